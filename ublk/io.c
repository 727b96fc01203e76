/* znbd-ublk's request handler: one ublk request on the device through
 * the request contract (io.h).  Sources: include/uapi/linux/ublk_cmd.h
 * (the descriptor, ops and flags), drivers/block/ublk_drv.c (what the
 * kernel sends and how it completes a result), drivers/block/null_blk
 * (the status of each zone error, which the core's errno already is). */
#include <errno.h>
#include <linux/blkzoned.h>
#include <string.h>

#include "io.h"

#define SECTOR 512u

void
znbd_ublk_io_init(struct znbd_ublk_io *h, struct znbd_dev *d, void *buf,
                  size_t buf_len)
{
  h->dev = d;
  znbd_req_ctx_init(&h->rq, d);
  /* A held zone may be this queue's own, whose write only this thread
   * can end: EBUSY, and the runner tries again (ZNBD_UBLK_RETRY). */
  znbd_req_ctx_busy_ok(&h->rq);
  h->buf = buf;
  h->buf_len = buf_len;
  h->redo_writes = false;
  h->redone = h->redone_appends = 0;
  h->zero_copy = false;
}

/* The result for a core call that failed with ERR.  The core's errno is
 * already the one null_blk gives (znbd/dev.h); errno_to_blk_status()
 * in the kernel knows these.  EAGAIN (a write ahead of the wp with
 * NOWAIT) and ESHUTDOWN (fenced by a power cut) are I/O errors: EAGAIN
 * would be BLK_STS_AGAIN, which the block layer retries or hands to a
 * NOWAIT submitter, not the write error null_blk gives. */
int32_t
znbd_ublk_errno_result(int err)
{
  switch (err) {
  case EBUSY:
    return ZNBD_UBLK_RETRY;
  case EIO:
  case EINVAL:
  case ENOMEM:
  case ENOSPC:
  case ETOOMANYREFS:
  case EOVERFLOW:
    return -err;
  default:
    return -EIO;
  }
}

static inline int32_t
fail(int err)
{
  return znbd_ublk_errno_result(err);
}

/* Whether [OFF, OFF + LEN) (bytes) lies inside the device and LEN fits
 * H's buffer (DATA: the request moves data). */
static bool
in_range(const struct znbd_ublk_io *h, uint64_t off, uint64_t len, bool data)
{
  uint64_t size = znbd_dev_size(h->dev);
  if (off > size || len > size - off)
    return false;
  return !data || len <= h->buf_len;
}

/* One zone as a struct blk_zone of <linux/blkzoned.h>, sectors.
 * Conventional (and READONLY, OFFLINE) zones have no wp in the core;
 * they report start + len, as null_blk's null_init_zoned_dev() sets a
 * conventional zone's wp and null_report_zones() reports it.  A
 * conventional zone's capacity is its length: blk_revalidate_disk_zones()
 * refuses anything else. */
static void
to_blk_zone(const struct znbd_zone_info *z, struct blk_zone *b)
{
  memset(b, 0, sizeof *b);
  b->start = z->start / SECTOR;
  b->len = z->len / SECTOR;
  b->capacity =
      z->type == ZNBD_ZONE_TYPE_CONVENTIONAL ? b->len : z->capacity / SECTOR;
  b->wp = z->wp == ZNBD_WP_INVALID ? b->start + b->len : z->wp / SECTOR;
  b->type = (uint8_t)z->type;
  b->cond = (uint8_t)z->cond;
}

static int32_t
report_zones(struct znbd_ublk_io *h, const struct znbd_ublksrv_io_desc *iod,
             const struct znbd_ublk_copy *copy)
{
  uint32_t nr = znbd_dev_nr_zones(h->dev);
  uint64_t off = iod->start_sector * SECTOR;
  uint64_t bytes = (uint64_t)iod->nr_sectors * sizeof(struct blk_zone);
  if (!nr)
    return -EOPNOTSUPP;
  if (off >= znbd_dev_size(h->dev) || bytes == 0 || bytes > h->buf_len)
    return -EINVAL;
  /* The zones after the last one read as zero-length entries: the end of
   * the report (ublk_report_zones()). */
  memset(h->buf, 0, bytes);
  struct blk_zone *out = h->buf;
  uint32_t first = znbd_dev_zone_index(h->dev, off);
  uint32_t want = iod->nr_sectors, done = 0;
  while (done < want) {
    struct znbd_zone_info z[64];
    uint32_t n = want - done < 64 ? want - done : 64;
    uint32_t got = znbd_dev_report(h->dev, first + done, n, z);
    for (uint32_t i = 0; i < got; i++)
      to_blk_zone(&z[i], &out[done + i]);
    done += got;
    if (got < n)
      break;
  }
  int r = copy->copy_out(copy->opaque, h->buf, bytes, 0);
  return r < 0 ? r : (int32_t)bytes;
}

