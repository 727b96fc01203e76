/* znbd server: the per-thread io_uring event loop serving connections.
 *
 * One io_uring per worker.  A connection has at most one recv and one
 * send in flight; replies accumulate in one of two output buffers while
 * the other is being sent, so the replies of a whole received batch go
 * out in one send.  Everything queued while handling a batch of
 * completions is submitted by the single io_uring_submit_and_wait() of
 * the next loop turn.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"
#include "wire.h"

#define IN_INITIAL (256u * 1024)
#define OUT_HIGH (4u * 1024 * 1024) /* stop parsing above this */
#define STOP_GRACE_NSEC 2000000000ULL
/* bio: send the replies collected so far after this many requests of one
 * received batch, so client and server overlap instead of taking turns. */
#define EARLY_SEND_AFTER 8

enum { UD_RECV = 0, UD_SEND = 1, UD_EFD = 2, UD_TIMER = 3, UD_MASK = 3 };

struct conn {
  struct worker *w;
  int fd;
  struct nbdc proto;
  uint8_t *in;
  size_t in_head, in_tail, in_cap, need;
  struct buf out[2]; /* out[fill] collects, out[!fill] is being sent */
  int fill;
  size_t sent;
  bool sending, receiving, stalled, dead, flush_close;
  unsigned inflight; /* rqs not yet completed back to us */
  unsigned batch;    /* requests executed since the last send started */
  struct conn *prev, *next;
};

struct worker {
  struct server *s;
  unsigned idx;
  pthread_t th;
  struct io_uring ring;
  int efd;
  uint64_t efd_val;
  pthread_mutex_t lock; /* newfds, done */
  int *newfds;
  size_t nnew, capnew;
  struct rq *done_head, *done_tail;
  atomic_bool signalled;
  atomic_bool stop;
  bool stopping, grace_armed;
  struct __kernel_timespec grace_ts;
  struct conn *conns;
  unsigned nconns;
};

int
ring_init(struct io_uring *ring, unsigned entries)
{
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int r = io_uring_queue_init_params(entries, ring, &p);
  if (r == -EINVAL) { /* older kernel */
    memset(&p, 0, sizeof p);
    r = io_uring_queue_init_params(entries, ring, &p);
  }
  return r;
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
            uint64_t ud)
{
  ts->tv_sec = (long long)(nsec / 1000000000);
  ts->tv_nsec = (long long)(nsec % 1000000000);
  struct io_uring_sqe *sqe = get_sqe(ring);
  io_uring_prep_timeout(sqe, ts, 0, 0);
  io_uring_sqe_set_data64(sqe, ud);
}

static void
wake(struct worker *w)
{
  if (!atomic_exchange(&w->signalled, true)) {
    uint64_t one = 1;
    if (write(w->efd, &one, 8) != 8)
      perror("znbd: eventfd write");
  }
}

struct worker *
worker_new(struct server *s, unsigned idx)
{
  struct worker *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->s = s;
  w->idx = idx;
  pthread_mutex_init(&w->lock, NULL);
  w->efd = eventfd(0, EFD_CLOEXEC);
  if (w->efd == -1) {
    free(w);
    return NULL;
  }
  return w;
}

void
worker_add_conn(struct worker *w, int fd)
{
  pthread_mutex_lock(&w->lock);
  if (w->nnew == w->capnew) {
    size_t cap = w->capnew ? 2 * w->capnew : 16;
    int *p = realloc(w->newfds, cap * sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&w->lock);
      close(fd);
      return;
    }
    w->newfds = p;
    w->capnew = cap;
  }
  w->newfds[w->nnew++] = fd;
  pthread_mutex_unlock(&w->lock);
  uint64_t one = 1;
  if (write(w->efd, &one, 8) != 8)
    perror("znbd: eventfd write");
}

void
worker_complete(struct rq *rq)
{
  struct worker *w = rq->w;
  rq->next = NULL;
  pthread_mutex_lock(&w->lock);
  if (w->done_tail)
    w->done_tail->next = rq;
  else
    w->done_head = rq;
  w->done_tail = rq;
  pthread_mutex_unlock(&w->lock);
  wake(w);
}

void
worker_retry_stalled(struct worker *w)
{
  wake(w);
}

void
worker_stop(struct worker *w)
{
  atomic_store(&w->stop, true);
  uint64_t one = 1;
  if (write(w->efd, &one, 8) != 8)
    perror("znbd: eventfd write");
}

/* ---- connections ---- */

