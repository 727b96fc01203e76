/* znbd lib-internal: how lib/ functions fail, and the one way they fill
 * a caller's error buffer.
 *
 * The idiom: a function that can fail returns -1 (or NULL for a pointer)
 * with errno set, and 0 (or a count, or the pointer) on success; it never
 * returns an errno value, positive or negative.  A function that takes
 * ERR, ERRLEN (as in the public headers: may be NULL / 0) also leaves a
 * message naming what failed in the caller's buffer, by set_err() below.
 * Cleanups keep errno: set_err(), and every lib/ function that frees,
 * closes or unlocks on a failure path (znbd_dev_free(), a store's close,
 * keep_errno_close() below) leaves errno as it found it, as glibc's free()
 * does since 2.33, so a failure path reads "clean up; return -1" with no
 * save/restore pair around it.  fail_err() ends a failure that has its
 * errno value in hand: message, errno, -1 in one call.
 * Functions that walk with a callback return the callback's first
 * non-zero result as it is.  An errno value travels as a value only where
 * no errno can carry it: to the completion callback of a parked write
 * (another thread), and out of znbd_dev_wire_errno(), whose job is to map
 * one errno to another.  Messages nobody waits for go to the log sink
 * (include/znbd/log.h), never to stderr. */
#ifndef ZNBD_LIB_ERR_H
#define ZNBD_LIB_ERR_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

static inline void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t errlen, const char *fmt, ...)
{
  if (!err || errlen == 0)
    return;
  int e = errno;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  errno = e;
}

/* Leave the message FMT in ERR (as set_err()), set errno to ERRNUM and
 * return -1: the last line of a failure path. */
static inline int __attribute__((format(printf, 4, 5)))
fail_err(char *err, size_t errlen, int errnum, const char *fmt, ...)
{
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  errno = errnum;
  return -1;
}

/* close(FD) on a failure path: errno stays the failure's. */
static inline void
keep_errno_close(int fd)
{
  int e = errno;
  close(fd);
  errno = e;
}

#endif