/* A WRITE's struct znbd_write_source (fill) and a READ's struct
 * znbd_read_sink (drain): the data copied between the request's buffer
 * and where the store keeps it; a failed copy kept (as a negative errno)
 * to be the request's result. */
struct fill_ctx {
  const struct znbd_ublk_copy *copy;
  int err;
};

/* A copy's result R (0 or a negative errno) as the core wants it. */
static int
kept(struct fill_ctx *fc, int r)
{
  if (r < 0) {
    fc->err = r;
    errno = -r;
    return -1;
  }
  return 0;
}

static int
fill(void *opaque, void *dst, uint64_t len)
{
  struct fill_ctx *fc = opaque;
  return kept(fc, fc->copy->copy_in(fc->copy->opaque, dst, (size_t)len, 0));
}

static int
drain(void *opaque, const void *src, uint64_t len, uint64_t at)
{
  struct fill_ctx *fc = opaque;
  return kept(fc, fc->copy->copy_out(fc->copy->opaque, src, (size_t)len, at));
}

/* The core's operation for a ublk zone operation. */
static const enum znbd_zone_op zone_ops[] = {
    [ZNBD_UBLK_IO_OP_ZONE_OPEN] = ZNBD_ZONE_OP_OPEN,
    [ZNBD_UBLK_IO_OP_ZONE_CLOSE] = ZNBD_ZONE_OP_CLOSE,
    [ZNBD_UBLK_IO_OP_ZONE_FINISH] = ZNBD_ZONE_OP_FINISH,
    [ZNBD_UBLK_IO_OP_ZONE_RESET] = ZNBD_ZONE_OP_RESET,
};

/* OPEN, CLOSE, FINISH or RESET of the zone holding byte OFF.  A zone
 * management request carries the zone's start sector (blk_rq_pos()). */
static int32_t
zone_op(struct znbd_ublk_io *h, uint8_t op, uint64_t off)
{
  if (!znbd_dev_nr_zones(h->dev) || off >= znbd_dev_size(h->dev))
    return -EINVAL;
  if (znbd_req_zone_op(&h->rq, zone_ops[op], znbd_dev_zone_index(h->dev, off)) <
      0)
    return fail(errno);
  return 0;
}

/* A ZONE_APPEND of LEN bytes to the zone starting at OFF (bytes), its
 * data in H->buf, intent noted in SLOT: a recovered server first looks
 * for the append among the dead server's kept records (znbd/redo.h); a
 * match was stored already and takes no space again.  Else the append
 * is the runner's to write (A set, when A) or done here.  *WRITTEN gets
 * the byte offset of the data.  Returns 0 or the result to commit. */
static int32_t
append(struct znbd_ublk_io *h, uint64_t len, uint64_t off, uint32_t slot,
       unsigned fua, const struct znbd_ublk_copy *copy, bool zc,
       struct znbd_ublk_async *a, uint64_t *written)
{
  int r = 0;
  /* Its data, from the kernel into the buffer: the redo of a recovered
   * server compares it, and the store takes it from there; with zero
   * copy the runner writes it from the request's own pages. */
  bool have = false, redo = h->redo_writes && znbd_dev_redo_kept(h->dev);
  if (!zc || redo) {
    if ((r = copy->copy_in(copy->opaque, h->buf, len, 0)) < 0)
      return r;
    have = true;
  }
  if (redo &&
      (r = znbd_dev_redo_append(h->dev, h->buf, len, off, slot, written)) < 0)
    return fail(errno);
  if (r == 1) {
    h->redone_appends++;
  } else if (a && (r = znbd_req_append_begin(&h->rq, len, off, slot, !zc,
                                             &a->w)) != ZNBD_ASYNC_SYNC) {
    /* The runner writes the data where the core put the append. */
    if (r < 0)
      return fail(errno);
    a->kind = ZNBD_UBLK_ASYNC_WRITE;
    a->dsync = fua != 0;
    a->zc = zc;
    a->len = len;
    *written = a->w.off;
    return 0;
  } else {
    if (!have && (r = copy->copy_in(copy->opaque, h->buf, len, 0)) < 0)
      return r;
    if (znbd_req_append_noted(&h->rq, h->buf, len, off, slot, written) < 0)
      return fail(errno);
  }
  if (fua && znbd_req_sync(&h->rq, len, *written) < 0)
    return fail(errno);
  return 0;
}

