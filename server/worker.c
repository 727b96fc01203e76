/* znbd server: the worker threads' event loop (--threads).
 *
 * One io_uring per worker; it serves a set of connections (conn.c):
 * takes new ones from the main loop, hands each CQE to its connection,
 * submits parsed requests to the queue model (bio.c executes them inline,
 * mq.c queues them to a hardware queue) and retires the requests handed
 * back to it (its rq_ops, called by any thread).  Everything queued while
 * handling a batch of completions is submitted by the single
 * io_uring_submit_and_wait() of the next loop turn.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bio.h"
#include "conn.h"
#include "mq.h"
#include "ring.h"
#include "rq.h"
#include "server.h"
#include "wire.h"
#include "worker.h"

/* SIGTERM: clients that do not read are cut off after this, within the
 * 2 s man/znbd.pod promises (what is still queued for them is dropped). */
#define STOP_GRACE_NSEC 1500000000ULL
#define WORKER_RING_ENTRIES 256
/* After activity, the worker gives memory back once it has been idle
 * about this long: spare buffers over OUT_KEEP, mq tags' buffers, and
 * malloc_trim() for what glibc keeps in its heaps. */
#define TRIM_NSEC 1000000000ULL

struct worker {
  struct server *s;
  unsigned idx;
  pthread_t th;
  struct io_uring ring;
  struct waker wk;
  struct conn_set cs;   /* its connections */
  struct bio_owner bio; /* bio mode: what bio_submit needs of us */
  pthread_mutex_t lock; /* newfds */
  int *newfds;
  size_t nnew, capnew;
  rq_stack done;      /* completed rqs handed back */
  rq_stack unplugged; /* plugged writes to issue (worker_unplug) */
  struct rq *unpl_head, *unpl_tail; /* ... still waiting for a tag */
  atomic_bool stop;
  bool grace_armed, grace_over;
  uint64_t gen; /* znbd_dev_generation() its connections were checked at */
  struct __kernel_timespec grace_ts;
  bool trim_armed; /* trim timer set */
  bool self_done;  /* completed rqs pushed by this thread: on_wake */
  struct __kernel_timespec trim_ts;
};

/* rq_ops complete: RQ is finished (any thread); its worker retires it. */
static void
worker_complete(struct rq *rq, struct io_uring *from)
{
  struct worker *w = rq->w;
  rq_stack_push(&w->done, rq);
  if (from == &w->ring) /* its own thread (mq direct issue) */
    w->self_done = true;
  else
    waker_kick(&w->wk, from);
}

/* rq_ops unplug: plugged write BIO waits for a tag of its worker. */
static void
worker_unplug(struct rq *bio, struct io_uring *from)
{
  struct worker *w = bio->w;
  rq_stack_push(&w->unplugged, bio);
  waker_kick(&w->wk, from);
}

/* rq_ops retry_stalled: W's readers that found no tag try again. */
static void
worker_retry_stalled(struct worker *w, struct io_uring *from)
{
  waker_kick(&w->wk, from);
}

static const struct rq_ops worker_rq_ops = {worker_complete, worker_unplug,
                                            worker_retry_stalled};

static struct worker *
worker_of(struct conn_set *cs)
{
  return (struct worker *)(void *)((char *)cs - offsetof(struct worker, cs));
}

static int
submit_mq(struct worker *w, struct conn *c, const struct nbd_req *r)
{
  struct rq bio = {.req = *r,
                   .conn = c,
                   .proto = &c->proto,
                   .w = w,
                   .ops = &worker_rq_ops,
                   .widx = w->idx};
  if (r->type == NBD_CMD_WRITE) /* the payload stays where it arrived */
    bio.pin = c->inb;
  switch (mq_submit_bio(w->s->mq, &bio, &w->ring)) {
  case MQ_NO_TAG:
    c->stalled = true;
    return 1;
  case MQ_NOMEM:
    nbd_reply_error(&c->proto, r, NBD_ENOMEM, "out of memory",
                    &c->out[c->fill]);
    return 0;
  case MQ_QUEUED:
  case MQ_PLUGGED:
    break;
  }
  /* Only this thread retires the request: counting after it is queued
   * is safe. */
  if (bio.pin)
    c->inb->refs++;
  c->inflight++;
  return 0;
}

/* nbdc_submit_fn of every connection of a worker (OPAQUE: the conn). */
static int
submit(void *opaque, struct nbdc *p, const struct nbd_req *r)
{
  struct conn *c = opaque;
  struct worker *w = worker_of(c->set);
  if (w->s->mode == QM_MQ)
    return submit_mq(w, c, r);
  return bio_submit(&w->bio, c, r);
}

