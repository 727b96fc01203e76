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
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "server.h"
#include "tls.h"
#include "wire.h"

#define IN_INITIAL (256u * 1024)
#define OUT_HIGH (4u * 1024 * 1024) /* stop parsing above this */
/* SIGTERM: clients that do not read are cut off after this, within the
 * 2 s man/znbd.pod promises (what is still queued for them is dropped). */
#define STOP_GRACE_NSEC 1500000000ULL
/* bio: send the replies collected so far after this many requests of one
 * received batch, so client and server overlap instead of taking turns. */
#define EARLY_SEND_AFTER 8
#define WORKER_RING_ENTRIES 256
/* A TLS handshake not done after this is given up and the connection
 * closed (man/znbd.pod): a client stalling in it holds no more than its
 * own connection, and that only for so long. */
#define TLS_HANDSHAKE_NSEC 10000000000ULL
/* Ciphertext room offered to each receive of a TLS connection. */
#define TLS_RX_MIN (64u * 1024)

/* A connection's input buffer.  WRITE payloads are not copied in mq mode:
 * their rq holds a reference to the buffer they were received into, and
 * the connection receives into a fresh buffer (moving only the unparsed
 * tail) rather than reuse bytes a queued request still points at. */
struct inbuf {
  unsigned refs; /* the connection's + one per queued rq; worker thread only */
  size_t cap;
  struct inbuf *next; /* worker's free list */
  uint8_t data[];
};
#define INBUF_FREE_KEEP 16 /* IN_INITIAL-sized buffers a worker keeps */

/* Replies of completed rqs are not copied into the output buffer: the rq's
 * reply buffer is queued as it is (the tag gets a spare buffer from the
 * worker's pool) and sent with the output buffer's bytes by one sendmsg.
 * Replies shorter than this are copied: cheaper than an iovec. */
#define REPLY_MOVE_MIN 512
#define REPLY_POOL_KEEP 256
#define REPLY_BUF_KEEP (1u << 20)
/* Output buffer bytes a connection with nothing to send keeps. */
#define OUT_KEEP (256u * 1024)
/* After activity, the worker gives memory back once it has been idle
 * about this long: spare buffers over OUT_KEEP, mq tags' buffers, and
 * malloc_trim() for what glibc keeps in its heaps. */
#define TRIM_NSEC 1000000000ULL

/* A reply buffer queued to go out after AT bytes of the output buffer. */
struct oseg {
  size_t at;
  struct buf b;
};

struct osegs {
  struct oseg *v;
  unsigned n, cap;
  size_t bytes; /* sum of v[].b.len */
};

struct conn {
  struct worker *w;
  int fd;
  struct nbdc proto;
  struct inbuf *inb;
  uint8_t *in; /* inb->data */
  size_t in_head, in_tail, in_cap, need;
  struct buf out[2];   /* out[fill] collects, out[!fill] is being sent */
  struct osegs seg[2]; /* reply buffers queued with out[i] */
  struct iovec *iov;   /* of the sendmsg in flight */
  unsigned iov_cap;
  struct msghdr msg;
  int fill;
  size_t sent;
  bool sending, receiving, stalled, dead, flush_close, touched;
  unsigned inflight; /* rqs not yet completed back to us */
  unsigned batch;    /* requests executed since the last send started */
  /* TLS (after NBD_OPT_STARTTLS; NULL before and without): receives go
   * into its ciphertext buffer, tls_fill() decrypts into in[], sends
   * encrypt a side into its records (queue_send_tls). */
  struct tls *tls;
  bool tls_up;      /* handshake done */
  bool tls_timer;   /* handshake timeout armed, its CQE not yet seen */
  bool tls_unarmed; /* ... and its removal asked for */
  bool tls_in_full; /* in[] had no room for what GnuTLS could give */
  bool tls_eof;     /* the client's close_notify */
  struct __kernel_timespec tls_ts;
  struct conn *prev, *next;
  struct conn *touch_next; /* conns with completions this turn */
};

struct worker {
  struct server *s;
  unsigned idx;
  pthread_t th;
  struct io_uring ring;
  struct waker wk;
  uint64_t efd_val;
  pthread_mutex_t lock; /* newfds */
  int *newfds;
  size_t nnew, capnew;
  rq_stack done;      /* completed rqs handed back */
  rq_stack unplugged; /* plugged writes to issue (worker_unplug) */
  struct rq *unpl_head, *unpl_tail; /* ... still waiting for a tag */
  struct inbuf *free_inb;
  unsigned nfree_inb;
  struct buf *pool; /* spare reply buffers */
  unsigned npool;
  atomic_bool stop;
  bool stopping, grace_armed, grace_over;
  uint64_t gen; /* znbd_dev_generation() its connections were checked at */
  struct __kernel_timespec grace_ts;
  struct conn *conns;
  unsigned nconns;
  bool dirty, trim_armed; /* served since the last trim; timer set */
  bool self_done;         /* completed rqs pushed by this thread: on_wake */
  struct __kernel_timespec trim_ts;
};

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

