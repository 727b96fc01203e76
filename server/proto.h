/* znbd server: the NBD protocol on buffers — handshake, request parsing,
 * request execution and replies (doc/proto.md of the NBD project).
 *
 * No I/O here: the event loop (worker.c) and the fuzzer (fuzz.c) feed
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

/* Start a connection: appends the server greeting to OUT. */
void nbdc_init(struct nbdc *c, const struct srv_cfg *cfg, struct buf *out);

/* The TLS handshake that followed NBD_OPT_STARTTLS succeeded: options go
 * on over TLS.  What was negotiated before it (structured replies,
 * metadata contexts) is forgotten, as it was sent in the clear. */
void nbdc_tls_up(struct nbdc *c);

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

/* Execution flags. */
#define EXEC_NOWAIT 0x1  /* writes ahead of the wp fail (ZNBD_WRITE_NOWAIT) */
#define EXEC_REQUEUE 0x2 /* ... and return EXEC_AGAIN without a reply */
#define EXEC_REF 0x4     /* READ data may go out by c->add_ref (no copy) */
#define REF_MIN 2048     /* smaller READs are copied: cheaper than an iovec */
#define EXEC_AGAIN 1

/* Execute R against the device and append its complete reply to OUT.
 * Returns 0, or EXEC_AGAIN (EXEC_REQUEUE only; OUT untouched). */
int nbd_exec(const struct nbdc *c, const struct nbd_req *r, unsigned xflags,
             struct buf *out);
/* nbd_exec() with READ data going to ADD_REF(OPAQUE, ...) instead of
 * c->add_ref (ADD_REF NULL: copied into OUT): for a thread that executes
 * for C without owning its send path (mq's hardware queues).  ADD_REF is
 * called after OUT holds the bytes that go before the data. */
int nbd_exec_ref(const struct nbdc *c, const struct nbd_req *r, unsigned xflags,
                 struct buf *out, nbd_add_ref_fn add_ref, void *opaque);

/* R's kind as a ZNBD_IO_* bit (drop-reply, delays). */
unsigned nbd_req_kind(const struct nbd_req *r);

/* The injected delay of R, ns (znbd_req_delay: completion_nsec, mbps,
 * zone_reset_nsec); call once per request (it takes from the mbps
 * bucket). */
uint64_t nbd_req_delay(const struct nbdc *c, const struct nbd_req *r);

/* A WRITE or WRITE_ZEROES the zone engine may park (nbd_exec_park):
 * filled by the caller, who keeps it, the request's payload and OUT
 * until DONE is called. */
struct nbd_park {
  const struct nbdc *c;
  struct nbd_req req; /* a copy of the request */
  struct buf *out;    /* gets the complete reply before DONE */
  /* Called once, from another thread (the one that ran the write, the
   * timeout sweeper, or one resetting the zone), with the reply in OUT. */
  void (*done)(struct nbd_park *p);
};
#define EXEC_PARKED 2

/* nbd_exec(P->c, &P->req, xflags, P->out) for a WRITE or WRITE_ZEROES,
 * except that a write ahead of its zone's wp (pipeline_zoned_writes) is
 * parked (znbd_req_write with DONE) rather than refused: returns EXEC_PARKED
 * and the reply comes through P->done; else returns 0 with the reply in
 * P->out, as nbd_exec. */
int nbd_exec_park(struct nbd_park *p, unsigned xflags);

/* Append an error reply (NBD errno ERR, e.g. NBD_EIO) for R to OUT:
 * a structured ERROR chunk with MSG when negotiated, else a simple reply.
 * With cfg->verbose the refusal and MSG are logged on stderr. */
void nbd_reply_error(const struct nbdc *c, const struct nbd_req *r,
                     uint32_t err, const char *msg, struct buf *out);

/* Transmission flags this connection was given. */
uint16_t nbdc_tflags(const struct nbdc *c);

#endif
