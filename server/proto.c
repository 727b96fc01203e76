/* znbd server: the NBD protocol on buffers (see proto.h).
 * Handshake: fixed newstyle (doc/proto.md, "Fixed newstyle negotiation").
 * Transmission: simple and structured replies, metadata contexts
 * base:allocation and x-znbd:zone (include/znbd/zonectx.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "znbd/zonectx.h"
#include "proto.h"
#include "wire.h"

/* Option payloads above this are refused with NBD_REP_ERR_TOO_BIG (and
 * dropped): every valid option of ours fits (strings are <= 4096 bytes). */
#define OPT_MAX (64u * 1024)
/* Descriptors in one BLOCK_STATUS chunk (doc/proto.md: SHOULD NOT send
 * more than 2^20). */
#define BS_MAX_DESC (64u * 1024)

uint16_t
nbdc_tflags(const struct nbdc *c)
{
  uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
               NBD_FLAG_CAN_MULTI_CONN | NBD_FLAG_SEND_CACHE;
  if (c->cfg->readonly)
    f |= NBD_FLAG_READ_ONLY;
  else
    f |= NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
         NBD_FLAG_SEND_FAST_ZERO;
  if (c->structured)
    f |= NBD_FLAG_SEND_DF;
  if (c->cfg->params && c->cfg->params->rotational)
    f |= NBD_FLAG_ROTATIONAL; /* null_blk's rotational */
  return f;
}

