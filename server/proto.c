/* znbd server: the NBD transmission phase on buffers (see proto.h):
 * nbdc_feed() splits the received bytes into handshake messages (for
 * handshake.c) and requests, validates each request and hands it to the
 * caller's submit function, and builds error replies, simple or as
 * structured ERROR chunks (doc/proto.md of the NBD project,
 * "Transmission phase").  No I/O, no execution (exec.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "handshake.h"
#include "proto.h"
#include "reply.h"
#include "wire.h"

/* ---- replies ---- */

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
    nbd_simple_reply(out, r->cookie, err);
    return;
  }
  uint16_t n = msg ? (uint16_t)strnlen(msg, 200) : 0;
  uint8_t *p = nbd_chunk(out, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR,
                         r->cookie, 6u + n);
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

void
nbd_reply_errno(const struct nbdc *c, const struct nbd_req *r, int e,
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
    nbdc_opt_error(out, c->after_opt, NBD_REP_ERR_TOO_BIG, "option too large");
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
      size_t n = nbdc_handshake_step(c, in + pos, len - pos, out, need);
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
