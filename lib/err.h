/* znbd lib-internal: how lib/ functions fail, and the one way they fill
 * a caller's error buffer.
 *
 * The idiom: a function that can fail returns -1 (or NULL for a pointer)
 * with errno set, and 0 (or a count, or the pointer) on success; it never
 * returns an errno value, positive or negative.  A function that takes
 * ERR, ERRLEN (as in the public headers: may be NULL / 0) also leaves a
 * message naming what failed in the caller's buffer, by set_err() below.
 * Functions that walk with a callback return the callback's first
 * non-zero result as it is.  An errno value travels as a value only where
 * no errno can carry it: to the completion callback of a parked write
 * (another thread), and out of znbd_dev_wire_errno(), whose job is to map
 * one errno to another.  Messages nobody waits for go to the log sink
 * (include/znbd/log.h), never to stderr. */
#ifndef ZNBD_LIB_ERR_H
#define ZNBD_LIB_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t errlen, const char *fmt, ...)
{
  if (!err || errlen == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

#endif
