/* znbd: the zone state machine: each zone's condition and wp, the
 * open/active counters, and one short function per zone operation (open,
 * close, finish, reset, the fault conditions; the write-pointer advance
 * and append rule that lib/zone_txn.c applies to each piece of a write)
 * behind a dispatch, as null_blk's zoned.c behind null_zone_mgmt().  See
 * lib/zone.h for the contract and doc/zone-rules.md for every rule (cited
 * here by name, e.g. rule open-check) and its source (Linux
 * drivers/block/null_blk/zoned.c).  All offsets and lengths are bytes. */
#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "refusal.h"
#include "zone_impl.h"

static bool
is_open(enum znbd_zone_cond c)
{
  return c == ZNBD_ZONE_COND_IMP_OPEN || c == ZNBD_ZONE_COND_EXP_OPEN;
}

static uint32_t *
counter(struct znbd_zone_counts *c, enum znbd_zone_cond cond)
{
  switch (cond) {
  case ZNBD_ZONE_COND_IMP_OPEN:
    return &c->io;
  case ZNBD_ZONE_COND_EXP_OPEN:
    return &c->eo;
  case ZNBD_ZONE_COND_CLOSED:
    return &c->cl;
  default:
    return NULL;
  }
}

/* Move one zone's contribution from condition FROM to TO (doc/zone-rules.md,
 * rule counters).  A zone leaving a counted condition was counted in it,
 * so the counter cannot be 0: debug builds check it rather than let it
 * wrap. */
static void
account(struct znbd_zone_counts *c, enum znbd_zone_cond from,
        enum znbd_zone_cond to)
{
  uint32_t *p = counter(c, from), *q = counter(c, to);
  if (p) {
    assert(*p > 0);
    (*p)--;
  }
  if (q)
    (*q)++;
}

struct znbd_zone_counts
znbd_zones_load_counts(const struct znbd_zones *zs)
{
  return (struct znbd_zone_counts){zs->nr_imp_open, zs->nr_exp_open,
                                   zs->nr_closed};
}

/* The counters' invariants (rule counters, open-check, active-check):
 * never more zones counted than there are sequential zones, never more
 * open or active zones than the limits allow. */
static void
store_counts(struct znbd_zones *zs, struct znbd_zone_counts c)
{
  assert((uint64_t)c.io + c.eo + c.cl <=
         (uint64_t)zs->nr_zones - zs->nr_conv + zs->nr_fault_stuck);
  assert(!zs->max_open || c.io + c.eo <= zs->max_open);
  /* Only zones restored CLOSED after a power cycle can take the active
   * count past the limit (znbd_zones_restore); it never grows beyond. */
  assert(!zs->max_active || c.io + c.eo + c.cl <= zs->max_active ||
         c.io + c.eo + c.cl <=
             zs->nr_imp_open + zs->nr_exp_open + zs->nr_closed);
  zs->nr_imp_open = c.io;
  zs->nr_exp_open = c.eo;
  zs->nr_closed = c.cl;
}

static void
set_cond(struct znbd_zones *zs, struct znbd_zone *z, enum znbd_zone_cond to)
{
  struct znbd_zone_counts c = znbd_zones_load_counts(zs);
  account(&c, z->cond, to);
  store_counts(zs, c);
  z->cond = to;
}

/* Conventional zones have no state to guard (the store has its own
 * locks), so they are never locked for I/O. */
void
znbd_zones_lock_range(struct znbd_zones *zs, uint32_t first, uint32_t last)
{
  for (uint32_t i = first < zs->nr_conv ? zs->nr_conv : first; i <= last; i++)
    pthread_mutex_lock(&zs->zone[i].lock);
}

void
znbd_zones_unlock_range(struct znbd_zones *zs, uint32_t first, uint32_t last)
{
  uint32_t lo = first < zs->nr_conv ? zs->nr_conv : first;
  for (uint32_t i = last + 1; i-- > lo;)
    pthread_mutex_unlock(&zs->zone[i].lock);
}

