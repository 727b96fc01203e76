/* znbd server: a connection's I/O on its thread's io_uring (conn.c) —
 * input buffers, the two output sides and their queued reply buffers,
 * the send and receive in flight, and the TLS session glue.  The thread
 * (worker.c) owns a conn_set, hands each CQE of a connection to
 * conn_on_*(), and gets the requests parsed on it through the set's
 * submit function.
 */
#ifndef ZNBD_SERVER_CONN_H
#define ZNBD_SERVER_CONN_H

#include <linux/time_types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <liburing.h>

#include "buf.h"
#include "proto.h"
#include "rq.h"

/* Output buffer bytes a connection with nothing to send keeps; also what
 * an idle worker lets each spare reply buffer and mq tag keep. */
#define OUT_KEEP (256u * 1024)

/* A connection's input buffer.  WRITE payloads are not copied in mq mode:
 * their rq holds a reference to the buffer they were received into, and
 * the connection receives into a fresh buffer (moving only the unparsed
 * tail) rather than reuse bytes a queued request still points at. */
struct inbuf {
  unsigned refs; /* the connection's + one per queued rq; its thread only */
  size_t cap;
  struct inbuf *next; /* conn_set's free list */
  uint8_t data[];
};

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

struct conn_set;

struct conn {
  struct conn_set *set;
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
  struct conn *touch_next; /* conns with completions this turn (worker) */
};

/* The connections one thread serves and what they share: its ring (every
 * SQE of theirs, tagged TAG_RECV, TAG_SEND, TAG_TLS_TIMEOUT or
 * TAG_CANCEL), spare input and reply buffers, and where parsed requests
 * go. */
struct conn_set {
  struct io_uring *ring;
  const struct srv_cfg *cfg;
  /* nbdc_feed()'s submit function for every connection (OPAQUE: the
   * struct conn). */
  nbdc_submit_fn submit;
  struct conn *conns;
  unsigned nconns;
  bool stopping; /* the server stops: no new options, recv until EOF */
  bool dirty;    /* received since the last conn_set_trim() */
  struct inbuf *free_inb;
  unsigned nfree_inb;
  struct buf *pool; /* spare reply buffers */
  unsigned npool;
};

/* Set up S for connections on RING with CFG, parsed requests to SUBMIT.
 * 0, or -ENOMEM. */
int conn_set_init(struct conn_set *s, struct io_uring *ring,
                  const struct srv_cfg *cfg, nbdc_submit_fn submit);
/* Free S's spare buffers and the connections still in it (only left when
 * a thread failed: the input buffers their requests pin are freed too). */
void conn_set_free(struct conn_set *s);
/* Give back what idle connections of S hold (output buffers over
 * OUT_KEEP, TLS buffers); when none is busy, also S's spare reply
 * buffers over OUT_KEEP.  false: some connection is busy (look again
 * later). */
bool conn_set_trim(struct conn_set *s);

/* Serve socket FD (taken over: closed on failure, ENOMEM) in S: the
 * greeting goes out, the first receive starts. */
void conn_new(struct conn_set *s, int fd);
/* Parse what C received, hand its requests to the set's submit, start
 * what can start (a send of replies, the next receive).  C may be freed
 * on return. */
void conn_process(struct conn *c);
/* Cut C off; freed once nothing of it is in flight. */
void conn_kill(struct conn *c);
/* C's receive completed with RES (bytes, or -errno). */
void conn_on_recv(struct conn *c, int res);
/* C's send completed with RES (bytes, or -errno). */
void conn_on_send(struct conn *c, int res);
/* C's TLS handshake timer fired (RES -ETIME) or was cancelled. */
void conn_on_tls_timeout(struct conn *c, int res);
/* RQ of C came back: its reply is queued on C (unless C is dead), C has
 * one request fewer in flight and RQ's payload pin is dropped.  RQ itself
 * is the caller's to release (a tag, or rq_free). */
void conn_rq_reply(struct conn *c, struct rq *rq);

#endif
