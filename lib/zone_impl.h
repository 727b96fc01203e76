/* znbd: what the files of the zone engine share, and nobody else uses
 * (lib/zone.h is the engine's contract with the rest of lib/).
 *
 * The engine is layered, each file calling only the ones below it:
 *   lib/zone_init.c  the engine's life: lays the zones out, tears them
 *                    down, each part's state by that part's function;
 *   lib/zone_park.c  the parked-write pipeline: every write and append
 *                    enters here, runs now or waits ahead of the wp;
 *   lib/zone_hold.c  a write held across its store I/O, which the caller
 *                    does outside the lock: checked and opened first, its
 *                    wp moved when the I/O ended;
 *   lib/zone_txn.c   multi-zone write transactions: check every piece of
 *                    a write, then commit all of them or none;
 *   lib/zone_read.c  what a read returns: the spans of a range, zone by
 *                    zone, split at the data end and null_blk's wp;
 *   lib/zone.c       the zone state machine: conditions, the open/active
 *                    counters, one function per zone operation.
 * The parked-write list helpers below are inline so that the state
 * machine (a reset or finish fails a zone's parked writes) and the
 * pipeline share them without calling each other.
 *
 * Names: znbd_zones_* find their zones in the set, by number, offset or
 * range; znbd_zone_* act on one zone given by pointer (with the set for
 * its counters).
 *
 * All offsets and lengths are bytes; rules are cited by their name in
 * doc/zone-rules.md, their source Linux drivers/block/null_blk/zoned.c. */
#ifndef ZNBD_ZONE_IMPL_H
#define ZNBD_ZONE_IMPL_H

#include <errno.h>

#include "refusal.h"
#include "zone.h"

/* ---- lib/zone.c: the state machine, for the transactions ---- */

/* The open/active counters (IMP_OPEN, EXP_OPEN, CLOSED zones), as a
 * prepare simulates a multi-zone write on a copy before committing. */
struct znbd_zone_counts {
  uint32_t io, eo, cl;
};

/* The counters of ZS; resource lock held. */
struct znbd_zone_counts znbd_zones_load_counts(const struct znbd_zones *zs);

/* Zone Z can take a write at its wp: EMPTY, open or CLOSED. */
bool znbd_zone_writable(const struct znbd_zone *z);

/* Why zone Z (locked, not znbd_zone_writable()) takes no write: its
 * condition READONLY, OFFLINE, else FULL. */
enum znbd_refusal znbd_zone_unwritable_why(const struct znbd_zone *z);

/* Why the write [OFF, OFF+LEN) (bytes) over zones FIRST < LAST (all
 * locked) may not go as one ZBC write (ZNBD_WRITE_ONE_ZONE: a write that
 * touches a sequential zone stays inside it, ZBC-2 4.5.3), or
 * ZNBD_REFUSAL_NONE (conventional zones only): it runs into the gap of
 * the first sequential zone it touches (PAST_CAPACITY), that zone is
 * READONLY or OFFLINE, else WRITE_BOUNDARY. */
enum znbd_refusal znbd_zones_span_why(const struct znbd_zones *zs,
                                      uint32_t first, uint32_t last,
                                      uint64_t off, uint64_t len);

/* The write rules for one piece, [POFF, POFF+PLEN) (bytes), of write T
 * in zone Z (locked), null_zone_write(): conventional passes (rule
 * write-conv); else EIO unless the piece is at the wp and within the
 * capacity (rule write-at-wp); an EMPTY or CLOSED zone needs its open
 * (and for EMPTY active) slot, maybe closing a victim added to T (rules
 * implicit-open, resource-checks); a piece reaching the capacity frees
 * its slot (rule write-full).  The slots are taken on the copy C of the
 * counters, the victim scan starts at *CURSOR; with T->res_locked false
 * the zone must need no slot.  Returns 0, or -1 with errno EIO,
 * EOVERFLOW, ETOOMANYREFS, ENOMEM (T may hold victims: abort it). */
int znbd_zone_write_check(struct znbd_zones *zs, struct znbd_zone_txn *t,
                          struct znbd_zone *z, uint64_t poff, uint64_t plen,
                          struct znbd_zone_counts *c, uint32_t *cursor);

/* Zone append's own rule, null_zone_write() with append: zone Z (locked)
 * takes LEN bytes at its wp.  Returns 0, or -1 with errno EIO
 * (conventional, not writable, LEN beyond the capacity). */
int znbd_zone_append_check(const struct znbd_zone *z, uint64_t len);

