/* znbd: the zone state machine (lib/zone.c), null_blk's rules in one place.
 *
 * Everything here is in bytes (null_blk works in 512-byte sectors).  The
 * rules, their sources and the deliberate deviations are listed by name in
 * doc/zone-rules.md (and for users in man/nbdkit-zoned-plugin.pod); the
 * reference is Linux drivers/block/null_blk/zoned.c.
 *
 * No data lives here: the engine tracks conditions, write pointers and the
 * open/active counters; lib/dev.c stores the data in between
 * znbd_zone_write_prepare() and znbd_zone_write_commit(), so a write whose
 * data cannot be stored changes nothing.
 *
 * Locking.  Every zone has a mutex (and a list of pipelined writes waiting
 * for its wp, each woken when the wp reaches it).  The counters
 * (EO, IO, CL) and the implicit-close cursor are the only shared state,
 * under one resource lock.  Order: zone locks in ascending zone order, then
 * the resource lock.  An implicit-close victim is taken with trylock while
 * the resource lock is held, and a busy zone (one another request holds) is
 * skipped, so no lock is ever waited for out of order.
 */
#ifndef ZNBD_ZONE_H
#define ZNBD_ZONE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "znbd/dev.h"

/* A pipelined write waiting for its zone's wp (znbd_zone_wait_wp). */
struct znbd_zone_waiter {
  uint64_t off; /* bytes: where the write starts */
  pthread_cond_t cv;
  struct znbd_zone_waiter *next;
};

struct znbd_zone {
  pthread_mutex_t lock;
  struct znbd_zone_waiter *waiters; /* woken when the wp reaches them */
  /* Writes whose wp is committed but whose data is still being copied
   * outside the lock (znbd_zone_copy_begin/end). */
  _Atomic uint32_t copying;
  uint64_t start, len; /* bytes; the last zone may be shorter */
  uint64_t capacity;   /* bytes writable, <= len */
  uint64_t wp;         /* ZNBD_WP_INVALID: conv, READONLY, OFFLINE */
  enum znbd_zone_type type;
  enum znbd_zone_cond cond;
};

/* The geometry asked for; znbd_zones_init() applies null_blk's clamps. */
struct znbd_zone_geometry {
  uint64_t size;          /* device, bytes, > 0 */
  uint64_t zone_size;     /* bytes, > 0; any value (npo2 allowed) */
  uint64_t zone_capacity; /* bytes, <= zone_size; 0 = zone_size */
  uint32_t nr_conv;       /* conventional zones at the start */
  uint32_t max_open;      /* 0 = no limit */
  uint32_t max_active;    /* 0 = no limit */
  bool zone_full;         /* sequential zones start FULL */
};

struct znbd_zones {
  struct znbd_zone *zone;
  uint32_t nr_zones, nr_conv;
  uint64_t size, zone_size;
  unsigned zone_shift; /* log2(zone_size) when zone_size_po2 */
  bool zone_size_po2;
  uint32_t max_open, max_active; /* after clamping; 0 = no limit */

  pthread_mutex_t res_lock; /* guards the four fields below */
  uint32_t nr_imp_open, nr_exp_open, nr_closed;
  uint32_t imp_close_zone_no; /* where the next victim scan starts */
};

/* Lay out zones over G->size bytes: nr_zones = ceil(size / zone_size),
 * the first nr_conv conventional (NOT_WP), the rest sequential-write-
 * required EMPTY (wp = start) or FULL (wp = start + len, as after a
 * finish) with zone_full; the last zone may be shorter and its capacity is
 * min(its length, zone_capacity).  Clamps as null_blk's
 * null_init_zoned_dev(): nr_conv >= nr_zones -> nr_zones - 1; max_active
 * >= sequential zones -> 0; max_open > max_active (when set) ->
 * max_active, else max_open >= sequential zones -> 0.  Returns 0, or -1
 * with errno EINVAL (size or zone_size 0, zone_capacity > zone_size, more
 * than UINT32_MAX - 1 zones) or ENOMEM. */
int znbd_zones_init(struct znbd_zones *zs, const struct znbd_zone_geometry *g);

/* Free what znbd_zones_init() allocated.  No zone may be locked. */
void znbd_zones_destroy(struct znbd_zones *zs);

/* Index of the zone holding byte OFF (OFF < size).  A shift when the zone
 * size is a power of 2, one division otherwise. */
static inline uint32_t
znbd_zones_zone_no(const struct znbd_zones *zs, uint64_t off)
{
  if (zs->zone_size_po2)
    return (uint32_t)(off >> zs->zone_shift);
  return (uint32_t)(off / zs->zone_size);
}

/* Index of the zone holding the last byte of [OFF, OFF+LEN) (LEN > 0),
 * given FIRST, the zone holding OFF: no division unless the range runs
 * into another zone, which requests seldom do. */