void
znbd_zone_info(struct znbd_zone *z, struct znbd_zone_info *out)
{
  bool seq = z->type == ZNBD_ZONE_TYPE_SEQWRITE_REQ;

  if (seq)
    pthread_mutex_lock(&z->lock);
  out->start = z->start;
  out->len = z->len;
  out->capacity = z->capacity;
  out->wp = z->wp;
  out->type = z->type;
  out->cond = z->cond;
  if (seq)
    pthread_mutex_unlock(&z->lock);
}

bool
znbd_zone_writable(const struct znbd_zone *z)
{
  return z->cond == ZNBD_ZONE_COND_EMPTY || is_open(z->cond) ||
         z->cond == ZNBD_ZONE_COND_CLOSED;
}

enum znbd_refusal
znbd_zone_unwritable_why(const struct znbd_zone *z)
{
  switch (z->cond) {
  case ZNBD_ZONE_COND_READONLY:
    return ZNBD_REFUSAL_ZONE_READONLY;
  case ZNBD_ZONE_COND_OFFLINE:
    return ZNBD_REFUSAL_ZONE_OFFLINE;
  default:
    return ZNBD_REFUSAL_ZONE_FULL;
  }
}

enum znbd_refusal
znbd_zones_span_why(const struct znbd_zones *zs, uint32_t first, uint32_t last,
                    uint64_t off, uint64_t len)
{
  if (last < zs->nr_conv)
    return ZNBD_REFUSAL_NONE; /* conventional zones only */
  /* The first sequential zone the write touches, in the order ZBC's
   * checks find them: its gap, its condition, then the boundary. */
  const struct znbd_zone *z =
      &zs->zone[first < zs->nr_conv ? zs->nr_conv : first];
  if (z->capacity < z->len && off + len > z->start + z->capacity)
    return ZNBD_REFUSAL_PAST_CAPACITY;
  if (z->cond == ZNBD_ZONE_COND_READONLY || z->cond == ZNBD_ZONE_COND_OFFLINE)
    return znbd_zone_unwritable_why(z);
  return ZNBD_REFUSAL_WRITE_BOUNDARY;
}

/* ---- open/active accounting: the resource checks and their victims ---- */

/* Rule active-check, null_check_active(): room for one more active zone? */
static int
check_active(const struct znbd_zones *zs, const struct znbd_zone_counts *c)
{
  if (!zs->max_active || c->eo + c->io + c->cl < zs->max_active)
    return 0;
  return znbd_refuse(ZNBD_REFUSAL_ZONE_ACTIVE_RESOURCE, EOVERFLOW);
}

static bool
txn_add_victim(struct znbd_zone_txn *t, uint32_t zno)
{
  if (t->nr_victims == t->cap_victims) {
    uint32_t n = t->cap_victims * 2;
    uint32_t *v = malloc(n * sizeof *v);
    if (!v)
      return false;
    memcpy(v, t->victims, t->nr_victims * sizeof *v);
    if (t->victims != t->victims_small)
      free(t->victims);
    t->victims = v;
    t->cap_victims = n;
  }
  t->victims[t->nr_victims++] = zno;
  return true;
}

/* Rules implicit-close and busy-victim, null_close_imp_open_zone(), as a
 * plan: find the next IMP_OPEN zone round-robin from *CURSOR, trylock it
 * (a zone someone else holds is skipped, so locks are never waited for out
 * of order), and record it as a victim, closed at commit.  Resource lock
 * held. */
static int
pick_victim(struct znbd_zones *zs, struct znbd_zone_txn *t,
            struct znbd_zone_counts *c, uint32_t *cursor)
{
  uint32_t zno = *cursor, i;

  if (zno >= zs->nr_zones)
    zno = zs->nr_conv;
  for (i = zs->nr_conv; i < zs->nr_zones; i++) {
    struct znbd_zone *z = &zs->zone[zno];
    uint32_t this = zno;

    if (++zno >= zs->nr_zones)
      zno = zs->nr_conv;
    if (this >= t->first && this <= t->last) {
      /* Our own zones, already locked.  Only a later piece can be
       * IMP_OPEN (earlier ones are FULL by now); it is a victim as in
       * null_blk, and its own piece then fails the wp check. */
      if (this <= t->cur || z->cond != ZNBD_ZONE_COND_IMP_OPEN)
        continue;
    } else if (pthread_mutex_trylock(&z->lock) != 0) {
      continue;
    } else if (z->cond != ZNBD_ZONE_COND_IMP_OPEN || z->held) {
      /* A held zone is being written: as if locked (rule busy-victim). */
      pthread_mutex_unlock(&z->lock);
      continue;
    }
    if (!txn_add_victim(t, this)) {
      if (this < t->first || this > t->last)
        pthread_mutex_unlock(&z->lock);
      errno = ENOMEM;
      return -1;
    }
    account(c, ZNBD_ZONE_COND_IMP_OPEN,
            z->wp == z->start ? ZNBD_ZONE_COND_EMPTY : ZNBD_ZONE_COND_CLOSED);
    *cursor = zno;
    return 0;
  }
  return znbd_refuse(ZNBD_REFUSAL_ZONE_OPEN_RESOURCE, ETOOMANYREFS);
}