/* A WRITE of LEN bytes at OFF whose file write the runner does (A), its
 * data read from the kernel into H->buf once the rules took it.  Returns
 * 0 (A set), ZNBD_ASYNC_SYNC (the synchronous path's), or the result to
 * commit. */
static int32_t
write_async(struct znbd_ublk_io *h, uint64_t len, uint64_t off, unsigned fua,
            const struct znbd_ublk_copy *copy, bool zc,
            struct znbd_ublk_async *a)
{
  int r = znbd_req_write_begin(&h->rq, len, off, ZNBD_WRITE_NOWAIT | fua, !zc,
                               &a->w);
  if (r == ZNBD_ASYNC_SYNC)
    return r;
  if (r < 0)
    return fail(errno);
  a->zc = zc; /* zero copy: the runner writes from the request's pages */
  if (!zc && (r = copy->copy_in(copy->opaque, h->buf, len, 0)) < 0) {
    znbd_req_write_end(&h->rq, &a->w, EIO);
    return r;
  }
  a->kind = ZNBD_UBLK_ASYNC_WRITE;
  a->dsync = fua != 0;
  a->len = len;
  return 0;
}

int32_t
znbd_ublk_io_finish(struct znbd_ublk_io *h, struct znbd_ublk_async *a, int err,
                    const struct znbd_ublk_copy *copy)
{
  enum znbd_ublk_async_kind kind = a->kind;
  uint8_t *buf = h->buf;
  int r;
  a->kind = ZNBD_UBLK_ASYNC_NONE;
  switch (kind) {
  case ZNBD_UBLK_ASYNC_WRITE:
    return znbd_req_write_end(&h->rq, &a->w, err) < 0 ? fail(errno)
                                                      : (int32_t)a->len;
  case ZNBD_UBLK_ASYNC_READ: {
    if (err)
      return -EIO;
    uint64_t at = a->r.io.len;
    for (unsigned i = 0; i < 2; i++) {
      /* Zero copy: the file's bytes are in the request's pages, the fill
       * goes there alone. */
      uint8_t *fill = a->zc ? buf : buf + at;
      memset(fill, a->r.fill[i], a->r.fill_len[i]);
      if (a->zc && a->r.fill_len[i] &&
          (r = copy->copy_out(copy->opaque, fill, a->r.fill_len[i], at)) < 0)
        return r;
      at += a->r.fill_len[i];
    }
    if (!a->zc && (r = copy->copy_out(copy->opaque, buf, a->len, 0)) < 0)
      return r;
    return (int32_t)a->len;
  }
  case ZNBD_UBLK_ASYNC_FLUSH:
    return znbd_req_flush_end(&h->rq, &a->f, err) < 0 ? fail(errno) : 0;
  case ZNBD_UBLK_ASYNC_NONE:
    break;
  }
  return -EINVAL;
}

/* One request as znbd_ublk_io_exec() decodes its descriptor: its op,
 * start and length, the flags (UBLK_IO_F_*), the FUA write flag,
 * whether its data moves with zero copy, its intent-record slot, and
 * what the runner takes over (A: NULL when the device's requests are
 * not the runner's) and commits (DONE). */
struct ublk_req {
  uint8_t op;
  uint32_t flags;
  uint64_t sector, off, len; /* start_sector, and in bytes */
  unsigned fua;
  bool zc;
  uint32_t slot;
  const struct znbd_ublk_copy *copy;
  struct znbd_ublk_async *a;
  struct znbd_ublk_done *done;
};

