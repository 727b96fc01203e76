/* znbd: the zone state machine.  See lib/zone.h for the contract
 * and doc/zone-rules.md for every rule (cited here by name, e.g. rule
 * open-check) and its source (Linux drivers/block/null_blk/zoned.c).  All
 * offsets and lengths are bytes. */
#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zone.h"
#include "znbd/geometry.h"

static bool
is_open(enum znbd_zone_cond c)
{
  return c == ZNBD_ZONE_COND_IMP_OPEN || c == ZNBD_ZONE_COND_EXP_OPEN;
}

/* Counters live in a small struct so a prepare can simulate a multi-zone
 * write on a copy before committing anything. */
struct counts {
  uint32_t io, eo, cl;
};

static uint32_t *
counter(struct counts *c, enum znbd_zone_cond cond)
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
account(struct counts *c, enum znbd_zone_cond from, enum znbd_zone_cond to)
{
  uint32_t *p = counter(c, from), *q = counter(c, to);
  if (p) {
    assert(*p > 0);
    (*p)--;
  }
  if (q)
    (*q)++;
}

static struct counts
load_counts(const struct znbd_zones *zs)
{
  return (struct counts){zs->nr_imp_open, zs->nr_exp_open, zs->nr_closed};
}

/* The counters' invariants (rule counters, open-check, active-check):
 * never more zones counted than there are sequential zones, never more
 * open or active zones than the limits allow. */
static void
store_counts(struct znbd_zones *zs, struct counts c)
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
  struct counts c = load_counts(zs);
  account(&c, z->cond, to);
  store_counts(zs, c);
  z->cond = to;
}

int
znbd_zones_init(struct znbd_zones *zs, const struct znbd_zone_geometry *g)
{
  /* The geometry and null_blk's clamps come from lib/geometry.c (the
   * one place they are derived); this lays the zones out from it. */
  struct znbd_geometry_request r = {
      .size = g->size,
      .zoned = true,
      .zone_size = g->zone_size,
      .zone_capacity = g->zone_capacity,
      .nr_conv = g->nr_conv,
      .max_open = g->max_open,
      .max_active = g->max_active,
  };
  struct znbd_geometry geo;
  uint32_t i;

  memset(zs, 0, sizeof *zs);
  if (znbd_geometry_derive(&geo, &r) < 0 || geo.nr_zones == UINT32_MAX) {
    errno = EINVAL;
    return -1;
  }
  zs->zone = calloc(geo.nr_zones, sizeof *zs->zone);
  if (!zs->zone)
    return -1;
  zs->nr_zones = geo.nr_zones;
  zs->size = geo.size;
  zs->zone_size = geo.zone_size;
  zs->zone_size_po2 = (geo.zone_size & (geo.zone_size - 1)) == 0;
  if (zs->zone_size_po2)
    zs->zone_shift = (unsigned)__builtin_ctzll(geo.zone_size);
  zs->nr_conv = geo.nr_conv;
  zs->max_active = geo.max_active;
  zs->max_open = geo.max_open;
  zs->imp_close_zone_no = zs->nr_conv;
  pthread_mutex_init(&zs->res_lock, NULL);
  pthread_mutex_init(&zs->sweep_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&zs->sweep_cv, &ca);
  pthread_condattr_destroy(&ca);
  atomic_init(&zs->nparked, 0);
  atomic_init(&zs->park_waits, 0);
  atomic_init(&zs->park_sleeps, 0);

  /* Adaptive zone locks: a writer holds one for well under a microsecond
   * (the data is copied outside it), so spinning a little beats sleeping
   * in the kernel when a sequential stream's writers meet on a zone. */
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
  for (i = 0; i < zs->nr_zones; i++) {
    struct znbd_zone *z = &zs->zone[i];
    struct znbd_geometry_span sp = znbd_geometry_span(&geo, i);

    pthread_mutex_init(&z->lock, &ma);
    atomic_init(&z->copying, 0);
    z->parked = NULL;
    atomic_init(&z->nparked, 0);
    z->start = sp.start;
    z->len = sp.len;
    z->capacity = sp.cap;
    if (!sp.seq) {
      z->type = ZNBD_ZONE_TYPE_CONVENTIONAL;
      z->cond = ZNBD_ZONE_COND_NOT_WP;
      z->wp = ZNBD_WP_INVALID;
      continue;
    }
    z->type = ZNBD_ZONE_TYPE_SEQWRITE_REQ;
    z->cond = g->zone_full ? ZNBD_ZONE_COND_FULL : ZNBD_ZONE_COND_EMPTY;
    z->wp = g->zone_full ? z->start + z->len : z->start;
  }
  pthread_mutexattr_destroy(&ma);
  return 0;
}

