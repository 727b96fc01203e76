/* znbd server: what every thread that sleeps on its own io_uring uses —
 * setting the ring up, getting SQEs, timers, and its wakeup (struct
 * waker) by other threads.  The workers (worker.c), the hardware queues
 * (mq.c) and the main loop (mainloop.c) all go through these.
 */
#ifndef ZNBD_SERVER_RING_H
#define ZNBD_SERVER_RING_H

#include <linux/time_types.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <liburing.h>

#include "tag.h"

/* io_uring_queue_init with SINGLE_ISSUER and DEFER_TASKRUN where the
 * kernel has them; DISABLED: created disabled (IORING_SETUP_R_DISABLED),
 * the thread that calls ring_enable() becomes its issuer.  ENTRIES is
 * the SQ size.  Returns 0 or -errno (io_uring_setup's: ENOMEM, EMFILE,
 * ENFILE, ...). */
int ring_init(struct io_uring *ring, unsigned entries, bool disabled);
/* Enable a ring made with DISABLED from the thread that will use it:
 * 0 or -errno (io_uring_register's). */
int ring_enable(struct io_uring *ring);
/* An SQE of RING; when the SQ is full, what it holds is submitted first.
 * Never NULL. */
struct io_uring_sqe *get_sqe(struct io_uring *ring);
/* Arm an io_uring timeout of NSEC nanoseconds on RING with TAG (tag.h),
 * using TS (which must live until its CQE). */
void arm_timeout(struct io_uring *ring, struct __kernel_timespec *ts,
                 uint64_t nsec, uint64_t tag);

/* The wakeup of a thread that sleeps in io_uring_submit_and_wait() on its
 * own ring: other threads post a CQE to that ring with an io_uring
 * MSG_RING request from their own ring (sent with their next submit, so a
 * whole batch of hand-overs costs one wakeup), or write its eventfd when
 * they have no ring or the ring is not up yet.  KICKED makes it one
 * wakeup per batch: set by the first sender, cleared by the woken thread
 * before it takes the handed-over work. */
struct waker {
  _Alignas(TAG_ALIGN) atomic_int ring_fd; /* -1 until the ring exists and
                                           * after it is gone */
  int efd;
  uint64_t efd_val; /* what the eventfd read reads */
  uint64_t msg_ud;  /* tag of the CQE posted on the woken ring */
  uint64_t efd_ud;  /* tag of the eventfd read's CQE */
  atomic_bool kicked;
};
/* T for the thread OWNER (a tagged object: its CQEs are TAG_WAKE_MSG and
 * TAG_WAKE_EFD with OWNER): makes its eventfd.  0 or -errno (eventfd's:
 * EMFILE, ENFILE, ENOMEM). */
int waker_init(struct waker *t, void *owner);
/* Arm the read of T's eventfd on RING (its CQE: TAG_WAKE_EFD); again
 * after each such CQE. */
void waker_listen(struct waker *t, struct io_uring *ring);
/* From the thread of RING (made disabled): enable RING, listen, and let
 * other threads wake it by MSG_RING from now on.  0 or -errno
 * (ring_enable's). */
int waker_start(struct waker *t, struct io_uring *ring);
/* The thread of T leaves its loop: wakeups go by eventfd again. */
void waker_stop(struct waker *t);
/* A failed MSG_RING posts TAG_WAKE_FAIL with the waker on the sender's
 * ring (tag.h); on success it posts nothing there. */
/* Wake T once per batch: MSG_RING from FROM (NULL: eventfd write). */
void waker_kick(struct waker *t, struct io_uring *from);
/* Wake T now, by eventfd (a failed MSG_RING, stop, new connections). */
void waker_kick_efd(struct waker *t);

#endif
