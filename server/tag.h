/* znbd server: the one encoding of io_uring user data (completion tags).
 *
 * Every SQE the server submits, on any ring (the main loop's, a worker's,
 * a hardware queue's), carries a 64-bit tag saying what completed: an
 * operation code in the low TAG_OP_BITS bits and, above them, either a
 * pointer to the object the completion is for or a small index.  Objects
 * that are tagged are aligned to TAG_ALIGN (malloc's alignment; struct
 * rq, struct hwq and struct waker are declared with it), so their low
 * bits are free.  Like liburing's examples/proxy.h (struct userdata),
 * all the bits are defined here and nowhere else.
 */
#ifndef ZNBD_SERVER_TAG_H
#define ZNBD_SERVER_TAG_H

#include <stdint.h>

enum tag_op {
  /* Worker rings: P is a struct conn. */
  TAG_RECV,
  TAG_SEND,
  /* Wakeups (struct waker's owner as P: struct worker or struct hwq):
   * the eventfd read completed, or another thread's MSG_RING arrived. */
  TAG_WAKE_EFD,
  TAG_WAKE_MSG,
  /* A MSG_RING we sent failed: P is the struct waker to kick by eventfd
   * instead.  (A successful one, IOSQE_CQE_SKIP_SUCCESS, posts nothing.) */
  TAG_WAKE_FAIL,
  /* Timers.  TAG_RQ_DONE: P is a struct rq whose completion_nsec delay is
   * over (bio worker or mq hardware queue).  TAG_GRACE: P is the worker
   * whose stop grace is over.  TAG_TRIM: P is the worker to give memory
   * back. */
  TAG_RQ_DONE,
  TAG_GRACE,
  TAG_TRIM,
  /* Worker rings: P is a struct conn whose TLS handshake took too long
   * (or the timer was cancelled); TAG_CANCEL: the completion of a
   * timeout removal, nothing to do. */
  TAG_TLS_TIMEOUT,
  TAG_CANCEL,
  /* Main ring: index I is the listener.  TAG_ACCEPT: a connection (or an
   * accept error); TAG_ACCEPT_PAUSE: the listener's back-off is over. */
  TAG_ACCEPT,
  TAG_ACCEPT_PAUSE,
  /* Main ring: a signal was read from the signalfd (no pointer). */
  TAG_SIGNAL,
  /* Main ring: a thread failed and reported it (server_fail). */
  TAG_FAILED,
  TAG_OP_COUNT
};

#define TAG_OP_BITS 4
#define TAG_ALIGN (1u << TAG_OP_BITS)
_Static_assert(TAG_OP_COUNT <= TAG_ALIGN, "operation codes fit TAG_OP_BITS");

static inline uint64_t
tag_ptr(enum tag_op op, const void *p)
{
  return (uint64_t)(uintptr_t)p | (uint64_t)op;
}

static inline uint64_t
tag_index(enum tag_op op, unsigned idx)
{
  return ((uint64_t)idx << TAG_OP_BITS) | (uint64_t)op;
}

static inline enum tag_op
tag_op(uint64_t tag)
{
  return (enum tag_op)(tag & (TAG_ALIGN - 1));
}

static inline void *
tag_get_ptr(uint64_t tag)
{
  return (void *)(uintptr_t)(tag & ~(uint64_t)(TAG_ALIGN - 1));
}

static inline unsigned
tag_get_index(uint64_t tag)
{
  return (unsigned)(tag >> TAG_OP_BITS);
}

#endif
