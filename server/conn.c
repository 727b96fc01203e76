/* znbd server: a connection's I/O on its thread's io_uring (see
 * conn.h).
 *
 * A connection has at most one recv and one send in flight; replies
 * accumulate in one of two output buffers while the other is being sent,
 * so the replies of a whole received batch go out in one send.  Replies
 * of completed rqs are moved, not copied, into the side being filled and
 * go out with it by one sendmsg.  With TLS, receives fill the session's
 * ciphertext buffer and sends carry its records.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "handshake.h"
#include "ring.h"
#include "tls.h"
#include "wire.h"

#define IN_INITIAL (256u * 1024)
#define OUT_HIGH (4u * 1024 * 1024) /* stop parsing above this */
/* A TLS handshake not done after this is given up and the connection
 * closed (man/znbd.pod): a client stalling in it holds no more than its
 * own connection, and that only for so long. */
#define TLS_HANDSHAKE_NSEC 10000000000ULL
/* Ciphertext room offered to each receive of a TLS connection. */
#define TLS_RX_MIN (64u * 1024)
#define INBUF_FREE_KEEP 16 /* IN_INITIAL-sized buffers a set keeps */

/* Replies of completed rqs are not copied into the output buffer: the rq's
 * reply buffer is queued as it is (the tag gets a spare buffer from the
 * set's pool) and sent with the output buffer's bytes by one sendmsg.
 * Replies shorter than this are copied: cheaper than an iovec. */
#define REPLY_MOVE_MIN 512
#define REPLY_POOL_KEEP 256
#define REPLY_BUF_KEEP (1u << 20)

