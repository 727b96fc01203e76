/* Requests whose store I/O the front-end does itself, asynchronously: the
 * core applies the zone rules and says which bytes of which file to read
 * or write; the front-end moves them (znbd-ublk: io_uring reads and
 * writes on its queue's ring, zero copy where the kernel has it) and
 * tells the core how the I/O ended.  A front-end's thread so never waits
 * for a file system.
 *
 * Only a dir= store without a volatile write cache offers it
 * (znbd_dev_async()): the RAM store's copy is a memcpy, done where the
 * synchronous calls do it, and write_cache=true's undo journal keeps a
 * write's old bytes before the write, in the same hold of the power-cut
 * lock, which an I/O in flight outside the core cannot share.
 *
 * A write or append is taken as null_blk's null_zone_write() takes one
 * before it copies the data with the zone locked (drivers/block/null_blk/
 * zoned.c): the rules are checked, an EMPTY or CLOSED zone becomes
 * IMP_OPEN (closing an implicitly open one for the open limit), and the
 * zone is held, its wp unmoved, until the front-end ends the write:
 * then the wp moves past it (FULL at the capacity).  A write whose store
 * I/O failed (a full or failing file system) leaves the wp where it was
 * and the zone IMP_OPEN, as null_blk leaves a zone whose copy failed;
 * the bytes it stored past the wp are cut off again, and the data below
 * the wp is untouched.  While a zone is held, another write, append or
 * zone management of it fails with EBUSY, changing nothing: the
 * front-end tries again once the held write ended (the synchronous calls
 * of znbd/dev.h and znbd/request.h wait for it themselves).
 *
 * Offsets and lengths are bytes.  Errors are -1 with errno.
 */
#ifndef ZNBD_ASYNC_H
#define ZNBD_ASYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "znbd/dev.h"
#include "znbd/request.h"

/* One run of file bytes: LEN bytes at byte AT of file FD.  DIRECT: FD
 * was opened with O_DIRECT (buffered_io=false), and AT and LEN suit its
 * alignment; the buffer must then be aligned to 4096 bytes. */
struct znbd_file_io {
  int fd;
  uint64_t at, len;
  bool direct;
};

/* The begin calls' result for a request the asynchronous path does not
 * take (a device with bad blocks listed, a range over two files, a
 * device without it): use the synchronous call instead. */
#define ZNBD_ASYNC_SYNC 1

/* Whether D takes asynchronous requests: a dir= store, write_cache=false. */
bool znbd_dev_async(const struct znbd_dev *d);

/* A write or append between its begin and its end. */
struct znbd_async_write {
  struct znbd_file_io io; /* out: where its bytes go */
  uint64_t off;           /* out: the device offset written */
  /* The core's: the zone held, what to undo on failure. */
  uint64_t priv[4];
  void *undo;
};

/* Begin a write of LEN bytes at OFF (FLAGS: ZNBD_WRITE_FUA is the
 * caller's to honour, with a synchronous write such as RWF_DSYNC; other
 * flags: ZNBD_ASYNC_SYNC), whose data the caller writes as W->io says;
 * ALIGNED: its buffer is 4096-byte aligned (O_DIRECT may be used).  The
 * store's blocks are allocated first (a conventional zone's, or the
 * sequential zone's capacity with zone_prealloc), so a full file system
 * refuses the write here.  Returns 0 (W filled: end it with
 * znbd_req_write_end()), ZNBD_ASYNC_SYNC, or -1 with errno, nothing
 * changed: as znbd_req_write() (EINVAL, EIO, ETOOMANYREFS, EOVERFLOW,
 * ENOSPC, ESHUTDOWN), or EBUSY (the zone is held by another write: try
 * again when one ends). */
int znbd_req_write_begin(const struct znbd_req_ctx *c, uint64_t len,
                         uint64_t off, unsigned flags, bool aligned,
                         struct znbd_async_write *w);

/* Begin a zone append of LEN bytes to the zone starting at ZONE_START,
 * as znbd_req_write_begin(); W->off gets its sector (bytes).  Its intent
 * is noted in SLOT as znbd_req_append_noted() notes it (znbd/redo.h),
 * before the caller stores a byte.  Errors as znbd_req_append(), plus
 * EBUSY. */
int znbd_req_append_begin(const struct znbd_req_ctx *c, uint64_t len,
                          uint64_t zone_start, uint32_t slot, bool aligned,
                          struct znbd_async_write *w);

/* End W, whose file write ended with ERR (0: all its bytes written; an
 * errno: it failed, or wrote fewer).  ERR 0: the write is done, its zone's
 * wp moved past it, its file to be synced by the next FLUSH.  Else the
 * zone is left as a failed write leaves it (above).  Returns 0, or -1
 * with errno ENOSPC (ERR ENOSPC or EDQUOT) or EIO. */
int znbd_req_write_end(const struct znbd_req_ctx *c, struct znbd_async_write *w,
                       int err);

/* A read: its first IO.len bytes from the file as IO says (none when
 * IO.len is 0), then FILL_LEN[0] bytes of FILL[0] and FILL_LEN[1] of
 * FILL[1] (a sequential zone past its data: zeros, or 0xff bytes past
 * the wp with zone_read_past_wp=ones), which add up to the read's
 * length.  A file shorter than IO says (a zone reset meanwhile) reads
 * zeros past its end. */
struct znbd_async_read {
  struct znbd_file_io io;
  uint64_t fill_len[2];
  uint8_t fill[2];
};

/* Where the LEN bytes at OFF come from, for a read the caller does (the
 * zone's lock is not held over it: a request overlapping the read may
 * change what it finds, as for any two overlapping requests).  Returns 0
 * (R filled), ZNBD_ASYNC_SYNC, or -1 with errno as znbd_dev_read(): EIO
 * (an OFFLINE zone, zone_read_past_wp=error), EINVAL. */
int znbd_req_read_begin(const struct znbd_req_ctx *c, uint64_t len,
                        uint64_t off, bool aligned, struct znbd_async_read *r);

/* A FLUSH the caller does: fdatasync of each of the N descriptors of FDS,
 * the files written since their last sync or being synced. */
struct znbd_async_flush {
  int *fds;
  uint32_t *zones;
  unsigned n;
};

/* Begin a FLUSH: F gets the files to sync (the caller then syncs each,
 * in any order, at once).  Returns 0, or -1 with errno ENOMEM. */
int znbd_req_flush_begin(const struct znbd_req_ctx *c,
                         struct znbd_async_flush *f);

/* End F, whose syncs ended with ERR (0, or the first errno): ERR 0, every
 * write completed before the begin is on stable storage; else the files
 * stay to be synced by the next FLUSH.  Frees F's arrays.  Returns 0, or
 * -1 with errno EIO. */
int znbd_req_flush_end(const struct znbd_req_ctx *c, struct znbd_async_flush *f,
                       int err);

#endif