static inline uint32_t
znbd_zones_last_zone_no(const struct znbd_zones *zs, uint32_t first,
                        uint64_t off, uint64_t len)
{
  const struct znbd_zone *z = &zs->zone[first];

  if (off + len <= z->start + z->len)
    return first;
  return znbd_zones_zone_no(zs, off + len - 1);
}

/* Lock / unlock the sequential zones among FIRST..LAST (inclusive) in
 * ascending order; conventional zones carry no state and are skipped. */
void znbd_zones_lock_range(struct znbd_zones *zs, uint32_t first,
                           uint32_t last);
void znbd_zones_unlock_range(struct znbd_zones *zs, uint32_t first,
                             uint32_t last);

/* Copy zone Z's report (caller holds its lock or accepts a torn read). */
void znbd_zone_info(const struct znbd_zone *z, struct znbd_zone_info *out);

/* End (exclusive byte offset) of the data a read of zone Z returns from
 * the store; bytes from there to the zone end are "past the wp"
 * (null_zone_valid_read_len()).  Conventional: start + len; sequential:
 * min(wp, start + capacity), READONLY start + capacity (its data stays
 * readable).  Caller holds Z's lock.  OFFLINE zones are not readable
 * (the caller fails with EIO). */
uint64_t znbd_zone_data_end(const struct znbd_zone *z);

/* Pipelined writes: with Z locked, wait until Z's wp reaches OFF (bytes),
 * at most TIMEOUT_MS milliseconds.  Returns at once when OFF is not ahead
 * of a writable wp (conventional zone, wp >= OFF, OFF beyond capacity,
 * FULL/READONLY/OFFLINE).  Returns 0, or -1 with errno ETIMEDOUT (the
 * caller reports EIO, as dev.h says). */
int znbd_zone_wait_wp(struct znbd_zone *z, uint64_t off, unsigned timeout_ms);

/* A write (or append) in flight: made by prepare, ended by exactly one of
 * commit or abort.  Opaque to callers. */
struct znbd_zone_txn {
  struct znbd_zones *zs;
  uint64_t off, len;
  uint32_t first, last; /* zones of the request, locked by the caller */
  uint32_t cur;         /* zone whose piece is being checked */
  bool res_locked;
  uint32_t nr_victims, cap_victims;
  uint32_t *victims; /* zone numbers to close at commit, locked by us */
  uint32_t victims_small[2];
};

/* Check a write of LEN > 0 bytes at OFF against null_blk's write rules
 * (null_zone_write()), zone by zone, as if each piece were a separate
 * write in ascending order; zones FIRST..LAST holding the range must be
 * locked by the caller (znbd_zones_lock_range).  Nothing changes yet: on
 * success, store the data, then call znbd_zone_write_commit(), or
 * znbd_zone_write_abort() if storing failed.  Resource slots and any
 * implicit-close victim are held (resource lock, victim trylocked) until
 * then, so the commit cannot fail.
 *   - conventional pieces: always pass;
 *   - sequential: EIO unless the piece starts at the wp and ends at or
 *     before start + capacity (FULL, READONLY, OFFLINE always fail);
 *   - EMPTY: EOVERFLOW if EO + IO + CL >= max_active; then the open check;
 *   - CLOSED: the open check only (deviation: null_blk also demands an
 *     active slot before closing a victim; ZBC/ZNS and QEMU do not);
 *   - open check: ETOOMANYREFS if EO + IO >= max_open and no IMP_OPEN zone
 *     can be closed; otherwise the round-robin victim (first IMP_OPEN zone
 *     from the cursor on that is not locked by anyone) is closed at commit.
 * Returns 0, or -1 with errno EIO, EOVERFLOW, ETOOMANYREFS, ENOMEM; on
 * failure nothing changed and T needs no abort. */
int znbd_zone_write_prepare(struct znbd_zones *zs, struct znbd_zone_txn *t,
                            uint64_t off, uint64_t len);

/* Zone append (null_zone_write() with append): prepare a write of LEN
 * bytes at the wp of zone ZNO, which the caller has locked; *OFF gets the
 * byte offset that will be written.  Errors: EINVAL (bad zone, LEN 0), EIO
 * (conventional zone, FULL/READONLY/OFFLINE, LEN beyond the capacity), and
 * those of znbd_zone_write_prepare().  Then commit or abort as a write. */
int znbd_zone_append_prepare(struct znbd_zones *zs, struct znbd_zone_txn *t,
                             uint32_t zno, uint64_t len, uint64_t *off);

/* Apply a prepared write: victims closed (EMPTY if their wp is at the start,
 * else CLOSED), EMPTY/CLOSED pieces IMP_OPEN, wps advanced, pieces at
 * capacity FULL (their open slot freed); waiters woken.  Zone locks of
 * FIRST..LAST stay with the caller. */
void znbd_zone_write_commit(struct znbd_zone_txn *t);

