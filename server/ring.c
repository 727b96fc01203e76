/* znbd server: the io_uring helpers every ring-using thread shares (see
 * ring.h): ring setup, SQEs, timers and the cross-thread wakeup. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ring.h"

int
ring_init(struct io_uring *ring, unsigned entries, bool disabled)
{
  struct io_uring_params p;
  unsigned extra = disabled ? IORING_SETUP_R_DISABLED : 0;
  memset(&p, 0, sizeof p);
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | extra;
  int r = io_uring_queue_init_params(entries, ring, &p);
  if (r == -EINVAL) { /* older kernel */
    memset(&p, 0, sizeof p);
    p.flags = extra;
    r = io_uring_queue_init_params(entries, ring, &p);
  }
  return r;
}

int
ring_enable(struct io_uring *ring)
{
  /* io_uring_enable_rings() is declared by liburing 2.3 but missing from
   * its symbol map: register IORING_REGISTER_ENABLE_RINGS directly. */
  if (syscall(__NR_io_uring_register, ring->ring_fd,
              IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0)
    return -errno;
  return 0;
}

struct io_uring_sqe *
get_sqe(struct io_uring *ring)
{
  struct io_uring_sqe *sqe;
  while ((sqe = io_uring_get_sqe(ring)) == NULL)
    io_uring_submit(ring);
  return sqe;
}

void
arm_timeout(struct io_uring *ring, struct __kernel_timespec *ts, uint64_t nsec,
            uint64_t tag)
{
  ts->tv_sec = (long long)(nsec / 1000000000);
  ts->tv_nsec = (long long)(nsec % 1000000000);
  struct io_uring_sqe *sqe = get_sqe(ring);
  io_uring_prep_timeout(sqe, ts, 0, 0);
  io_uring_sqe_set_data64(sqe, tag);
}

int
waker_init(struct waker *t, void *owner)
{
  atomic_init(&t->ring_fd, -1);
  t->msg_ud = tag_ptr(TAG_WAKE_MSG, owner);
  t->efd_ud = tag_ptr(TAG_WAKE_EFD, owner);
  t->efd = eventfd(0, EFD_CLOEXEC);
  return t->efd == -1 ? -errno : 0;
}

void
waker_listen(struct waker *t, struct io_uring *ring)
{
  struct io_uring_sqe *sqe = get_sqe(ring);
  io_uring_prep_read(sqe, t->efd, &t->efd_val, 8, 0);
  io_uring_sqe_set_data64(sqe, t->efd_ud);
}

int
waker_start(struct waker *t, struct io_uring *ring)
{
  int r = ring_enable(ring);
  if (r < 0)
    return r;
  waker_listen(t, ring);
  atomic_store(&t->ring_fd, ring->ring_fd);
  return 0;
}

void
waker_stop(struct waker *t)
{
  atomic_store(&t->ring_fd, -1);
}

void
waker_kick_efd(struct waker *t)
{
  uint64_t one = 1;
  if (write(t->efd, &one, 8) != 8)
    perror("znbd: eventfd write");
}

void
waker_kick(struct waker *t, struct io_uring *from)
{
  if (atomic_exchange(&t->kicked, true))
    return; /* a wakeup is on its way and the work will be seen */
  int fd = atomic_load(&t->ring_fd);
  if (!from || fd < 0) {
    waker_kick_efd(t);
    return;
  }
  struct io_uring_sqe *sqe = get_sqe(from);
  io_uring_prep_msg_ring(sqe, fd, 0, t->msg_ud, 0);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  io_uring_sqe_set_data64(sqe, tag_ptr(TAG_WAKE_FAIL, t));
}