static void conn_process(struct conn *c);

static void
conn_maybe_free(struct conn *c)
{
  if (!c->dead || c->sending || c->receiving || c->inflight)
    return;
  struct worker *w = c->w;
  close(c->fd);
  if (c->prev)
    c->prev->next = c->next;
  else
    w->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  w->nconns--;
  free(c->in);
  buf_free(&c->out[0]);
  buf_free(&c->out[1]);
  free(c);
}

static void
conn_kill(struct conn *c)
{
  if (!c->dead) {
    c->dead = true;
    shutdown(c->fd, SHUT_RDWR); /* completes our pending recv/send */
  }
  conn_maybe_free(c);
}

static void
queue_send(struct conn *c)
{
  struct buf *b = &c->out[!c->fill];
  struct io_uring_sqe *sqe = get_sqe(&c->w->ring);
  io_uring_prep_send(sqe, c->fd, b->p + c->sent, b->len - c->sent,
                     MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | UD_SEND);
  c->sending = true;
}

static void
queue_recv(struct conn *c)
{
  size_t need = c->need > c->in_tail - c->in_head ? c->need : 0;
  /* Make room: compact, then grow to hold the whole next message. */
  if (c->in_head == c->in_tail)
    c->in_head = c->in_tail = 0;
  if (c->in_head > 0 &&
      (c->in_cap - c->in_tail < 64 * 1024 || c->in_cap - c->in_head < need)) {
    memmove(c->in, c->in + c->in_head, c->in_tail - c->in_head);
    c->in_tail -= c->in_head;
    c->in_head = 0;
  }
  if (need > c->in_cap) {
    size_t cap = c->in_cap;
    while (cap < need)
      cap *= 2;
    uint8_t *p = realloc(c->in, cap);
    if (!p) {
      conn_kill(c);
      return;
    }
    c->in = p;
    c->in_cap = cap;
  }
  struct io_uring_sqe *sqe = get_sqe(&c->w->ring);
  io_uring_prep_recv(sqe, c->fd, c->in + c->in_tail, c->in_cap - c->in_tail, 0);
  io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | UD_RECV);
  c->receiving = true;
}

/* Start what can start: a send of collected replies, the next recv. */
static void
conn_kick(struct conn *c)
{
  if (c->dead) {
    conn_maybe_free(c);
    return;
  }
  if (!c->sending && c->out[c->fill].len) {
    c->fill = !c->fill;
    c->sent = 0;
    queue_send(c);
  }
  if (c->flush_close) {
    if (!c->sending && c->inflight == 0)
      conn_kill(c);
    return;
  }
  if (!c->receiving && !c->stalled && c->out[c->fill].len <= OUT_HIGH &&
      !(c->w->stopping && c->proto.phase != PH_TRANS))
    queue_recv(c);
}

/* Request ready in bio mode: execute inline, reply straight away. */
static int
submit_bio(struct conn *c, const struct nbd_req *r)
{
  struct server *s = c->w->s;
  if (s->completion_nsec == 0) {
    nbd_exec(&c->proto, r, EXEC_NOWAIT, &c->out[c->fill]);
    /* Let the client start on the first replies of a long batch while
     * the rest execute (see conn_process). */
    if (++c->batch == EARLY_SEND_AFTER && !c->sending)
      c->proto.pause = true;
    return 0;
  }
  /* Timer completion (null_blk irqmode=2): hold the reply. */
  struct rq *rq = calloc(1, sizeof *rq);
  if (!rq) {
    nbd_reply_error(&c->proto, r, NBD_ENOMEM, "out of memory",
                    &c->out[c->fill]);
    return 0;
  }
  rq->conn = c;
  rq->proto = &c->proto;
  rq->w = c->w;
  nbd_exec(&c->proto, r, EXEC_NOWAIT, &rq->reply);
  c->inflight++;
  arm_timeout(&c->w->ring, &rq->ts, s->completion_nsec,
              (uint64_t)(uintptr_t)rq | UD_TIMER);
  return 0;
}