/* Rule open-check, null_check_open(), minus its active check (rule
 * reopen-closed): room for one more open zone, if need be by closing a
 * victim. */
static int
check_open(struct znbd_zones *zs, struct znbd_zone_txn *t,
           struct znbd_zone_counts *c, uint32_t *cursor)
{
  if (!zs->max_open || c->eo + c->io < zs->max_open)
    return 0;
  if (c->io == 0)
    return znbd_refuse(ZNBD_REFUSAL_ZONE_OPEN_RESOURCE, ETOOMANYREFS);
  return pick_victim(zs, t, c, cursor);
}

/* Rule resource-checks, null_check_zone_resources(): EMPTY needs an
 * active and an open slot, CLOSED an open slot. */
static int
check_resources(struct znbd_zones *zs, struct znbd_zone_txn *t,
                struct znbd_zone_counts *c, uint32_t *cursor,
                enum znbd_zone_cond cond)
{
  if (cond == ZNBD_ZONE_COND_EMPTY && check_active(zs, c) < 0)
    return -1;
  return check_open(zs, t, c, cursor);
}

void
znbd_zone_txn_release_victims(struct znbd_zone_txn *t)
{
  for (uint32_t i = 0; i < t->nr_victims; i++)
    if (t->victims[i] < t->first || t->victims[i] > t->last)
      pthread_mutex_unlock(&t->zs->zone[t->victims[i]].lock);
  if (t->victims != t->victims_small)
    free(t->victims);
  t->victims = t->victims_small;
  t->nr_victims = 0;
}

struct znbd_zone *
znbd_zones_piece(struct znbd_zones *zs, uint64_t poff, uint64_t end,
                 uint64_t *plen)
{
  struct znbd_zone *z = &zs->zone[znbd_zones_zone_no(zs, poff)];
  uint64_t zend = z->start + z->len;

  *plen = (zend < end ? zend : end) - poff;
  return z;
}

/* ---- the write rules, applied piece by piece by lib/zone_txn.c ---- */

int
znbd_zone_write_check(struct znbd_zones *zs, struct znbd_zone_txn *t,
                      struct znbd_zone *z, uint64_t poff, uint64_t plen,
                      struct znbd_zone_counts *c, uint32_t *cursor)
{
  enum znbd_zone_cond cond = z->cond;

  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
    return 0; /* rule write-conv */
  /* Rule write-at-wp: at the wp, within capacity.  FULL, READONLY and
   * OFFLINE zones never pass.  The reasons in ZBC's order (capacity,
   * condition, wp), one refusal as null_blk's check is. */
  if (poff + plen > z->start + z->capacity)
    return znbd_refuse(ZNBD_REFUSAL_PAST_CAPACITY, EIO);
  if (!znbd_zone_writable(z))
    return znbd_refuse(znbd_zone_unwritable_why(z), EIO);
  if (poff != z->wp)
    return znbd_refuse(ZNBD_REFUSAL_UNALIGNED_WRITE, EIO);
  /* Rule implicit-open, on the copy C of the counters. */
  if (cond == ZNBD_ZONE_COND_EMPTY || cond == ZNBD_ZONE_COND_CLOSED) {
    t->cur = (uint32_t)(z - zs->zone);
    if (check_resources(zs, t, c, cursor, cond) < 0)
      return -1;
    account(c, cond, ZNBD_ZONE_COND_IMP_OPEN);
    cond = ZNBD_ZONE_COND_IMP_OPEN;
  }
  /* Rule write-full: the slot is free for a later piece's checks (C
   * is only kept when some piece needs them). */
  if (t->res_locked && poff + plen == z->start + z->capacity)
    account(c, cond, ZNBD_ZONE_COND_FULL);
  return 0;
}