static struct inbuf *
inbuf_get(struct worker *w, size_t cap)
{
  struct inbuf *b = NULL;
  if (cap <= IN_INITIAL && w->free_inb) {
    b = w->free_inb;
    w->free_inb = b->next;
    w->nfree_inb--;
  } else {
    if (cap < IN_INITIAL)
      cap = IN_INITIAL;
    if (!(b = malloc(sizeof *b + cap)))
      return NULL;
    b->cap = cap;
  }
  b->refs = 1;
  return b;
}

static void
inbuf_put(struct worker *w, struct inbuf *b)
{
  if (--b->refs)
    return;
  if (b->cap == IN_INITIAL && w->nfree_inb < INBUF_FREE_KEEP) {
    b->next = w->free_inb;
    w->free_inb = b;
    w->nfree_inb++;
  } else {
    free(b);
  }
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
  if (!(w->pool = calloc(REPLY_POOL_KEEP, sizeof *w->pool)))
    goto fail_w;
  atomic_init(&w->wk.ring_fd, -1);
  w->wk.msg_ud = tag_ptr(TAG_WAKE_MSG, w);
  w->wk.efd = eventfd(0, EFD_CLOEXEC);
  if (w->wk.efd == -1) {
    what = "eventfd";
    r = -errno;
    goto fail_pool;
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
fail_pool:
  free(w->pool);
fail_w:
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

void
worker_complete(struct rq *rq, struct io_uring *from)
{
  struct worker *w = rq->w;
  rq_stack_push(&w->done, rq);
  if (from == &w->ring) /* its own thread (mq direct issue) */
    w->self_done = true;
  else
    waker_kick(&w->wk, from);
}

void
worker_unplug(struct rq *bio, struct io_uring *from)
{
  struct worker *w = bio->w;
  rq_stack_push(&w->unplugged, bio);
  waker_kick(&w->wk, from);
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
worker_retry_stalled(struct worker *w, struct io_uring *from)
{
  waker_kick(&w->wk, from);
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

/* ---- connections ---- */

static size_t
side_len(const struct conn *c, int i)
{
  return c->out[i].len + c->seg[i].bytes;
}

static void
pool_put(struct worker *w, struct buf *b)
{
  if (b->cap == 0) /* borrowed store bytes (side_add_ref): not ours */
    return;
  if (b->cap <= REPLY_BUF_KEEP && w->npool < REPLY_POOL_KEEP) {
    b->len = 0;
    w->pool[w->npool++] = *b;
  } else {
    buf_free(b);
  }
}

/* Side I was sent: empty it, recycle its reply buffers. */
static void
side_reset(struct conn *c, int i)
{
  struct osegs *sg = &c->seg[i];
  for (unsigned k = 0; k < sg->n; k++)
    pool_put(c->w, &sg->v[k].b);
  sg->n = 0;
  sg->bytes = 0;
  c->out[i].len = 0;
}

/* Queue B (taken over) after what out[fill] holds now. */
static bool
side_queue(struct conn *c, const struct buf *b)
{
  struct osegs *sg = &c->seg[c->fill];
  if (sg->n == sg->cap) {
    unsigned cap = sg->cap ? 2 * sg->cap : 16;
    struct oseg *v = realloc(sg->v, cap * sizeof *v);
    if (!v)
      return false;
    sg->v = v;
    sg->cap = cap;
  }
  sg->v[sg->n].at = c->out[c->fill].len;
  sg->v[sg->n].b = *b;
  sg->n++;
  sg->bytes += b->len;
  return true;
}

/* bio READ data sent straight from the store (nbdc add_ref, EXEC_REF):
 * queued as a borrowed buffer (cap 0: never freed or pooled). */
static void
side_add_ref(void *opaque, const void *p, size_t len)
{
  struct conn *c = opaque;
  struct buf b = {.p = (uint8_t *)(uintptr_t)p, .len = len, .cap = 0};
  if (!side_queue(c, &b)) {
    perror("znbd: realloc");
    abort(); /* as buf_reserve: cannot answer without it */
  }
}

/* Queue the reply in *B after what out[fill] holds; *B gets a spare. */
static bool
side_move_reply(struct conn *c, struct buf *b)
{
  struct worker *w = c->w;
  if (!side_queue(c, b))
    return false;
  if (w->npool)
    *b = w->pool[--w->npool];
  else
    *b = (struct buf){0};
  return true;
}

static void conn_process(struct conn *c);

/* Nothing left to send and nothing in flight: free output buffers grown
 * past OUT_KEEP by large replies, so an idle connection holds no 64 MiB
 * read reply (they are allocated again, to size, when needed). */
static void
give_back(struct conn *c)
{
  if (c->sending || c->inflight || side_len(c, 0) || side_len(c, 1))
    return;
  for (int i = 0; i < 2; i++)
    if (c->out[i].cap > OUT_KEEP)
      buf_free(&c->out[i]);
  if (c->tls)
    tls_give_back(c->tls, OUT_KEEP, !c->receiving);
}

/* Close C's socket and free it and its output buffers (not its input
 * buffer: the caller decides, it may be shared with queued writes). */
static void
conn_destroy(struct conn *c)
{
  close(c->fd);
  for (int i = 0; i < 2; i++) {
    side_reset(c, i);
    free(c->seg[i].v);
    buf_free(&c->out[i]);
  }
  free(c->iov);
  tls_free(c->tls);
  free(c);
}

static void
conn_maybe_free(struct conn *c)
{
  if (!c->dead || c->sending || c->receiving || c->inflight || c->tls_timer)
    return;
  struct worker *w = c->w;
  if (c->prev)
    c->prev->next = c->next;
  else
    w->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  w->nconns--;
  inbuf_put(w, c->inb);
  conn_destroy(c);
}

/* Cancel the TLS handshake timer (its CQE still comes, -ECANCELED). */
static void
tls_unarm(struct conn *c)
{
  if (!c->tls_timer || c->tls_unarmed)
    return;
  struct io_uring_sqe *sqe = get_sqe(&c->w->ring);
  io_uring_prep_timeout_remove(sqe, tag_ptr(TAG_TLS_TIMEOUT, c), 0);
  io_uring_sqe_set_data64(sqe, tag_ptr(TAG_CANCEL, NULL));
  c->tls_unarmed = true;
}

/* Cut C off; freed once nothing of it is in flight (conn_maybe_free). */
static void
conn_cut(struct conn *c)
{
  if (!c->dead) {
    c->dead = true;
    atomic_store(&c->proto.gone, true);
    shutdown(c->fd, SHUT_RDWR); /* completes our pending recv/send */
    tls_unarm(c);
  }
}

static void
conn_kill(struct conn *c)
{
  conn_cut(c);
  conn_maybe_free(c);
}

/* Bytes of the send in flight: a side, or the TLS records of one. */
static size_t
send_len(const struct conn *c)
{
  return c->tls ? tls_tx_len(c->tls) : side_len(c, !c->fill);
}

/* The send in flight went out whole. */
static void
send_finished(struct conn *c)
{
  side_reset(c, !c->fill);
  if (c->tls)
    tls_tx_done(c->tls);
}

/* Something to send: replies collected, or TLS records waiting. */
static bool
out_pending(const struct conn *c)
{
  return side_len(c, c->fill) || (c->tls && tls_tx_fill_len(c->tls));
}

/* Side I of a TLS connection into records: the reply bytes and the
 * buffers queued with them, in order (store bytes of zero-copy READs are
 * encrypted from where they are: encryption is their copy).  The side is
 * empty after.  false: the session failed (C is cut). */
static bool
encrypt_side(struct conn *c, int i)
{
  struct buf *b = &c->out[i];
  struct osegs *sg = &c->seg[i];
  size_t at = 0;
  int r = 0;
  if (b->len == 0 && sg->n == 0)
    return true;
  tls_write_begin(c->tls);
  for (unsigned k = 0; k < sg->n && r == 0; k++) {
    r = tls_write(c->tls, b->p + at, sg->v[k].at - at);
    at = sg->v[k].at;
    if (r == 0)
      r = tls_write(c->tls, sg->v[k].b.p, sg->v[k].b.len);
  }
  if (r == 0)
    r = tls_write(c->tls, b->p + at, b->len - at);
  if (tls_write_end(c->tls) < 0)
    r = -1;
  side_reset(c, i);
  if (r < 0) {
    conn_cut(c);
    return false;
  }
  return true;
}

/* queue_send of a TLS connection: a new send encrypts side !fill first;
 * what goes out is the records, from c->sent on. */
static void
queue_send_tls(struct conn *c)
{
  if (tls_tx_len(c->tls) == 0 && c->tls_up && !encrypt_side(c, !c->fill))
    return;
  size_t len;
  const uint8_t *p = tls_tx_take(c->tls, &len);
  if (len <= c->sent)
    return; /* nothing to send */
  struct io_uring_sqe *sqe = get_sqe(&c->w->ring);
  io_uring_prep_send(sqe, c->fd, p + c->sent, len - c->sent, MSG_NOSIGNAL);
  io_uring_sqe_set_data64(sqe, tag_ptr(TAG_SEND, c));
  c->sending = true;
}

static void
queue_send(struct conn *c)
{
  if (c->tls) {
    queue_send_tls(c);
    return;
  }
  int i = !c->fill;
  struct buf *b = &c->out[i];
  struct osegs *sg = &c->seg[i];
  struct io_uring_sqe *sqe = get_sqe(&c->w->ring);
  if (sg->n == 0) {
    io_uring_prep_send(sqe, c->fd, b->p + c->sent, b->len - c->sent,
                       MSG_NOSIGNAL);
  } else {
    /* out bytes and reply buffers interleaved, from c->sent on. */
    if (c->iov_cap < 2 * sg->n + 1) {
      unsigned cap = 2 * sg->n + 1;
      struct iovec *v = realloc(c->iov, cap * sizeof *v);
      if (!v) {
        perror("znbd: realloc");
        abort(); /* as buf_reserve: cannot answer without it */
      }
      c->iov = v;
      c->iov_cap = cap;
    }
    unsigned n = 0;
    size_t skip = c->sent, at = 0;
#define ADD_IOV(ptr, l)                                                        \
  do {                                                                         \
    size_t len_ = (l);                                                         \
    if (skip >= len_) {                                                        \
      skip -= len_;                                                            \
    } else {                                                                   \
      c->iov[n].iov_base = (uint8_t *)(ptr) + skip;                            \
      c->iov[n].iov_len = len_ - skip;                                         \
      skip = 0;                                                                \
      n++;                                                                     \
    }                                                                          \
  } while (0)
    for (unsigned k = 0; k < sg->n; k++) {
      ADD_IOV(b->p + at, sg->v[k].at - at);
      at = sg->v[k].at;
      ADD_IOV(sg->v[k].b.p, sg->v[k].b.len);
    }
    ADD_IOV(b->p + at, b->len - at);
#undef ADD_IOV
    memset(&c->msg, 0, sizeof c->msg);
    c->msg.msg_iov = c->iov;
    c->msg.msg_iovlen = n;
    io_uring_prep_sendmsg(sqe, c->fd, &c->msg, MSG_NOSIGNAL);
  }
  io_uring_sqe_set_data64(sqe, tag_ptr(TAG_SEND, c));
  c->sending = true;
}

/* The next message does not fit and no buffer for it can be had: a
 * WRITE's payload is dropped and the write refused with ENOMEM (the
 * stream stays in step); anything else ends the connection. */
static bool
recv_no_room(struct conn *c)
{
  size_t n = nbdc_refuse_pending(&c->proto, c->in + c->in_head,
                                 c->in_tail - c->in_head, NBD_ENOMEM,
                                 "out of memory for the write payload");
  if (n == 0) {
    conn_kill(c);
    return false;
  }
  c->in_head += n;
  c->need = 0;
  if (c->inb->refs == 1)
    c->in_head = c->in_tail = 0;
  return true;
}

/* Room for the whole next message: grown to what it needs (a multiple
 * of 64 KiB), at least doubled. */
static size_t
recv_cap(const struct conn *c, size_t need)
{
  size_t cap = c->in_cap;
  if (cap >= need)
    return cap;
  size_t want = (need + 65535) & ~(size_t)65535;
  return 2 * cap > want ? 2 * cap : want;
}

/* Room at in[in_tail]: compacted, moved or grown for the next message.
 * false: C was killed (no memory for a message that is not a WRITE). */
static bool
in_room(struct conn *c)
{
  size_t need = c->need > c->in_tail - c->in_head ? c->need : 0;
  size_t cap = recv_cap(c, need);
  if (c->inb->refs > 1) {
    /* Queued writes point into this buffer: leave its bytes alone and
     * move on to a fresh one when it is short of room. */
    if (c->in_cap - c->in_tail < 64 * 1024 || c->in_cap - c->in_head < need) {
      struct inbuf *b = inbuf_get(c->w, cap);
      if (!b && !recv_no_room(c))
        return false;
      if (b) {
        memcpy(b->data, c->in + c->in_head, c->in_tail - c->in_head);
        c->in_tail -= c->in_head;
        c->in_head = 0;
        inbuf_put(c->w, c->inb);
        c->inb = b;
        c->in = b->data;
        c->in_cap = b->cap;
      }
    }
  } else {
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
      struct inbuf *b = realloc(c->inb, sizeof *b + cap);
      if (!b && !recv_no_room(c))
        return false;
      if (b) {
        b->cap = cap;
        c->inb = b;
        c->in = b->data;
        c->in_cap = cap;
      }
    }
  }
  return true;
}

static void
queue_recv(struct conn *c)
{
  uint8_t *p;
  size_t len;
  if (c->tls) { /* ciphertext: decrypted into in[] by tls_fill */
    if (!(p = tls_rx_space(c->tls, TLS_RX_MIN, &len))) {
      conn_kill(c);
      return;
    }
  } else {
    if (!in_room(c))
      return;
    p = c->in + c->in_tail;
    len = c->in_cap - c->in_tail;
  }
  struct io_uring_sqe *sqe = get_sqe(&c->w->ring);
  io_uring_prep_recv(sqe, c->fd, p, len, 0);
  io_uring_sqe_set_data64(sqe, tag_ptr(TAG_RECV, c));
  c->receiving = true;
}

/* A large message was consumed and nothing is left: go back to an
 * initial-sized input buffer rather than keep up to 64 MiB per idle
 * connection.  Only between receives, and not while writes queued in
 * mq mode still point into the buffer. */
static void
inbuf_shrink(struct conn *c)
{
  if (c->receiving || c->in_head != c->in_tail || c->inb->refs > 1 ||
      c->in_cap <= IN_INITIAL)
    return;
  struct inbuf *b = inbuf_get(c->w, IN_INITIAL);
  if (!b)
    return;
  inbuf_put(c->w, c->inb);
  c->inb = b;
  c->in = b->data;
  c->in_cap = b->cap;
  c->in_head = c->in_tail = 0;
}

/* Start what can start: a send of collected replies, the next recv. */
static void
conn_kick(struct conn *c)
{
  if (c->dead) {
    conn_maybe_free(c);
    return;
  }
  if (!c->sending && out_pending(c)) {
    c->fill = !c->fill;
    c->sent = 0;
    queue_send(c);
    if (c->dead) {
      conn_maybe_free(c);
      return;
    }
  }
  if (c->flush_close) {
    if (!c->sending && c->inflight == 0)
      conn_kill(c);
    return;
  }
  /* No receive between STARTTLS and the start of TLS (tls_begin), nor
   * while decrypted bytes wait for room in in[]. */
  if (!c->receiving && !c->stalled && side_len(c, c->fill) <= OUT_HIGH &&
      !(c->w->stopping && c->proto.phase != PH_TRANS) &&
      !(c->proto.starttls && !c->tls) && !c->tls_in_full)
    queue_recv(c);
}

static struct conn *rq_retire(struct worker *w, struct rq *rq);

/* A parked write's reply is ready (any thread): back to its worker. */
static void
bio_park_done(struct nbd_park *p)
{
  worker_complete(rq_of_park(p), NULL);
}

/* Writes that may be parked: with pipeline_zoned_writes, WRITE and
 * WRITE_ZEROES. */
static bool
parkable(const struct conn *c, const struct nbd_req *r)
{
  return c->w->s->cfg.params->pipeline_zoned_writes &&
         (r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES);
}

/* bio: R is a write ahead of its zone's wp (nbd_exec said EXEC_AGAIN).
 * Park it in RQ (NULL: a new one) with its payload's input buffer pinned,
 * so no thread and no event loop waits for the wp: its reply comes back
 * through the worker's done list when it ran or failed.  Executed at once
 * if the wp moved meanwhile (or it cannot be parked): replied now. */
static void
bio_park(struct conn *c, const struct nbd_req *r, struct rq *rq)
{
  if (!rq && !(rq = calloc(1, sizeof *rq))) {
    nbd_reply_error(&c->proto, r, NBD_ENOMEM, "out of memory",
                    &c->out[c->fill]);
    return;
  }
  rq->conn = c;
  rq->proto = &c->proto;
  rq->w = c->w;
  rq->req = *r;
  rq->park = (struct nbd_park){&c->proto, *r, &rq->reply, bio_park_done};
  if (r->type == NBD_CMD_WRITE) { /* the payload stays where it arrived */
    rq->pin = c->inb;
    c->inb->refs++;
  }
  c->inflight++;
  if (nbd_exec_park(&rq->park, 0) != EXEC_PARKED)
    rq_retire(c->w, rq);
}

/* Request ready in bio mode: execute inline, reply straight away; a
 * write ahead of the wp is parked (bio_park). */
static int
submit_bio(struct conn *c, const struct nbd_req *r)
{
  unsigned park = parkable(c, r) ? EXEC_REQUEUE : 0;
  uint64_t ns = nbd_req_delay(&c->proto, r);
  if (ns == 0) {
    if (nbd_exec(&c->proto, r, EXEC_NOWAIT | EXEC_REF | park,
                 &c->out[c->fill]) == EXEC_AGAIN)
      bio_park(c, r, NULL);
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
  if (nbd_exec(&c->proto, r, EXEC_NOWAIT | park, &rq->reply) == EXEC_AGAIN) {
    bio_park(c, r, rq); /* replied when it runs, without the delay */
    return 0;
  }
  c->inflight++;
  arm_timeout(&c->w->ring, &rq->ts, ns, tag_ptr(TAG_RQ_DONE, rq));
  return 0;
}

static int
submit_mq(struct conn *c, const struct nbd_req *r)
{
  struct rq bio = {
      .req = *r, .conn = c, .proto = &c->proto, .w = c->w, .widx = c->w->idx};
  if (r->type == NBD_CMD_WRITE) /* the payload stays where it arrived */
    bio.pin = c->inb;
  switch (mq_submit_bio(c->w->s->mq, &bio, &c->w->ring)) {
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
      io_uring_cqe_get_data64(cqe) == tag_ptr(TAG_SEND, c)) {
    int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    c->sending = false;
    if (res > 0 && (size_t)res == send_len(c)) {
      send_finished(c);
    } else if (res >= 0 || res == -EINTR || res == -EAGAIN) {
      c->sent += res > 0 ? (size_t)res : 0;
      queue_send(c); /* the rest goes with the next submit */
    } else {         /* freed later by conn_kick, not under our caller's feet */
      conn_cut(c);
    }
  }
}

/* NBD_OPT_STARTTLS was acknowledged: once the ACK is out (plain) and no
 * receive is in flight, start the session; the bytes received after the
 * option are its first records.  false: not yet, or C was killed. */
static bool
tls_begin(struct conn *c)
{
  if (c->sending || side_len(c, 0) || side_len(c, 1) || c->receiving)
    return false;
  if (!(c->tls = tls_new()) ||
      !tls_rx_put(c->tls, c->in + c->in_head, c->in_tail - c->in_head)) {
    conn_kill(c);
    return false;
  }
  c->in_head = c->in_tail = 0;
  c->need = 0;
  arm_timeout(&c->w->ring, &c->tls_ts, TLS_HANDSHAKE_NSEC,
              tag_ptr(TAG_TLS_TIMEOUT, c));
  c->tls_timer = true;
  return true;
}

/* The TLS handshake goes on with what was received: true once it is
 * done (options go on over TLS), false while it needs more or after it
 * failed (the alert goes out, then the connection closes). */
static bool
tls_step(struct conn *c)
{
  if (!c->tls && !tls_begin(c))
    return false;
  int r = tls_handshake(c->tls);
  if (r == 0)
    return false;
  tls_unarm(c);
  if (r < 0) {
    c->flush_close = true;
    return false;
  }
  c->tls_up = true;
  nbdc_tls_up(&c->proto);
  return true;
}

/* Decrypt what GnuTLS can give into in[], as far as it has room.  false:
 * the session failed and C was killed. */
static bool
tls_fill(struct conn *c)
{
  c->tls_in_full = false;
  while (!c->tls_eof) {
    if (!in_room(c))
      return false;
    if (c->in_tail == c->in_cap) {
      c->tls_in_full = true;
      return true;
    }
    ssize_t r = tls_read(c->tls, c->in + c->in_tail, c->in_cap - c->in_tail);
    if (r == 0)
      break;
    if (r == -1) {
      c->tls_eof = true; /* close_notify: answer what came before it */
      break;
    }
    if (r < 0) {
      conn_kill(c);
      return false;
    }
    c->in_tail += (size_t)r;
  }
  return true;
}

static void
conn_process(struct conn *c)
{
  if (c->dead) {
    conn_maybe_free(c);
    return;
  }
  if (znbd_req_cut(&c->proto.rq)) {
    conn_kill(c); /* a power cut since it connected */
    return;
  }
  if (c->proto.starttls && (c->flush_close || !tls_step(c))) {
    if (!c->dead)
      conn_kick(c);
    return;
  }
  c->stalled = false;
  for (;;) {
    if (c->tls && !tls_fill(c))
      return;
    if (!(c->in_tail > c->in_head && !c->flush_close && !c->dead))
      break;
    size_t need;
    c->batch = 0;
    size_t n = nbdc_feed(&c->proto, c->in + c->in_head, c->in_tail - c->in_head,
                         &c->out[c->fill], OUT_HIGH, submit, c, &need);
    c->in_head += n;
    c->need = need;
    /* A recv in flight writes at in_tail (unless TLS, where it writes
     * ciphertext elsewhere): only rewind when idle. */
    if (c->in_head == c->in_tail && (!c->receiving || c->tls) &&
        c->inb->refs == 1)
      c->in_head = c->in_tail = 0;
    if (c->proto.phase == PH_CLOSED)
      c->flush_close = true;
    if (c->proto.starttls)
      break; /* the ACK goes out, then tls_begin */
    if (c->proto.pause && !c->sending) {
      conn_early_send(c);
      continue;
    }
    /* TLS: decrypted bytes that had no room may complete a message now
     * that some were consumed, or once in[] grows for the one pending. */
    if (c->tls_in_full && (n > 0 || c->need > c->in_tail - c->in_head))
      continue;
    break;
  }
  if (c->tls_eof)
    c->flush_close = true;
  inbuf_shrink(c);
  conn_kick(c);
}

static void
conn_new(struct worker *w, int fd)
{
  struct conn *c = calloc(1, sizeof *c);
  if (!c || !(c->inb = inbuf_get(w, IN_INITIAL))) {
    free(c);
    close(fd);
    return;
  }
  c->w = w;
  c->fd = fd;
  c->in = c->inb->data;
  c->in_cap = c->inb->cap;
  nbdc_init(&c->proto, &w->s->cfg, &c->out[0]);
  c->proto.add_ref = side_add_ref;
  c->proto.ref_opaque = c;
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
  c->w->dirty = true;
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
  if (c->tls)
    tls_rx_commit(c->tls, (size_t)res);
  else
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
  c->sent += (size_t)res;
  if (c->sent < send_len(c) && !c->dead) {
    queue_send(c);
    return;
  }
  send_finished(c);
  give_back(c);
  conn_process(c);
}

/* RQ's reply with READ data borrowed from the store (rq->ref): its own
 * bytes (chunk headers) are copied, the data is queued as it is. */
static void
queue_refs(struct conn *c, const struct rq *rq)
{
  struct buf *out = &c->out[c->fill];
  size_t at = 0;
  for (unsigned k = 0; k < rq->nref; k++) {
    buf_append(out, rq->reply.p + at, rq->ref[k].at - at);
    at = rq->ref[k].at;
    side_add_ref(c, rq->ref[k].p, rq->ref[k].len);
  }
  buf_append(out, rq->reply.p + at, rq->reply.len - at);
}

/* An rq came back (mq completion or bio timer): queue its reply, release
 * its tag and payload.  Returns its connection, to be processed. */
static struct conn *
rq_retire(struct worker *w, struct rq *rq)
{
  struct conn *c = rq->conn;
  if (!c->dead && rq->nref) {
    queue_refs(c, rq);
  } else if (!c->dead) {
    if (rq->reply.len < REPLY_MOVE_MIN || !side_move_reply(c, &rq->reply))
      buf_append(&c->out[c->fill], rq->reply.p, rq->reply.len);
  }
  c->inflight--;
  if (rq->pin)
    inbuf_put(w, rq->pin);
  if (rq->hq) {
    mq_put_tag(w->s->mq, rq, &w->ring);
  } else {
    buf_free(&rq->reply);
    free(rq);
  }
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
  w->stopping = true;
  for (struct conn *c = w->conns, *n; c; c = n) {
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
    conn_new(w, fds[i]);
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
  for (struct conn *c = w->conns, *n; c; c = n) {
    n = c->next;
    if (c->stalled)
      conn_process(c);
  }
  uint64_t gen = znbd_dev_generation(w->s->cfg.dev);
  if (gen != w->gen) { /* a power cut: drop the connections made before */
    w->gen = gen;
    for (struct conn *c = w->conns, *n; c; c = n) {
      n = c->next;
      if (znbd_req_cut(&c->proto.rq))
        conn_kill(c);
    }
  }
  if (atomic_load(&w->stop) && !w->stopping)
    begin_stop(w);
}

static void
on_efd(struct worker *w)
{
  on_wake(w);
  struct io_uring_sqe *sqe = get_sqe(&w->ring);
  io_uring_prep_read(sqe, w->wk.efd, &w->efd_val, 8, 0);
  io_uring_sqe_set_data64(sqe, tag_ptr(TAG_WAKE_EFD, w));
}

/* The trim timer fired: give back what idle connections and an idle
 * worker hold; if anything is still busy, look again later. */
static void
worker_trim(struct worker *w)
{
  bool idle = true;
  w->trim_armed = false;
  for (struct conn *c = w->conns; c; c = c->next) {
    if (c->sending || c->inflight || side_len(c, 0) || side_len(c, 1))
      idle = false;
    else
      give_back(c);
  }
  if (!idle)
    return; /* still dirty: re-armed at the end of the loop turn */
  unsigned k = 0;
  for (unsigned i = 0; i < w->npool; i++) {
    if (w->pool[i].cap > OUT_KEEP)
      buf_free(&w->pool[i]);
    else
      w->pool[k++] = w->pool[i];
  }
  w->npool = k;
  if (w->s->mq)
    mq_trim(w->s->mq, OUT_KEEP);
  malloc_trim(0);
  w->dirty = false;
}

/* The TLS handshake timer of C fired (RES -ETIME) or was cancelled. */
static void
on_tls_timeout(struct conn *c, int res)
{
  c->tls_timer = false;
  if (res == -ETIME && !c->tls_up && !c->dead) {
    if (c->w->s->cfg.verbose)
      fprintf(stderr,
              "znbd: TLS: handshake not done after %llu s: "
              "connection closed\n",
              TLS_HANDSHAKE_NSEC / 1000000000);
    conn_kill(c);
    return;
  }
  conn_maybe_free(c);
}

/* One completion on W's ring: TAG (tag.h) with result RES. */
static void
worker_handle(struct worker *w, uint64_t tag, int res)
{
  void *p = tag_get_ptr(tag);
  switch (tag_op(tag)) {
  case TAG_RECV:
    on_recv(p, res);
    break;
  case TAG_SEND:
    on_send(p, res);
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
    for (struct conn *c = w->conns, *nx; c; c = nx) {
      nx = c->next;
      conn_kill(c);
    }
    break;
  case TAG_RQ_DONE:
    rq_finished(w, p);
    break;
  case TAG_TLS_TIMEOUT:
    on_tls_timeout(p, res);
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
  int r = ring_enable(&w->ring);
  if (r < 0) {
    server_fail(w->s, "worker %u: io_uring enable: %s", w->idx, strerror(-r));
    return NULL;
  }
  struct io_uring_sqe *sqe = get_sqe(&w->ring);
  io_uring_prep_read(sqe, w->wk.efd, &w->efd_val, 8, 0);
  io_uring_sqe_set_data64(sqe, tag_ptr(TAG_WAKE_EFD, w));
  atomic_store(&w->wk.ring_fd, w->ring.ring_fd);
  /* Stopping: until every connection is gone, or, after another thread
   * failed, until the grace is over (requests it held never complete). */
  while (!(w->stopping &&
           (w->nconns == 0 || (w->grace_over && atomic_load(&w->s->failed))))) {
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
    if (w->dirty && !w->trim_armed && !w->stopping) {
      arm_timeout(&w->ring, &w->trim_ts, TRIM_NSEC, tag_ptr(TAG_TRIM, w));
      w->trim_armed = true;
    }
  }
  atomic_store(&w->wk.ring_fd, -1);
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
  /* Connections left only when a thread failed (the loop ended early). */
  for (struct conn *c = w->conns, *n; c; c = n) {
    n = c->next;
    free(c->inb); /* pinned by requests that will never complete */
    conn_destroy(c);
  }
  io_uring_queue_exit(&w->ring);
  close(w->wk.efd);
  free(w->newfds);
  for (unsigned i = 0; i < w->npool; i++)
    buf_free(&w->pool[i]);
  free(w->pool);
  for (struct inbuf *b = w->free_inb, *n; b; b = n) {
    n = b->next;
    free(b);
  }
  for (struct rq *rq = atomic_load(&w->done), *n; rq; rq = n) {
    n = rq->next;
    if (!rq->hq) {
      buf_free(&rq->reply);
      free(rq);
    }
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