static int32_t
exec_read(struct znbd_ublk_io *h, const struct ublk_req *q)
{
  /* RAM's bytes go to the kernel's request in place (one copy). */
  struct fill_ctx fc = {q->copy, 0};
  struct znbd_read_sink sink = {drain, &fc, h->buf};
  struct znbd_ublk_async *a = q->a;
  int r;
  if (!in_range(h, q->off, q->len, true))
    return -EINVAL;
  q->done->delay_nsec = znbd_req_delay(&h->rq, ZNBD_IO_READ, q->len, 0);
  /* dir=: the runner reads the file into the buffer (znbd/async.h). */
  if (a && (r = znbd_req_read_begin(&h->rq, q->len, q->off, !q->zc, &a->r)) !=
               ZNBD_ASYNC_SYNC) {
    if (r < 0)
      return fail(errno);
    a->kind = ZNBD_UBLK_ASYNC_READ;
    a->zc = q->zc;
    a->len = q->len;
    return 0;
  }
  if (znbd_req_read(&h->rq, &sink, q->len, q->off, ZNBD_READ_SINK) < 0)
    return fc.err ? fc.err : fail(errno);
  return (int32_t)q->len;
}

static int32_t
exec_write(struct znbd_ublk_io *h, const struct ublk_req *q)
{
  /* The data goes from the kernel's request to the store in one copy,
   * once the zone rules took the write (ZNBD_WRITE_SOURCE). */
  const struct znbd_ublk_copy *copy = q->copy;
  struct fill_ctx fc = {copy, 0};
  struct znbd_write_source src = {fill, &fc, h->buf};
  uint64_t len = q->len, off = q->off;
  int r;
  if (!in_range(h, off, len, true))
    return -EINVAL;
  q->done->delay_nsec = znbd_req_delay(&h->rq, ZNBD_IO_WRITE, len, 0);
  if (q->a) {
    r = write_async(h, len, off, q->fua, copy, q->zc, q->a);
    /* A recovered server's refused write may be the redo of one the
     * dead server did: the synchronous path below refuses it again and
     * checks. */
    if (r != ZNBD_ASYNC_SYNC && !(r == -EIO && h->redo_writes))
      return r;
  }
  if (znbd_req_write(&h->rq, &src, len, off,
                     ZNBD_WRITE_SOURCE | ZNBD_WRITE_NOWAIT | q->fua, NULL,
                     NULL) < 0) {
    int e = errno;
    if (fc.err) /* the copy failed, not the rules */
      return fc.err;
    if (!h->redo_writes ||
        (r = copy->copy_in(copy->opaque, h->buf, len, 0)) < 0)
      return fail(e);
    if ((r = znbd_dev_redo_write(h->dev, h->buf, len, off)) != 1 ||
        (q->fua && znbd_req_sync(&h->rq, len, off) < 0))
      return fail(r < 0 ? errno : e);
    h->redone++;
  }
  return (int32_t)len;
}

static int32_t
exec_write_zeroes(struct znbd_ublk_io *h, const struct ublk_req *q)
{
  if (!in_range(h, q->off, q->len, false))
    return -EINVAL;
  unsigned keep = q->flags & ZNBD_UBLK_IO_F_NOUNMAP ? ZNBD_WRITE_ALLOCATE : 0;
  q->done->delay_nsec = znbd_req_delay(&h->rq, ZNBD_IO_WRITE, q->len, 0);
  if (znbd_req_write(&h->rq, NULL, q->len, q->off,
                     ZNBD_WRITE_NOWAIT | keep | q->fua, NULL, NULL) < 0)
    return fail(errno);
  return 0;
}

static int32_t
exec_flush(struct znbd_ublk_io *h, const struct ublk_req *q)
{
  q->done->delay_nsec = znbd_req_delay(&h->rq, ZNBD_IO_FLUSH, 0, 0);
  if (q->a) { /* the runner syncs the files */
    if (znbd_req_flush_begin(&h->rq, &q->a->f) < 0)
      return fail(errno);
    q->a->kind = ZNBD_UBLK_ASYNC_FLUSH;
    return 0;
  }
  return znbd_req_flush(&h->rq) < 0 ? fail(errno) : 0;
}

static int32_t
exec_discard(struct znbd_ublk_io *h, const struct ublk_req *q)
{
  if (!in_range(h, q->off, q->len, false))
    return -EINVAL;
  q->done->delay_nsec = znbd_req_delay(&h->rq, ZNBD_IO_TRIM, q->len, 0);
  return znbd_req_trim(&h->rq, q->len, q->off, 0) < 0 ? fail(errno) : 0;
}

