/* znbd server: the blk-mq-like submission model (--queue-mode=mq).
 *
 * A tag set of hw_queue_depth tags per hardware queue (null_blk's
 * hw_queue_depth, per blk-mq hardware context), submit_queues hardware
 * queues each dispatched by its own thread through queue_rq(), which
 * executes the request and completes it — at once, or after
 * completion_nsec through an io_uring timeout so no thread sleeps
 * (null_blk irqmode=2).  Worker I maps to hardware queue I mod
 * submit_queues, as blk-mq maps CPUs to hardware contexts.
 *
 * Scheduler mq-deadline here means zone write locking (Linux
 * blk-zoned/mq-deadline before 6.10): at most one write per sequential
 * zone is dispatched at a time, the others wait in a per-zone FIFO until
 * it completes.  no_zone_write_lock=true turns the locking off, and so
 * does pipeline_zoned_writes=true (the default), which instead
 * dispatches same-zone writes concurrently; one that is ahead of the
 * write pointer is parked by the zone engine, keeping its tag, and its
 * completion comes back through its hardware queue when the wp reached
 * it (or it failed: zone_write_timeout, a reset).
 *
 * zone_write_plugging=true replaces both with Linux 6.10's zone write
 * plugging (block/blk-zoned.c, blk_zone_plug_bio): a write to a
 * sequential zone that already has a write dispatched waits in the
 * zone's plug list before it takes a tag (mq_submit_bio), so plugged
 * writes hold no tag; when the dispatched write completes, the hardware
 * queue thread issues the next plugged write, merging the contiguous
 * plugged writes behind it into its request
 * (blk_zone_write_plug_init_request), and hands it to its worker when
 * no tag is free.  A TRIM resetting zones fails their plugged writes
 * with EIO (disk_zone_wplug_set_wp_offset aborts them).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "mq.h"
#include "ring.h"
#include "rq.h"
#include "server.h"
#include "wire.h"

#define TAG_BUF_KEEP (1u << 20) /* bytes of buffer a free tag keeps */
/* Zone write plugging merges plugged writes into the request ahead of
 * them up to Linux's default request size cap (BLK_DEF_MAX_SECTORS_CAP,
 * 2560 sectors) and max_segments (BLK_MAX_SEGMENTS, 128; one segment per
 * write here). */
/* Direct issue (direct_ok) up to this many bytes: a worker executing
 * larger requests itself would stop serving its other connections (and
 * noticing a stop) for as long as a bio worker does. */
#define MQ_DIRECT_MAX (256u * 1024)
#define PLUG_MERGE_MAX_BYTES (2560u * 512)
#define PLUG_MERGE_MAX_WRITES 128

struct hwq {
  _Alignas(TAG_ALIGN) struct mq *m; /* tagged: TAG_WAKE_* */
  unsigned idx;
  pthread_t th;
  struct io_uring ring;
  struct waker wk;
  pthread_mutex_t lock; /* free */
  rq_stack list;        /* to dispatch */
  struct rq *free;      /* free tags */
  struct rq *rqs;
  unsigned depth, nfree;
  atomic_int stalled; /* readers that found no tag */
  atomic_uint busy;   /* pushed to LIST and not yet through queue_rq */
  atomic_bool stop;
};

/* A sequential zone's write lock or write plug.  LOCKED: a write of the
 * zone is dispatched.  The FIFO holds tagged requests (zone write
 * locking) or untagged plugged writes (plugging; DEPTH of them). */
struct zstate {
  bool locked;
  struct rq *head, *tail;
  unsigned depth;
};

struct mq {
  struct server *s;
  unsigned nq;
  struct hwq *q;
  bool zone_lock, pipeline, plug;
  bool direct; /* issue READ/WRITE from the submitting worker */
  uint64_t completion_nsec;
  pthread_mutex_t zlock; /* zones, ps */
  struct zstate *zones;
  uint32_t nr_zones, nr_conv;
  struct mq_plug_stats ps;
};