void
znbd_zones_destroy(struct znbd_zones *zs)
{
  uint32_t i;

  if (!zs->zone)
    return;
  pthread_mutex_lock(&zs->sweep_lock);
  zs->sweep_stop = true;
  pthread_cond_signal(&zs->sweep_cv);
  pthread_mutex_unlock(&zs->sweep_lock);
  if (zs->sweeper_running)
    pthread_join(zs->sweeper, NULL);
  pthread_cond_destroy(&zs->sweep_cv);
  pthread_mutex_destroy(&zs->sweep_lock);
  for (i = 0; i < zs->nr_zones; i++) {
    pthread_mutex_destroy(&zs->zone[i].lock);
  }
  pthread_mutex_destroy(&zs->res_lock);
  free(zs->zone);
  zs->zone = NULL;
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

uint64_t
znbd_zone_data_end(const struct znbd_zone *z)
{
  uint64_t cap_end = z->start + z->capacity;

  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
    return z->start + z->len;
  if (z->wp == ZNBD_WP_INVALID)
    return cap_end;
  return z->wp < cap_end ? z->wp : cap_end;
}

static bool
writable(const struct znbd_zone *z)
{
  return z->cond == ZNBD_ZONE_COND_EMPTY || is_open(z->cond) ||
         z->cond == ZNBD_ZONE_COND_CLOSED;
}

/* ---- parked writes ---- */

/* Parked writes taken off their zone, to be told how they ended once no
 * zone lock is held. */
struct done_list {
  struct znbd_zone_write *head, **tail;
};
#define DONE_LIST_INIT(l)                                                      \
  {                                                                            \
    NULL, &(l).head                                                            \
  }

static uint64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Take the parked write *PP off zone Z (locked) into DL with ERR. */
static void
unpark(struct znbd_zones *zs, struct znbd_zone *z, struct znbd_zone_write **pp,
       int err, struct done_list *dl)
{
  struct znbd_zone_write *w = *pp;
  *pp = w->next;
  atomic_fetch_sub(&z->nparked, 1);
  atomic_fetch_sub(&zs->nparked, 1);
  w->err = err;
  w->next = NULL;
  *dl->tail = w;
  dl->tail = &w->next;
}

static void
unpark_all(struct znbd_zones *zs, struct znbd_zone *z, struct done_list *dl)
{
  while (z->parked)
    unpark(zs, z, &z->parked, EIO, dl);
}

/* Tell the writes in DL how they ended (no zone lock held). */
static void
call_done(struct done_list *dl)
{
  for (struct znbd_zone_write *w = dl->head, *n; w; w = n) {
    n = w->next;
    w->done(w, w->err);
  }
  dl->head = NULL;
  dl->tail = &dl->head;
}

/* Fail the parked writes whose deadline passed, zone by zone.  Zones
 * with nothing parked are skipped without their lock. */
static void
sweep(struct znbd_zones *zs, uint64_t now)
{
  struct done_list dl = DONE_LIST_INIT(dl);

  for (uint32_t i = zs->nr_conv; i < zs->nr_zones; i++) {
    struct znbd_zone *z = &zs->zone[i];
    if (atomic_load(&z->nparked) == 0)
      continue;
    pthread_mutex_lock(&z->lock);
    for (struct znbd_zone_write **pp = &z->parked; *pp;) {
      if ((*pp)->deadline_ns <= now)
        unpark(zs, z, pp, EIO, &dl);
      else
        pp = &(*pp)->next;
    }
    pthread_mutex_unlock(&z->lock);
    call_done(&dl);
  }
}

/* Fail every parked write with EIO, zone by zone (zones with nothing
 * parked skipped without their lock when SKIP_EMPTY). */
static void
fail_all_parked(struct znbd_zones *zs, bool skip_empty)
{
  struct done_list dl = DONE_LIST_INIT(dl);
  for (uint32_t i = zs->nr_conv; i < zs->nr_zones; i++) {
    struct znbd_zone *z = &zs->zone[i];
    if (skip_empty && atomic_load(&z->nparked) == 0)
      continue;
    pthread_mutex_lock(&z->lock);
    unpark_all(zs, z, &dl);
    pthread_mutex_unlock(&z->lock);
    call_done(&dl);
  }
}

void
znbd_zones_close_parking(struct znbd_zones *zs)
{
  pthread_mutex_lock(&zs->sweep_lock);
  zs->park_closed = true;
  pthread_mutex_unlock(&zs->sweep_lock);
  /* Every zone under its lock, without a look at nparked first: a write
   * that found parking open holds its zone's lock until it is in the
   * list, so it is either there now or will find parking closed. */
  fail_all_parked(zs, false);
}

void
znbd_zones_fail_parked(struct znbd_zones *zs)
{
  fail_all_parked(zs, true); /* no write can be parking now */
}

/* How often the sweeper looks while writes are parked: zone_write_timeout
 * is kept to within this. */
#define SWEEP_NSEC 5000000L

static void *
sweeper_main(void *arg)
{
  struct znbd_zones *zs = arg;

  pthread_mutex_lock(&zs->sweep_lock);
  while (!zs->sweep_stop) {
    if (atomic_load(&zs->nparked) == 0) {
      pthread_cond_wait(&zs->sweep_cv, &zs->sweep_lock);
      continue;
    }
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_nsec += SWEEP_NSEC;
    if (dl.tv_nsec >= 1000000000L) {
      dl.tv_sec++;
      dl.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&zs->sweep_cv, &zs->sweep_lock, &dl);
    pthread_mutex_unlock(&zs->sweep_lock);
    sweep(zs, now_ns());
    pthread_mutex_lock(&zs->sweep_lock);
  }
  pthread_mutex_unlock(&zs->sweep_lock);
  return NULL;
}

/* Park W in zone Z (locked), sorted by offset; the sweeper is started
 * with the first parked write and woken when it sleeps.  Returns 0, or
 * -1 with errno ENOMEM (no sweeper thread). */
static int
park(struct znbd_zones *zs, struct znbd_zone *z, struct znbd_zone_write *w)
{
  pthread_mutex_lock(&zs->sweep_lock);
  if (zs->park_closed) {
    pthread_mutex_unlock(&zs->sweep_lock);
    errno = EIO; /* stopping: nobody may wait any more */
    return -1;
  }
  if (!zs->sweeper_running) {
    if (pthread_create(&zs->sweeper, NULL, sweeper_main, zs) != 0) {
      pthread_mutex_unlock(&zs->sweep_lock);
      errno = ENOMEM;
      return -1;
    }
    zs->sweeper_running = true;
  }
  if (atomic_fetch_add(&zs->nparked, 1) == 0)
    pthread_cond_signal(&zs->sweep_cv);
  pthread_mutex_unlock(&zs->sweep_lock);

  w->deadline_ns = now_ns() + (uint64_t)w->timeout_ms * 1000000u;
  w->err = 0;
  struct znbd_zone_write **pp = &z->parked;
  while (*pp && (*pp)->off <= w->off)
    pp = &(*pp)->next;
  w->next = *pp;
  *pp = w;
  atomic_fetch_add(&z->nparked, 1);
  return 0;
}

/* Rule active-check, null_check_active(): room for one more active zone? */
static int
check_active(const struct znbd_zones *zs, const struct counts *c)
{
  if (!zs->max_active || c->eo + c->io + c->cl < zs->max_active)
    return 0;
  errno = EOVERFLOW;
  return -1;
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
pick_victim(struct znbd_zones *zs, struct znbd_zone_txn *t, struct counts *c,
            uint32_t *cursor)
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
    } else if (z->cond != ZNBD_ZONE_COND_IMP_OPEN) {
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
  errno = ETOOMANYREFS;
  return -1;
}

/* Rule open-check, null_check_open(), minus its active check (rule
 * reopen-closed): room for one more open zone, if need be by closing a
 * victim. */
static int
check_open(struct znbd_zones *zs, struct znbd_zone_txn *t, struct counts *c,
           uint32_t *cursor)
{
  if (!zs->max_open || c->eo + c->io < zs->max_open)
    return 0;
  if (c->io == 0) {
    errno = ETOOMANYREFS;
    return -1;
  }
  return pick_victim(zs, t, c, cursor);
}

/* Rule resource-checks, null_check_zone_resources(): EMPTY needs an
 * active and an open slot, CLOSED an open slot. */
static int
check_resources(struct znbd_zones *zs, struct znbd_zone_txn *t,
                struct counts *c, uint32_t *cursor, enum znbd_zone_cond cond)
{
  if (cond == ZNBD_ZONE_COND_EMPTY && check_active(zs, c) < 0)
    return -1;
  return check_open(zs, t, c, cursor);
}

static void
release_victims(struct znbd_zone_txn *t)
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

#define FOR_EACH_PIECE(zs, off, n, z, poff, plen)                              \
  for (uint64_t poff = (off), plen = 0, end_ = (off) + (n);                    \
       poff < end_ && ((z) = znbd_zones_piece((zs), poff, end_, &plen));       \
       poff += plen)

int
znbd_zone_write_prepare(struct znbd_zones *zs, struct znbd_zone_txn *t,
                        uint64_t off, uint64_t len)
{
  struct znbd_zone *z;
  struct counts c = {0, 0, 0};
  uint32_t cursor = 0;
  bool need_res = false;

  memset(t, 0, sizeof *t);
  t->zs = zs;
  t->off = off;
  t->len = len;
  t->victims = t->victims_small;
  t->cap_victims = 2;
  if (len == 0 || off >= zs->size || len > zs->size - off) {
    errno = EINVAL;
    return -1;
  }
  t->first = znbd_zones_zone_no(zs, off);
  t->last = znbd_zones_last_zone_no(zs, t->first, off, len);

  /* Resource checks need the resource lock from the first piece on; the
   * conditions are stable (all the zones are locked). */
  FOR_EACH_PIECE(zs, off, len, z, poff, plen)
  {
    if (z->cond == ZNBD_ZONE_COND_EMPTY || z->cond == ZNBD_ZONE_COND_CLOSED)
      need_res = true;
  }
  if (need_res) {
    pthread_mutex_lock(&zs->res_lock);
    t->res_locked = true;
    c = load_counts(zs);
    cursor = zs->imp_close_zone_no;
  }

  /* Piece by piece, as separate writes in ascending order would be. */
  FOR_EACH_PIECE(zs, off, len, z, poff, plen)
  {
    enum znbd_zone_cond cond = z->cond;

    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
      continue; /* rule write-conv */
    /* Rule write-at-wp: at the wp, within capacity.  FULL, READONLY and
     * OFFLINE zones never pass. */
    if (!writable(z) || poff != z->wp ||
        plen > z->start + z->capacity - z->wp) {
      znbd_zone_write_abort(t);
      errno = EIO;
      return -1;
    }
    /* Rule implicit-open, on the copy C of the counters. */
    if (cond == ZNBD_ZONE_COND_EMPTY || cond == ZNBD_ZONE_COND_CLOSED) {
      t->cur = (uint32_t)(z - zs->zone);
      if (check_resources(zs, t, &c, &cursor, cond) < 0) {
        int e = errno;
        znbd_zone_write_abort(t);
        errno = e;
        return -1;
      }
      account(&c, cond, ZNBD_ZONE_COND_IMP_OPEN);
      cond = ZNBD_ZONE_COND_IMP_OPEN;
    }
    /* Rule write-full: the slot is free for a later piece's checks (C
     * is only kept when some piece needs them). */
    if (t->res_locked && poff + plen == z->start + z->capacity)
      account(&c, cond, ZNBD_ZONE_COND_FULL);
  }
  return 0;
}

int
znbd_zone_append_prepare(struct znbd_zones *zs, struct znbd_zone_txn *t,
                         uint32_t zno, uint64_t len, uint64_t *off)
{
  struct znbd_zone *z;

  memset(t, 0, sizeof *t);
  t->victims = t->victims_small;
  if (zno >= zs->nr_zones || len == 0) {
    errno = EINVAL;
    return -1;
  }
  z = &zs->zone[zno];
  /* null_zone_write(append): conventional or invalid wp -> EIO; a length
   * past the capacity is refused here, before it could reach the next
   * zone. */
  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL || !writable(z) ||
      len > z->start + z->capacity - z->wp) {
    errno = EIO;
    return -1;
  }
  *off = z->wp;
  return znbd_zone_write_prepare(zs, t, z->wp, len);
}

