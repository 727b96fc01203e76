/* znbd: the zone engine, null_blk's rules in one place: the state
 * machine (lib/zone.c), what a read returns (lib/zone_read.c), multi-zone
 * write transactions (lib/zone_txn.c), the parked-write pipeline
 * (lib/zone_park.c) and the engine's set-up and tear-down
 * (lib/zone_init.c); lib/zone_impl.h says how they layer.
 *
 * Everything here is in bytes (null_blk works in 512-byte sectors).  The
 * rules, their sources and the deliberate deviations are listed by name in
 * doc/zone-rules.md (and for users in man/nbdkit-zoned-plugin.pod); the
 * reference is Linux drivers/block/null_blk/zoned.c.
 *
 * No data lives here: the engine tracks conditions, write pointers and the
 * open/active counters, and owns the zones' locks: lib/dev.c never locks
 * a zone, it hands reads, extents, writes and appends to the engine
 * (znbd_zones_spans, znbd_zones_write, znbd_zones_append) with a callback
 * into the store, called under the zone locks where the rules need it; a
 * store that can fail is written in between znbd_zones_write_prepare() and
 * znbd_zones_write_commit(), so a write whose data cannot be stored
 * changes nothing.
 *
 * Names.  znbd_zones_* functions act on the zone set (struct znbd_zones,
 * or a transaction over it); znbd_zone_* ones on one zone (struct
 * znbd_zone), even when they also take the set for its counters.
 *
 * Locking.  Every zone has a mutex (and a list of the pipelined writes
 * parked ahead of its wp, each run when the wp reaches it).  The counters
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
#include "znbd/refusal.h"

struct znbd_zone_write;

struct znbd_zone {
  pthread_mutex_t lock;
  /* Pipelined writes ahead of the wp, sorted by offset, run by whoever
   * moves the wp to them (znbd_zones_write). */
  struct znbd_zone_write *parked;
  _Atomic uint32_t nparked; /* read without the lock by the sweeper */
  /* Writes whose wp is committed but whose data is still being copied
   * outside the lock (znbd_zone_copy_begin/end). */
  _Atomic uint32_t copying;
  uint64_t start, len; /* bytes; the last zone may be shorter */
  uint64_t capacity;   /* bytes writable, <= len */
  uint64_t wp;         /* ZNBD_WP_INVALID: conv, READONLY, OFFLINE */
  enum znbd_zone_type type;
  enum znbd_zone_cond cond;
  /* A write whose store I/O is in flight outside the lock holds the zone
   * (znbd_zones_hold): writes, appends and zone management get EBUSY,
   * and no implicit close picks it, until znbd_zones_unhold(). */
  bool held;
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
  /* CLOSED zones made READONLY/OFFLINE whose finish failed: they stay
   * counted in nr_closed, as in null_blk (rule fault-set). */
  uint32_t nr_fault_stuck;

  /* The sweeper: a thread started with the first parked write, failing
   * parked writes whose deadline passed (znbd_zones_write). */
  pthread_mutex_t sweep_lock; /* guards the four fields below */
  pthread_cond_t sweep_cv;
  bool sweeper_running, sweep_stop;
  bool park_closed; /* znbd_zones_close_parking() */
  pthread_t sweeper;
  _Atomic uint64_t nparked; /* parked writes, all zones */

  /* znbd_zones_write_wait(): parked writes whose thread waited, and how
   * many of those slept (the rest saw their write run while yielding). */
  _Atomic uint64_t park_waits, park_sleeps;
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

/* The zone holding byte POFF (< size) of a request ending at END
 * (exclusive, bytes), and in *PLEN how many bytes of [POFF, END) lie in
 * it.  No lock taken: zone boundaries never move. */
struct znbd_zone *znbd_zones_piece(struct znbd_zones *zs, uint64_t poff,
                                   uint64_t end, uint64_t *plen);

/* Lock / unlock the sequential zones among FIRST..LAST (inclusive) in
 * ascending order; conventional zones carry no state and are skipped.
 * Unlocking leaves errno as it found it (lib/err.h). */
void znbd_zones_lock_range(struct znbd_zones *zs, uint32_t first,
                           uint32_t last);
void znbd_zones_unlock_range(struct znbd_zones *zs, uint32_t first,
                             uint32_t last);

/* Copy zone Z's report, under Z's lock (a consistent snapshot). */
void znbd_zone_info(struct znbd_zone *z, struct znbd_zone_info *out);

/* End (exclusive byte offset) of the data a read of zone Z returns from
 * the store; bytes from there to the zone end are "past the wp"
 * (null_zone_valid_read_len()).  Conventional: start + len; sequential:
 * min(wp, start + capacity), READONLY start + capacity (its data stays
 * readable).  Caller holds Z's lock.  OFFLINE zones are not readable
 * (the caller fails with EIO). */