void
nbdc_init(struct nbdc *c, const struct srv_cfg *cfg, struct buf *out)
{
  memset(c, 0, sizeof *c);
  c->cfg = cfg;
  znbd_req_ctx_init(&c->rq, cfg->dev);
  c->phase = PH_CFLAGS;
  uint8_t *p = buf_reserve(out, 18);
  put64(p, NBD_MAGIC);
  put64(p + 8, NBD_IHAVEOPT);
  put16(p + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
  buf_commit(out, 18);
}

/* ---- handshake ---- */

static void
opt_reply(struct buf *out, uint32_t opt, uint32_t type, const void *data,
          uint32_t len)
{
  uint8_t *p = buf_reserve(out, 20 + len);
  put64(p, NBD_REP_MAGIC);
  put32(p + 8, opt);
  put32(p + 12, type);
  put32(p + 16, len);
  if (len)
    memcpy(p + 20, data, len);
  buf_commit(out, 20 + len);
}

static void
opt_error(struct buf *out, uint32_t opt, uint32_t type, const char *msg)
{
  opt_reply(out, opt, type, msg, (uint32_t)strlen(msg));
}

static bool
name_ok(const struct nbdc *c, const uint8_t *name, uint32_t len)
{
  const struct srv_cfg *s = c->cfg;
  if (!s->export_name_set || len == 0)
    return true;
  return len == strlen(s->export_name) &&
         memcmp(name, s->export_name, len) == 0;
}

static void
info_reply(struct nbdc *c, struct buf *out, uint32_t opt, uint16_t type)
{
  const struct srv_cfg *s = c->cfg;
  uint8_t tmp[2 + 12];
  put16(tmp, type);
  switch (type) {
  case NBD_INFO_EXPORT: {
    uint8_t *p = buf_reserve(out, 20 + 12);
    put64(p, NBD_REP_MAGIC);
    put32(p + 8, opt);
    put32(p + 12, NBD_REP_INFO);
    put32(p + 16, 12);
    put16(p + 20, NBD_INFO_EXPORT);
    put64(p + 22, s->size);
    put16(p + 30, nbdc_tflags(c));
    buf_commit(out, 32);
    break;
  }
  case NBD_INFO_NAME:
  case NBD_INFO_DESCRIPTION: {
    const char *str = type == NBD_INFO_NAME ? s->export_name : s->description;
    uint32_t n = (uint32_t)strlen(str);
    uint8_t *p = buf_reserve(out, 22 + n);
    put64(p, NBD_REP_MAGIC);
    put32(p + 8, opt);
    put32(p + 12, NBD_REP_INFO);
    put32(p + 16, 2 + n);
    put16(p + 20, type);
    memcpy(p + 22, str, n);
    buf_commit(out, 22 + n);
    break;
  }
  case NBD_INFO_BLOCK_SIZE:
    put32(tmp + 2, s->blocksize);
    put32(tmp + 6, s->blocksize > 4096 ? s->blocksize : 4096);
    put32(tmp + 10, NBD_MAX_PAYLOAD);
    opt_reply(out, opt, NBD_REP_INFO, tmp, 14);
    break;
  }
}

/* NBD_OPT_INFO / NBD_OPT_GO. */
static void
opt_info_go(struct nbdc *c, uint32_t opt, const uint8_t *d, uint32_t len,
            struct buf *out)
{
  if (len < 6) {
    opt_error(out, opt, NBD_REP_ERR_INVALID, "option too short");
    return;
  }
  uint32_t nlen = get32(d);
  if (nlen > len - 6) {
    opt_error(out, opt, NBD_REP_ERR_INVALID, "bad export name length");
    return;
  }
  if (nlen > NBD_MAX_STRING) { /* as nbdkit: the spec's string limit */
    opt_error(out, opt, NBD_REP_ERR_INVALID,
              "export name longer than 4096 bytes");
    return;
  }
  uint16_t nreq = get16(d + 4 + nlen);
  if ((uint64_t)4 + nlen + 2 + 2u * nreq != len) {
    opt_error(out, opt, NBD_REP_ERR_INVALID, "bad information request count");
    return;
  }
  if (!name_ok(c, d + 4, nlen)) {
    opt_error(out, opt, NBD_REP_ERR_UNKNOWN, "no such export");
    return;
  }
  bool want_name = false, want_desc = false;
  for (uint16_t i = 0; i < nreq; i++) {
    uint16_t t = get16(d + 4 + nlen + 2 + 2u * i);
    want_name |= t == NBD_INFO_NAME;
    want_desc |= t == NBD_INFO_DESCRIPTION;
  }
  info_reply(c, out, opt, NBD_INFO_EXPORT);
  if (want_name)
    info_reply(c, out, opt, NBD_INFO_NAME);
  if (want_desc)
    info_reply(c, out, opt, NBD_INFO_DESCRIPTION);
  info_reply(c, out, opt, NBD_INFO_BLOCK_SIZE);
  opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
  if (opt == NBD_OPT_GO)
    c->phase = PH_TRANS;
}

static void
meta_reply(struct buf *out, uint32_t opt, uint32_t id, const char *name)
{
  uint32_t n = (uint32_t)strlen(name);
  uint8_t *p = buf_reserve(out, 24 + n);
  put64(p, NBD_REP_MAGIC);
  put32(p + 8, opt);
  put32(p + 12, NBD_REP_META_CONTEXT);
  put32(p + 16, 4 + n);
  put32(p + 20, id);
  memcpy(p + 24, name, n);
  buf_commit(out, 24 + n);
}

static bool
str_is(const uint8_t *s, uint32_t n, const char *lit)
{
  return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT. */
static void
opt_meta(struct nbdc *c, uint32_t opt, const uint8_t *d, uint32_t len,
         struct buf *out)
{
  bool set = opt == NBD_OPT_SET_META_CONTEXT;
  bool zoned = znbd_dev_nr_zones(c->cfg->dev) > 0;
  if (set)
    c->ctx_alloc = c->ctx_zone = false; /* replaced even on failure */
  if (!c->structured) {
    opt_error(out, opt, NBD_REP_ERR_INVALID,
              "structured replies not negotiated");
    return;
  }
  if (len < 8 || get32(d) > len - 8) {
    opt_error(out, opt, NBD_REP_ERR_INVALID, "bad export name length");
    return;
  }
  uint32_t nlen = get32(d);
  if (nlen > NBD_MAX_STRING) {
    opt_error(out, opt, NBD_REP_ERR_INVALID,
              "export name longer than 4096 bytes");
    return;
  }
  if (!name_ok(c, d + 4, nlen)) {
    opt_error(out, opt, NBD_REP_ERR_UNKNOWN, "no such export");
    return;
  }
  uint32_t nq = get32(d + 4 + nlen);
  uint32_t pos = 8 + nlen;
  bool alloc = false, zone = false;
  if (nq == 0 && !set) {
    alloc = true;
    zone = zoned;
  }
  for (uint32_t i = 0; i < nq; i++) {
    if (len - pos < 4 || get32(d + pos) > len - pos - 4) {
      opt_error(out, opt, NBD_REP_ERR_INVALID, "bad query length");
      return;
    }
    uint32_t qlen = get32(d + pos);
    const uint8_t *q = d + pos + 4;
    pos += 4 + qlen;
    if (str_is(q, qlen, "base:allocation") ||
        (!set && str_is(q, qlen, "base:")))
      alloc = true;
    else if (zoned && (str_is(q, qlen, ZNBD_ZONECTX_NAME) ||
                       (!set && str_is(q, qlen, "x-znbd:"))))
      zone = true;
    /* Anything else: unknown namespace or leaf, ignored (spec). */
  }
  if (pos != len) {
    opt_error(out, opt, NBD_REP_ERR_INVALID, "trailing bytes in option");
    return;
  }
  if (alloc)
    meta_reply(out, opt, set ? CTX_ID_ALLOC : 0, "base:allocation");
  if (zone)
    meta_reply(out, opt, set ? CTX_ID_ZONE : 0, ZNBD_ZONECTX_NAME);
  opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
  if (set) {
    c->ctx_alloc = alloc;
    c->ctx_zone = zone;
  }
}

void
nbdc_tls_up(struct nbdc *c)
{
  c->starttls = false;
  c->tls = true;
  c->structured = false;
  c->ctx_alloc = c->ctx_zone = false;
}

/* NBD_OPT_STARTTLS (doc/proto.md, "TLS support"): NOTLS mode refuses it,
 * otherwise it is acknowledged once, and the handshake follows. */
static void
opt_starttls(struct nbdc *c, uint32_t opt, uint32_t len, struct buf *out)
{
  if (c->cfg->tls == TLS_OFF) {
    opt_error(out, opt, NBD_REP_ERR_UNSUP, "TLS is not enabled (--tls=off)");
    return;
  }
  if (len != 0) {
    opt_error(out, opt, NBD_REP_ERR_INVALID, "NBD_OPT_STARTTLS takes no data");
    return;
  }
  if (c->tls) {
    opt_error(out, opt, NBD_REP_ERR_INVALID, "TLS already negotiated");
    return;
  }
  opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
  c->starttls = true;
}

/* One complete option at D (LEN bytes of data). */
static void
do_option(struct nbdc *c, uint32_t opt, const uint8_t *d, uint32_t len,
          struct buf *out)
{
  const struct srv_cfg *s = c->cfg;
  /* FORCEDTLS mode (doc/proto.md): before TLS, every option but STARTTLS
   * and ABORT gets NBD_REP_ERR_TLS_REQD; EXPORT_NAME, which cannot be
   * answered with an error, ends the session. */
  if (s->tls == TLS_REQUIRE && !c->tls && opt != NBD_OPT_STARTTLS &&
      opt != NBD_OPT_ABORT) {
    if (s->verbose)
      fprintf(stderr, "znbd: option %" PRIu32 " refused: TLS required\n", opt);
    if (opt == NBD_OPT_EXPORT_NAME)
      c->phase = PH_CLOSED;
    else
      opt_error(out, opt, NBD_REP_ERR_TLS_REQD,
                "TLS required: send NBD_OPT_STARTTLS first");
    return;
  }
  switch (opt) {
  case NBD_OPT_EXPORT_NAME: {
    if (len > NBD_MAX_STRING || !name_ok(c, d, len)) {
      c->phase = PH_CLOSED; /* the only answer the spec allows */
      return;
    }
    size_t n = c->no_zeroes ? 10 : 134;
    uint8_t *p = buf_reserve(out, n);
    memset(p, 0, n);
    put64(p, s->size);
    put16(p + 8, nbdc_tflags(c));
    buf_commit(out, n);
    c->phase = PH_TRANS;
    return;
  }
  case NBD_OPT_ABORT:
    opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
    c->phase = PH_CLOSED;
    return;
  case NBD_OPT_LIST: {
    if (len != 0) {
      opt_error(out, opt, NBD_REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
      return;
    }
    uint32_t n = (uint32_t)strlen(s->export_name);
    uint8_t tmp[4 + 4096];
    put32(tmp, n);
    memcpy(tmp + 4, s->export_name, n);
    opt_reply(out, opt, NBD_REP_SERVER, tmp, 4 + n);
    opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
    return;
  }
  case NBD_OPT_STRUCTURED_REPLY:
    if (len != 0) {
      opt_error(out, opt, NBD_REP_ERR_INVALID, "option takes no data");
      return;
    }
    if (c->structured) {
      opt_error(out, opt, NBD_REP_ERR_INVALID, "already negotiated");
      return;
    }
    c->structured = true;
    opt_reply(out, opt, NBD_REP_ACK, NULL, 0);
    return;
  case NBD_OPT_INFO:
  case NBD_OPT_GO:
    opt_info_go(c, opt, d, len, out);
    return;
  case NBD_OPT_LIST_META_CONTEXT:
  case NBD_OPT_SET_META_CONTEXT:
    opt_meta(c, opt, d, len, out);
    return;
  case NBD_OPT_STARTTLS:
    opt_starttls(c, opt, len, out);
    return;
  default:
    opt_error(out, opt, NBD_REP_ERR_UNSUP, "option not supported");
    return;
  }
}

/* Returns bytes consumed (0 with *need set when incomplete). */
static size_t
handshake_step(struct nbdc *c, const uint8_t *in, size_t len, struct buf *out,
               size_t *need)
{
  if (c->phase == PH_CFLAGS) {
    if (len < 4) {
      *need = 4;
      return 0;
    }
    uint32_t f = get32(in);
    if (f & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
      c->phase = PH_CLOSED; /* unknown client flags: spec says close */
      return 4;
    }
    c->no_zeroes = f & NBD_FLAG_C_NO_ZEROES;
    c->phase = PH_OPTS;
    return 4;
  }
  if (len < 16) {
    *need = 16;
    return 0;
  }
  if (get64(in) != NBD_IHAVEOPT) {
    c->phase = PH_CLOSED;
    return len;
  }
  uint32_t opt = get32(in + 8), olen = get32(in + 12);
  if (olen > OPT_MAX) {
    if (opt == NBD_OPT_EXPORT_NAME) {
      c->phase = PH_CLOSED;
      return len;
    }
    c->discard = olen; /* refused once its data is read */
    c->after_discard = AFTER_OPT_TOO_BIG;
    c->after_opt = opt;
    return 16;
  }
  if (len - 16 < olen) {
    *need = 16 + (size_t)olen;
    return 0;
  }
  do_option(c, opt, in + 16, olen, out);
  return 16 + (size_t)olen;
}

/* ---- transmission: replies ---- */

static void
simple_reply(struct buf *out, uint64_t cookie, uint32_t err)
{
  uint8_t *p = buf_reserve(out, NBD_SIMPLE_REPLY_SIZE);
  put32(p, NBD_SIMPLE_REPLY_MAGIC);
  put32(p + 4, err);
  put64(p + 8, cookie);
  buf_commit(out, NBD_SIMPLE_REPLY_SIZE);
}

static uint8_t *
chunk(struct buf *out, uint16_t flags, uint16_t type, uint64_t cookie,
      uint32_t len)
{
  uint8_t *p = buf_reserve(out, NBD_CHUNK_HEADER_SIZE + (size_t)len);
  put32(p, NBD_STRUCTURED_REPLY_MAGIC);
  put16(p + 4, flags);
  put16(p + 6, type);
  put64(p + 8, cookie);
  put32(p + 16, len);
  return p + NBD_CHUNK_HEADER_SIZE;
}

static const char *
cmd_name(uint16_t type)
{
  static const char *const names[] = {
      [NBD_CMD_READ] = "READ",
      [NBD_CMD_WRITE] = "WRITE",
      [NBD_CMD_DISC] = "DISC",
      [NBD_CMD_FLUSH] = "FLUSH",
      [NBD_CMD_TRIM] = "TRIM",
      [NBD_CMD_CACHE] = "CACHE",
      [NBD_CMD_WRITE_ZEROES] = "WRITE_ZEROES",
      [NBD_CMD_BLOCK_STATUS] = "BLOCK_STATUS",
  };
  if (type < sizeof names / sizeof names[0] && names[type])
    return names[type];
  return "UNKNOWN";
}

static const char *
errno_label(int e)
{
  const char *n = znbd_errno_name(e);
  if (n)
    return n;
  switch (e) {
  case ESHUTDOWN:
    return "ESHUTDOWN";
  case ENOTSUP:
    return "ENOTSUP";
  }
  return "?";
}

/* -v: why R was refused, one line on stderr in the plugin's format
 * (plugin/zoned.c, fail()): command, bytes, offset, errno name, reason
 * and, on a zoned device, the zone holding the offset with its
 * condition, write pointer and end of capacity.  E is the Linux errno,
 * ERR the NBD errno sent. */
static void
log_refused(const struct nbdc *c, const struct nbd_req *r, uint32_t err, int e,
            const char *msg)
{
  char wire[40] = "";
  if ((uint32_t)e != err)
    snprintf(wire, sizeof wire, " (%s on the wire)", errno_label((int)err));
  char zone[160];
  znbd_dev_zone_note(c->cfg->dev, r->off, zone, sizeof zone);
  fprintf(stderr, "znbd: %s: %" PRIu32 " bytes at %" PRIu64 ": %s%s: %s%s\n",
          cmd_name(r->type), r->len, r->off, errno_label(e), wire,
          msg ? msg : "", zone);
}

/* The error reply: wire errno ERR, Linux errno E for the -v log. */
static void
refuse(const struct nbdc *c, const struct nbd_req *r, uint32_t err, int e,
       const char *msg, struct buf *out)
{
  if (c->cfg->verbose)
    log_refused(c, r, err, e, msg);
  if (!c->structured) {
    simple_reply(out, r->cookie, err);
    return;
  }
  uint16_t n = msg ? (uint16_t)strnlen(msg, 200) : 0;
  uint8_t *p =
      chunk(out, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, r->cookie, 6u + n);
  put32(p, err);
  put16(p + 4, n);
  if (n)
    memcpy(p + 6, msg, n);
  buf_commit(out, NBD_CHUNK_HEADER_SIZE + 6 + (size_t)n);
}

void
nbd_reply_error(const struct nbdc *c, const struct nbd_req *r, uint32_t err,
                const char *msg, struct buf *out)
{
  refuse(c, r, err, (int)err, msg, out); /* NBD errnos are Linux's */
}

static void
reply_ok(const struct nbdc *c, const struct nbd_req *r, struct buf *out)
{
  simple_reply(out, r->cookie, 0);
}

static void
reply_errno(const struct nbdc *c, const struct nbd_req *r, int e,
            struct buf *out)
{
  refuse(c, r, (uint32_t)znbd_dev_wire_errno(e), e, strerror(e), out);
}

/* ---- transmission: requests ---- */

static bool
range_ok(const struct nbdc *c, uint64_t off, uint64_t len)
{
  return off <= c->cfg->size && len <= c->cfg->size - off;
}

static bool
aligned(const struct nbdc *c, uint64_t off, uint64_t len)
{
  uint32_t bs = c->cfg->blocksize;
  return ((off | len) & (bs - 1)) == 0;
}

/* Validate R; 0 if it may execute, else the NBD error to reply. */
static uint32_t
validate(const struct nbdc *c, const struct nbd_req *r, const char **msg)
{
  static const uint16_t allowed[] = {
      /* doc/proto.md: FUA "is valid for all commands" (ignored where
       * it means nothing); the others only where listed. */
      [NBD_CMD_READ] = NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_DF,
      [NBD_CMD_WRITE] = NBD_CMD_FLAG_FUA,
      [NBD_CMD_FLUSH] = NBD_CMD_FLAG_FUA,
      [NBD_CMD_TRIM] = NBD_CMD_FLAG_FUA,
      [NBD_CMD_CACHE] = NBD_CMD_FLAG_FUA,
      [NBD_CMD_WRITE_ZEROES] =
          NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO,
      [NBD_CMD_BLOCK_STATUS] = NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_REQ_ONE,
  };
  if (c->stopping) {
    *msg = "server is shutting down";
    return NBD_ESHUTDOWN;
  }
  if (r->type > NBD_CMD_BLOCK_STATUS || r->type == NBD_CMD_DISC) {
    *msg = "unknown command";
    return NBD_EINVAL;
  }
  if (r->flags & ~allowed[r->type]) {
    *msg = "invalid command flags";
    return NBD_EINVAL;
  }
  if ((r->flags & NBD_CMD_FLAG_DF) && !c->structured) {
    *msg = "DF without structured replies";
    return NBD_EINVAL;
  }
  bool write = r->type == NBD_CMD_WRITE || r->type == NBD_CMD_TRIM ||
               r->type == NBD_CMD_WRITE_ZEROES;
  if (write && c->cfg->readonly) {
    *msg = "read-only export";
    return NBD_EPERM;
  }
  if (r->type == NBD_CMD_FLUSH)
    return 0;
  if (r->type == NBD_CMD_BLOCK_STATUS && !c->ctx_alloc && !c->ctx_zone) {
    *msg = "no metadata context negotiated";
    return NBD_EINVAL;
  }
  if (r->len == 0) {
    *msg = "zero length";
    return NBD_EINVAL;
  }
  if (r->type == NBD_CMD_READ && r->len > NBD_MAX_REQUEST) {
    *msg = "read larger than 64 MiB";
    return NBD_EINVAL;
  }
  if (!range_ok(c, r->off, r->len)) {
    *msg = "request beyond the end of the export";
    return r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES
               ? NBD_ENOSPC
               : NBD_EINVAL;
  }
  if (r->type != NBD_CMD_BLOCK_STATUS && !aligned(c, r->off, r->len)) {
    *msg = "request not aligned to the block size";
    return NBD_EINVAL;
  }
  return 0;
}

enum { RQ_NEED, RQ_DONE, RQ_STALL };

static int
request_step(struct nbdc *c, const uint8_t *in, size_t len, struct buf *out,
             nbdc_submit_fn fn, void *opaque, size_t *used, size_t *need)
{
  if (len < NBD_REQUEST_SIZE) {
    *need = NBD_REQUEST_SIZE;
    return RQ_NEED;
  }
  if (get32(in) != NBD_REQUEST_MAGIC) {
    c->phase = PH_CLOSED; /* cannot resynchronise: hard disconnect */
    *used = len;
    return RQ_DONE;
  }
  struct nbd_req r = {
      .flags = get16(in + 4),
      .type = get16(in + 6),
      .cookie = get64(in + 8),
      .off = get64(in + 16),
      .len = get32(in + 24),
  };
  if (r.type == NBD_CMD_DISC) {
    c->phase = PH_CLOSED;
    *used = len; /* nothing after DISC is read */
    return RQ_DONE;
  }
  const char *msg = NULL;
  if (r.type == NBD_CMD_WRITE && r.len > NBD_MAX_REQUEST) {
    /* Drop the payload, then refuse: libnbd counts the command as sent
     * only after its payload, so an earlier reply would be unknown. */
    c->discard = r.len;
    c->after_discard = AFTER_WRITE_REFUSED;
    c->after_err = NBD_EINVAL;
    c->after_msg = "write larger than 64 MiB";
    c->after_req =
        (struct nbd_req_hdr){r.flags, r.type, r.cookie, r.off, r.len};
    c->requests++;
    *used = NBD_REQUEST_SIZE;
    return RQ_DONE;
  }
  size_t total = NBD_REQUEST_SIZE;
  if (r.type == NBD_CMD_WRITE) {
    total += r.len;
    if (len < total) {
      *need = total;
      return RQ_NEED;
    }
    r.payload = in + NBD_REQUEST_SIZE;
  }
  uint32_t err = validate(c, &r, &msg);
  if (err) {
    nbd_reply_error(c, &r, err, msg, out);
  } else if (fn(opaque, c, &r)) {
    return RQ_STALL;
  }
  c->requests++;
  *used = total;
  return RQ_DONE;
}

/* The reply owed after dropping an oversized message (see nbdc). */
static void
owed_reply(struct nbdc *c, struct buf *out)
{
  if (c->after_discard == AFTER_OPT_TOO_BIG) {
    opt_error(out, c->after_opt, NBD_REP_ERR_TOO_BIG, "option too large");
  } else if (c->after_discard == AFTER_WRITE_REFUSED) {
    struct nbd_req r = {.flags = c->after_req.flags,
                        .type = c->after_req.type,
                        .cookie = c->after_req.cookie,
                        .off = c->after_req.off,
                        .len = c->after_req.len};
    nbd_reply_error(c, &r, c->after_err, c->after_msg, out);
  }
  c->after_discard = AFTER_NONE;
}

size_t
nbdc_refuse_pending(struct nbdc *c, const uint8_t *in, size_t len, uint32_t err,
                    const char *msg)
{
  if (c->phase != PH_TRANS || c->discard || len < NBD_REQUEST_SIZE ||
      get32(in) != NBD_REQUEST_MAGIC || get16(in + 6) != NBD_CMD_WRITE)
    return 0;
  uint32_t plen = get32(in + 24);
  if ((uint64_t)len >= (uint64_t)NBD_REQUEST_SIZE + plen)
    return 0; /* complete: nothing to drop */
  c->discard = NBD_REQUEST_SIZE + (uint64_t)plen - len;
  c->after_discard = AFTER_WRITE_REFUSED;
  c->after_err = err;
  c->after_msg = msg;
  c->after_req = (struct nbd_req_hdr){get16(in + 4), NBD_CMD_WRITE,
                                      get64(in + 8), get64(in + 16), plen};
  c->requests++;
  return len;
}

size_t
nbdc_feed(struct nbdc *c, const uint8_t *in, size_t len, struct buf *out,
          size_t out_high, nbdc_submit_fn fn, void *opaque, size_t *need)
{
  size_t pos = 0;
  *need = 0;
  c->pause = false;
  while (c->phase != PH_CLOSED && out->len <= out_high && !c->pause &&
         !c->starttls) {
    if (c->discard) {
      size_t n = len - pos < c->discard ? len - pos : c->discard;
      pos += n;
      c->discard -= n;
      if (c->discard)
        break;
      owed_reply(c, out);
      continue;
    }
    if (c->phase != PH_TRANS) {
      size_t n = handshake_step(c, in + pos, len - pos, out, need);
      if (n == 0)
        break;
      pos += n;
      continue;
    }
    size_t used = 0;
    int rc = request_step(c, in + pos, len - pos, out, fn, opaque, &used, need);
    if (rc != RQ_DONE)
      break;
    pos += used;
  }
  return pos;
}

/* ---- execution ---- */

struct ext {
  uint64_t off, len;
  uint32_t flags;
};
struct ext_list {
  struct ext e[32];
  unsigned n;
  uint64_t end;
};

static int
collect_ext(void *opaque, uint64_t off, uint64_t len, uint32_t flags)
{
  struct ext_list *l = opaque;
  if (off + len > l->end)
    len = l->end - off;
  if (len == 0)
    return 1;
  if (l->n && l->e[l->n - 1].flags == flags) {
    l->e[l->n - 1].len += len;
  } else {
    if (l->n == 32)
      return 1; /* the rest is read as data */
    l->e[l->n++] = (struct ext){off, len, flags};
  }
  return off + len >= l->end;
}

/* Where zero-copy READ data goes (nbd_exec_ref). */
struct ref_sink {
  nbd_add_ref_fn add_ref; /* NULL: copy */
  void *opaque;
};

/* With EXEC_REF, a plain RAM disk's allocated data goes out from the
 * store itself (the sink's add_ref): one copy fewer (the kernel's into the
 * socket remains).  What the send reads is what the store holds when the
 * send runs, which may be after requests that came later in the same
 * batch: those overlap the READ (the client had no reply yet), so either
 * content is allowed (doc/proto.md leaves overlapping requests unordered). */
static const void *
read_ref(const struct nbdc *c, uint64_t off, uint32_t len, unsigned xflags,
         const struct ref_sink *rs)
{
  if (!(xflags & EXEC_REF) || !rs->add_ref || len < REF_MIN)
    return NULL;
  return znbd_dev_read_ref(c->cfg->dev, len, off);
}

static int
read_data_chunk(const struct nbdc *c, const struct nbd_req *r, uint64_t off,
                uint32_t len, struct buf *out, size_t *last, unsigned xflags,
                const struct ref_sink *rs)
{
  *last = out->len;
  const void *ref = read_ref(c, off, len, xflags, rs);
  if (!ref && !buf_try_reserve(out, NBD_CHUNK_HEADER_SIZE + 8 + (size_t)len)) {
    errno = ENOMEM; /* chunk() below then needs no allocation */
    return -1;
  }
  uint8_t *p =
      chunk(out, 0, NBD_REPLY_TYPE_OFFSET_DATA, r->cookie, 8 + (ref ? 0 : len));
  put64(p, off);
  if (ref) {
    put32(out->p + *last + 16, 8 + len); /* the chunk's length field */
    buf_commit(out, NBD_CHUNK_HEADER_SIZE + 8);
    rs->add_ref(rs->opaque, ref, len);
    return 0;
  }
  if (znbd_dev_read(c->cfg->dev, p + 8, len, off) == -1)
    return -1;
  buf_commit(out, NBD_CHUNK_HEADER_SIZE + 8 + (size_t)len);
  return 0;
}

static void
exec_read(const struct nbdc *c, const struct nbd_req *r, struct buf *out,
          unsigned xflags, const struct ref_sink *rs)
{
  struct znbd_dev *d = c->cfg->dev;
  size_t start = out->len;
  if (!c->structured) {
    uint8_t *p = buf_try_reserve(out, NBD_SIMPLE_REPLY_SIZE + (size_t)r->len);
    if (!p) {
      reply_errno(c, r, ENOMEM, out);
      return;
    }
    if (znbd_dev_read(d, p + NBD_SIMPLE_REPLY_SIZE, r->len, r->off) == -1) {
      reply_errno(c, r, errno, out);
      return;
    }
    simple_reply(out, r->cookie, 0);
    buf_commit(out, r->len);
    return;
  }
  size_t last = out->len;
  /* Holes are answered without reading: bad blocks are checked first. */
  if (c->cfg->holes_ok && znbd_dev_read_check(d, r->len, r->off) == -1) {
    reply_errno(c, r, errno, out);
    return;
  }
  if (!c->cfg->holes_ok) {
    if (read_data_chunk(c, r, r->off, r->len, out, &last, xflags, rs) == -1)
      goto fail;
    goto done;
  }
  struct ext_list l = {.n = 0, .end = r->off + r->len};
  int rc = znbd_dev_extents(d, r->off, r->len, collect_ext, &l);
  if (rc < 0)
    goto fail;
  if (l.n == 0 || (r->flags & NBD_CMD_FLAG_DF)) {
    /* One chunk: a hole if all of it reads as zeros, else data. */
    if (l.n == 1 && (l.e[0].flags & 2) && l.e[0].len == r->len) {
      uint8_t *p = chunk(out, 0, NBD_REPLY_TYPE_OFFSET_HOLE, r->cookie, 12);
      put64(p, r->off);
      put32(p + 8, r->len);
      buf_commit(out, NBD_CHUNK_HEADER_SIZE + 12);
    } else if (read_data_chunk(c, r, r->off, r->len, out, &last, xflags, rs) ==
               -1) {
      goto fail;
    }
    goto done;
  }
  uint64_t pos = r->off, end = r->off + r->len;
  for (unsigned i = 0; i < l.n && pos < end; i++) {
    struct ext *e = &l.e[i];
    if (e->flags & 2) { /* NBD_STATE_ZERO: reads as zeros */
      last = out->len;
      uint8_t *p = chunk(out, 0, NBD_REPLY_TYPE_OFFSET_HOLE, r->cookie, 12);
      put64(p, pos);
      put32(p + 8, (uint32_t)e->len);
      buf_commit(out, NBD_CHUNK_HEADER_SIZE + 12);
      pos += e->len;
      continue;
    }
    /* Data: extend over following non-zero extents. */
    uint64_t n = e->len;
    while (i + 1 < l.n && !(l.e[i + 1].flags & 2))
      n += l.e[++i].len;
    if (i + 1 == l.n)
      n = end - pos; /* collector stopped early: rest is data */
    if (read_data_chunk(c, r, pos, (uint32_t)n, out, &last, xflags, rs) == -1)
      goto fail;
    pos += n;
  }
  if (pos < end && read_data_chunk(c, r, pos, (uint32_t)(end - pos), out, &last,
                                   xflags, rs) == -1)
    goto fail;
done:
  put16(out->p + last + 4, NBD_REPLY_FLAG_DONE);
  return;
fail : {
  /* No ref was queued before this: refs are only taken on plain RAM
   * disks, whose reads cannot fail once the range is checked. */
  int e = errno;
  out->len = start;
  reply_errno(c, r, e, out);
}
}

/* WRITE or WRITE_ZEROES R (NO_HOLE: the range stays allocated); with
 * DONE, a write ahead of the wp may be parked (znbd_req_write). */
static int
exec_write(const struct nbdc *c, const struct nbd_req *r, unsigned wflags,
           znbd_write_done_fn done, void *opaque)
{
  const void *data = r->type == NBD_CMD_WRITE ? r->payload : NULL;
  if (r->type == NBD_CMD_WRITE_ZEROES && (r->flags & NBD_CMD_FLAG_NO_HOLE))
    wflags |= ZNBD_WRITE_ALLOCATE;
  /* FUA inside the write when it runs in this call: a power cut comes
   * before both or after both (finish_exec then has nothing to sync). */
  if (r->flags & NBD_CMD_FLAG_FUA)
    wflags |= ZNBD_WRITE_FUA;
  return znbd_req_write(&c->rq, data, r->len, r->off, wflags, done, opaque);
}

/* Block status descriptors being built into one chunk. */
struct bs {
  struct buf *out;
  uint32_t n; /* descriptors */
  uint32_t max;
  bool merge;     /* join neighbours with equal flags (base:allocation) */
  uint64_t start; /* the request's offset: the first descriptor's start */
  uint64_t end;   /* where the last descriptor may end (block aligned) */
  size_t last;    /* offset in out of the previous descriptor */
};

/* Longest descriptor: 32-bit lengths, kept a multiple of 4096. */
#define BS_MAX_LEN (UINT32_MAX & ~(uint32_t)4095)

/* Extent callback: append [OFF, OFF+LEN) with FLAGS, clipped to
 * [start, end).  Returns 1 to stop (full, or past the end). */
static int
bs_add(void *opaque, uint64_t off, uint64_t len, uint32_t flags)
{
  struct bs *b = opaque;
  if (off + len <= b->start)
    return 0;
  if (off < b->start) {
    len -= b->start - off;
    off = b->start;
  }
  if (off >= b->end)
    return 1;
  if (len > b->end - off)
    len = b->end - off;
  if (b->n && b->merge && get32(b->out->p + b->last + 4) == flags) {
    uint32_t have = get32(b->out->p + b->last);
    uint64_t add = len < BS_MAX_LEN - have ? len : BS_MAX_LEN - have;
    put32(b->out->p + b->last, have + (uint32_t)add);
    len -= add;
  }
  while (len) {
    if (b->n == b->max)
      return 1;
    uint32_t l = len < BS_MAX_LEN ? (uint32_t)len : BS_MAX_LEN;
    uint8_t *p = buf_reserve(b->out, 8);
    put32(p, l);
    put32(p + 4, flags);
    b->last = b->out->len;
    buf_commit(b->out, 8);
    b->n++;
    len -= l;
  }
  /* Merging: a later extent may still extend the last descriptor. */
  return !b->merge && b->n == b->max;
}

static int
alloc_add(void *opaque, uint64_t off, uint64_t len, uint32_t flags)
{
  return bs_add(opaque, off, len, flags & 3);
}

static int
zone_extents(struct znbd_dev *d, struct bs *b, uint64_t off)
{
  struct znbd_zone_info zi[64];
  uint32_t z = znbd_dev_zone_index(d, off);
  for (;;) {
    uint32_t n = znbd_dev_report(d, z, 64, zi);
    if (n == 0)
      return 0;
    for (uint32_t i = 0; i < n; i++, z++) {
      struct znbd_zone_info *q = &zi[i];
      uint32_t st =
          (q->cond & ZNBD_ZONECTX_COND_MASK) |
          ((q->type << ZNBD_ZONECTX_TYPE_SHIFT) & ZNBD_ZONECTX_TYPE_MASK);
      uint64_t zs = q->start, ze = q->start + q->len;
      if (zs < off)
        zs = off;
      if (zs >= b->end)
        return 0;
      bool split = q->type == ZNBD_ZONE_TYPE_SEQWRITE_REQ &&
                   q->wp != ZNBD_WP_INVALID && q->cond != ZNBD_ZONE_COND_FULL;
      int rc;
      if (split && q->wp > zs) {
        rc = bs_add(b, zs, (q->wp < ze ? q->wp : ze) - zs, st);
        if (rc)
          return 0;
      }
      if (split) {
        uint64_t s = q->wp > zs ? q->wp : zs;
        if (s < ze && (rc = bs_add(b, s, ze - s, st | ZNBD_ZONECTX_PAST_WP)))
          return 0;
      } else if ((rc = bs_add(b, zs, ze - zs, st))) {
        return 0;
      }
    }
  }
}

/* BLOCK_STATUS.  An unaligned range is looked up rounded out to whole
 * blocks; the first descriptor starts at the request's offset and the
 * last may end at the next block boundary (doc/proto.md: the final
 * extent MAY go beyond the requested range). */
static int
exec_block_status(const struct nbdc *c, const struct nbd_req *r,
                  struct buf *out)
{
  struct znbd_dev *d = c->cfg->dev;
  uint64_t bsz = c->cfg->blocksize;
  uint64_t astart = r->off & ~(bsz - 1);
  uint64_t aend = (r->off + r->len + bsz - 1) & ~(bsz - 1);
  if (aend > c->cfg->size)
    aend = c->cfg->size;
  size_t start = out->len, last = out->len;
  uint32_t max = (r->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : BS_MAX_DESC;
  for (int ctx = CTX_ID_ALLOC; ctx <= CTX_ID_ZONE; ctx++) {
    if ((ctx == CTX_ID_ALLOC && !c->ctx_alloc) ||
        (ctx == CTX_ID_ZONE && !c->ctx_zone))
      continue;
    last = out->len;
    uint8_t *p = chunk(out, 0, NBD_REPLY_TYPE_BLOCK_STATUS, r->cookie, 0);
    put32(p, (uint32_t)ctx);
    buf_commit(out, NBD_CHUNK_HEADER_SIZE + 4);
    struct bs b = {.out = out,
                   .max = max,
                   .merge = ctx == CTX_ID_ALLOC,
                   .start = r->off,
                   .end = aend};
    if (ctx == CTX_ID_ALLOC) {
      if (znbd_dev_extents(d, astart, aend - astart, alloc_add, &b) < 0) {
        out->len = start;
        return -1;
      }
    } else {
      zone_extents(d, &b, r->off);
    }
    if (b.n == 0) { /* never empty: report the range as plain data */
      bs_add(&b, r->off, r->len, 0);
    }
    put32(out->p + last + 16,
          (uint32_t)(out->len - last - NBD_CHUNK_HEADER_SIZE));
  }
  put16(out->p + last + 4, NBD_REPLY_FLAG_DONE);
  return 0;
}

/* The reply to R, whose execution returned RC (0, or -1 with errno).
 * FUA on a command that changed data: its range on stable storage before
 * the reply (doc/proto.md, NBD_CMD_FLAG_FUA), unless SYNCED (a write or
 * trim that ran with ZNBD_WRITE_FUA did it already).  Returns EXEC_AGAIN for a
 * write ahead of the wp with EXEC_REQUEUE (no reply), else 0. */
static int
finish_exec(const struct nbdc *c, const struct nbd_req *r, int rc,
            unsigned xflags, struct buf *out, bool synced)
{
  if (rc == 0 && !synced && (r->flags & NBD_CMD_FLAG_FUA) &&
      (r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES ||
       r->type == NBD_CMD_TRIM))
    rc = znbd_req_sync(&c->rq, r->len, r->off);
  if (rc == -1) {
    if (errno == EAGAIN && (xflags & EXEC_REQUEUE))
      return EXEC_AGAIN;
    reply_errno(c, r, errno, out);
  } else {
    reply_ok(c, r, out);
  }
  return 0;
}

unsigned
nbd_req_kind(const struct nbd_req *r)
{
  switch (r->type) {
  case NBD_CMD_READ:
    return ZNBD_IO_READ;
  case NBD_CMD_WRITE:
  case NBD_CMD_WRITE_ZEROES:
    return ZNBD_IO_WRITE;
  case NBD_CMD_FLUSH:
    return ZNBD_IO_FLUSH;
  case NBD_CMD_TRIM:
    return ZNBD_IO_TRIM;
  default:
    return ZNBD_IO_OTHER;
  }
}

uint64_t
nbd_req_delay(const struct nbdc *c, const struct nbd_req *r)
{
  unsigned kind = nbd_req_kind(r);
  /* WRITE_ZEROES moves no data over the link. */
  uint64_t len = r->type == NBD_CMD_WRITE_ZEROES ? 0 : r->len;
  return znbd_req_delay(&c->rq, kind, len, 0);
}

static int exec_one(const struct nbdc *c, const struct nbd_req *r,
                    unsigned xflags, struct buf *out,
                    const struct ref_sink *rs);

/* drop-reply for a request of KIND that is not a READ, whose reply was
 * appended to OUT from BEFORE on: take it back if it is to be dropped. */
static void
drop_after(const struct nbdc *c, unsigned kind, struct buf *out, size_t before)
{
  if (znbd_req_drop_reply(&c->rq, kind))
    out->len = before;
}

/* drop-reply (znbd_req_drop_reply): the request is executed, then what
 * it appended to OUT is taken back, so the client never hears of it.
 * Zero-copy READ data cannot be taken back, so a READ is chosen before
 * it executes (and copied); other requests after, so that a write sent
 * back for requeueing (EXEC_AGAIN) is not counted. */
int
nbd_exec(const struct nbdc *c, const struct nbd_req *r, unsigned xflags,
         struct buf *out)
{
  return nbd_exec_ref(c, r, xflags, out, c->add_ref, c->ref_opaque);
}

int
nbd_exec_ref(const struct nbdc *c, const struct nbd_req *r, unsigned xflags,
             struct buf *out, nbd_add_ref_fn add_ref, void *opaque)
{
  const struct ref_sink rs = {add_ref, opaque};
  unsigned kind = nbd_req_kind(r);
  bool drop = kind == ZNBD_IO_READ && znbd_req_drop_reply(&c->rq, kind);
  size_t before = out->len;
  int rc =
      exec_one(c, r, drop ? xflags & ~(unsigned)EXEC_REF : xflags, out, &rs);
  if (rc == EXEC_AGAIN)
    return rc;
  if (drop)
    out->len = before;
  else if (kind != ZNBD_IO_READ)
    drop_after(c, kind, out, before);
  return rc;
}

static int
exec_one(const struct nbdc *c, const struct nbd_req *r, unsigned xflags,
         struct buf *out, const struct ref_sink *rs)
{
  unsigned wflags = (xflags & EXEC_NOWAIT) ? ZNBD_WRITE_NOWAIT : 0;
  int rc = 0;
  if (znbd_req_cut(&c->rq)) { /* power cut: the device is gone */
    reply_errno(c, r, ESHUTDOWN, out);
    return 0;
  }
  /* The check above is only a shortcut: a cut may come between it and
   * the request reaching the device, so the device checks c->rq's fence
   * again under its cut lock. */
  switch (r->type) {
  case NBD_CMD_READ:
    exec_read(c, r, out, xflags, rs);
    return 0;
  case NBD_CMD_WRITE:
  case NBD_CMD_WRITE_ZEROES:
    rc = exec_write(c, r, wflags, NULL, NULL);
    break;
  case NBD_CMD_TRIM:
    rc = znbd_req_trim(&c->rq, r->len, r->off,
                       (r->flags & NBD_CMD_FLAG_FUA) ? ZNBD_WRITE_FUA : 0);
    break;
  case NBD_CMD_FLUSH: /* dir=: fdatasync; RAM: nothing to do */
    rc = znbd_req_flush(&c->rq);
    break;
  case NBD_CMD_CACHE: /* nothing to prefetch */
    break;
  case NBD_CMD_BLOCK_STATUS:
    rc = exec_block_status(c, r, out);
    if (rc == 0)
      return 0;
    break;
  default:
    nbd_reply_error(c, r, NBD_EINVAL, "unknown command", out);
    return 0;
  }
  return finish_exec(c, r, rc, xflags, out, true);
}

/* The parked write P ran (ERR 0) or failed: its reply, then P->done. */
static void
park_done(void *opaque, int err)
{
  struct nbd_park *p = opaque;
  size_t before = p->out->len;
  errno = err;
  finish_exec(p->c, &p->req, err ? -1 : 0, 0, p->out, false);
  drop_after(p->c, ZNBD_IO_WRITE, p->out, before);
  p->done(p);
}

int
nbd_exec_park(struct nbd_park *p, unsigned xflags)
{
  unsigned wflags = (xflags & EXEC_NOWAIT) ? ZNBD_WRITE_NOWAIT : 0;
  size_t before = p->out->len;
  int rc = exec_write(p->c, &p->req, wflags, park_done, p);
  if (rc == ZNBD_WRITE_PARKED)
    return EXEC_PARKED;
  rc = finish_exec(p->c, &p->req, rc, xflags, p->out, true);
  if (rc != EXEC_AGAIN)
    drop_after(p->c, ZNBD_IO_WRITE, p->out, before);
  return rc;
}