/* blk-mq's BLK_MQ_MAX_DEPTH: blk_mq_alloc_tag_set() reduces a deeper
 * null_blk hw_queue_depth to it; znbd refuses one (man/znbd.pod). */
#define MQ_MAX_DEPTH 10240

/* Hardware queue Q's tags, eventfd and (disabled) ring; 0 or -errno with
 * *WHAT naming the step that failed. */
static int
hwq_init(struct hwq *q, struct mq *m, unsigned idx, unsigned depth,
         const char **what)
{
  int r;
  q->m = m;
  q->idx = idx;
  q->depth = depth;
  *what = "out of memory for the tags";
  if (!(q->rqs = calloc(depth, sizeof *q->rqs)))
    return -ENOMEM;
  for (unsigned t = 0; t < depth; t++) {
    q->rqs[t].hq = q;
    q->rqs[t].next = q->free;
    q->free = &q->rqs[t];
  }
  q->nfree = depth;
  *what = "eventfd";
  if ((r = waker_init(&q->wk, q)) < 0)
    goto fail_rqs;
  /* Room for a completion timer per tag, the eventfd read and wakeups
   * sent; enabled by the queue's own thread. */
  *what = "io_uring setup";
  if ((r = ring_init(&q->ring, 2 * depth + 8, true)) < 0)
    goto fail_efd;
  pthread_mutex_init(&q->lock, NULL);
  return 0;

fail_efd:
  close(q->wk.efd);
fail_rqs:
  free(q->rqs);
  return r;
}

static void
hwq_free(struct hwq *q)
{
  for (unsigned t = 0; t < q->depth; t++)
    buf_free(&q->rqs[t].reply);
  free(q->rqs);
  io_uring_queue_exit(&q->ring);
  close(q->wk.efd);
  pthread_mutex_destroy(&q->lock);
}

struct mq *
mq_new(struct server *s, char *err, size_t errlen)
{
  const struct znbd_params *p = s->cfg.params;
  unsigned depth = p->hw_queue_depth ? p->hw_queue_depth : 64;
  if (depth > MQ_MAX_DEPTH) {
    snprintf(err, errlen,
             "hw_queue_depth=%u: at most %u tags per hardware queue "
             "(blk-mq's BLK_MQ_MAX_DEPTH)",
             depth, MQ_MAX_DEPTH);
    return NULL;
  }
  struct mq *m = calloc(1, sizeof *m);
  if (!m)
    goto oom;
  m->s = s;
  m->nq = p->submit_queues ? p->submit_queues : 1;
  m->pipeline = p->pipeline_zoned_writes;
  m->completion_nsec = p->completion_nsec;
  m->nr_zones = znbd_dev_nr_zones(s->cfg.dev);
  m->nr_conv = p->zone_nr_conv;
  /* Plugging replaces zone write locking and pipelining (Linux 6.10
   * removed zone write locking from mq-deadline). */
  m->plug = p->zone_write_plugging && m->nr_zones > 0;
  if (m->plug)
    m->pipeline = false;
  /* Pipelining replaces zone write locking (as in the null_blk /
   * mq-deadline pipelining patches): both on means no lock. */
  m->zone_lock = s->sched_deadline && !p->no_zone_write_lock && !m->pipeline &&
                 !m->plug && m->nr_zones > 0;
  /* blk-mq without an elevator issues a request from the submitting
   * context (blk_mq_try_issue_directly); kept to RAM devices completing
   * at once, where queue_rq never blocks and needs no timer. */
  m->direct = !s->sched_deadline && !m->zone_lock && !m->plug &&
              !m->completion_nsec && !p->dir;
  if ((m->zone_lock || m->plug) &&
      !(m->zones = calloc(m->nr_zones, sizeof *m->zones)))
    goto fail_m;
  if (!(m->q = calloc(m->nq, sizeof *m->q)))
    goto fail_zones;
  for (unsigned i = 0; i < m->nq; i++) {
    const char *what;
    int r = hwq_init(&m->q[i], m, i, depth, &what);
    if (r < 0) {
      snprintf(err, errlen,
               "submit_queues=%u hw_queue_depth=%u: hardware queue %u: %s: "
               "%s%s",
               m->nq, depth, i, what, strerror(-r),
               r == -EMFILE || r == -ENFILE
                   ? " (each hardware queue needs 2 descriptors: raise "
                     "ulimit -n or lower submit_queues)"
                   : "");
      while (i--)
        hwq_free(&m->q[i]);
      free(m->q);
      free(m->zones);
      free(m);
      return NULL;
    }
  }
  pthread_mutex_init(&m->zlock, NULL);
  return m;

fail_zones:
  free(m->zones);
fail_m:
  free(m);
oom:
  snprintf(err, errlen, "out of memory for the mq tag set");
  return NULL;
}