uint64_t znbd_zone_data_end(const struct znbd_zone *z);

/* What a byte range of the device holds, as reads and extents see it. */
enum znbd_zone_span {
  ZNBD_SPAN_CONV,    /* a conventional zone: whatever the store holds */
  ZNBD_SPAN_DATA,    /* below a sequential zone's data end: written data */
  ZNBD_SPAN_GAP,     /* [capacity, wp) of a finished zone, [capacity, zone
                      * end) of a READONLY one: below null_blk's wp */
  ZNBD_SPAN_PAST_WP, /* the rest, up to the zone end */
  ZNBD_SPAN_OFFLINE, /* an OFFLINE zone: not readable */
};

/* Called by znbd_zones_spans() for LEN > 0 bytes at OFF; for a sequential
 * zone the zone's lock is held, so the wp cannot move while the store is
 * read.  Returns 0 to go on; anything else stops the walk. */
typedef int (*znbd_zone_span_fn)(void *opaque, uint64_t off, uint64_t len,
                                 enum znbd_zone_span span);

/* Walk [OFF, OFF+LEN) (bytes, inside the device) zone by zone in
 * ascending order, calling FN for each span: conventional zones without
 * a lock (they carry no state), sequential ones under their lock
 * (null_blk locks the zone for memory-backed reads) split at
 * znbd_zone_data_end() and, for a FULL or READONLY zone with capacity <
 * zone size, at the end of the gap null_blk reads from memory
 * (null_zone_valid_read_len(): a finished zone's wp is start + zone size,
 * a READONLY zone's wp is invalid).  Returns 0, or FN's first non-zero value
 * (errno as FN left it). */
int znbd_zones_spans(struct znbd_zones *zs, uint64_t off, uint64_t len,
                     znbd_zone_span_fn fn, void *opaque);

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
 * success, store the data, then call znbd_zones_write_commit(), or
 * znbd_zones_write_abort() if storing failed.  Resource slots and any
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
int znbd_zones_write_prepare(struct znbd_zones *zs, struct znbd_zone_txn *t,
                             uint64_t off, uint64_t len);

/* Zone append (null_zone_write() with append): prepare a write of LEN
 * bytes at the wp of zone ZNO, which the caller has locked; *OFF gets the
 * byte offset that will be written.  Errors: EINVAL (bad zone, LEN 0), EIO
 * (conventional zone, FULL/READONLY/OFFLINE, LEN beyond the capacity), and
 * those of znbd_zones_write_prepare().  Then commit or abort as a write. */
int znbd_zones_append_prepare(struct znbd_zones *zs, struct znbd_zone_txn *t,
                              uint32_t zno, uint64_t len, uint64_t *off);

/* Apply a prepared write: victims closed (EMPTY if their wp is at the start,
 * else CLOSED), EMPTY/CLOSED pieces IMP_OPEN, wps advanced, pieces at
 * capacity FULL (their open slot freed).  Zone locks of
 * FIRST..LAST stay with the caller. */
void znbd_zones_write_commit(struct znbd_zone_txn *t);

/* Drop a prepared write without changing anything.  Leaves errno as it
 * found it (a failure path's cleanup, lib/err.h: it only unlocks and
 * frees). */
void znbd_zones_write_abort(struct znbd_zone_txn *t);

/* Stores the data of a write: LEN bytes at device offset OFF from DATA
 * (the request's buffer, NULL for zeros).  Returns 0, or -1 with errno. */
typedef int (*znbd_zone_store_fn)(void *opaque, const void *data, uint64_t len,
                                  uint64_t off);

/* A write as the engine runs it (znbd_zones_write, znbd_zones_append). */
struct znbd_zone_write {
  uint64_t off, len;        /* bytes; append: OFF is set to where it went */
  const void *data;         /* handed to STORE as it is */
  znbd_zone_store_fn store; /* called once, with the zones locked or not */
  void *opaque;             /* STORE's */
  bool store_may_fail;      /* store before the commit, abort on failure */
  bool pipeline;            /* ahead of a writable wp: park (with DONE) */
  bool nowait;              /* ...but fail with EAGAIN instead */
  bool one_zone;            /* ZNBD_WRITE_ONE_ZONE: znbd_zones_span_why() */
  unsigned timeout_ms;      /* how long a parked write may wait */
  /* A bound on parked writes (NULL: none): W parks only if fewer than
   * WAIT_MAX writes counted in *WAITING are parked, and counts itself
   * there until it ran or failed (DONE's caller uncounts it); else
   * EAGAIN.  Counted under the zone's lock, when W is really ahead of
   * the wp, so a write that finds itself in order never counts. */
  _Atomic unsigned *waiting;
  unsigned wait_max;
  /* Parked writes: called once, with no zone lock held, by the thread
   * that ran W (ERR 0) or failed it (ERR an errno; the rule's reason, or
   * ZNBD_REFUSAL_NONE, is that thread's znbd_refusal_now meanwhile, for
   * znbd_req_refusal()).  NULL: never parked (EAGAIN instead). */
  void (*done)(struct znbd_zone_write *w, int err);
  /* The engine's, while parked. */
  uint64_t deadline_ns; /* CLOCK_MONOTONIC */
  int err;
  enum znbd_refusal why; /* with ERR: the refusing rule's reason */
  struct znbd_zone_write *next;
};