static int
submit_mq(struct conn *c, const struct nbd_req *r)
{
  struct mq *m = c->w->s->mq;
  struct rq *rq = mq_get_tag(m, c->w->idx);
  if (!rq) {
    c->stalled = true;
    return 1;
  }
  rq->req = *r;
  if (r->type == NBD_CMD_WRITE) {
    if (rq->payload_cap < r->len) {
      uint8_t *p = realloc(rq->payload, r->len);
      if (!p) {
        mq_put_tag(m, rq);
        nbd_reply_error(&c->proto, r, NBD_ENOMEM, "out of memory",
                        &c->out[c->fill]);
        return 0;
      }
      rq->payload = p;
      rq->payload_cap = r->len;
    }
    memcpy(rq->payload, r->payload, r->len);
    rq->req.payload = rq->payload;
  }
  rq->reply.len = 0;
  rq->conn = c;
  rq->proto = &c->proto;
  rq->w = c->w;
  rq->attempts = 0;
  c->inflight++;
  mq_submit(m, rq);
  return 0;
}

static int
submit(void *opaque, struct nbdc *p, const struct nbd_req *r)
{
  struct conn *c = opaque;
  if (c->w->s->mode == QM_MQ)
    return submit_mq(c, r);
  return submit_bio(c, r);
}

/* Start sending what is collected now and hand the send to the kernel at
 * once; if it completed inline, consume its CQE here so the next early
 * send of the batch can go too. */
static void
conn_early_send(struct conn *c)
{
  struct io_uring *ring = &c->w->ring;
  c->fill = !c->fill;
  c->sent = 0;
  queue_send(c);
  io_uring_submit(ring);
  struct io_uring_cqe *cqe;
  if (io_uring_peek_cqe(ring, &cqe) == 0 &&
      io_uring_cqe_get_data64(cqe) == ((uint64_t)(uintptr_t)c | UD_SEND)) {
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    struct buf *b = &c->out[!c->fill];
    c->sending = false;
    if (res > 0 && (size_t)res == b->len) {
      b->len = 0;
    } else if (res >= 0 || res == -EINTR || res == -EAGAIN) {
      c->sent += res > 0 ? (size_t)res : 0;
      queue_send(c); /* the rest goes with the next submit */
    } else {         /* freed later by conn_kick, not under our caller's feet */
      c->dead = true;
      shutdown(c->fd, SHUT_RDWR);
    }
  }
}

static void
conn_process(struct conn *c)
{
  if (c->dead) {
    conn_maybe_free(c);
    return;
  }
  c->stalled = false;
  while (c->in_tail > c->in_head && !c->flush_close && !c->dead) {
    size_t need;
    c->batch = 0;
    size_t n = nbdc_feed(&c->proto, c->in + c->in_head, c->in_tail - c->in_head,
                         &c->out[c->fill], OUT_HIGH, submit, c, &need);
    c->in_head += n;
    c->need = need;
    /* A recv in flight writes at in_tail: only rewind when idle. */
    if (c->in_head == c->in_tail && !c->receiving)
      c->in_head = c->in_tail = 0;
    if (c->proto.phase == PH_CLOSED)
      c->flush_close = true;
    if (!c->proto.pause || c->sending)
      break;
    conn_early_send(c);
  }
  conn_kick(c);
}

static void
conn_new(struct worker *w, int fd)
{
  struct conn *c = calloc(1, sizeof *c);
  if (!c || !(c->in = malloc(IN_INITIAL))) {
    free(c);
    close(fd);
    return;
  }
  c->w = w;
  c->fd = fd;
  c->in_cap = IN_INITIAL;
  nbdc_init(&c->proto, &w->s->cfg, &c->out[0]);
  c->next = w->conns;
  if (w->conns)
    w->conns->prev = c;
  w->conns = c;
  w->nconns++;
  if (w->stopping) {
    conn_kill(c);
    return;
  }
  conn_kick(c);
}

static void
on_recv(struct conn *c, int res)
{
  c->receiving = false;
  if (res <= 0) {
    if (res == -EINTR || res == -EAGAIN) {
      conn_kick(c);
      return;
    }
    /* EOF or error.  When stopping, answer what was received first. */
    if (res == 0 && c->w->stopping && c->proto.phase == PH_TRANS && !c->dead) {
      c->proto.stopping = true;
      conn_process(c);
      c->flush_close = true;
      conn_kick(c);
      return;
    }
    conn_kill(c);
    return;
  }
  c->in_tail += (size_t)res;
  conn_process(c);
}

static void
on_send(struct conn *c, int res)
{
  c->sending = false;
  if (res < 0) {
    if (res == -EINTR || res == -EAGAIN) {
      queue_send(c);
      return;
    }
    conn_kill(c);
    return;
  }
  struct buf *b = &c->out[!c->fill];
  c->sent += (size_t)res;
  if (c->sent < b->len && !c->dead) {
    queue_send(c);
    return;
  }
  b->len = 0;
  conn_process(c);
}