/* A free tag of hardware queue for worker index IDX, or NULL (all busy:
 * the reader waits, as blk-mq's). */
static struct rq *
mq_get_tag(struct mq *m, unsigned idx)
{
  struct hwq *q = &m->q[idx % m->nq];
  pthread_mutex_lock(&q->lock);
  struct rq *rq = q->free;
  if (rq) {
    q->free = rq->next;
    q->nfree--;
  } else {
    atomic_fetch_add(&q->stalled, 1);
  }
  pthread_mutex_unlock(&q->lock);
  return rq;
}

void
mq_put_tag(struct mq *m, struct rq *rq, struct io_uring *from)
{
  struct hwq *q = rq->hq;
  /* Read before the tag is free: from then on another worker may take it
   * and overwrite every field. */
  const struct worker *self = rq->w;
  const struct rq_ops *ops = rq->ops;
  /* Do not keep a 64 MiB reply buffer per tag after one large read. */
  if (rq->reply.cap > TAG_BUF_KEEP)
    buf_free(&rq->reply);
  pthread_mutex_lock(&q->lock);
  rq->next = q->free;
  q->free = rq;
  q->nfree++;
  pthread_mutex_unlock(&q->lock);
  /* Readers of other workers waiting for a tag of this queue. */
  if (atomic_exchange(&q->stalled, 0) > 0) {
    for (unsigned i = 0; i < m->s->nworkers; i++)
      if (m->s->workers[i] != self)
        ops->retry_stalled(m->s->workers[i], from);
  }
}

void
mq_trim(struct mq *m, size_t keep)
{
  for (unsigned i = 0; i < m->nq; i++) {
    struct hwq *q = &m->q[i];
    pthread_mutex_lock(&q->lock);
    for (struct rq *rq = q->free; rq; rq = rq->next)
      if (rq->reply.cap > keep)
        buf_free(&rq->reply);
    pthread_mutex_unlock(&q->lock);
  }
}

static void
hwq_push(struct hwq *q, struct rq *rq, struct io_uring *from)
{
  atomic_fetch_add(&q->busy, 1);
  rq_stack_push(&q->list, rq);
  /* The hardware queue's own thread (zone lock passed on) looks at its
   * list again before it sleeps; others wake it once per batch. */
  if (from != &q->ring)
    waker_kick(&q->wk, from);
}

static bool
seq_write(struct mq *m, struct rq *rq)
{
  if (rq->req.type != NBD_CMD_WRITE && rq->req.type != NBD_CMD_WRITE_ZEROES)
    return false;
  rq->zone = znbd_dev_zone_index(m->s->cfg.dev, rq->req.off);
  return rq->zone >= m->nr_conv;
}

static void queue_rq(struct hwq *q, struct rq *rq, struct io_uring *ring);

/* Direct issue of RQ from worker ring FROM (blk_mq_try_issue_directly):
 * a READ, or a WRITE without FUA (nothing that waits for a disk), of at
 * most MQ_DIRECT_MAX bytes, while its hardware queue has nothing queued
 * or dispatching, so that nothing the worker queued before is
 * overtaken. */
static bool
direct_ok(struct mq *m, struct rq *rq, const struct io_uring *from)
{
  struct hwq *q = rq->hq;
  if (!m->direct || !from || from == &q->ring || atomic_load(&q->busy))
    return false;
  if (rq->req.len > MQ_DIRECT_MAX)
    return false;
  if (rq->req.type == NBD_CMD_READ)
    return true;
  return rq->req.type == NBD_CMD_WRITE && !(rq->req.flags & NBD_CMD_FLAG_FUA);
}

