/* znbd-ublk: the handler of one ublk request (a struct ublksrv_io_desc
 * of include/uapi/linux/ublk_cmd.h) on a znbd device, through the
 * request contract (znbd/request.h) and the device's reads and zone
 * reports (znbd/dev.h).  No ring and no system call of its own: the
 * request's data moves through the copy callbacks (the runner's pread
 * and pwrite on /dev/ublkcN, a test's memory), so a host unit test
 * drives it (tests/unit/ublk_test.c).
 *
 * Results are those the ublk server commits: the bytes done (READ,
 * WRITE, ZONE_APPEND, REPORT_ZONES: the kernel completes the rest of a
 * shorter READ or WRITE again, ublk_drv.c's __ublk_complete_rq) or 0,
 * or a negative errno, which ublk_drv.c turns into a block status with
 * errno_to_blk_status(): -EIO (BLK_STS_IOERR), -ETOOMANYREFS
 * (BLK_STS_ZONE_OPEN_RESOURCE), -EOVERFLOW (BLK_STS_ZONE_ACTIVE_RESOURCE),
 * -EINVAL, -ENOMEM, -ENOSPC, -EOPNOTSUPP.  Those are the statuses
 * null_blk's null_process_zoned_cmd() gives for the same conditions
 * (drivers/block/null_blk/zoned.c): the zone rules themselves are the
 * core's, never repeated here.
 */
#ifndef ZNBD_UBLK_IO_H
#define ZNBD_UBLK_IO_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uapi.h"
#include "znbd/async.h"
#include "znbd/dev.h"
#include "znbd/redo.h"
#include "znbd/request.h"

/* Moving a request's data: COPY_IN reads LEN bytes of the request's
 * buffer from byte OFF into BUF (a WRITE's or an append's data);
 * COPY_OUT writes LEN bytes from BUF at byte OFF of the request's buffer
 * (a READ's data, a zone report).  Both return 0, or a negative errno
 * (the request fails with it). */
struct znbd_ublk_copy {
  int (*copy_in)(void *opaque, void *buf, size_t len, uint64_t off);
  int (*copy_out)(void *opaque, const void *buf, size_t len, uint64_t off);
  void *opaque;
};

/* One ublk queue's view of a device: its request context (one per
 * queue, fenced when the queue started), and a bounce buffer of BUF_LEN
 * bytes, the device's max_io_buf_bytes: no request is larger (the
 * kernel's max_sectors is set from it). */
struct znbd_ublk_io {
  struct znbd_dev *dev;
  struct znbd_req_ctx rq;
  void *buf;
  size_t buf_len;
  /* Set by a server that recovered the device (--recover): a WRITE or
   * ZONE_APPEND that the dead server did but never committed, reissued
   * by the kernel (UBLK_F_USER_RECOVERY_REISSUE), is taken as done
   * without being done twice (znbd_ublk_io_exec(), znbd/redo.h). */
  bool redo_writes;
  uint64_t redone, redone_appends; /* requests so taken as done */
  /* The device was added with UBLK_F_AUTO_BUF_REG: a request's pages are
   * registered for the runner's fixed-buffer I/O (znbd_ublk_async's
   * zc), unless its descriptor says UBLK_IO_F_NEED_REG_BUF. */
  bool zero_copy;
};

/* Set H up for a queue starting now on D, with BUF (BUF_LEN bytes, kept,
 * not copied), redo_writes false, the counts 0.  Never fails. */
void znbd_ublk_io_init(struct znbd_ublk_io *h, struct znbd_dev *d, void *buf,
                       size_t buf_len);

/* A request whose file I/O the runner does on its ring (a dir= device
 * without write_cache, znbd/async.h): znbd_ublk_io_exec() sets KIND and
 * what the I/O is, the runner does it, then znbd_ublk_io_finish() ends
 * the request.  Data sits in the ublk_io's BUF (the tag's own buffer:
 * it must stay the request's until the finish). */
enum znbd_ublk_async_kind {
  ZNBD_UBLK_ASYNC_NONE,  /* done: exec's result stands */
  ZNBD_UBLK_ASYNC_READ,  /* R.io.len bytes of R.io into BUF */
  ZNBD_UBLK_ASYNC_WRITE, /* W.io.len bytes from BUF to W.io (DSYNC: with
                          * RWF_DSYNC, a FUA write) */
  ZNBD_UBLK_ASYNC_FLUSH, /* fdatasync of each of F's files */
};
struct znbd_ublk_async {
  enum znbd_ublk_async_kind kind;
  bool dsync;
  /* Zero copy: READ_FIXED and WRITE_FIXED on the request's own pages,
   * which the kernel registered at the tag's index (UBLK_F_AUTO_BUF_REG);
   * BUF is not used but for a READ's fill. */
  bool zc;
  uint64_t len; /* the request's bytes */
  struct znbd_async_write w;
  struct znbd_async_read r;
  struct znbd_async_flush f;
};

