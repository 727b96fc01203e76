/* znbd server: execution of NBD requests against lib/'s device — READ
 * (with holes and zero-copy data), WRITE, WRITE_ZEROES, TRIM, FLUSH,
 * CACHE and BLOCK_STATUS with the base:allocation and x-znbd:zone
 * contexts (include/znbd/zonectx.h) — appending each complete reply to a
 * buffer (doc/proto.md of the NBD project).  No I/O.
 */
#include <errno.h>
#include <string.h>

#include "znbd/zonectx.h"
#include "exec.h"
#include "reply.h"
#include "wire.h"

/* Descriptors in one BLOCK_STATUS chunk (doc/proto.md: SHOULD NOT send
 * more than 2^20). */
#define BS_MAX_DESC (64u * 1024)

static void
reply_ok(const struct nbdc *c, const struct nbd_req *r, struct buf *out)
{
  nbd_simple_reply(out, r->cookie, 0);
}

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
static int
read_ref(const struct nbdc *c, uint64_t off, uint32_t len, unsigned xflags,
         const struct ref_sink *rs, const void **ref)
{
  *ref = NULL;
  if (!(xflags & EXEC_REF) || !rs->add_ref || len < REF_MIN)
    return 0;
  return znbd_req_read(&c->rq, ref, len, off, ZNBD_READ_REF);
}

static int
read_data_chunk(const struct nbdc *c, const struct nbd_req *r, uint64_t off,
                uint32_t len, struct buf *out, size_t *last, unsigned xflags,
                const struct ref_sink *rs)
{
  *last = out->len;
  const void *ref;
  if (read_ref(c, off, len, xflags, rs, &ref) < 0)
    return -1;
  if (!ref && !buf_try_reserve(out, NBD_CHUNK_HEADER_SIZE + 8 + (size_t)len)) {
    errno = ENOMEM; /* nbd_chunk() below then needs no allocation */
    return -1;
  }
  uint8_t *p = nbd_chunk(out, 0, NBD_REPLY_TYPE_OFFSET_DATA, r->cookie,
                         8 + (ref ? 0 : len));
  put64(p, off);
  if (ref) {
    put32(out->p + *last + 16, 8 + len); /* the chunk's length field */
    buf_commit(out, NBD_CHUNK_HEADER_SIZE + 8);
    rs->add_ref(rs->opaque, ref, len);
    return 0;
  }
  if (znbd_req_read(&c->rq, p + 8, len, off, 0) == -1)
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
      nbd_reply_errno(c, r, ENOMEM, out);
      return;
    }
    if (znbd_req_read(&c->rq, p + NBD_SIMPLE_REPLY_SIZE, r->len, r->off, 0) ==
        -1) {
      nbd_reply_errno(c, r, errno, out);
      return;
    }
    nbd_simple_reply(out, r->cookie, 0);
    buf_commit(out, r->len);
    return;
  }
  size_t last = out->len;
  /* Holes are answered without reading: bad blocks are checked first. */
  if (c->cfg->holes_ok &&
      znbd_req_read(&c->rq, NULL, r->len, r->off, ZNBD_READ_CHECK) == -1) {
    nbd_reply_errno(c, r, errno, out);
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
      uint8_t *p = nbd_chunk(out, 0, NBD_REPLY_TYPE_OFFSET_HOLE, r->cookie, 12);
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
      uint8_t *p = nbd_chunk(out, 0, NBD_REPLY_TYPE_OFFSET_HOLE, r->cookie, 12);
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
fail:
  /* No ref was queued before this: refs are only taken on plain RAM
   * disks, whose reads cannot fail once the range is checked. */
  out->len = start;
  nbd_reply_errno(c, r, errno, out);
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

/* Zone-context extent callback: E's condition, type and past-wp flag in
 * the x-znbd:zone status bits (znbd/zonectx.h). */
static int
zone_add(void *opaque, const struct znbd_zone_extent *e)
{
  uint32_t st =
      (e->cond & ZNBD_ZONECTX_COND_MASK) |
      ((e->type << ZNBD_ZONECTX_TYPE_SHIFT) & ZNBD_ZONECTX_TYPE_MASK) |
      (e->past_wp ? ZNBD_ZONECTX_PAST_WP : 0);
  return bs_add(opaque, e->off, e->len, st);
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
    uint8_t *p = nbd_chunk(out, 0, NBD_REPLY_TYPE_BLOCK_STATUS, r->cookie, 0);
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
      /* A refusal leaves B empty: answered below as plain data. */
      znbd_dev_zone_extents(d, astart, aend - astart, zone_add, &b);
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
    nbd_reply_errno(c, r, errno, out);
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
    nbd_reply_errno(c, r, ESHUTDOWN, out);
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