/* Insert RQ (tagged, filled) through the scheduler. */
static void
mq_submit(struct mq *m, struct rq *rq, struct io_uring *from)
{
  if (direct_ok(m, rq, from)) {
    rq->zone_locked = false;
    queue_rq(rq->hq, rq, from);
    return;
  }
  rq->zone_locked = false;
  if (m->zone_lock && seq_write(m, rq)) {
    struct zstate *z = &m->zones[rq->zone];
    pthread_mutex_lock(&m->zlock);
    if (z->locked) { /* wait behind the write holding the zone */
      rq->next = NULL;
      if (z->tail)
        z->tail->next = rq;
      else
        z->head = rq;
      z->tail = rq;
      pthread_mutex_unlock(&m->zlock);
      return;
    }
    z->locked = true;
    rq->zone_locked = true;
    pthread_mutex_unlock(&m->zlock);
  }
  hwq_push(rq->hq, rq, from);
}

/* Fill request RQ (a tag or a plugged write) from BIO: what the worker
 * gave, nothing of RQ's own (hq, reply buffer) is overwritten. */
static void
rq_take(struct rq *rq, const struct rq *bio)
{
  rq->req = bio->req;
  rq->pin = bio->pin;
  rq->conn = bio->conn;
  rq->proto = bio->proto;
  rq->w = bio->w;
  rq->ops = bio->ops;
  rq->widx = bio->widx;
  rq->zone = bio->zone;
  rq->merged = bio->merged;
  rq->reply.len = 0;
  rq->nref = 0;
  rq->parked = false;
  rq->zone_locked = false;
}

/* Zone write plugging, BIO a write to sequential zone BIO->zone: if the
 * zone has a write dispatched, BIO joins its plug without a tag
 * (blk_zone_wplug_handle_write); else it takes a tag and the zone. */
static enum mq_submit_result
plug_write(struct mq *m, const struct rq *bio, struct io_uring *from)
{
  struct zstate *z = &m->zones[bio->zone];
  pthread_mutex_lock(&m->zlock);
  m->ps.writes++;
  if (z->locked) {
    struct rq *b = calloc(1, sizeof *b);
    if (!b) {
      m->ps.writes--;
      pthread_mutex_unlock(&m->zlock);
      return MQ_NOMEM;
    }
    rq_take(b, bio); /* b->hq NULL: no tag, freed when retired */
    if (z->tail)
      z->tail->next = b;
    else
      z->head = b;
    z->tail = b;
    if (++z->depth > m->ps.max_depth)
      m->ps.max_depth = z->depth;
    m->ps.plugged++;
    m->ps.now++;
    pthread_mutex_unlock(&m->zlock);
    return MQ_PLUGGED;
  }
  struct rq *rq = mq_get_tag(m, bio->widx);
  if (!rq) {
    m->ps.writes--; /* offered again once a tag is free */
    pthread_mutex_unlock(&m->zlock);
    return MQ_NO_TAG;
  }
  z->locked = true;
  pthread_mutex_unlock(&m->zlock);
  rq_take(rq, bio);
  rq->zone_locked = true;
  hwq_push(rq->hq, rq, from);
  return MQ_QUEUED;
}

/* A TRIM R resets zones: their plugged writes fail with EIO, as Linux
 * aborts a zone's plugged BIOs when a reset or reset-all is submitted
 * (blk_zone_wplug_handle_reset_or_finish, disk_zone_wplug_abort).  A
 * write already dispatched is not touched. */