static struct inbuf *
inbuf_get(struct conn_set *s, size_t cap)
{
  struct inbuf *b = NULL;
  if (cap <= IN_INITIAL && s->free_inb) {
    b = s->free_inb;
    s->free_inb = b->next;
    s->nfree_inb--;
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
inbuf_put(struct conn_set *s, struct inbuf *b)
{
  if (--b->refs)
    return;
  if (b->cap == IN_INITIAL && s->nfree_inb < INBUF_FREE_KEEP) {
    b->next = s->free_inb;
    s->free_inb = b;
    s->nfree_inb++;
  } else {
    free(b);
  }
}

static size_t
side_len(const struct conn *c, int i)
{
  return c->out[i].len + c->seg[i].bytes;
}

static void
pool_put(struct conn_set *s, struct buf *b)
{
  if (b->cap == 0) /* borrowed store bytes (side_add_ref): not ours */
    return;
  if (b->cap <= REPLY_BUF_KEEP && s->npool < REPLY_POOL_KEEP) {
    b->len = 0;
    s->pool[s->npool++] = *b;
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
    pool_put(c->set, &sg->v[k].b);
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
  struct conn_set *s = c->set;
  if (!side_queue(c, b))
    return false;
  if (s->npool)
    *b = s->pool[--s->npool];
  else
    *b = (struct buf){0};
  return true;
}

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
  struct conn_set *s = c->set;
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  s->nconns--;
  inbuf_put(s, c->inb);
  conn_destroy(c);
}

/* Cancel the TLS handshake timer (its CQE still comes, -ECANCELED). */
static void
tls_unarm(struct conn *c)
{
  if (!c->tls_timer || c->tls_unarmed)
    return;
  struct io_uring_sqe *sqe = get_sqe(c->set->ring);
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

void
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
  struct io_uring_sqe *sqe = get_sqe(c->set->ring);
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
  struct io_uring_sqe *sqe = get_sqe(c->set->ring);
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
      struct inbuf *b = inbuf_get(c->set, cap);
      if (!b && !recv_no_room(c))
        return false;
      if (b) {
        memcpy(b->data, c->in + c->in_head, c->in_tail - c->in_head);
        c->in_tail -= c->in_head;
        c->in_head = 0;
        inbuf_put(c->set, c->inb);
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
  struct io_uring_sqe *sqe = get_sqe(c->set->ring);
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
  struct inbuf *b = inbuf_get(c->set, IN_INITIAL);
  if (!b)
    return;
  inbuf_put(c->set, c->inb);
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
      !(c->set->stopping && c->proto.phase != PH_TRANS) &&
      !(c->proto.starttls && !c->tls) && !c->tls_in_full)
    queue_recv(c);
}

/* Start sending what is collected now and hand the send to the kernel at
 * once; if it completed inline, consume its CQE here so the next early
 * send of the batch can go too. */
static void
conn_early_send(struct conn *c)
{
  struct io_uring *ring = c->set->ring;
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
  arm_timeout(c->set->ring, &c->tls_ts, TLS_HANDSHAKE_NSEC,
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

void
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
                         &c->out[c->fill], OUT_HIGH, c->set->submit, c, &need);
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

void
conn_new(struct conn_set *s, int fd)
{
  struct conn *c = calloc(1, sizeof *c);
  if (!c || !(c->inb = inbuf_get(s, IN_INITIAL))) {
    free(c);
    close(fd);
    return;
  }
  c->set = s;
  c->fd = fd;
  c->in = c->inb->data;
  c->in_cap = c->inb->cap;
  nbdc_init(&c->proto, s->cfg, &c->out[0]);
  c->proto.add_ref = side_add_ref;
  c->proto.ref_opaque = c;
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  s->nconns++;
  if (s->stopping) {
    conn_kill(c);
    return;
  }
  conn_kick(c);
}

void
conn_on_recv(struct conn *c, int res)
{
  c->receiving = false;
  c->set->dirty = true;
  if (res <= 0) {
    if (res == -EINTR || res == -EAGAIN) {
      conn_kick(c);
      return;
    }
    /* EOF or error.  When stopping, answer what was received first. */
    if (res == 0 && c->set->stopping && c->proto.phase == PH_TRANS &&
        !c->dead) {
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

void
conn_on_send(struct conn *c, int res)
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

void
conn_rq_reply(struct conn *c, struct rq *rq)
{
  if (!c->dead && rq->nref) {
    queue_refs(c, rq);
  } else if (!c->dead) {
    if (rq->reply.len < REPLY_MOVE_MIN || !side_move_reply(c, &rq->reply))
      buf_append(&c->out[c->fill], rq->reply.p, rq->reply.len);
  }
  c->inflight--;
  if (rq->pin)
    inbuf_put(c->set, rq->pin);
}

/* The TLS handshake timer of C fired (RES -ETIME) or was cancelled. */
void
conn_on_tls_timeout(struct conn *c, int res)
{
  c->tls_timer = false;
  if (res == -ETIME && !c->tls_up && !c->dead) {
    if (c->set->cfg->verbose)
      fprintf(stderr,
              "znbd: TLS: handshake not done after %llu s: "
              "connection closed\n",
              TLS_HANDSHAKE_NSEC / 1000000000);
    conn_kill(c);
    return;
  }
  conn_maybe_free(c);
}

int
conn_set_init(struct conn_set *s, struct io_uring *ring,
              const struct srv_cfg *cfg, nbdc_submit_fn submit)
{
  memset(s, 0, sizeof *s);
  s->ring = ring;
  s->cfg = cfg;
  s->submit = submit;
  if (!(s->pool = calloc(REPLY_POOL_KEEP, sizeof *s->pool)))
    return -ENOMEM;
  return 0;
}

bool
conn_set_trim(struct conn_set *s)
{
  bool idle = true;
  for (struct conn *c = s->conns; c; c = c->next) {
    if (c->sending || c->inflight || side_len(c, 0) || side_len(c, 1))
      idle = false;
    else
      give_back(c);
  }
  if (!idle)
    return false;
  unsigned k = 0;
  for (unsigned i = 0; i < s->npool; i++) {
    if (s->pool[i].cap > OUT_KEEP)
      buf_free(&s->pool[i]);
    else
      s->pool[k++] = s->pool[i];
  }
  s->npool = k;
  return true;
}

void
conn_set_free(struct conn_set *s)
{
  /* Connections left only when a thread failed (the loop ended early). */
  for (struct conn *c = s->conns, *n; c; c = n) {
    n = c->next;
    free(c->inb); /* pinned by requests that will never complete */
    conn_destroy(c);
  }
  for (unsigned i = 0; i < s->npool; i++)
    buf_free(&s->pool[i]);
  free(s->pool);
  for (struct inbuf *b = s->free_inb, *n; b; b = n) {
    n = b->next;
    free(b);
  }
}