/* znbd_zones_write(): W was parked; W->done() tells how it ended. */
#define ZNBD_ZONE_PARKED 1

/* Run write W (LEN > 0, inside the device): lock its zones in ascending
 * order, check every piece (znbd_zones_write_prepare), then
 *   - a store that cannot fail (RAM): commit, and store the data after
 *     unlocking (znbd_zone_copy_begin says why and what keeps it safe);
 *   - a store that can fail (dir=): store the data with the zones still
 *     locked, then commit, or abort if storing failed (the store undoes
 *     its partial write), so a failed write changes nothing.
 * A write that starts ahead of a writable wp of a sequential zone, below
 * its capacity, with W->pipeline: EAGAIN with W->nowait or no W->done;
 * EIO with a timeout of 0; else it is parked: W (and its data) stays with
 * the engine, sorted by offset in the zone's list, and the write that
 * brings the wp to W->off runs it after its own (so does an append), as
 * many parked writes as then line up.  A parked write fails with EIO
 * when W->timeout_ms passed (a sweeper thread checks every few
 * milliseconds), when its zone is reset, finished, made READONLY or
 * OFFLINE, or when the wp went past its offset; else with the errno of
 * its own checks when it runs.
 * Returns 0, ZNBD_ZONE_PARKED, or -1 with errno as
 * znbd_zones_write_prepare(), the store's errno, EAGAIN, EIO, ENOMEM. */
int znbd_zones_write(struct znbd_zones *zs, struct znbd_zone_write *w);

/* znbd_zones_write() for a caller that waits on its own thread: a write
 * that would be parked is parked (W->done is the engine's) and this
 * thread waits until it ran or failed, unless MAX threads counted in
 * *WAITING (NULL: no bound) wait already: then EAGAIN at once (a write
 * in order runs whatever the count).  It waits by yielding its CPU
 * (sched_yield) for up to 20 microseconds, then sleeps until woken;
 * ZS->park_waits counts the waits, ZS->park_sleeps those that slept.
 * Returns 0, or -1 with errno as znbd_zones_write(). */
int znbd_zones_write_wait(struct znbd_zones *zs,
                          const struct znbd_zone_write *w,
                          _Atomic unsigned *waiting, unsigned max);

/* No more parking: every parked write fails with EIO now (its DONE is
 * called from this thread), and from now on a write that would be parked
 * fails with EIO at once.  For a server that stops: its clients get their
 * answers without waiting for zone_write_timeout. */
void znbd_zones_close_parking(struct znbd_zones *zs);

/* A power cut (lib/wcache.c, every write excluded): every parked write
 * fails with EIO now (DONE called from this thread); parking stays open.
 * Its client's connection is gone, and its wp may never come back. */
void znbd_zones_fail_parked(struct znbd_zones *zs);

/* Zone append at the wp of zone ZNO (null_zone_write() with append): the
 * engine locks the zone, prepares (znbd_zones_append_prepare), stores the
 * data of W->len bytes with the zone locked, then commits, or aborts if
 * storing failed.  W->off gets the byte offset written.  Returns 0, or -1
 * with errno as znbd_zones_append_prepare() or the store's. */
int znbd_zones_append(struct znbd_zones *zs, uint32_t zno,
                      struct znbd_zone_write *w);

/* A write held across its store I/O (znbd_zones_hold()). */
struct znbd_zone_hold {
  bool append; /* in: a zone append to zone ZNO, else a write at OFF */
  uint32_t zno;
  uint64_t off, len; /* bytes; an append's OFF is set by the hold */
  bool seq;          /* out: a sequential zone was held */
};

