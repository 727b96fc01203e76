/* znbd server: the main thread's loop.  On one io_uring it accepts
 * connections on the listeners (handing them to the workers round-robin),
 * reads signals from the signalfd, and hears of a thread that failed
 * (server_fail, fail.c: S->fail_efd); it returns when the server must
 * stop.  It calls the workers, never the other way. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"
#include "server.h"
#include "worker.h"

/* Out of descriptors (EMFILE, ENFILE) or memory (ENOBUFS, ENOMEM):
 * accepting again at once fails again at once, so a listener pauses
 * ACCEPT_PAUSE_NSEC before its next accept while connections wait in the
 * backlog, and the condition is logged at most once a minute. */
#define ACCEPT_PAUSE_NSEC 100000000ULL
#define ACCEPT_LOG_SEC 60

static bool
accept_exhausted(int err)
{
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

/* Log accept error ERR (an errno), at most once per ACCEPT_LOG_SEC for
 * the exhaustion errors, with how many were not logged in between. */
static void
accept_log(int err)
{
  static struct timespec last;
  static unsigned long quiet;
  static bool logged;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (!accept_exhausted(err)) {
    fprintf(stderr, "znbd: accept: %s\n", strerror(err));
    return;
  }
  if (logged && now.tv_sec - last.tv_sec < ACCEPT_LOG_SEC) {
    quiet++;
    return;
  }
  fprintf(stderr,
          "znbd: accept: %s: pausing new connections %llu ms at a time "
          "(%lu more since the last message; logged at most once every "
          "%d s)\n",
          strerror(err), ACCEPT_PAUSE_NSEC / 1000000, quiet, ACCEPT_LOG_SEC);
  last = now;
  logged = true;
  quiet = 0;
}

static void
queue_accept(struct io_uring *ring, const struct listeners *l, unsigned i)
{
  struct io_uring_sqe *sqe = get_sqe(ring);
  io_uring_prep_accept(sqe, l->fd[i], NULL, NULL, SOCK_CLOEXEC);
  io_uring_sqe_set_data64(sqe, tag_index(TAG_ACCEPT, i));
}

/* The state of one main loop. */
struct mainloop {
  struct server *s;
  const struct listeners *l;
  struct io_uring ring;
  int sfd;
  struct signalfd_siginfo si;
  uint64_t fail_val;
  struct __kernel_timespec pause_ts[LISTENERS_MAX];
  unsigned rr; /* next worker */
};

static void
queue_signal_read(struct mainloop *ml)
{
  struct io_uring_sqe *sqe = get_sqe(&ml->ring);
  io_uring_prep_read(sqe, ml->sfd, &ml->si, sizeof ml->si, 0);
  io_uring_sqe_set_data64(sqe, tag_index(TAG_SIGNAL, 0));
}

/* Accept on listener I completed with RES (a descriptor or -errno). */
static void
on_accept(struct mainloop *ml, unsigned i, int res)
{
  struct server *s = ml->s;
  if (res >= 0) {
    if (ml->l->tcp[i]) {
      int one = 1;
      setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    worker_add_conn(s->workers[ml->rr++ % s->nworkers], res);
  } else if (accept_exhausted(-res)) {
    accept_log(-res);
    arm_timeout(&ml->ring, &ml->pause_ts[i], ACCEPT_PAUSE_NSEC,
                tag_index(TAG_ACCEPT_PAUSE, i));
    return;
  } else if (res != -EINTR && res != -ECONNABORTED && res != -EAGAIN) {
    accept_log(-res);
  }
  queue_accept(&ml->ring, ml->l, i);
}

int
main_loop(struct server *s, const struct listeners *l, int sfd, pid_t child,
          bool *child_reaped)
{
  struct mainloop ml = {.s = s, .l = l, .sfd = sfd};
  int r = ring_init(&ml.ring, 16, false);
  if (r < 0) {
    fprintf(stderr, "znbd: main loop: io_uring setup: %s\n", strerror(-r));
    return EXIT_FAILURE;
  }
  for (unsigned i = 0; i < l->n; i++)
    queue_accept(&ml.ring, l, i);
  queue_signal_read(&ml);
  struct io_uring_sqe *sqe = get_sqe(&ml.ring);
  io_uring_prep_read(sqe, s->fail_efd, &ml.fail_val, sizeof ml.fail_val, 0);
  io_uring_sqe_set_data64(sqe, tag_index(TAG_FAILED, 0));
  int status = 0;
  bool done = false;
  while (!done) {
    r = io_uring_submit_and_wait(&ml.ring, 1);
    if (r < 0 && r != -EINTR) {
      fprintf(stderr, "znbd: main loop: io_uring: %s: stopping\n",
              strerror(-r));
      status = EXIT_FAILURE;
      break;
    }
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&ml.ring, head, cqe)
    {
      n++;
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      switch (tag_op(tag)) {
      case TAG_SIGNAL:
        if (signal_stops(&ml.si, child, &status)) {
          done = true;
          *child_reaped = ml.si.ssi_signo == SIGCHLD;
        }
        queue_signal_read(&ml);
        break;
      case TAG_FAILED:
        status = EXIT_FAILURE;
        done = true;
        break;
      case TAG_ACCEPT_PAUSE: /* the listener's pause is over */
        queue_accept(&ml.ring, l, tag_get_index(tag));
        break;
      case TAG_ACCEPT:
        on_accept(&ml, tag_get_index(tag), cqe->res);
        break;
      default: /* not used on the main ring */
        break;
      }
    }
    io_uring_cq_advance(&ml.ring, n);
  }
  io_uring_queue_exit(&ml.ring);
  return status;
}