/* Close T's implicit-close victims, checked by znbd_zone_write_check()
 * (EMPTY if their wp is at the start, else CLOSED), and move the victim
 * cursor past them (null_close_imp_open_zone()).  Resource lock held. */
void znbd_zones_close_victims(struct znbd_zones *zs,
                              const struct znbd_zone_txn *t);

/* Unlock the victims T locked (not its own zones) and forget them.
 * Leaves errno as it found it (lib/err.h). */
void znbd_zone_txn_release_victims(struct znbd_zone_txn *t);

/* Advance zone Z's wp (locked, sequential, checked) by LEN bytes: EMPTY
 * or CLOSED becomes IMP_OPEN, a wp at the capacity FULL (rules
 * implicit-open, write-full).  Resource lock held when the condition
 * changes. */
void znbd_zone_advance_wp(struct znbd_zones *zs, struct znbd_zone *z,
                          uint64_t len);

/* Walk [OFF, OFF+N) (bytes) zone by zone: Z gets each zone, POFF and
 * PLEN the piece inside it. */
#define FOR_EACH_PIECE(zs, off, n, z, poff, plen)                              \
  for (uint64_t poff = (off), plen = 0, end_ = (off) + (n);                    \
       poff < end_ && ((z) = znbd_zones_piece((zs), poff, end_, &plen));       \
       poff += plen)

/* ---- lib/zone_txn.c: transactions, for the pipeline ---- */

/* Write W, whose first zone FIRST the caller holds (if sequential): lock
 * the others up to LAST, prepare, then store and commit (or abort), or
 * with LATE commit and count a copy in flight per zone (the caller
 * stores after unlocking, then calls znbd_zone_copy_end).  Returns 0, or
 * -1 with errno as znbd_zones_write_prepare() or the store's. */
int znbd_zones_run_write(struct znbd_zones *zs, struct znbd_zone_write *w,
                         uint32_t first, uint32_t last, bool late);

/* Append W at the wp of zone ZNO (< nr_zones, locked by the caller):
 * prepare, store with the zone locked, commit or abort; W->off gets the
 * byte offset written.  Returns 0, or -1 with errno as
 * znbd_zones_append_prepare() or the store's. */
int znbd_zones_run_append(struct znbd_zones *zs, uint32_t zno,
                          struct znbd_zone_write *w);

/* ---- lib/zone_park.c: its own state, for lib/zone_init.c ---- */

/* Set up the parked-write pipeline of ZS (the sweeper's lock and
 * condition, no thread yet, no write parked).  No errors. */
void znbd_zones_park_init(struct znbd_zones *zs);

/* Stop and join the sweeper if it started, and free what
 * znbd_zones_park_init() set up.  No write may be parked or arrive. */
void znbd_zones_park_destroy(struct znbd_zones *zs);

/* ---- the parked-write lists, shared by lib/zone.c and lib/zone_park.c */

/* Parked writes taken off their zone, to be told how they ended once no
 * zone lock is held. */
struct done_list {
  struct znbd_zone_write *head, **tail;
};
#define DONE_LIST_INIT(l)                                                      \
  {                                                                            \
    NULL, &(l).head                                                            \
  }

/* Take the parked write *PP off zone Z (locked) into DL with ERR and the
 * reason WHY (ZNBD_REFUSAL_NONE when no rule refused it). */
static inline void
unpark(struct znbd_zones *zs, struct znbd_zone *z, struct znbd_zone_write **pp,
       int err, enum znbd_refusal why, struct done_list *dl)
{
  struct znbd_zone_write *w = *pp;
  *pp = w->next;
  atomic_fetch_sub(&z->nparked, 1);
  atomic_fetch_sub(&zs->nparked, 1);
  w->err = err;
  w->why = why;
  w->next = NULL;
  *dl->tail = w;
  dl->tail = &w->next;
}

/* Take every parked write off zone Z (locked) into DL with EIO. */
static inline void
unpark_all(struct znbd_zones *zs, struct znbd_zone *z, struct done_list *dl)
{
  while (z->parked)
    unpark(zs, z, &z->parked, EIO, ZNBD_REFUSAL_NONE, dl);
}

/* Tell the writes in DL how they ended (no zone lock held), each DONE
 * with its reason as the thread's for the call; the thread's own stays. */
static inline void
call_done(struct done_list *dl)
{
  enum znbd_refusal own = znbd_refusal_now;
  for (struct znbd_zone_write *w = dl->head, *n; w; w = n) {
    n = w->next;
    znbd_refusal_now = w->why;
    w->done(w, w->err);
  }
  znbd_refusal_now = own;
  dl->head = NULL;
  dl->tail = &dl->head;
}

#endif
