/* znbd: the one place lib/ says things (public).
 *
 * lib/ never prints: it calls znbd_log(), and the message goes to the
 * sink a front-end plugged in once at start with znbd_log_set_sink().
 * Each front-end decides where each level goes (the nbdkit plugin: its
 * error and debug logs; znbd and znbd-tcmu: stderr).  Without a sink,
 * errors and warnings go to stderr as "znbd: MESSAGE" and notes and
 * faults are dropped, so tools and tests that plug nothing in see what
 * they always saw.
 */
#ifndef ZNBD_LOG_H
#define ZNBD_LOG_H

/* What a message is, from most to least serious. */
enum znbd_log_level {
  /* Something failed that nobody is waiting on, so no call can return
   * it: a store error in zone management, a failed flush at shutdown. */
  ZNBD_LOG_ERROR,
  /* Works, but not as the user may expect: the device starts in a state
   * that needs their attention (too many CLOSED zones after a restart). */
  ZNBD_LOG_WARNING,
  /* Start-up information worth seeing without -v: a parameter clamped as
   * null_blk clamps it, a default taken from a directory's record. */
  ZNBD_LOG_NOTE,
  /* An injected fault fired (bad block, dropped reply): what a test that
   * injects faults wants to see, noise for everyone else. */
  ZNBD_LOG_FAULT,
};

/* A sink: gets every message with its LEVEL; MSG is one line without a
 * newline, valid only during the call.  May be called from any thread
 * that does I/O, concurrently. */
typedef void znbd_log_fn(void *opaque, enum znbd_log_level level,
                         const char *msg);

/* Send every later message to FN(OPAQUE, ...); FN NULL puts the default
 * back (errors and warnings on stderr as "znbd: MESSAGE", the rest
 * dropped).  Call once at start, before any thread uses lib/.  No
 * errors. */
void znbd_log_set_sink(znbd_log_fn *fn, void *opaque);

/* Format a message (printf FMT; at most 511 bytes are kept) and hand it
 * to the sink at LEVEL.  No errors; errno is left as it was, so callers
 * can log and then return -1 with errno. */
void znbd_log(enum znbd_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
