/* The reasons of refusals (znbd/refusal.h, lib/refusal.h): the thread's
 * last reason, and each reason's name and errno. */
#include <errno.h>
#include <stddef.h>

#include "refusal.h"

_Thread_local enum znbd_refusal znbd_refusal_now;

static const struct {
  const char *name;
  int err;
} reasons[ZNBD_REFUSAL_COUNT] = {
    [ZNBD_REFUSAL_NONE] = {"NONE", 0},
    [ZNBD_REFUSAL_UNALIGNED_WRITE] = {"UNALIGNED_WRITE", EIO},
    [ZNBD_REFUSAL_PAST_CAPACITY] = {"PAST_CAPACITY", EIO},
    [ZNBD_REFUSAL_WRITE_BOUNDARY] = {"WRITE_BOUNDARY", EIO},
    [ZNBD_REFUSAL_ZONE_FULL] = {"ZONE_FULL", EIO},
    [ZNBD_REFUSAL_ZONE_READONLY] = {"ZONE_READONLY", EIO},
    [ZNBD_REFUSAL_ZONE_OFFLINE] = {"ZONE_OFFLINE", EIO},
    [ZNBD_REFUSAL_ZONE_OPEN_RESOURCE] = {"ZONE_OPEN_RESOURCE", ETOOMANYREFS},
    [ZNBD_REFUSAL_ZONE_ACTIVE_RESOURCE] = {"ZONE_ACTIVE_RESOURCE", EOVERFLOW},
    [ZNBD_REFUSAL_CONVENTIONAL_ZONE] = {"CONVENTIONAL_ZONE", EIO},
    [ZNBD_REFUSAL_ZONE_COND] = {"ZONE_COND", EIO},
    [ZNBD_REFUSAL_BAD_BLOCK] = {"BAD_BLOCK", EIO},
    [ZNBD_REFUSAL_FENCED] = {"FENCED", ESHUTDOWN},
    [ZNBD_REFUSAL_OUT_OF_RANGE] = {"OUT_OF_RANGE", EINVAL},
    [ZNBD_REFUSAL_READ_MIXED_TYPES] = {"READ_MIXED_TYPES", EIO},
    [ZNBD_REFUSAL_READ_PAST_WP] = {"READ_PAST_WP", EIO},
};

const char *
znbd_refusal_name(enum znbd_refusal reason)
{
  return (unsigned)reason < ZNBD_REFUSAL_COUNT ? reasons[reason].name
                                               : "UNKNOWN";
}

int
znbd_refusal_errno(enum znbd_refusal reason)
{
  return (unsigned)reason < ZNBD_REFUSAL_COUNT ? reasons[reason].err : 0;
}
