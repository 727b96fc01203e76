/* znbd: the standard names of zone conditions, zone types and errno
 * values, in one place for the control socket, the plugin's log and
 * nbdzone (include/znbd/dev.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "znbd/dev.h"

const char *
znbd_zone_cond_name(unsigned cond)
{
  switch (cond) {
  case ZNBD_ZONE_COND_NOT_WP:
    return "NOT_WP";
  case ZNBD_ZONE_COND_EMPTY:
    return "EMPTY";
  case ZNBD_ZONE_COND_IMP_OPEN:
    return "IMP_OPEN";
  case ZNBD_ZONE_COND_EXP_OPEN:
    return "EXP_OPEN";
  case ZNBD_ZONE_COND_CLOSED:
    return "CLOSED";
  case ZNBD_ZONE_COND_READONLY:
    return "READONLY";
  case ZNBD_ZONE_COND_FULL:
    return "FULL";
  case ZNBD_ZONE_COND_OFFLINE:
    return "OFFLINE";
  }
  return "UNKNOWN";
}

const char *
znbd_zone_type_name(unsigned type)
{
  switch (type) {
  case ZNBD_ZONE_TYPE_CONVENTIONAL:
    return "CONVENTIONAL";
  case ZNBD_ZONE_TYPE_SEQWRITE_REQ:
    return "SEQ_WRITE_REQUIRED";
  }
  return "UNKNOWN";
}

const char *
znbd_errno_name(int err)
{
  switch (err) {
  case EINVAL:
    return "EINVAL";
  case EIO:
    return "EIO";
  case ETOOMANYREFS:
    return "ETOOMANYREFS";
  case EOVERFLOW:
    return "EOVERFLOW";
  case ENOMEM:
    return "ENOMEM";
  case ENOSPC:
    return "ENOSPC";
  case EPERM:
    return "EPERM";
  case EAGAIN:
    return "EAGAIN";
  case ETIMEDOUT:
    return "ETIMEDOUT";
  case ENOENT:
    return "ENOENT";
  case ESHUTDOWN:
    return "ESHUTDOWN";
  }
  return NULL;
}

void
znbd_dev_zone_note(struct znbd_dev *d, uint64_t off, char *buf, size_t len)
{
  struct znbd_zone_info zi;
  if (len)
    buf[0] = 0;
  if (!znbd_dev_nr_zones(d) || off >= znbd_dev_size(d))
    return;
  uint32_t idx = znbd_dev_zone_index(d, off);
  if (znbd_dev_report(d, idx, 1, &zi) != 1)
    return;
  if (zi.wp == ZNBD_WP_INVALID)
    snprintf(buf, len, " (zone %" PRIu32 " at %" PRIu64 ": %s)", idx, zi.start,
             znbd_zone_cond_name(zi.cond));
  else
    snprintf(buf, len,
             " (zone %" PRIu32 " at %" PRIu64 ": %s, wp %" PRIu64
             ", capacity ends at %" PRIu64 ")",
             idx, zi.start, znbd_zone_cond_name(zi.cond), zi.wp,
             zi.start + zi.capacity);
}