/* Take the write H describes (LEN > 0 bytes at OFF, or appended to zone
 * ZNO, within one zone) as null_blk's null_zone_write() takes a write
 * before it copies the data with the zone locked, with the copy done
 * by the caller, outside the lock: the rules are checked
 * (znbd_zones_write_prepare, znbd_zones_append_prepare), the condition
 * changes now (implicit-close victims closed, an EMPTY or CLOSED zone
 * IMP_OPEN), and the zone is held (struct znbd_zone's held) until
 * znbd_zones_unhold() moves the wp or leaves it.  A conventional zone's
 * write is not checked or held (H->seq false).  Returns 0, or -1 with
 * errno: EBUSY (the zone is held by another write: nothing changed, try
 * again once it ended), EINVAL (crosses the zone's end), or the
 * prepare's (EIO, ETOOMANYREFS, EOVERFLOW). */
int znbd_zones_hold(struct znbd_zones *zs, struct znbd_zone_hold *h);

/* End the held write H: DONE, its data stored, moves the wp past it
 * (FULL at the capacity, its open slot freed: rule write-full); else the
 * wp stays where it was and the zone in the condition the hold gave it,
 * IMP_OPEN, as null_zone_write() leaves a zone whose data copy failed.
 * Never fails. */
void znbd_zones_unhold(struct znbd_zones *zs, const struct znbd_zone_hold *h,
                       bool done);

/* Whether the N bytes the store holds at OFF (under the zone's lock) are
 * a redone request's, whose byte OFF is W->data's first: 1 yes, 0 no, or
 * -1 with errno (EIO: the store could not be read). */
typedef int (*znbd_zone_same_fn)(void *opaque, uint64_t off, uint64_t n);

/* The redo of write W (W->off, W->len > 0, within one zone; W->data a
 * byte buffer) that a server killed before it completed may have done
 * (include/znbd/redo.h): with the zone locked, W is taken as done when
 * the zone is sequential with a valid wp, W->off lies below the wp, W
 * ends at or past the wp (ANYWHERE: or anywhere below it, an append whose
 * intent record says where it went), and SAME(OPAQUE, W->off, n) says the
 * n bytes up to the wp or W's end are W's.  The part past the wp, if any
 * (the store was cut short), is then written at the wp as a write of its
 * own, W->store storing it.  Returns 1 (taken as done), 0 (not a redo:
 * nothing changed), or -1 with errno: SAME's, or the part's refusal or
 * store error, as znbd_zones_write() (nothing changed then). */
int znbd_zones_redo(struct znbd_zones *zs, struct znbd_zone_write *w,
                    bool anywhere, znbd_zone_same_fn same, void *opaque);

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
 * RESET, FINISH, SET_READONLY and SET_OFFLINE fail the zone's parked
 * writes with EIO (as Linux aborts a zone's plugged writes on a reset or
 * finish, disk_zone_wplug_abort).
 * A held zone (znbd_zones_hold) is not changed: EBUSY; reset-all skips
 * held zones and then fails with EBUSY (the others are reset).
 * Returns 0, or -1 with errno EINVAL (bad index or op), EIO, ETOOMANYREFS
 * (open limit), EOVERFLOW (active limit), EBUSY. */
int znbd_zones_mgmt(struct znbd_zones *zs, enum znbd_zone_op op, uint32_t zno,
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

/* Sequential zone ZNO (not READONLY or OFFLINE), under its lock: the
 * bytes written from its start in *WRITTEN (its capacity when FULL) and
 * true; false for any other zone. */
bool znbd_zones_written(struct znbd_zones *zs, uint32_t zno, uint64_t *written);

/* Called by znbd_zones_power_cycle with zone Z (index ZNO) locked and no
 * copy in flight: drop its data past its first KEEP bytes from the store.
 * Returns 0, or -1 with errno. */
typedef int (*znbd_zone_cut_fn)(void *opaque, uint32_t zno,
                                const struct znbd_zone *z, uint64_t keep);

/* A power cut (write_cache=true, lib/wcache.c; every write excluded by
 * the caller): sequential zone ZNO keeps min(*KEEP, bytes written) bytes
 * from its start (the state of the last FLUSH; the result in *KEEP), CUT
 * dropping the rest from the store, and takes the condition a drive
 * gives it when power returns: 0 -> EMPTY, its capacity -> FULL, else
 * CLOSED; open zones are never open after a power cycle (ZBC-2 and ZNS
 * 1.1 keep no open zone across a power loss; doc/zone-rules.md,
 * power-cut).  READONLY, OFFLINE and conventional zones are left alone
 * (*KEEP unchanged).  The counters follow; as after a restart, CLOSED
 * zones may exceed zone_max_active.  Returns 0, or CUT's -1 with errno
 * (the condition is set all the same). */
int znbd_zones_power_cycle(struct znbd_zones *zs, uint32_t zno, uint64_t *keep,
                           znbd_zone_cut_fn cut, void *opaque);

/* The counters, read together under the resource lock. */
void znbd_zones_counters(struct znbd_zones *zs, uint32_t *imp_open,
                         uint32_t *exp_open, uint32_t *closed);

#endif