/* exec's result for a request that met a zone held by another
 * asynchronous write (EBUSY): nothing was done, nothing is committed;
 * the runner executes it again once a write ended. */
#define ZNBD_UBLK_RETRY (-EBUSY)

/* What a request gives back besides its result. */
struct znbd_ublk_done {
  /* A ZONE_APPEND's sector written (512-byte sectors), for the commit's
   * zone_append_lba; a failed append's, its zone's start sector (the
   * kernel logs the error at the commit's sector); 0 for every other
   * request. */
  uint64_t append_lba;
  /* The injected delay before the commit, ns (znbd_req_delay():
   * completion_nsec, mbps, zone operation latencies). */
  uint64_t delay_nsec;
};

/* The request's result for a core call that failed with errno ERR (a
 * zone rule's refusal included: its reason, znbd/refusal.h, gives its
 * errno): a negative errno the kernel's errno_to_blk_status() knows, as
 * null_blk gives (EIO, EINVAL, ENOMEM, ENOSPC, ETOOMANYREFS, EOVERFLOW;
 * anything else -EIO), or ZNBD_UBLK_RETRY for EBUSY. */
int32_t znbd_ublk_errno_result(int err);

/* Execute IOD (sectors are 512 bytes whatever the block size, as in
 * ublk_drv.c's ublk_setup_iod) on H, moving data through COPY; SLOT is
 * the request's intent-record slot (its tag's, queue * depth + tag;
 * ZNBD_NO_SLOT: none), where a ZONE_APPEND notes where it goes before
 * its data is stored (znbd_req_append_noted()).
 * READ, WRITE (UBLK_IO_F_FUA: the range is durable before it returns,
 * ZNBD_WRITE_FUA), FLUSH, DISCARD (znbd_req_trim: on a zoned device
 * whole sequential zones are reset, as an NBD TRIM), WRITE_ZEROES
 * (UBLK_IO_F_NOUNMAP keeps the range allocated on a plain device),
 * ZONE_OPEN/CLOSE/FINISH/RESET of the zone holding start_sector,
 * ZONE_RESET_ALL (znbd_req_zone_op_all), ZONE_APPEND at the wp of the
 * zone starting at start_sector, REPORT_ZONES of nr_zones zones from the
 * zone starting at start_sector (struct blk_zone entries, a zero-length
 * entry after the last zone; the result is the whole nr_zones * 64
 * bytes, as ublk_drv.c's ublk_report_zones() reads them).  Writes never
 * wait for a wp (ZNBD_WRITE_NOWAIT): a write ahead of it fails with
 * -EIO, as a write off the wp.  Zone operations and appends on a device
 * without zones, a request past the end, or one larger than the buffer
 * fail with -EINVAL; an unknown op with -EOPNOTSUPP; every request
 * after a power cut (znbd_req_cut()) with -EIO.  With H->redo_writes
 * (znbd/redo.h): a WRITE into a sequential zone that the core refuses,
 * but that ends at the zone's wp (or past it: the dead server was
 * killed while storing it) over bytes equal to its own, is taken as
 * done (its bytes and FUA; the missing part written): the redo of a
 * write a killed server did before it could commit it.  Zone write
 * plugging (block/blk-zoned.c) keeps at most one write of a zone in
 * flight, so that write is the zone's last; on a conventional zone or a
 * plain device a redone write just writes again.  A ZONE_APPEND that
 * matches one of the dead server's kept intent records
 * (znbd_dev_redo_append()) is answered with the record's sector and
 * takes no space again.  Returns the result to commit (bytes or 0, or a
 * negative errno) and fills DONE.  With A (NULL: all synchronous) on a
 * device that takes asynchronous requests (znbd_dev_async()), a READ,
 * WRITE, ZONE_APPEND or FLUSH may instead leave its file I/O to the
 * runner: A->kind says so, and the result is then
 * znbd_ublk_io_finish()'s.  ZNBD_UBLK_RETRY: the request met a held
 * zone (EBUSY) and did nothing. */
int32_t znbd_ublk_io_exec(struct znbd_ublk_io *h,
                          const struct znbd_ublksrv_io_desc *iod, uint32_t slot,
                          const struct znbd_ublk_copy *copy,
                          struct znbd_ublk_async *a,
                          struct znbd_ublk_done *done);

/* End request A of H (A->kind not NONE) whose file I/O ended with ERR
 * (0: every byte moved; a READ's bytes past a short read zero-filled by
 * the runner; else an errno): a WRITE or ZONE_APPEND is ended in the
 * core (znbd_req_write_end: its wp moves, or a failed one leaves the
 * zone as null_blk does), a READ's fill bytes are added and the whole
 * read copied out, a FLUSH ended.  Returns the result to commit (bytes or
 * 0, or a negative errno); A->kind is NONE after. */
int32_t znbd_ublk_io_finish(struct znbd_ublk_io *h, struct znbd_ublk_async *a,
                            int err, const struct znbd_ublk_copy *copy);

#endif