int
znbd_zone_append_check(const struct znbd_zone *z, uint64_t len)
{
  /* null_zone_write(append): conventional or invalid wp -> EIO; a length
   * past the capacity is refused here, before it could reach the next
   * zone. */
  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
    return znbd_refuse(ZNBD_REFUSAL_CONVENTIONAL_ZONE, EIO);
  if (!znbd_zone_writable(z))
    return znbd_refuse(znbd_zone_unwritable_why(z), EIO);
  if (len > z->start + z->capacity - z->wp)
    return znbd_refuse(ZNBD_REFUSAL_PAST_CAPACITY, EIO);
  return 0;
}

/* Close open zone Z (locked, resource lock held): EMPTY when nothing was
 * written, else CLOSED (null_blk's __null_close_zone()). */
static void
close_now(struct znbd_zones *zs, struct znbd_zone *z)
{
  set_cond(zs, z,
           z->wp == z->start ? ZNBD_ZONE_COND_EMPTY : ZNBD_ZONE_COND_CLOSED);
}

void
znbd_zones_close_victims(struct znbd_zones *zs, const struct znbd_zone_txn *t)
{
  for (uint32_t i = 0; i < t->nr_victims; i++) {
    close_now(zs, &zs->zone[t->victims[i]]);
    zs->imp_close_zone_no = t->victims[i] + 1;
    if (zs->imp_close_zone_no >= zs->nr_zones)
      zs->imp_close_zone_no = zs->nr_conv;
  }
}

void
znbd_zone_advance_wp(struct znbd_zones *zs, struct znbd_zone *z, uint64_t len)
{
  if (z->cond == ZNBD_ZONE_COND_EMPTY || z->cond == ZNBD_ZONE_COND_CLOSED)
    set_cond(zs, z, ZNBD_ZONE_COND_IMP_OPEN);
  z->wp += len;
  if (z->wp == z->start + z->capacity)
    set_cond(zs, z, ZNBD_ZONE_COND_FULL);
}

void
znbd_zone_copy_begin(struct znbd_zone *z)
{
  atomic_fetch_add_explicit(&z->copying, 1, memory_order_relaxed);
}

void
znbd_zone_copy_end(struct znbd_zone *z)
{
  atomic_fetch_sub_explicit(&z->copying, 1, memory_order_release);
}

/* Z locked: let the copies in flight land before Z's data is discarded.
 * No new one can start while we hold the lock, and each is one memcpy. */
static void
wait_copies(struct znbd_zone *z)
{
  while (atomic_load_explicit(&z->copying, memory_order_acquire) != 0)
    sched_yield();
}

/* ---- zone management: one function per operation ---- */

/* Move zone Z (locked, resource lock held) to an open-type condition TO
 * (null_open_zone and the open part of null_finish_zone): runs the checks
 * EMPTY and CLOSED need; closes a victim now if one is needed. */
static int
take_open_slot(struct znbd_zones *zs, struct znbd_zone *z,
               enum znbd_zone_cond to)
{
  struct znbd_zone_txn t = {.zs = zs,
                            .first = (uint32_t)(z - zs->zone),
                            .last = (uint32_t)(z - zs->zone),
                            .cur = (uint32_t)(z - zs->zone),
                            .victims = NULL,
                            .cap_victims = 2};
  struct znbd_zone_counts c = znbd_zones_load_counts(zs);
  uint32_t cursor = zs->imp_close_zone_no;

  t.victims = t.victims_small;
  if (z->cond == ZNBD_ZONE_COND_EMPTY || z->cond == ZNBD_ZONE_COND_CLOSED) {
    if (check_resources(zs, &t, &c, &cursor, z->cond) < 0) {
      znbd_zone_txn_release_victims(&t);
      return -1;
    }
  }
  znbd_zones_close_victims(zs, &t);
  znbd_zone_txn_release_victims(&t);
  set_cond(zs, z, to);
  return 0;
}