static void
plug_abort(struct mq *m, const struct nbd_req *r, struct io_uring *from)
{
  uint32_t first, end;
  struct rq *list = NULL, **tail = &list;
  znbd_dev_trim_zones(m->s->cfg.dev, r->len, r->off, &first, &end);
  if (first >= end)
    return;
  pthread_mutex_lock(&m->zlock);
  for (uint32_t i = first; i < end; i++) {
    struct zstate *z = &m->zones[i];
    if (!z->head)
      continue;
    *tail = z->head;
    tail = &z->tail->next;
    m->ps.now -= z->depth;
    m->ps.aborted += z->depth;
    z->head = z->tail = NULL;
    z->depth = 0;
  }
  pthread_mutex_unlock(&m->zlock);
  *tail = NULL;
  while (list) {
    struct rq *b = list;
    list = b->next;
    nbd_reply_error(b->proto, &b->req, NBD_EIO,
                    "zone reset while the write was plugged", &b->reply);
    b->ops->complete(b, from);
  }
}

enum mq_submit_result
mq_submit_bio(struct mq *m, struct rq *bio, struct io_uring *from)
{
  bio->merged = NULL;
  if (m->plug && seq_write(m, bio))
    return plug_write(m, bio, from);
  struct rq *rq = mq_get_tag(m, bio->widx);
  if (!rq)
    return MQ_NO_TAG;
  rq_take(rq, bio);
  if (m->plug && rq->req.type == NBD_CMD_TRIM)
    plug_abort(m, &rq->req, from);
  mq_submit(m, rq, from);
  return MQ_QUEUED;
}

bool
mq_issue_plugged(struct mq *m, struct rq *bio, struct io_uring *from)
{
  struct rq *rq = mq_get_tag(m, bio->widx);
  if (!rq)
    return false;
  rq_take(rq, bio);
  rq->zone_locked = true; /* the zone passes on */
  free(bio);
  hwq_push(rq->hq, rq, from);
  return true;
}

/* RQ held zone RQ->zone's plug and is done: the next plugged write (with
 * the contiguous writes behind it merged into its request) takes the
 * zone, or the zone is free (blk_zone_write_plug_finish_request,
 * disk_zone_wplug_unplug_bio).  Linux issues it from a work item; here
 * the completing hardware queue thread does, and the write's worker when
 * no tag is free. */
static void
plug_next(struct hwq *q, struct rq *rq, struct io_uring *ring)
{
  struct mq *m = q->m;
  struct zstate *z = &m->zones[rq->zone];
  pthread_mutex_lock(&m->zlock);
  struct rq *next = z->head;
  if (next) {
    z->head = next->next;
    z->depth--;
    m->ps.now--;
    uint64_t end = next->req.off + next->req.len, bytes = next->req.len;
    unsigned n = 1;
    struct rq **tail = &next->merged;
    struct rq *b;
    while (next->req.type == NBD_CMD_WRITE && (b = z->head) &&
           b->req.type == NBD_CMD_WRITE && b->req.off == end &&
           bytes + b->req.len <= PLUG_MERGE_MAX_BYTES &&
           n < PLUG_MERGE_MAX_WRITES) {
      z->head = b->next;
      z->depth--;
      m->ps.now--;
      m->ps.merged++;
      b->next = NULL;
      *tail = b;
      tail = &b->next;
      end += b->req.len;
      bytes += b->req.len;
      n++;
    }
    if (!z->head)
      z->tail = NULL;
  } else {
    z->locked = false;
  }
  pthread_mutex_unlock(&m->zlock);
  rq->zone_locked = false;
  if (next && !mq_issue_plugged(m, next, ring))
    next->ops->unplug(next, ring);
}

/* The request is done: release its zone write lock or plug, hand it and
 * the writes merged into it back. */
static void
complete(struct hwq *q, struct rq *rq, struct io_uring *ring)
{
  struct mq *m = q->m;
  if (rq->zone_locked && m->plug) {
    plug_next(q, rq, ring);
  } else if (rq->zone_locked) {
    struct zstate *z = &m->zones[rq->zone];
    pthread_mutex_lock(&m->zlock);
    struct rq *next = z->head;
    if (next) {
      z->head = next->next;
      if (!z->head)
        z->tail = NULL;
      next->zone_locked = true; /* the lock passes on */
    } else {
      z->locked = false;
    }
    pthread_mutex_unlock(&m->zlock);
    rq->zone_locked = false;
    if (next)
      hwq_push(next->hq, next, ring);
  }
  for (struct rq *b = rq->merged, *n; b; b = n) {
    n = b->next;
    b->ops->complete(b, ring);
  }
  rq->merged = NULL;
  rq->ops->complete(rq, ring);
}