/* OPEN, CLOSE, FINISH, RESET of one zone, or RESET_ALL. */
static int32_t
exec_zone_mgmt(struct znbd_ublk_io *h, const struct ublk_req *q)
{
  struct znbd_zone_all res;
  if (q->op != ZNBD_UBLK_IO_OP_ZONE_RESET_ALL) {
    q->done->delay_nsec =
        znbd_req_delay(&h->rq, ZNBD_IO_ZONE_MGMT, 0, zone_ops[q->op]);
    return zone_op(h, q->op, q->off);
  }
  if (!znbd_dev_nr_zones(h->dev))
    return -EINVAL;
  q->done->delay_nsec =
      znbd_req_delay(&h->rq, ZNBD_IO_ZONE_MGMT, 0, ZNBD_ZONE_OP_RESET);
  if (znbd_req_zone_op_all(&h->rq, ZNBD_ZONE_OP_RESET, &res) < 0)
    return fail(errno);
  return 0;
}

static int32_t
exec_append(struct znbd_ublk_io *h, const struct ublk_req *q)
{
  uint64_t written;
  int r;
  /* A failed append's completion carries its zone's start: the kernel
   * sets the request's sector from the commit whatever the result
   * (ublk_drv.c), and logs the error there. */
  q->done->append_lba = q->sector;
  if (!znbd_dev_nr_zones(h->dev) || !in_range(h, q->off, q->len, true))
    return -EINVAL;
  q->done->delay_nsec = znbd_req_delay(&h->rq, ZNBD_IO_WRITE, q->len, 0);
  if ((r = append(h, q->len, q->off, q->slot, q->fua, q->copy, q->zc, q->a,
                  &written)) < 0)
    return r;
  q->done->append_lba = written / SECTOR;
  return q->a && q->a->kind != ZNBD_UBLK_ASYNC_NONE ? 0 : (int32_t)q->len;
}

int32_t
znbd_ublk_io_exec(struct znbd_ublk_io *h,
                  const struct znbd_ublksrv_io_desc *iod, uint32_t slot,
                  const struct znbd_ublk_copy *copy, struct znbd_ublk_async *a,
                  struct znbd_ublk_done *done)
{
  uint32_t flags = iod->op_flags >> 8 << 8;
  struct ublk_req q = {
      .op = iod->op_flags & 0xff,
      .flags = flags,
      .sector = iod->start_sector,
      .off = iod->start_sector * SECTOR,
      .len = (uint64_t)iod->nr_sectors * SECTOR,
      .fua = flags & ZNBD_UBLK_IO_F_FUA ? ZNBD_WRITE_FUA : 0,
      /* Zero copy, unless the kernel could not register this request's
       * pages (UBLK_AUTO_BUF_REG_FALLBACK): then user copy, as without. */
      .zc = h->zero_copy && !(flags & ZNBD_UBLK_IO_F_NEED_REG_BUF),
      .slot = slot,
      .copy = copy,
      .a = a && znbd_dev_async(h->dev) ? a : NULL,
      .done = done,
  };

  done->append_lba = 0;
  done->delay_nsec = 0;
  if (a) {
    a->kind = ZNBD_UBLK_ASYNC_NONE;
    a->zc = false;
  }
  /* After a power cut the queue's requests change nothing (the contract's
   * fence) and reads, which the fence does not cover, fail too: the
   * device this queue served is gone, as znbd-tcmu's NOT READY. */
  if (znbd_req_cut(&h->rq))
    return -EIO;
  /* One function per kind of request, as null_blk's
   * null_process_zoned_cmd() hands each to its own. */
  switch (q.op) {
  case ZNBD_UBLK_IO_OP_READ:
    return exec_read(h, &q);
  case ZNBD_UBLK_IO_OP_WRITE:
    return exec_write(h, &q);
  case ZNBD_UBLK_IO_OP_WRITE_ZEROES:
    return exec_write_zeroes(h, &q);
  case ZNBD_UBLK_IO_OP_FLUSH:
    return exec_flush(h, &q);
  case ZNBD_UBLK_IO_OP_DISCARD:
    return exec_discard(h, &q);
  case ZNBD_UBLK_IO_OP_ZONE_OPEN:
  case ZNBD_UBLK_IO_OP_ZONE_CLOSE:
  case ZNBD_UBLK_IO_OP_ZONE_FINISH:
  case ZNBD_UBLK_IO_OP_ZONE_RESET:
  case ZNBD_UBLK_IO_OP_ZONE_RESET_ALL:
    return exec_zone_mgmt(h, &q);
  case ZNBD_UBLK_IO_OP_ZONE_APPEND:
    return exec_append(h, &q);
  case ZNBD_UBLK_IO_OP_REPORT_ZONES:
    return report_zones(h, iod, copy);
  default:
    return -EOPNOTSUPP;
  }
}