/* The operations below: zone Z locked, resource lock held, Z sequential
 * and not READONLY or OFFLINE unless said.  *DISCARD_FROM gets the first
 * byte of [*DISCARD_FROM, zone end) whose data must go, or stays
 * UINT64_MAX.  Each returns 0, or -1 with errno. */

/* Rule explicit-open, null_open_zone(). */
static int
open_zone(struct znbd_zones *zs, struct znbd_zone *z)
{
  if (z->cond == ZNBD_ZONE_COND_EXP_OPEN)
    return 0;
  if (z->cond == ZNBD_ZONE_COND_FULL)
    return znbd_refuse(ZNBD_REFUSAL_ZONE_FULL, EIO);
  return take_open_slot(zs, z, ZNBD_ZONE_COND_EXP_OPEN);
}

/* Rule zone-close, null_close_zone(). */
static int
close_zone(struct znbd_zones *zs, struct znbd_zone *z)
{
  if (z->cond == ZNBD_ZONE_COND_CLOSED)
    return 0;
  if (!is_open(z->cond))
    return znbd_refuse(ZNBD_REFUSAL_ZONE_COND, EIO);
  close_now(zs, z);
  return 0;
}

/* Rule zone-finish, null_finish_zone(). */
static int
finish_zone(struct znbd_zones *zs, struct znbd_zone *z, uint64_t *discard_from)
{
  if (z->cond == ZNBD_ZONE_COND_FULL)
    return 0;
  /* EMPTY and CLOSED run the checks although the zone ends up FULL. */
  if (take_open_slot(zs, z, ZNBD_ZONE_COND_FULL) < 0)
    return -1;
  *discard_from = z->wp;
  z->wp = z->start + z->len;
  return 0;
}

/* Rule zone-reset, null_reset_zone(); also how a READONLY or OFFLINE zone
 * comes back EMPTY. */
static int
reset_zone(struct znbd_zones *zs, struct znbd_zone *z, uint64_t *discard_from)
{
  set_cond(zs, z, ZNBD_ZONE_COND_EMPTY);
  z->wp = z->start;
  *discard_from = z->start;
  return 0;
}

static bool
is_faulty(const struct znbd_zone *z)
{
  return z->cond == ZNBD_ZONE_COND_READONLY ||
         z->cond == ZNBD_ZONE_COND_OFFLINE;
}

/* Rule fault-set, null_set_zone_cond(): Z (any condition) becomes FAULT
 * (READONLY or OFFLINE), or EMPTY when it is FAULT already. */
static int
set_fault(struct znbd_zones *zs, struct znbd_zone *z, enum znbd_zone_cond fault,
          uint64_t *discard_from)
{
  if (z->cond == fault)
    return reset_zone(zs, z, discard_from);
  /* null_set_zone_cond(): the zone is finished first to free its slot
   * (null_finish_zone(), with its resource checks and maybe an
   * implicitly open victim closed), and the finish's result is
   * ignored.  A finish refused on a CLOSED zone (open limit) leaves it
   * counted as closed: null_blk's counters, kept as they are. */
  if (!is_faulty(z) && z->cond != ZNBD_ZONE_COND_FULL &&
      take_open_slot(zs, z, ZNBD_ZONE_COND_FULL) < 0 &&
      z->cond == ZNBD_ZONE_COND_CLOSED)
    zs->nr_fault_stuck++;
  z->cond = fault; /* no accounting: FULL (or stuck) -> fault */
  z->wp = ZNBD_WP_INVALID;
  return 0;
}

/* Back online (configfs clearing zone_readonly/zone_offline): a READONLY
 * or OFFLINE zone Z becomes EMPTY; any other fails with EIO. */
static int
online_zone(struct znbd_zones *zs, struct znbd_zone *z, uint64_t *discard_from)
{
  if (!is_faulty(z))
    return znbd_refuse(ZNBD_REFUSAL_ZONE_COND, EIO);
  return reset_zone(zs, z, discard_from);
}

/* The dispatch, null_zone_mgmt(): OP on zone Z (locked, resource lock
 * held, any type and condition).  The caller discards [*DISCARD_FROM,
 * zone end) after dropping the resource lock. */
