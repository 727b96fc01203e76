/* znbd server: the NBD protocol on buffers — a connection's protocol
 * state, and its transmission phase: request parsing and error replies
 * (doc/proto.md of the NBD project).  The handshake is handshake.h's,
 * the execution of requests exec.h's.
 *
 * No I/O here: the connections (conn.c) and the fuzzer (fuzz.c) feed
 * received bytes to nbdc_feed() and send what it appends to OUT.
 */
#ifndef ZNBD_SERVER_PROTO_H
#define ZNBD_SERVER_PROTO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "znbd/dev.h"
#include "znbd/request.h"
#include "buf.h"

/* --tls (nbdkit's names): NBD_OPT_STARTTLS refused (the NBD spec's
 * NOTLS mode), offered, or required (FORCEDTLS: every option but
 * STARTTLS and ABORT refused with NBD_REP_ERR_TLS_REQD until TLS is up). */
enum tls_mode { TLS_OFF, TLS_ON, TLS_REQUIRE };

/* What every connection of one server shares; read-only once serving. */
struct srv_cfg {
  struct znbd_dev *dev;
  const struct znbd_params *params;
  const char *export_name; /* "" unless -e */
  bool export_name_set;    /* -e given: only "" and this name are served */
  bool readonly;
  char *description; /* znbd_dev_describe() */
  uint64_t size;     /* bytes */
  uint32_t blocksize;
  bool holes_ok; /* structured reads may answer zeros with OFFSET_HOLE */
  bool verbose;  /* -v: log every refused request on stderr */
  enum tls_mode tls;
};

enum nbdc_phase { PH_CFLAGS, PH_OPTS, PH_TRANS, PH_CLOSED };

/* Zero-copy READ data: the LEN bytes at P (inside the store) go out right
 * after the reply bytes produced so far, without being copied. */
typedef void (*nbd_add_ref_fn)(void *opaque, const void *p, size_t len);

/* Per-connection protocol state. */
struct nbdc {
  const struct srv_cfg *cfg;
  enum nbdc_phase phase;
  bool no_zeroes, structured;
  bool ctx_alloc, ctx_zone; /* selected metadata contexts */
  bool stopping;            /* server shutting down: ESHUTDOWN */
  bool pause;               /* set by the submit callback: feed returns */
  /* NBD_OPT_STARTTLS was answered with NBD_REP_ACK (the last bytes in
   * OUT): the caller sends OUT as it is, then runs the TLS handshake on
   * the bytes that follow the option (they are TLS records, not NBD) and
   * calls nbdc_tls_up(); until then nbdc_feed() consumes nothing. */
  bool starttls;
  bool tls; /* TLS is up (nbdc_tls_up) */
  /* The connection is cut off: requests still queued for it are dropped
   * unexecuted (set by its worker, read by mq hardware queue threads). */
  atomic_bool gone;
  uint64_t discard; /* input bytes still to drop */
  /* Reply owed once the dropped bytes are consumed (a client may only
   * expect it after sending them): an oversized option or write. */
  enum { AFTER_NONE, AFTER_OPT_TOO_BIG, AFTER_WRITE_REFUSED } after_discard;
  uint32_t after_err;    /* AFTER_WRITE_REFUSED: NBD errno and message */
  const char *after_msg; /* (a string constant) */
  uint32_t after_opt;
  struct nbd_req_hdr {
    uint16_t flags, type;
    uint64_t cookie, off;
    uint32_t len;
  } after_req;
  uint64_t requests; /* requests answered or submitted */
  /* The connection's request context (znbd/request.h), fenced when it
   * began: after a power cut (write_cache=true) the connection is
   * dropped, and requests still executed for it fail with ESHUTDOWN. */
  struct znbd_req_ctx rq;
  /* Zero-copy READ data (nbd_exec with EXEC_REF): queue the LEN bytes at P
   * (inside the store) to be sent right after what OUT holds now, without
   * copying them.  Set by the caller that owns OUT's send path. */
  nbd_add_ref_fn add_ref;
  void *ref_opaque;
};

/* Context ids handed out by NBD_OPT_SET_META_CONTEXT. */
#define CTX_ID_ALLOC 1
#define CTX_ID_ZONE 2

/* One parsed, validated transmission request.  PAYLOAD points into the
 * caller's input (WRITE only) and is valid until the input is consumed. */
struct nbd_req {
  uint16_t flags, type;
  uint64_t cookie, off;
  uint32_t len;
  const uint8_t *payload;
};

/* Called by nbdc_feed() for every valid request in the transmission
 * phase.  Return 0 when it was taken (executed or queued; the payload is
 * consumed on return), 1 to stall (not taken: feed stops and the same
 * request is offered again on the next feed). */
typedef int (*nbdc_submit_fn)(void *opaque, struct nbdc *c,
                              const struct nbd_req *r);

/* Consume IN[0..LEN): handshake options are answered into OUT, requests
 * that fail validation get their error reply in OUT, valid ones go to FN.
 * Stops early when OUT holds more than OUT_HIGH bytes, FN stalls or sets
 * c->pause (after the request it took), or the
 * connection must close (c->phase == PH_CLOSED: flush OUT then close).
 * Returns the bytes consumed; *NEED is the total size of the next
 * incomplete message at IN + return value (0 if unknown/not needed). */
size_t nbdc_feed(struct nbdc *c, const uint8_t *in, size_t len, struct buf *out,
                 size_t out_high, nbdc_submit_fn fn, void *opaque,
                 size_t *need);

/* The incomplete WRITE at IN (LEN bytes of it received, its header
 * complete) cannot be buffered: its payload is dropped as it arrives and
 * it is answered with NBD errno ERR (e.g. NBD_ENOMEM) and MSG (a string
 * constant) once dropped, as an oversized write is.  Returns the bytes
 * consumed (LEN), or 0 if IN is not such a request (caller's choice). */
size_t nbdc_refuse_pending(struct nbdc *c, const uint8_t *in, size_t len,
                           uint32_t err, const char *msg);

/* Append an error reply (NBD errno ERR, e.g. NBD_EIO) for R to OUT:
 * a structured ERROR chunk with MSG when negotiated, else a simple reply.
 * With cfg->verbose the refusal and MSG are logged on stderr. */
void nbd_reply_error(const struct nbdc *c, const struct nbd_req *r,
                     uint32_t err, const char *msg, struct buf *out);
/* nbd_reply_error() for Linux errno E (e.g. EIO): sent as its NBD errno
 * (znbd_dev_wire_errno), with strerror(E) as the message; the -v log
 * names E. */
void nbd_reply_errno(const struct nbdc *c, const struct nbd_req *r, int e,
                     struct buf *out);

#endif
