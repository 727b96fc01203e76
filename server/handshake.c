/* znbd server: the NBD handshake on buffers — fixed newstyle
 * negotiation (doc/proto.md of the NBD project, "Fixed newstyle
 * negotiation"): the greeting, client flags and every option up to the
 * transmission phase, STARTTLS included.  No I/O: nbdc_feed() (proto.c)
 * hands it the bytes of the handshake phase.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "znbd/zonectx.h"
#include "handshake.h"
#include "wire.h"

/* Option payloads above this are refused with NBD_REP_ERR_TOO_BIG (and
 * dropped): every valid option of ours fits (strings are <= 4096 bytes). */
#define OPT_MAX (64u * 1024)

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

/* An option reply of TYPE to option OPT: the 20-byte header, then HLEN
 * bytes of HEAD (a reply's fixed fields) and LEN bytes of DATA (its
 * string), both may be empty. */
static void
opt_reply_parts(struct buf *out, uint32_t opt, uint32_t type, const void *head,
                uint32_t hlen, const void *data, uint32_t len)
{
  uint8_t *p = buf_reserve(out, 20 + hlen + len);
  put64(p, NBD_REP_MAGIC);
  put32(p + 8, opt);
  put32(p + 12, type);
  put32(p + 16, hlen + len);
  if (hlen)
    memcpy(p + 20, head, hlen);
  if (len)
    memcpy(p + 20 + hlen, data, len);
  buf_commit(out, 20 + hlen + len);
}

static void
opt_reply(struct buf *out, uint32_t opt, uint32_t type, const void *data,
          uint32_t len)
{
  opt_reply_parts(out, opt, type, NULL, 0, data, len);
}

void
nbdc_opt_error(struct buf *out, uint32_t opt, uint32_t type, const char *msg)
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
  case NBD_INFO_EXPORT:
    put64(tmp + 2, s->size);
    put16(tmp + 10, nbdc_tflags(c));
    opt_reply(out, opt, NBD_REP_INFO, tmp, 12);
    break;
  case NBD_INFO_NAME:
  case NBD_INFO_DESCRIPTION: {
    const char *str = type == NBD_INFO_NAME ? s->export_name : s->description;
    opt_reply_parts(out, opt, NBD_REP_INFO, tmp, 2, str, (uint32_t)strlen(str));
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
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID, "option too short");
    return;
  }
  uint32_t nlen = get32(d);
  if (nlen > len - 6) {
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID, "bad export name length");
    return;
  }
  if (nlen > NBD_MAX_STRING) { /* as nbdkit: the spec's string limit */
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID,
                   "export name longer than 4096 bytes");
    return;
  }
  uint16_t nreq = get16(d + 4 + nlen);
  if ((uint64_t)4 + nlen + 2 + 2u * nreq != len) {
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID,
                   "bad information request count");
    return;
  }
  if (!name_ok(c, d + 4, nlen)) {
    nbdc_opt_error(out, opt, NBD_REP_ERR_UNKNOWN, "no such export");
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
  uint8_t head[4];
  put32(head, id);
  opt_reply_parts(out, opt, NBD_REP_META_CONTEXT, head, 4, name,
                  (uint32_t)strlen(name));
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
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID,
                   "structured replies not negotiated");
    return;
  }
  if (len < 8 || get32(d) > len - 8) {
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID, "bad export name length");
    return;
  }
  uint32_t nlen = get32(d);
  if (nlen > NBD_MAX_STRING) {
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID,
                   "export name longer than 4096 bytes");
    return;
  }
  if (!name_ok(c, d + 4, nlen)) {
    nbdc_opt_error(out, opt, NBD_REP_ERR_UNKNOWN, "no such export");
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
      nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID, "bad query length");
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
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID, "trailing bytes in option");
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
    nbdc_opt_error(out, opt, NBD_REP_ERR_UNSUP,
                   "TLS is not enabled (--tls=off)");
    return;
  }
  if (len != 0) {
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID,
                   "NBD_OPT_STARTTLS takes no data");
    return;
  }
  if (c->tls) {
    nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID, "TLS already negotiated");
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
      nbdc_opt_error(out, opt, NBD_REP_ERR_TLS_REQD,
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
      nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID,
                     "NBD_OPT_LIST takes no data");
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
      nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID, "option takes no data");
      return;
    }
    if (c->structured) {
      nbdc_opt_error(out, opt, NBD_REP_ERR_INVALID, "already negotiated");
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
    nbdc_opt_error(out, opt, NBD_REP_ERR_UNSUP, "option not supported");
    return;
  }
}

size_t
nbdc_handshake_step(struct nbdc *c, const uint8_t *in, size_t len,
                    struct buf *out, size_t *need)
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