/* Drop a prepared write without changing anything. */
void znbd_zone_write_abort(struct znbd_zone_txn *t);

/* Copying a committed write's data outside the zone lock.  With zone Z
 * locked and the write committed, znbd_zone_copy_begin() counts one copy
 * in flight; the caller unlocks Z, stores the data and calls
 * znbd_zone_copy_end() (no lock needed).  Zone management waits for the
 * copies in flight before it discards a zone's data, so a late copy never
 * lands in a zone that was reset.  Why: the copy of a first-touched page
 * costs a page fault (about 2 us here), and holding the zone lock over it
 * made every writer of a sequential stream queue behind it.  A read that
 * overlaps a write still in flight may see part of its data, which NBD
 * allows for overlapping requests; nothing else can observe the gap. */
void znbd_zone_copy_begin(struct znbd_zone *z);
void znbd_zone_copy_end(struct znbd_zone *z);

/* Called with zone Z locked, after its condition changed, when the data
 * of bytes [FROM, zone end) must go: Z->cond is FULL after a finish (FROM
 * is the old wp), EMPTY after a reset or back online (FROM is the zone
 * start). */
typedef void (*znbd_zone_discard_fn)(void *opaque, const struct znbd_zone *z,
                                     uint64_t from);

/* Zone management on zone index ZNO (the engine locks it), null_blk's
 * null_zone_mgmt() and configfs zone_readonly/zone_offline:
 *   any op but SET_READONLY/SET_OFFLINE/ONLINE on READONLY/OFFLINE: EIO;
 *   conventional zone: EIO (SET_*, ONLINE too; configfs says EINVAL);
 *   OPEN: EXP_OPEN no-op; FULL EIO; EMPTY active + open checks; CLOSED open
 *     check; IMP_OPEN free; -> EXP_OPEN;
 *   CLOSE: CLOSED no-op; EMPTY, FULL EIO; open -> EMPTY (wp = start) or
 *     CLOSED;
 *   FINISH: FULL no-op; EMPTY active + open checks; CLOSED open check;
 *     -> FULL with wp = start + len; [old wp, end) discarded;
 *   RESET: -> EMPTY, wp = start, whole zone discarded (any condition but
 *     READONLY/OFFLINE, EMPTY included);
 *   SET_READONLY / SET_OFFLINE: already in that condition -> EMPTY (wp =
 *     start, zone discarded); otherwise the open/active slot is released
 *     and the zone becomes READONLY / OFFLINE with an invalid wp;
 *   ONLINE: READONLY or OFFLINE -> EMPTY (zone discarded); else EIO.
 * ZNBD_ALL_ZONES with RESET: reset-all, every sequential zone not EMPTY,
 * READONLY or OFFLINE is reset; always succeeds.  DISCARD may be NULL.
 * Returns 0, or -1 with errno EINVAL (bad index or op), EIO, ETOOMANYREFS
 * (open limit), EOVERFLOW (active limit). */
int znbd_zone_mgmt(struct znbd_zones *zs, enum znbd_zone_op op, uint32_t zno,
                   znbd_zone_discard_fn discard, void *opaque);

/* After a power cycle (persistent store): sequential zone ZNO, EMPTY and
 * not locked by anyone, gets its wp back from WRITTEN, the bytes written
 * from its start: 0 -> EMPTY, its capacity -> FULL, else CLOSED (active,
 * not open), as a drive turns open zones into closed ones when power
 * returns (doc/zone-rules.md, after a power cycle).  More CLOSED zones than
 * zone_max_active are accepted: the active count then exceeds the limit
 * until zones are finished or reset, and no zone can become active before
 * it drops below.  Returns 0, or -1 with errno EINVAL (conventional zone,
 * not EMPTY, WRITTEN beyond the capacity). */
int znbd_zones_restore(struct znbd_zones *zs, uint32_t zno, uint64_t written);

/* A power cut (write_cache=true, lib/wcache.c): sequential zone Z, whose
 * lock the caller holds, keeps WRITTEN bytes from its start (the state of
 * the last FLUSH) and takes the condition a drive gives it when power
 * returns: 0 -> EMPTY, its capacity -> FULL, else CLOSED; open zones are
 * never open after a power cycle (ZBC-2 and ZNS 1.1: open zones become
 * closed; doc/zone-rules.md, after a power cycle).  READONLY, OFFLINE and
 * conventional zones are left alone.  The counters follow; as after a
 * restart, CLOSED zones may exceed zone_max_active.  Returns 0, or -1
 * with errno EINVAL (WRITTEN beyond the capacity). */
int znbd_zone_power_cycle(struct znbd_zones *zs, struct znbd_zone *z,
                          uint64_t written);

/* The counters, read together under the resource lock. */
void znbd_zones_counters(struct znbd_zones *zs, uint32_t *imp_open,
                         uint32_t *exp_open, uint32_t *closed);

#endif