void
znbd_zone_write_commit(struct znbd_zone_txn *t)
{
  struct znbd_zones *zs = t->zs;
  struct znbd_zone *z;
  bool locked = t->res_locked;

  FOR_EACH_PIECE(zs, t->off, t->len, z, poff, plen)
  {
    (void)poff;
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
      continue;
    if (!locked && (z->wp + plen == z->start + z->capacity)) {
      pthread_mutex_lock(&zs->res_lock);
      locked = true;
    }
  }
  /* Victims first: in null_blk they close before the write opens. */
  for (uint32_t i = 0; i < t->nr_victims; i++) {
    struct znbd_zone *v = &zs->zone[t->victims[i]];
    set_cond(zs, v,
             v->wp == v->start ? ZNBD_ZONE_COND_EMPTY : ZNBD_ZONE_COND_CLOSED);
    zs->imp_close_zone_no = t->victims[i] + 1;
    if (zs->imp_close_zone_no >= zs->nr_zones)
      zs->imp_close_zone_no = zs->nr_conv;
  }
  FOR_EACH_PIECE(zs, t->off, t->len, z, poff, plen)
  {
    (void)poff;
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
      continue;
    if (z->cond == ZNBD_ZONE_COND_EMPTY || z->cond == ZNBD_ZONE_COND_CLOSED)
      set_cond(zs, z, ZNBD_ZONE_COND_IMP_OPEN);
    z->wp += plen;
    if (z->wp == z->start + z->capacity)
      set_cond(zs, z, ZNBD_ZONE_COND_FULL);
  }
  if (locked)
    pthread_mutex_unlock(&zs->res_lock);
  t->res_locked = false;
  release_victims(t);
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

void
znbd_zone_write_abort(struct znbd_zone_txn *t)
{
  release_victims(t);
  if (t->res_locked)
    pthread_mutex_unlock(&t->zs->res_lock);
  t->res_locked = false;
}

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
  struct counts c = load_counts(zs);
  uint32_t cursor = zs->imp_close_zone_no;

  t.victims = t.victims_small;
  if (z->cond == ZNBD_ZONE_COND_EMPTY || z->cond == ZNBD_ZONE_COND_CLOSED) {
    if (check_resources(zs, &t, &c, &cursor, z->cond) < 0) {
      release_victims(&t);
      return -1;
    }
  }
  for (uint32_t i = 0; i < t.nr_victims; i++) {
    struct znbd_zone *v = &zs->zone[t.victims[i]];
    set_cond(zs, v,
             v->wp == v->start ? ZNBD_ZONE_COND_EMPTY : ZNBD_ZONE_COND_CLOSED);
  }
  if (t.nr_victims)
    zs->imp_close_zone_no = cursor;
  release_victims(&t);
  set_cond(zs, z, to);
  return 0;
}

