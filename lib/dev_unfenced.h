/* The device's unfenced calls that change data or zones: for callers
 * tied to no connection (tools, tests, and lib/ itself), never for a
 * front-end, which goes through the request contract
 * (include/znbd/request.h) and its power-cut fence.  Each is the fenced
 * call of lib/dev_fenced.h with ZNBD_NO_FENCE.  Offsets and lengths are
 * bytes; errors -1 with errno as said. */
#ifndef ZNBD_DEV_UNFENCED_H
#define ZNBD_DEV_UNFENCED_H

#include <stdint.h>

#include "znbd/dev.h"

/* Write LEN bytes from BUF at OFF; BUF NULL writes zeros without
 * allocating (NBD WRITE_ZEROES).  Sequential zones follow null_blk's write
 * rules; a request spanning zones is all-or-nothing.  With
 * pipeline_zoned_writes a write ahead of the wp is parked until the wp
 * reaches it (at most zone_write_timeout ms; the calling thread waits)
 * unless ZNBD_WRITE_NOWAIT.  A failed write
 * changes no byte, wp, condition or counter.  Errors: EINVAL, EIO (wp,
 * capacity or condition), ETOOMANYREFS (open limit), EOVERFLOW (active
 * limit), EAGAIN (NOWAIT and ahead of wp), ETIMEDOUT is not returned (a
 * timed-out wait is EIO), ENOMEM.  A write touching a bad sector fails
 * with EIO before the zone rules are applied; with badblocks_partial_io
 * the blocks before it are written first, as a write of their own
 * (null_handle_badblocks()). */
int znbd_dev_write(struct znbd_dev *d, const void *buf, uint64_t len,
                   uint64_t off, unsigned flags);

/* Zone append: write LEN bytes at the wp of the zone starting at
 * ZONE_START (both bytes); *WRITTEN gets the byte offset used.  Errors:
 * EINVAL for a device without zones, a ZONE_START that is not a zone
 * start, a zero LEN or one not a multiple of the block size; EIO for a
 * conventional, FULL, READONLY or OFFLINE zone and for a LEN past the
 * room left below the zone capacity, also when it passes the end of the
 * device (Linux null_blk, null_zone_write()); otherwise as a write
 * (ETOOMANYREFS, EOVERFLOW for the open and active limits). */
int znbd_dev_append(struct znbd_dev *d, const void *buf, uint64_t len,
                    uint64_t zone_start, uint64_t *written);

/* NBD TRIM: whole sequential zones covered are reset (the whole device:
 * reset-all), partly covered sequential zones are left alone, conventional
 * ranges and a non-zoned device have their pages freed.  Errors: EINVAL. */
int znbd_dev_trim(struct znbd_dev *d, uint64_t len, uint64_t off);

/* NBD FLUSH: every write completed so far is on stable storage (dir=:
 * fdatasync of the zone files written since the last flush; RAM: nothing
 * to do) and, with write_cache=true, survives a power cut.  Errors: EIO,
 * ESHUTDOWN (an armed power cut happened instead). */
int znbd_dev_flush(struct znbd_dev *d);

/* NBD FUA: [OFF, OFF+LEN) (bytes) is on stable storage (dir=: fdatasync
 * of the files holding it); with write_cache=true its 4 KiB pages in
 * conventional zones, and each sequential zone up to the end of the
 * range, survive a power cut.  Errors: EINVAL (range), EIO. */
int znbd_dev_sync(struct znbd_dev *d, uint64_t len, uint64_t off);

/* Zone management on zone index ZONE (or ZNBD_ALL_ZONES for reset-all),
 * with null_blk's result on every condition.  Errors: EINVAL (not zoned,
 * bad index), EIO (condition), ETOOMANYREFS, EOVERFLOW. */
int znbd_dev_zone_op(struct znbd_dev *d, enum znbd_zone_op op, uint32_t zone);

#endif