/* nbd_add_ref_fn of an rq (OPAQUE): remember the store bytes, or copy
 * them into the reply when RQ_REFS are taken. */
static void
rq_add_ref(void *opaque, const void *p, size_t len)
{
  struct rq *rq = opaque;
  if (rq->nref == RQ_REFS) {
    buf_append(&rq->reply, p, len);
    return;
  }
  rq->ref[rq->nref++] = (struct rq_ref){rq->reply.len, p, len};
}

/* Execute RQ unless its connection is gone (nobody to answer).  READ
 * data of a plain RAM disk is not copied (rq_add_ref). */
static int
exec_rq(struct rq *rq, unsigned xf)
{
  rq->nref = 0;
  if (atomic_load(&rq->proto->gone)) {
    rq->reply.len = 0;
    return 0;
  }
  return nbd_exec_ref(rq->proto, &rq->req, xf | EXEC_REF, &rq->reply,
                      rq_add_ref, rq);
}

/* A parked write's reply is ready (any thread): complete it through its
 * hardware queue (queue_rq sees PARKED). */
static void
mq_park_done(struct nbd_park *p)
{
  struct rq *rq = rq_of_park(p);
  rq->parked = true;
  hwq_push(rq->hq, rq, NULL);
}

/* queue_rq: execute RQ (and the writes merged into it, in order), or
 * complete it if it was parked and its reply is ready.  A write ahead of
 * the wp (pipelining) is parked with its tag. */
static void
queue_rq(struct hwq *q, struct rq *rq, struct io_uring *ring)
{
  struct mq *m = q->m;
  const struct nbdc *c = rq->proto;
  unsigned xf = EXEC_NOWAIT;
  if (rq->parked) {
    rq->parked = false;
    goto done;
  }
  if (atomic_load(&c->gone) && !rq->merged) { /* do not execute it */
    rq->reply.len = 0;
    rq->nref = 0;
    complete(q, rq, ring);
    return;
  }
  if (m->pipeline)
    xf |= EXEC_REQUEUE;
  if (exec_rq(rq, xf) == EXEC_AGAIN) {
    rq->park = (struct nbd_park){c, rq->req, &rq->reply, mq_park_done};
    if (nbd_exec_park(&rq->park, 0) == EXEC_PARKED)
      return;
  }
  for (struct rq *b = rq->merged; b; b = b->next)
    exec_rq(b, EXEC_NOWAIT);
done:;
  /* The bucket hands out times in order: the last merged write's delay
   * (completion_nsec included) covers them all. */
  uint64_t ns = nbd_req_delay(rq->proto, &rq->req);
  for (struct rq *b = rq->merged; b; b = b->next)
    ns = nbd_req_delay(b->proto, &b->req);
  if (ns)
    arm_timeout(ring, &rq->ts, ns, tag_ptr(TAG_RQ_DONE, rq));
  else
    complete(q, rq, ring);
}

void
mq_plug_stats(struct mq *m, struct mq_plug_stats *out)
{
  pthread_mutex_lock(&m->zlock);
  *out = m->ps;
  pthread_mutex_unlock(&m->zlock);
}

void
mq_stats_print(void *opaque, FILE *out)
{
  struct mq *m = opaque;
  struct mq_plug_stats st;
  if (!m->plug)
    return;
  mq_plug_stats(m, &st);
  fprintf(out,
          " plug_writes=%" PRIu64 " plug_plugged=%" PRIu64 " plug_now=%u"
          " plug_max_depth=%u plug_merged=%" PRIu64 " plug_aborted=%" PRIu64,
          st.writes, st.plugged, st.now, st.max_depth, st.merged, st.aborted);
}