/* One zone, locked, resource lock held.  *DISCARD_FROM gets the first
 * byte of [*DISCARD_FROM, zone end) whose data must go, or stays
 * UINT64_MAX; the caller discards after dropping the resource lock. */
static int
zone_op_locked(struct znbd_zones *zs, struct znbd_zone *z, enum znbd_zone_op op,
               uint64_t *discard_from)
{
  bool faulty =
      z->cond == ZNBD_ZONE_COND_READONLY || z->cond == ZNBD_ZONE_COND_OFFLINE;
  enum znbd_zone_cond fault;

  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL) {
    /* Zone management ops fail with EIO.  configfs zone_readonly and
     * zone_offline refuse conventional zones too (with EINVAL, as a bad
     * attribute value); here it is an op refused by the zone's type, so
     * EIO like the others (dev.h). */
    errno = EIO;
    return -1;
  }
  if (faulty && op < ZNBD_ZONE_OP_SET_READONLY) {
    errno = EIO; /* null_zone_mgmt() */
    return -1;
  }

  switch (op) {
  case ZNBD_ZONE_OP_OPEN: /* rule explicit-open, null_open_zone() */
    if (z->cond == ZNBD_ZONE_COND_EXP_OPEN)
      return 0;
    if (z->cond == ZNBD_ZONE_COND_FULL) {
      errno = EIO;
      return -1;
    }
    return take_open_slot(zs, z, ZNBD_ZONE_COND_EXP_OPEN);

  case ZNBD_ZONE_OP_CLOSE: /* rule zone-close, null_close_zone() */
    if (z->cond == ZNBD_ZONE_COND_CLOSED)
      return 0;
    if (!is_open(z->cond)) {
      errno = EIO;
      return -1;
    }
    set_cond(zs, z,
             z->wp == z->start ? ZNBD_ZONE_COND_EMPTY : ZNBD_ZONE_COND_CLOSED);
    break;

  case ZNBD_ZONE_OP_FINISH: /* rule zone-finish, null_finish_zone() */
    if (z->cond == ZNBD_ZONE_COND_FULL)
      return 0;
    /* EMPTY and CLOSED run the checks although the zone ends up FULL. */
    if (take_open_slot(zs, z, ZNBD_ZONE_COND_FULL) < 0)
      return -1;
    *discard_from = z->wp;
    z->wp = z->start + z->len;
    break;

  case ZNBD_ZONE_OP_RESET: /* rule zone-reset, null_reset_zone() */
    set_cond(zs, z, ZNBD_ZONE_COND_EMPTY);
    z->wp = z->start;
    *discard_from = z->start;
    break;

  case ZNBD_ZONE_OP_SET_READONLY: /* rule fault-set, null_set_zone_cond() */
  case ZNBD_ZONE_OP_SET_OFFLINE:
    fault = op == ZNBD_ZONE_OP_SET_READONLY ? ZNBD_ZONE_COND_READONLY
                                            : ZNBD_ZONE_COND_OFFLINE;
    if (z->cond == fault) {
      set_cond(zs, z, ZNBD_ZONE_COND_EMPTY);
      z->wp = z->start;
      *discard_from = z->start;
      break;
    }
    /* null_set_zone_cond(): the zone is finished first to free its slot
     * (null_finish_zone(), with its resource checks and maybe an
     * implicitly open victim closed), and the finish's result is
     * ignored.  A finish refused on a CLOSED zone (open limit) leaves it
     * counted as closed: null_blk's counters, kept as they are. */
    if (!faulty && z->cond != ZNBD_ZONE_COND_FULL &&
        take_open_slot(zs, z, ZNBD_ZONE_COND_FULL) < 0 &&
        z->cond == ZNBD_ZONE_COND_CLOSED)
      zs->nr_fault_stuck++;
    z->cond = fault; /* no accounting: FULL (or stuck) -> fault */
    z->wp = ZNBD_WP_INVALID;
    break;

  case ZNBD_ZONE_OP_ONLINE:
    if (!faulty) {
      errno = EIO;
      return -1;
    }
    set_cond(zs, z, ZNBD_ZONE_COND_EMPTY);
    z->wp = z->start;
    *discard_from = z->start;
    break;

  default:
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* Does OP take Z's wp away from its parked writes? */
static bool
op_aborts_parked(enum znbd_zone_op op)
{
  return op == ZNBD_ZONE_OP_RESET || op == ZNBD_ZONE_OP_FINISH ||
         op == ZNBD_ZONE_OP_SET_READONLY || op == ZNBD_ZONE_OP_SET_OFFLINE;
}

int
znbd_zone_mgmt(struct znbd_zones *zs, enum znbd_zone_op op, uint32_t zno,
               znbd_zone_discard_fn discard, void *opaque)
{
  struct znbd_zone *z;
  struct done_list dl = DONE_LIST_INIT(dl);
  uint64_t from = UINT64_MAX;
  int r;

  if (zno == ZNBD_ALL_ZONES && op == ZNBD_ZONE_OP_RESET) {
    /* Rule reset-all, null_zone_mgmt(REQ_OP_ZONE_RESET_ALL): zone by zone;
     * parked writes fail in every zone, EMPTY ones included. */
    for (uint32_t i = zs->nr_conv; i < zs->nr_zones; i++) {
      z = &zs->zone[i];
      pthread_mutex_lock(&z->lock);
      if (z->cond != ZNBD_ZONE_COND_EMPTY &&
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
    return 0;
  }
  if (zno >= zs->nr_zones || (unsigned)op > ZNBD_ZONE_OP_ONLINE) {
    errno = EINVAL;
    return -1;
  }
  z = &zs->zone[zno];
  pthread_mutex_lock(&z->lock);
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
znbd_zone_written(struct znbd_zones *zs, uint32_t zno, uint64_t *written)
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
znbd_zone_power_cycle(struct znbd_zones *zs, uint32_t zno, uint64_t *keep,
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
  struct counts c = load_counts(zs);
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

/* End (exclusive, bytes) of the [capacity, zone end) bytes of zone Z
 * (locked, sequential) that null_blk reads from memory although nobody
 * can write them: null_zone_valid_read_len() compares with the wp, which
 * null_finish_zone() sets to start + zone size and a READONLY zone has
 * invalid (all ones, above everything).  A zone filled by writes keeps
 * its wp at start + capacity, so it has no such gap.  Without a gap:
 * znbd_zone_data_end(Z). */
static uint64_t
gap_end(const struct znbd_zone *z)
{
  uint64_t end = z->start + z->len;

  if (z->cond == ZNBD_ZONE_COND_READONLY)
    return end;
  if (z->cond == ZNBD_ZONE_COND_FULL && z->wp != ZNBD_WP_INVALID &&
      z->wp > z->start + z->capacity)
    return z->wp < end ? z->wp : end;
  return znbd_zone_data_end(z);
}

/* Call FN for the part of [OFF, END) inside [LO, HI), if any. */
static int
clipped_span(znbd_zone_span_fn fn, void *opaque, uint64_t off, uint64_t end,
             uint64_t lo, uint64_t hi, enum znbd_zone_span span)
{
  if (lo < off)
    lo = off;
  if (hi > end)
    hi = end;
  return lo < hi ? fn(opaque, lo, hi - lo, span) : 0;
}

int
znbd_zones_spans(struct znbd_zones *zs, uint64_t off, uint64_t len,
                 znbd_zone_span_fn fn, void *opaque)
{
  struct znbd_zone *z;
  int r = 0;

  FOR_EACH_PIECE(zs, off, len, z, poff, plen)
  {
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL) {
      r = fn(opaque, poff, plen, ZNBD_SPAN_CONV);
      if (r)
        return r;
      continue;
    }
    pthread_mutex_lock(&z->lock);
    if (z->cond == ZNBD_ZONE_COND_OFFLINE) {
      r = fn(opaque, poff, plen, ZNBD_SPAN_OFFLINE);
    } else {
      uint64_t pend = poff + plen, dend = znbd_zone_data_end(z);
      uint64_t gend = gap_end(z);
      r = clipped_span(fn, opaque, poff, pend, z->start, dend, ZNBD_SPAN_DATA);
      if (r == 0)
        r = clipped_span(fn, opaque, poff, pend, dend, gend, ZNBD_SPAN_GAP);
      if (r == 0)
        r = clipped_span(fn, opaque, poff, pend, gend, z->start + z->len,
                         ZNBD_SPAN_PAST_WP);
    }
    if (r) {
      int e = errno;
      pthread_mutex_unlock(&z->lock);
      errno = e;
      return r;
    }
    pthread_mutex_unlock(&z->lock);
  }
  return 0;
}

/* Zone Z (locked) is sequential and writable with OFF ahead of its wp,
 * below its capacity: a pipelined write at OFF has to wait for the wp. */
static bool
ahead_of_wp(const struct znbd_zone *z, uint64_t off)
{
  return z->type == ZNBD_ZONE_TYPE_SEQWRITE_REQ && z->wp != ZNBD_WP_INVALID &&
         off > z->wp && off < z->start + z->capacity;
}

/* Write W, whose first zone FIRST the caller holds (if sequential): lock
 * the others, prepare, then store and commit (or abort), or with LATE
 * commit and count a copy in flight per zone (the caller stores after
 * unlocking, then calls znbd_zone_copy_end).  Returns 0 or an errno. */
static int
run_write(struct znbd_zones *zs, struct znbd_zone_write *w, uint32_t first,
          uint32_t last, bool late)
{
  struct znbd_zone_txn t;
  int e = 0;

  if (first < last)
    znbd_zones_lock_range(zs, first + 1, last);
  if (znbd_zone_write_prepare(zs, &t, w->off, w->len) < 0) {
    e = errno;
  } else if (!late && w->store(w->opaque, w->data, w->len, w->off) < 0) {
    e = errno;
    znbd_zone_write_abort(&t);
  } else {
    znbd_zone_write_commit(&t);
    for (uint32_t i = first; i <= last && late; i++)
      znbd_zone_copy_begin(&zs->zone[i]);
  }
  if (first < last)
    znbd_zones_unlock_range(zs, first + 1, last);
  return e;
}

/* Zone I (locked): run the parked writes its wp reached, in order, until
 * the next is still ahead; fail those it went past, and all of them when
 * the zone is no longer writable.  *HI grows to the last zone a parked
 * write ran into (its parked writes may line up now too). */
static void
drain_locked(struct znbd_zones *zs, uint32_t i, uint32_t *hi,
             struct done_list *dl)
{
  struct znbd_zone *z = &zs->zone[i];
  struct znbd_zone_write *w;

  while ((w = z->parked) && (!writable(z) || w->off <= z->wp)) {
    if (!writable(z) || w->off != z->wp) {
      unpark(zs, z, &z->parked, EIO, dl);
      continue;
    }
    uint32_t last = znbd_zones_last_zone_no(zs, i, w->off, w->len);
    int e = run_write(zs, w, i, last, false);
    unpark(zs, z, &z->parked, e, dl);
    if (e == 0 && last > *hi)
      *hi = last;
  }
}

/* After a write or append moved the wps of zones FIRST..LAST (none
 * locked): run what was parked for them. */
static void
drain(struct znbd_zones *zs, uint32_t first, uint32_t last)
{
  struct done_list dl = DONE_LIST_INIT(dl);

  for (uint32_t i = first; i <= last; i++) {
    struct znbd_zone *z = &zs->zone[i];
    if (atomic_load(&z->nparked) == 0)
      continue;
    pthread_mutex_lock(&z->lock);
    drain_locked(zs, i, &last, &dl);
    pthread_mutex_unlock(&z->lock);
  }
  call_done(&dl);
}

int
znbd_zones_write(struct znbd_zones *zs, struct znbd_zone_write *w)
{
  uint32_t first = znbd_zones_zone_no(zs, w->off);
  uint32_t last = znbd_zones_last_zone_no(zs, first, w->off, w->len);
  struct znbd_zone *z = &zs->zone[first];
  bool seq = z->type == ZNBD_ZONE_TYPE_SEQWRITE_REQ;
  bool late = !w->store_may_fail;
  int e = 0;

  if (seq)
    pthread_mutex_lock(&z->lock);
  if (w->pipeline && seq && ahead_of_wp(z, w->off)) {
    if (w->nowait || !w->done)
      e = EAGAIN;
    else if (w->timeout_ms == 0)
      e = EIO; /* no time to wait for the wp */
    else if (w->waiting && atomic_fetch_add(w->waiting, 1) >= w->wait_max) {
      atomic_fetch_sub(w->waiting, 1);
      e = EAGAIN; /* enough writes wait already */
    } else if (park(zs, z, w) < 0) {
      e = errno;
      if (w->waiting)
        atomic_fetch_sub(w->waiting, 1);
    } else {
      pthread_mutex_unlock(&z->lock);
      return ZNBD_ZONE_PARKED;
    }
  } else {
    e = run_write(zs, w, first, last, late);
  }
  if (seq)
    pthread_mutex_unlock(&z->lock);
  if (e) {
    errno = e;
    return -1;
  }
  if (late) {
    w->store(w->opaque, w->data, w->len, w->off); /* RAM: cannot fail */
    for (uint32_t i = first; i <= last; i++)
      znbd_zone_copy_end(&zs->zone[i]);
  }
  drain(zs, first, last);
  return 0;
}

int
znbd_zones_append(struct znbd_zones *zs, uint32_t zno,
                  struct znbd_zone_write *w)
{
  struct znbd_zone_txn t;
  int r = -1, e = 0;

  if (zno >= zs->nr_zones) {
    errno = EINVAL;
    return -1;
  }
  struct znbd_zone *z = &zs->zone[zno];
  pthread_mutex_lock(&z->lock);
  if (znbd_zone_append_prepare(zs, &t, zno, w->len, &w->off) < 0) {
    e = errno;
  } else if (w->store(w->opaque, w->data, w->len, w->off) < 0) {
    e = errno;
    znbd_zone_write_abort(&t);
  } else {
    znbd_zone_write_commit(&t);
    r = 0;
  }
  pthread_mutex_unlock(&z->lock);
  if (r == 0)
    drain(zs, zno, zno);
  errno = e;
  return r;
}

/* A parked write of znbd_zones_write_wait(): its thread waits here. */
struct sync_write {
  struct znbd_zone_write w;
  pthread_mutex_t lock;
  pthread_cond_t cv;
  _Atomic bool finished; /* set under LOCK, also read without it */
  int err;
};

/* The parked write ran or failed: its thread no longer counts as waiting
 * from here on, not from when it is scheduled again, so a write that
 * arrives meanwhile is not refused because of a thread already woken. */
static void
sync_done(struct znbd_zone_write *w, int err)
{
  struct sync_write *sw = (struct sync_write *)w;
  if (w->waiting)
    atomic_fetch_sub(w->waiting, 1);
  pthread_mutex_lock(&sw->lock);
  sw->err = err;
  atomic_store_explicit(&sw->finished, true, memory_order_release);
  pthread_cond_signal(&sw->cv);
  pthread_mutex_unlock(&sw->lock);
}

/* How long a parked write's thread yields the CPU before it sleeps, ns
 * (bench/README.md: with 20 us, 15-60 % of the waits of zoned.so's
 * sequential writes still slept, against all of them without; 200 us
 * left almost none, but cost more CPU per request than it saved). */
#define PARK_YIELD_NS 20000u

/* Adaptive wait: the write that fills the gap has usually been read by
 * another thread already, which runs this one's write right after its
 * own (drain).  When that thread lost its CPU, spinning does not help,
 * but giving up the CPU (sched_yield) often lets it run: yield until
 * *FINISHED or for PARK_YIELD_NS, so the usual short wait costs neither
 * a sleep nor a futex wake-up. */
static void
yield_wait(_Atomic bool *finished)
{
  uint64_t until = now_ns() + PARK_YIELD_NS;
  while (!atomic_load_explicit(finished, memory_order_acquire) &&
         now_ns() < until)
    sched_yield();
}

int
znbd_zones_write_wait(struct znbd_zones *zs, const struct znbd_zone_write *w,
                      _Atomic unsigned *waiting, unsigned max)
{
  struct sync_write sw = {.w = *w,
                          .lock = PTHREAD_MUTEX_INITIALIZER,
                          .cv = PTHREAD_COND_INITIALIZER};
  sw.w.done = sync_done;
  sw.w.waiting = waiting;
  sw.w.wait_max = max;
  int r = znbd_zones_write(zs, &sw.w), e = errno;
  if (r == ZNBD_ZONE_PARKED) { /* sync_done uncounts it */
    atomic_fetch_add_explicit(&zs->park_waits, 1, memory_order_relaxed);
    yield_wait(&sw.finished);
    /* Under the lock, even when it is finished: sync_done is done with
     * SW (it signals before it unlocks) once this has the lock. */
    pthread_mutex_lock(&sw.lock);
    if (!atomic_load(&sw.finished))
      atomic_fetch_add_explicit(&zs->park_sleeps, 1, memory_order_relaxed);
    while (!atomic_load(&sw.finished))
      pthread_cond_wait(&sw.cv, &sw.lock);
    pthread_mutex_unlock(&sw.lock);
    r = sw.err ? -1 : 0;
    e = sw.err;
  }
  pthread_cond_destroy(&sw.cv);
  pthread_mutex_destroy(&sw.lock);
  errno = e;
  return r;
}