static int
zone_op_locked(struct znbd_zones *zs, struct znbd_zone *z, enum znbd_zone_op op,
               uint64_t *discard_from)
{
  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL) {
    /* Zone management ops fail with EIO.  configfs zone_readonly and
     * zone_offline refuse conventional zones too (with EINVAL, as a bad
     * attribute value); here it is an op refused by the zone's type, so
     * EIO like the others (dev.h). */
    return znbd_refuse(ZNBD_REFUSAL_CONVENTIONAL_ZONE, EIO);
  }
  if (is_faulty(z) && op < ZNBD_ZONE_OP_SET_READONLY) /* null_zone_mgmt() */
    return znbd_refuse(znbd_zone_unwritable_why(z), EIO);

  switch (op) {
  case ZNBD_ZONE_OP_OPEN:
    return open_zone(zs, z);
  case ZNBD_ZONE_OP_CLOSE:
    return close_zone(zs, z);
  case ZNBD_ZONE_OP_FINISH:
    return finish_zone(zs, z, discard_from);
  case ZNBD_ZONE_OP_RESET:
    return reset_zone(zs, z, discard_from);
  case ZNBD_ZONE_OP_SET_READONLY:
    return set_fault(zs, z, ZNBD_ZONE_COND_READONLY, discard_from);
  case ZNBD_ZONE_OP_SET_OFFLINE:
    return set_fault(zs, z, ZNBD_ZONE_COND_OFFLINE, discard_from);
  case ZNBD_ZONE_OP_ONLINE:
    return online_zone(zs, z, discard_from);
  default:
    errno = EINVAL;
    return -1;
  }
}

/* Does OP take Z's wp away from its parked writes? */
static bool
op_aborts_parked(enum znbd_zone_op op)
{
  return op == ZNBD_ZONE_OP_RESET || op == ZNBD_ZONE_OP_FINISH ||
         op == ZNBD_ZONE_OP_SET_READONLY || op == ZNBD_ZONE_OP_SET_OFFLINE;
}

int
znbd_zones_mgmt(struct znbd_zones *zs, enum znbd_zone_op op, uint32_t zno,
                znbd_zone_discard_fn discard, void *opaque)
{
  struct znbd_zone *z;
  struct done_list dl = DONE_LIST_INIT(dl);
  uint64_t from = UINT64_MAX;
  int r;

  if (zno == ZNBD_ALL_ZONES && op == ZNBD_ZONE_OP_RESET) {
    /* Rule reset-all, null_zone_mgmt(REQ_OP_ZONE_RESET_ALL): zone by zone;
     * parked writes fail in every zone, EMPTY ones included.  A held zone
     * is left for the caller's next try. */
    bool busy = false;
    for (uint32_t i = zs->nr_conv; i < zs->nr_zones; i++) {
      z = &zs->zone[i];
      pthread_mutex_lock(&z->lock);
      if (z->held) {
        busy = true;
      } else if (z->cond != ZNBD_ZONE_COND_EMPTY &&
                 z->cond != ZNBD_ZONE_COND_READONLY &&
                 z->cond != ZNBD_ZONE_COND_OFFLINE) {
        pthread_mutex_lock(&zs->res_lock);
        zone_op_locked(zs, z, ZNBD_ZONE_OP_RESET, &from);
        pthread_mutex_unlock(&zs->res_lock);
        wait_copies(z);
        if (discard)
          discard(opaque, z, z->start);
      }
      unpark_all(zs, z, &dl);
      pthread_mutex_unlock(&z->lock);
    }
    call_done(&dl);
    if (busy)
      errno = EBUSY;
    return busy ? -1 : 0;
  }
  if (zno >= zs->nr_zones || (unsigned)op > ZNBD_ZONE_OP_ONLINE) {
    errno = EINVAL;
    return -1;
  }
  z = &zs->zone[zno];
  pthread_mutex_lock(&z->lock);
  if (z->held) {
    pthread_mutex_unlock(&z->lock);
    errno = EBUSY;
    return -1;
  }
  pthread_mutex_lock(&zs->res_lock);
  r = zone_op_locked(zs, z, op, &from);
  pthread_mutex_unlock(&zs->res_lock);
  if (discard && from < z->start + z->len) {
    wait_copies(z);
    discard(opaque, z, from);
  }
  if (r == 0 && op_aborts_parked(op))
    unpark_all(zs, z, &dl);
  pthread_mutex_unlock(&z->lock);
  call_done(&dl);
  return r;
}