struct worker *
worker_new(struct server *s, unsigned idx, char *err, size_t errlen)
{
  const char *what = "out of memory";
  int r = -ENOMEM;
  struct worker *w = calloc(1, sizeof *w);
  if (!w)
    goto fail;
  w->s = s;
  w->idx = idx;
  w->bio = (struct bio_owner){w, &worker_rq_ops};
  if (conn_set_init(&w->cs, &w->ring, &s->cfg, submit) < 0)
    goto fail_cs;
  if ((r = waker_init(&w->wk, w)) < 0) {
    what = "eventfd";
    goto fail_cs;
  }
  /* Set up here, where a failure can name its option; enabled by the
   * worker's thread, which becomes its single issuer. */
  if ((r = ring_init(&w->ring, WORKER_RING_ENTRIES, true)) < 0) {
    what = "io_uring setup";
    goto fail_efd;
  }
  pthread_mutex_init(&w->lock, NULL);
  return w;

fail_efd:
  close(w->wk.efd);
fail_cs:
  conn_set_free(&w->cs);
  free(w);
fail:
  snprintf(err, errlen, "--threads %u: worker %u: %s: %s%s", s->nworkers, idx,
           what, strerror(-r),
           r == -EMFILE || r == -ENFILE
               ? " (each worker needs 2 descriptors: raise ulimit -n or "
                 "lower --threads)"
               : "");
  return NULL;
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
  waker_kick_efd(&w->wk);
}

/* Issue the plugged writes handed to us, oldest first, while tags last. */
static void
issue_unplugged(struct worker *w)
{
  struct rq *l = rq_stack_take(&w->unplugged);
  if (l) {
    if (w->unpl_tail)
      w->unpl_tail->next = l;
    else
      w->unpl_head = l;
    while (l->next)
      l = l->next;
    w->unpl_tail = l;
  }
  while (w->unpl_head) {
    struct rq *b = w->unpl_head, *n = b->next;
    if (!mq_issue_plugged(w->s->mq, b, &w->ring))
      return;
    w->unpl_head = n;
  }
  w->unpl_tail = NULL;
}

void
worker_power_cut(struct worker *w)
{
  waker_kick_efd(&w->wk); /* on_wake sees the new generation */
}

void
worker_stop(struct worker *w)
{
  atomic_store(&w->stop, true);
  waker_kick_efd(&w->wk);
}

/* An rq came back (mq completion or bio timer): queue its reply, release
 * its tag and payload.  Returns its connection, to be processed. */
static struct conn *
rq_retire(struct worker *w, struct rq *rq)
{
  struct conn *c = rq->conn;
  conn_rq_reply(c, rq);
  if (rq->hq)
    mq_put_tag(w->s->mq, rq, &w->ring);
  else
    rq_free(rq);
  return c;
}

static void
rq_finished(struct worker *w, struct rq *rq)
{
  conn_process(rq_retire(w, rq));
}

static void
begin_stop(struct worker *w)
{
  w->cs.stopping = true;
  for (struct conn *c = w->cs.conns, *n; c; c = n) {
    n = c->next;
    if (c->proto.phase != PH_TRANS)
      conn_kill(c);
    else
      shutdown(c->fd, SHUT_RD); /* pending recv sees EOF */
  }
  arm_timeout(&w->ring, &w->grace_ts, STOP_GRACE_NSEC, tag_ptr(TAG_GRACE, w));
  w->grace_armed = true;
}

/* Woken (eventfd or MSG_RING): take new connections and completions. */
static void
on_wake(struct worker *w)
{
  atomic_store(&w->wk.kicked, false);
  pthread_mutex_lock(&w->lock);
  int *fds = w->newfds;
  size_t nnew = w->nnew;
  w->newfds = NULL;
  w->nnew = w->capnew = 0;
  pthread_mutex_unlock(&w->lock);
  struct rq *done = rq_stack_take(&w->done);
  for (size_t i = 0; i < nnew; i++)
    conn_new(&w->cs, fds[i]);
  free(fds);
  /* Queue all the replies first, then process each connection once, so
   * a batch of completions goes out in one send. */
  struct conn *touched = NULL;
  while (done) {
    struct rq *n = done->next;
    struct conn *c = rq_retire(w, done);
    if (!c->touched) {
      c->touched = true;
      c->touch_next = touched;
      touched = c;
    }
    done = n;
  }
  while (touched) {
    struct conn *c = touched;
    touched = c->touch_next;
    c->touched = false;
    conn_process(c);
  }
  /* Tags may have been freed anywhere: plugged writes next in their zone
   * go first, then stalled readers. */
  if (w->s->mq)
    issue_unplugged(w);
  for (struct conn *c = w->cs.conns, *n; c; c = n) {
    n = c->next;
    if (c->stalled)
      conn_process(c);
  }
  uint64_t gen = znbd_dev_generation(w->s->cfg.dev);
  if (gen != w->gen) { /* a power cut: drop the connections made before */
    w->gen = gen;
    for (struct conn *c = w->cs.conns, *n; c; c = n) {
      n = c->next;
      if (znbd_req_cut(&c->proto.rq))
        conn_kill(c);
    }
  }
  if (atomic_load(&w->stop) && !w->cs.stopping)
    begin_stop(w);
}

