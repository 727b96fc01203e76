/* znbd lib-internal: how a rule refuses (znbd/refusal.h).  The reason
 * travels as errno does, per thread: set beside errno where the rule
 * decides, cleared by the request contract (lib/request.c) as a request
 * enters, read by znbd_req_refusal() after it failed.  A thread-local
 * costs the hot path one store per request and no allocation, and keeps
 * every call's signature; a parked write's failure, which lands on
 * another thread, has its reason set on that thread for the time of its
 * completion (lib/zone_impl.h, call_done()). */
#ifndef ZNBD_LIB_REFUSAL_H
#define ZNBD_LIB_REFUSAL_H

#include <errno.h>

#include "znbd/refusal.h"

extern _Thread_local enum znbd_refusal znbd_refusal_now;

/* Refuse with REASON and errno ERR: returns -1. */
static inline int
znbd_refuse(enum znbd_refusal reason, int err)
{
  znbd_refusal_now = reason;
  errno = err;
  return -1;
}

#endif