/* An rq came back (mq completion or bio timer): queue its reply. */
static void
rq_finished(struct worker *w, struct rq *rq)
{
  struct conn *c = rq->conn;
  if (!c->dead)
    buf_append(&c->out[c->fill], rq->reply.p, rq->reply.len);
  c->inflight--;
  if (rq->hq) {
    mq_put_tag(w->s->mq, rq);
  } else {
    buf_free(&rq->reply);
    free(rq);
  }
  conn_process(c);
}

static void
begin_stop(struct worker *w)
{
  w->stopping = true;
  for (struct conn *c = w->conns, *n; c; c = n) {
    n = c->next;
    if (c->proto.phase != PH_TRANS)
      conn_kill(c);
    else
      shutdown(c->fd, SHUT_RD); /* pending recv sees EOF */
  }
  arm_timeout(&w->ring, &w->grace_ts, STOP_GRACE_NSEC,
              (uint64_t)(uintptr_t)w | UD_TIMER);
  w->grace_armed = true;
}

static void
on_efd(struct worker *w)
{
  atomic_store(&w->signalled, false);
  pthread_mutex_lock(&w->lock);
  int *fds = w->newfds;
  size_t nnew = w->nnew;
  w->newfds = NULL;
  w->nnew = w->capnew = 0;
  struct rq *done = w->done_head;
  w->done_head = w->done_tail = NULL;
  pthread_mutex_unlock(&w->lock);
  for (size_t i = 0; i < nnew; i++)
    conn_new(w, fds[i]);
  free(fds);
  while (done) {
    struct rq *n = done->next;
    rq_finished(w, done);
    done = n;
  }
  /* Tags may have been freed anywhere: retry stalled readers. */
  for (struct conn *c = w->conns, *n; c; c = n) {
    n = c->next;
    if (c->stalled)
      conn_process(c);
  }
  if (atomic_load(&w->stop) && !w->stopping)
    begin_stop(w);
  struct io_uring_sqe *sqe = get_sqe(&w->ring);
  io_uring_prep_read(sqe, w->efd, &w->efd_val, 8, 0);
  io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)w | UD_EFD);
}

static void *
worker_main(void *arg)
{
  struct worker *w = arg;
  if (ring_init(&w->ring, 256) < 0) {
    fprintf(stderr, "znbd: io_uring setup failed\n");
    exit(EXIT_FAILURE);
  }
  struct io_uring_sqe *sqe = get_sqe(&w->ring);
  io_uring_prep_read(sqe, w->efd, &w->efd_val, 8, 0);
  io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)w | UD_EFD);
  while (!(w->stopping && w->nconns == 0)) {
    int r = io_uring_submit_and_wait(&w->ring, 1);
    if (r < 0 && r != -EINTR && r != -EBUSY) {
      fprintf(stderr, "znbd: io_uring_submit_and_wait: %s\n", strerror(-r));
      break;
    }
    struct io_uring_cqe *cqe;
    /* One CQE at a time, marked seen before it is handled: a handler may
     * consume the CQE of its own early send (conn_early_send). */
    while (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
      uint64_t ud = io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      io_uring_cqe_seen(&w->ring, cqe);
      void *p = (void *)(uintptr_t)(ud & ~(uint64_t)UD_MASK);
      switch (ud & UD_MASK) {
      case UD_RECV:
        on_recv(p, res);
        break;
      case UD_SEND:
        on_send(p, res);
        break;
      case UD_EFD:
        on_efd(p);
        break;
      case UD_TIMER:
        if (p == (void *)w) { /* stop grace over: drop stragglers */
          for (struct conn *c = w->conns, *nx; c; c = nx) {
            nx = c->next;
            conn_kill(c);
          }
        } else {
          rq_finished(w, p);
        }
        break;
      }
    }
  }
  io_uring_queue_exit(&w->ring);
  return NULL;
}

int
worker_start(struct worker *w)
{
  return pthread_create(&w->th, NULL, worker_main, w);
}

void
worker_join(struct worker *w)
{
  pthread_join(w->th, NULL);
}

void
worker_free(struct worker *w)
{
  close(w->efd);
  free(w->newfds);
  for (struct rq *rq = w->done_head, *n; rq; rq = n) {
    n = rq->next;
    if (!rq->hq) {
      buf_free(&rq->reply);
      free(rq);
    }
  }
  pthread_mutex_destroy(&w->lock);
  free(w);
}
