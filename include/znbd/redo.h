/* Redo after a crash: how a server that takes over a device whose server
 * died (znbd-ublk --recover) answers the requests the kernel sends again.
 *
 * Linux's ublk driver with UBLK_F_USER_RECOVERY_REISSUE hands every
 * request the dead server had fetched to the new one
 * (drivers/block/ublk_drv.c, ublk_ch_release_work_fn() and
 * __ublk_abort_rq()); it cannot tell which of them the dead server had
 * already executed.  Run again, a write to a sequential zone is refused
 * (the wp moved past it) and a zone append lands a second time at the new
 * wp, taking the zone's space twice: a file system that counts its zones'
 * space itself (zoned btrfs, XFS zoned) then runs an append past the zone
 * capacity.  These calls let a server take such a request as done:
 *   - a write is recognised by position (zone write plugging,
 *     block/blk-zoned.c, keeps one write of a zone in flight, so a redone
 *     write is the zone's last: it ends at the wp, or straddles it when
 *     the dead server was killed in the middle of storing it);
 *   - an append is recognised by an intent record: before an append's
 *     data reaches the store, the server notes (zone, sector, length) in
 *     a slot of its own (a ublk tag), in a file of the dir= store mapped
 *     shared, which outlives the process; the note goes in the same
 *     system call that hands the append's completion to the kernel (ublk:
 *     an io_uring read of /dev/zero into the note, right behind the
 *     commit), so a killed server leaves a note exactly for the appends
 *     the kernel will send again.  A recovering server keeps the notes it
 *     finds whose appends were stored whole (one the kill cut short is
 *     cut off, to run again), and a reissued append of the same zone and
 *     length whose bytes are those stored at a kept note's sector is
 *     answered with that sector.
 * Only a dir= store outlives its server; a RAM store's data dies with it.
 * Offsets and lengths are bytes.  Safe from many threads at once.
 */
#ifndef ZNBD_REDO_H
#define ZNBD_REDO_H

#include <stdbool.h>
#include <stdint.h>

#include "znbd/dev.h"
#include "znbd/request.h"

/* No intent record: an append of a request that has no slot. */
#define ZNBD_NO_SLOT UINT32_MAX

/* Keep intent records for NSLOTS slots (a front-end's requests in
 * flight: ublk's queues times their depth) of D in its dir= store, file
 * PATH/znbd.redo.  KEEP (a server taking over a device whose server
 * died): the records the dead server left unconfirmed whose appends were
 * stored whole are kept to match reissued appends
 * (znbd_dev_redo_append()), and stay in the file until matched, so a
 * recovery that dies in turn loses none; an append stored in part (the
 * last store of its zone, cut short) is cut off again, its zone's wp back
 * at its sector, so that nothing lands inside its range before it runs
 * again; without KEEP every record is cleared (a new device: nothing
 * will be reissued).  Call it before any request.
 * Returns the number of records kept (>= 0), or -1 with errno and a
 * message in ERR: EINVAL (D has no dir= store or no zones, NSLOTS 0 or
 * above 65536), ENOMEM, or the file's (EACCES, EIO, ENOSPC). */
int znbd_dev_redo_open(struct znbd_dev *d, uint32_t nslots, bool keep,
                       char *err, size_t errlen);

/* Records kept by znbd_dev_redo_open() and not matched yet (0 without
 * redo records).  One atomic load. */
uint32_t znbd_dev_redo_kept(struct znbd_dev *d);

/* znbd_req_append() that first notes its intent in SLOT (< the NSLOTS
 * given to znbd_dev_redo_open(); ZNBD_NO_SLOT or no redo records: none),
 * under the zone's lock, once the sector is chosen and before the data
 * is stored: zone, sector, LEN.  The record stays until
 * znbd_dev_redo_confirm(SLOT) or the slot's next append.  Errors as
 * znbd_req_append(); EINVAL for a SLOT out of range. */
int znbd_req_append_noted(const struct znbd_req_ctx *c, const void *buf,
                          uint64_t len, uint64_t zone_start, uint32_t slot,
                          uint64_t *written);

/* The kernel has taken SLOT's last completion: its record goes.  SLOT
 * out of range or no redo records: nothing.  Never fails. */
void znbd_dev_redo_confirm(struct znbd_dev *d, uint32_t slot);

/* The 4 bytes whose zeroing confirms SLOT as znbd_dev_redo_confirm()
 * does, for a front-end that confirms inside the system call that
 * completes the request (ublk: an io_uring read of 4 bytes of /dev/zero
 * there, queued right behind the commit, which io_uring_enter issues in
 * order and SIGKILL cannot split); they stay mapped and locked in
 * memory (no fault in that call) until D is freed.  NULL when D keeps
 * no records or SLOT is out of range. */
void *znbd_dev_redo_word(struct znbd_dev *d, uint32_t slot);

/* A zone append of LEN bytes from BUF to the zone starting at ZONE_START,
 * reissued after a recovery into SLOT: when a kept record of that zone
 * and length lies below the zone's wp (all of it, or its first part when
 * the dead server was killed while storing it) over the same bytes, the
 * append is taken as done: *WRITTEN gets the record's sector (bytes), the
 * part past the wp, if any, is written, and the record moves to SLOT's
 * (to be confirmed as a new append's, so that a server killed before
 * the completion reached the kernel keeps it).  Returns 1 (taken as
 * done), 0 (no kept record matches: run the append), or -1 with errno
 * (EIO: a store error reading or writing the zone; ENOMEM). */
int znbd_dev_redo_append(struct znbd_dev *d, const void *buf, uint64_t len,
                         uint64_t zone_start, uint32_t slot, uint64_t *written);

/* A write of LEN bytes from BUF at OFF that the core refused, reissued
 * after a recovery: when OFF lies in a sequential zone below its wp, the
 * write ends at the wp (or past it: the dead server was killed while
 * storing it) and the bytes from OFF to the wp are BUF's, it is taken as
 * done: the part past the wp, if any, is written.  A write to a
 * conventional zone or a plain device is never refused, so never a redo
 * here.  Returns 1 (taken as done), 0 (not a redo: the refusal stands),
 * or -1 with errno (EIO: a store error; ENOMEM). */
int znbd_dev_redo_write(struct znbd_dev *d, const void *buf, uint64_t len,
                        uint64_t off);

#endif
