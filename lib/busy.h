/* znbd lib-internal: a synchronous call on a zone held by an
 * asynchronous write (include/znbd/async.h) fails with EBUSY inside the
 * core; the callers that wait (znbd/request.h without busy_ok, the
 * unfenced calls of znbd/dev.h) try it again until the write ended. */
#ifndef ZNBD_LIB_BUSY_H
#define ZNBD_LIB_BUSY_H

#include <errno.h>
#include <stdbool.h>
#include <time.h>

/* Whether a call that returned R is to be made again: it failed with
 * EBUSY and the caller waits (not BUSY_OK), for at most 60 s, a try each
 * 100 us (*TRIES counts them, from 0); then its EBUSY stands. */
static inline bool
znbd_busy_again(bool busy_ok, int r, unsigned *tries)
{
  if (r != -1 || errno != EBUSY || busy_ok || ++*tries > 600000)
    return false;
  struct timespec ts = {0, 100000};
  nanosleep(&ts, NULL);
  return true;
}

#endif