int
znbd_zones_restore(struct znbd_zones *zs, uint32_t zno, uint64_t written)
{
  struct znbd_zone *z;

  if (zno < zs->nr_conv || zno >= zs->nr_zones) {
    errno = EINVAL;
    return -1;
  }
  z = &zs->zone[zno];
  if (z->cond != ZNBD_ZONE_COND_EMPTY || written > z->capacity) {
    errno = EINVAL;
    return -1;
  }
  if (written == 0)
    return 0;
  pthread_mutex_lock(&zs->res_lock);
  z->wp = z->start + written;
  if (written == z->capacity) {
    z->cond = ZNBD_ZONE_COND_FULL;
  } else {
    /* Not through store_counts(): this may pass max_active on purpose. */
    z->cond = ZNBD_ZONE_COND_CLOSED;
    zs->nr_closed++;
  }
  pthread_mutex_unlock(&zs->res_lock);
  return 0;
}

/* Bytes written from Z's start: its capacity when FULL (finish put the
 * wp at the zone end).  Z is a sequential zone, locked. */
static uint64_t
written_locked(const struct znbd_zone *z)
{
  return z->cond == ZNBD_ZONE_COND_FULL ? z->capacity : z->wp - z->start;
}

/* A sequential zone with a wp (not READONLY or OFFLINE). */
static bool
has_wp(const struct znbd_zone *z)
{
  return z->type == ZNBD_ZONE_TYPE_SEQWRITE_REQ &&
         z->cond != ZNBD_ZONE_COND_READONLY &&
         z->cond != ZNBD_ZONE_COND_OFFLINE;
}

bool
znbd_zones_written(struct znbd_zones *zs, uint32_t zno, uint64_t *written)
{
  struct znbd_zone *z = &zs->zone[zno];
  pthread_mutex_lock(&z->lock);
  bool r = has_wp(z);
  if (r)
    *written = written_locked(z);
  pthread_mutex_unlock(&z->lock);
  return r;
}

int
znbd_zones_power_cycle(struct znbd_zones *zs, uint32_t zno, uint64_t *keep,
                       znbd_zone_cut_fn cut, void *opaque)
{
  struct znbd_zone *z = &zs->zone[zno];
  int r = 0;
  pthread_mutex_lock(&z->lock);
  if (!has_wp(z))
    goto out;
  uint64_t now = written_locked(z);
  if (*keep > now)
    *keep = now;
  uint64_t kept = *keep;
  if (kept < now) {
    wait_copies(z);
    r = cut(opaque, zno, z, kept);
  }
  enum znbd_zone_cond to = kept == 0             ? ZNBD_ZONE_COND_EMPTY
                           : kept == z->capacity ? ZNBD_ZONE_COND_FULL
                                                 : ZNBD_ZONE_COND_CLOSED;
  pthread_mutex_lock(&zs->res_lock);
  /* Not through store_counts(): a zone FULL before the cut may come back
   * CLOSED and take the active count past max_active, as after a restart
   * (znbd_zones_restore). */
  struct znbd_zone_counts c = znbd_zones_load_counts(zs);
  account(&c, z->cond, to);
  zs->nr_imp_open = c.io;
  zs->nr_exp_open = c.eo;
  zs->nr_closed = c.cl;
  /* A zone FULL before and after keeps its wp (finish put it at the zone
   * end); else the wp is what was kept, as znbd_zones_restore sets it. */
  if (!(to == ZNBD_ZONE_COND_FULL && z->cond == ZNBD_ZONE_COND_FULL))
    z->wp = z->start + kept;
  z->cond = to;
  pthread_mutex_unlock(&zs->res_lock);
out:
  pthread_mutex_unlock(&z->lock);
  return r;
}

void
znbd_zones_counters(struct znbd_zones *zs, uint32_t *imp_open,
                    uint32_t *exp_open, uint32_t *closed)
{
  pthread_mutex_lock(&zs->res_lock);
  *imp_open = zs->nr_imp_open;
  *exp_open = zs->nr_exp_open;
  *closed = zs->nr_closed;
  pthread_mutex_unlock(&zs->res_lock);
}