static void
on_efd(struct worker *w)
{
  on_wake(w);
  waker_listen(&w->wk, &w->ring);
}

/* The trim timer fired: give back what idle connections and an idle
 * worker hold; if anything is still busy, look again later. */
static void
worker_trim(struct worker *w)
{
  w->trim_armed = false;
  if (!conn_set_trim(&w->cs))
    return; /* still dirty: re-armed at the end of the loop turn */
  if (w->s->mq)
    mq_trim(w->s->mq, OUT_KEEP);
  malloc_trim(0);
  w->cs.dirty = false;
}

/* One completion on W's ring: TAG (tag.h) with result RES. */
static void
worker_handle(struct worker *w, uint64_t tag, int res)
{
  void *p = tag_get_ptr(tag);
  switch (tag_op(tag)) {
  case TAG_RECV:
    conn_on_recv(p, res);
    break;
  case TAG_SEND:
    conn_on_send(p, res);
    break;
  case TAG_WAKE_EFD:
    on_efd(p);
    break;
  case TAG_WAKE_MSG:
    on_wake(p);
    break;
  case TAG_WAKE_FAIL:
    waker_kick_efd(p);
    break;
  case TAG_TRIM:
    worker_trim(w);
    break;
  case TAG_GRACE: /* stop grace over: drop stragglers */
    w->grace_over = true;
    for (struct conn *c = w->cs.conns, *nx; c; c = nx) {
      nx = c->next;
      conn_kill(c);
    }
    break;
  case TAG_RQ_DONE:
    rq_finished(w, p);
    break;
  case TAG_TLS_TIMEOUT:
    conn_on_tls_timeout(p, res);
    break;
  case TAG_CANCEL:
    break;
  default: /* not used on a worker's ring */
    break;
  }
}

static void *
worker_main(void *arg)
{
  struct worker *w = arg;
  int r = waker_start(&w->wk, &w->ring);
  if (r < 0) {
    server_fail(w->s, "worker %u: io_uring enable: %s", w->idx, strerror(-r));
    return NULL;
  }
  /* Stopping: until every connection is gone, or, after another thread
   * failed, until the grace is over (requests it held never complete). */
  while (!(w->cs.stopping && (w->cs.nconns == 0 ||
                              (w->grace_over && atomic_load(&w->s->failed))))) {
    r = io_uring_submit_and_wait(&w->ring, 1);
    if (r < 0 && r != -EINTR && r != -EBUSY) {
      server_fail(w->s, "worker %u: io_uring_submit_and_wait: %s", w->idx,
                  strerror(-r));
      break; /* its connections are closed by worker_free */
    }
    struct io_uring_cqe *cqe;
    /* One CQE at a time, marked seen before it is handled: a handler may
     * consume the CQE of its own early send (conn_early_send). */
    while (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      io_uring_cqe_seen(&w->ring, cqe);
      worker_handle(w, tag, res);
    }
    /* Requests this thread issued directly and completed (mq): their
     * replies go out with this turn's submit, no wakeup needed. */
    while (w->self_done) {
      w->self_done = false;
      on_wake(w);
    }
    if (w->cs.dirty && !w->trim_armed && !w->cs.stopping) {
      arm_timeout(&w->ring, &w->trim_ts, TRIM_NSEC, tag_ptr(TAG_TRIM, w));
      w->trim_armed = true;
    }
  }
  waker_stop(&w->wk);
  return NULL;
}

int
worker_start(struct worker *w, char *err, size_t errlen)
{
  int r = pthread_create(&w->th, NULL, worker_main, w);
  if (r) {
    snprintf(err, errlen, "--threads %u: cannot start worker %u: %s",
             w->s->nworkers, w->idx, strerror(r));
    return -1;
  }
  return 0;
}

void
worker_join(struct worker *w)
{
  pthread_join(w->th, NULL);
}

void
worker_free(struct worker *w)
{
  if (!w)
    return;
  conn_set_free(&w->cs);
  io_uring_queue_exit(&w->ring);
  close(w->wk.efd);
  free(w->newfds);
  for (struct rq *rq = atomic_load(&w->done), *n; rq; rq = n) {
    n = rq->next;
    if (!rq->hq)
      rq_free(rq);
  }
  /* Plugged writes never issued (their zone's write never completed). */
  struct rq *lists[2] = {atomic_load(&w->unplugged), w->unpl_head};
  for (int i = 0; i < 2; i++)
    for (struct rq *rq = lists[i], *n; rq; rq = n) {
      n = rq->next;
      free(rq);
    }
  pthread_mutex_destroy(&w->lock);
  free(w);
}