/* Handle the completions on Q's ring. */
static void
hwq_reap(struct hwq *q)
{
  struct io_uring_cqe *cqe;
  unsigned head, n = 0;
  bool efd = false;
  io_uring_for_each_cqe(&q->ring, head, cqe)
  {
    n++;
    uint64_t tag = io_uring_cqe_get_data64(cqe);
    switch (tag_op(tag)) {
    case TAG_WAKE_EFD:
      efd = true;
      break;
    case TAG_WAKE_MSG: /* woken: the list is looked at next */
      break;
    case TAG_WAKE_FAIL:
      waker_kick_efd(tag_get_ptr(tag));
      break;
    case TAG_RQ_DONE:
      complete(q, tag_get_ptr(tag), &q->ring);
      break;
    default: /* not used on a hardware queue's ring */
      break;
    }
  }
  io_uring_cq_advance(&q->ring, n);
  if (efd)
    waker_listen(&q->wk, &q->ring);
}

/* Dispatch LIST. */
static void
hwq_dispatch(struct hwq *q, struct rq *list)
{
  while (list) {
    struct rq *rq = list;
    list = rq->next;
    queue_rq(q, rq, &q->ring);
    atomic_fetch_sub(&q->busy, 1);
  }
}

/* Stopping and all tags back (or a failed thread holds some for good). */
static bool
hwq_may_stop(struct hwq *q)
{
  if (!atomic_load(&q->stop))
    return false;
  pthread_mutex_lock(&q->lock);
  bool stop = q->nfree == q->depth || atomic_load(&q->m->s->failed);
  pthread_mutex_unlock(&q->lock);
  return stop;
}

static void *
hwq_main(void *arg)
{
  struct hwq *q = arg;
  int r = waker_start(&q->wk, &q->ring);
  if (r < 0) {
    server_fail(q->m->s, "hardware queue %u: io_uring enable: %s", q->idx,
                strerror(-r));
    return NULL;
  }
  bool again = false;
  for (;;) {
    /* Work our own completions queued (a zone lock passed on): no sleep. */
    r = io_uring_submit_and_wait(&q->ring, again ? 0 : 1);
    if (r < 0 && r != -EINTR && r != -EBUSY) {
      server_fail(q->m->s, "hardware queue %u: io_uring_submit_and_wait: %s",
                  q->idx, strerror(-r));
      break; /* its requests never complete: the workers stop anyway */
    }
    hwq_reap(q);
    atomic_store(&q->wk.kicked, false);
    struct rq *list = rq_stack_take(&q->list);
    if (hwq_may_stop(q) && !list)
      break;
    hwq_dispatch(q, list);
    again = atomic_load(&q->list) != NULL;
  }
  waker_stop(&q->wk);
  return NULL;
}

/* Stop and join the threads of the first N hardware queues. */
static void
stop_queues(struct mq *m, unsigned n)
{
  for (unsigned i = 0; i < n; i++) {
    atomic_store(&m->q[i].stop, true);
    waker_kick_efd(&m->q[i].wk);
  }
  for (unsigned i = 0; i < n; i++)
    pthread_join(m->q[i].th, NULL);
}

int
mq_start(struct mq *m, char *err, size_t errlen)
{
  for (unsigned i = 0; i < m->nq; i++) {
    int r = pthread_create(&m->q[i].th, NULL, hwq_main, &m->q[i]);
    if (r) {
      snprintf(err, errlen,
               "submit_queues=%u: cannot start hardware queue %u: %s", m->nq, i,
               strerror(r));
      stop_queues(m, i);
      return -1;
    }
  }
  return 0;
}

void
mq_stop(struct mq *m)
{
  stop_queues(m, m->nq);
}

void
mq_free(struct mq *m)
{
  if (!m)
    return;
  for (unsigned i = 0; i < m->nq; i++)
    hwq_free(&m->q[i]);
  free(m->q);
  /* Plugged writes left only when a thread failed. */
  for (uint32_t i = 0; m->plug && i < m->nr_zones; i++)
    for (struct rq *b = m->zones[i].head, *n; b; b = n) {
      n = b->next;
      rq_free(b);
    }
  free(m->zones);
  pthread_mutex_destroy(&m->zlock);
  free(m);
}
