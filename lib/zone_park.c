/* znbd: the parked-write pipeline.  Every write and append enters the
 * engine here (znbd_zones_write, znbd_zones_append): a write at the wp
 * runs now as a transaction (lib/zone_txn.c); with pipeline_zoned_writes
 * a write ahead of the wp is parked in its zone's list, sorted by offset,
 * until the write that brings the wp to it runs it (drain); a sweeper
 * thread fails the parked writes older than zone_write_timeout.  See
 * lib/zone.h for the contract and doc/zone-rules.md, rule
 * pipelined-write; all offsets and lengths are bytes. */
#include <errno.h>
#include <sched.h>
#include <time.h>

#include "clock.h"
#include "stop_thread.h"
#include "zone_impl.h"

void
znbd_zones_park_init(struct znbd_zones *zs)
{
  pthread_mutex_init(&zs->sweep_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&zs->sweep_cv, &ca);
  pthread_condattr_destroy(&ca);
  atomic_init(&zs->nparked, 0);
  atomic_init(&zs->park_waits, 0);
  atomic_init(&zs->park_sleeps, 0);
}

void
znbd_zones_park_destroy(struct znbd_zones *zs)
{
  znbd_stop_thread(&zs->sweep_lock, &zs->sweep_cv, &zs->sweep_stop,
                   zs->sweeper_running, zs->sweeper);
  pthread_cond_destroy(&zs->sweep_cv);
  pthread_mutex_destroy(&zs->sweep_lock);
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
        unpark(zs, z, pp, EIO, ZNBD_REFUSAL_NONE, &dl); /* timed out */
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
    sweep(zs, znbd_mono_ns());
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

  w->deadline_ns = znbd_mono_ns() + (uint64_t)w->timeout_ms * 1000000u;
  w->err = 0;
  struct znbd_zone_write **pp = &z->parked;
  while (*pp && (*pp)->off <= w->off)
    pp = &(*pp)->next;
  w->next = *pp;
  *pp = w;
  atomic_fetch_add(&z->nparked, 1);
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

/* Why a write parked in zone Z (locked) cannot run: Z's condition takes
 * writes no more, or its wp went past the write. */
static enum znbd_refusal
unwritable_why(const struct znbd_zone *z)
{
  switch (z->cond) {
  case ZNBD_ZONE_COND_FULL:
    return ZNBD_REFUSAL_ZONE_FULL;
  case ZNBD_ZONE_COND_READONLY:
    return ZNBD_REFUSAL_ZONE_READONLY;
  case ZNBD_ZONE_COND_OFFLINE:
    return ZNBD_REFUSAL_ZONE_OFFLINE;
  default:
    return ZNBD_REFUSAL_UNALIGNED_WRITE;
  }
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

  while ((w = z->parked) && (!znbd_zone_writable(z) || w->off <= z->wp)) {
    if (!znbd_zone_writable(z) || w->off != z->wp) {
      unpark(zs, z, &z->parked, EIO, unwritable_why(z), dl);
      continue;
    }
    uint32_t last = znbd_zones_last_zone_no(zs, i, w->off, w->len);
    enum znbd_refusal own = znbd_refusal_now;
    znbd_refusal_now = ZNBD_REFUSAL_NONE;
    int e = znbd_zones_run_write(zs, w, i, last, false) < 0 ? errno : 0;
    unpark(zs, z, &z->parked, e, e ? znbd_refusal_now : ZNBD_REFUSAL_NONE, dl);
    znbd_refusal_now = own;
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
  int r = -1;

  if (seq)
    pthread_mutex_lock(&z->lock);
  /* A ZBC write across a zone end is refused by znbd_zones_run_write(),
   * which has all its zones locked, even ahead of the wp. */
  if (w->pipeline && seq && !(w->one_zone && first != last) &&
      ahead_of_wp(z, w->off)) {
    /* Ahead of the wp, and it may not wait (here, or at all). */
    znbd_refusal_now = ZNBD_REFUSAL_UNALIGNED_WRITE;
    if (w->nowait || !w->done)
      errno = EAGAIN;
    else if (w->timeout_ms == 0)
      errno = EIO; /* no time to wait for the wp */
    else if (w->waiting && atomic_fetch_add(w->waiting, 1) >= w->wait_max) {
      atomic_fetch_sub(w->waiting, 1);
      errno = EAGAIN; /* enough writes wait already */
    } else if (park(zs, z, w) < 0) {
      if (w->waiting)
        atomic_fetch_sub(w->waiting, 1);
    } else {
      pthread_mutex_unlock(&z->lock);
      return ZNBD_ZONE_PARKED;
    }
  } else {
    r = znbd_zones_run_write(zs, w, first, last, late);
  }
  if (seq)
    pthread_mutex_unlock(&z->lock);
  if (r < 0)
    return -1;
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
  if (zno >= zs->nr_zones) {
    errno = EINVAL;
    return -1;
  }
  struct znbd_zone *z = &zs->zone[zno];
  pthread_mutex_lock(&z->lock);
  int r = znbd_zones_run_append(zs, zno, w);
  pthread_mutex_unlock(&z->lock);
  if (r < 0)
    return -1;
  drain(zs, zno, zno);
  return 0;
}

/* A parked write of znbd_zones_write_wait(): its thread waits here. */
struct sync_write {
  struct znbd_zone_write w;
  pthread_mutex_t lock;
  pthread_cond_t cv;
  _Atomic bool finished; /* set under LOCK, also read without it */
  int err;
  enum znbd_refusal why;
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
  sw->why = znbd_refusal_now; /* call_done() set it */
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
  uint64_t until = znbd_mono_ns() + PARK_YIELD_NS;
  while (!atomic_load_explicit(finished, memory_order_acquire) &&
         znbd_mono_ns() < until)
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
  int r = znbd_zones_write(zs, &sw.w);
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
    errno = sw.err; /* the parked write's result, from its completion */
    if (r < 0)
      znbd_refusal_now = sw.why;
  }
  pthread_cond_destroy(&sw.cv);
  pthread_mutex_destroy(&sw.lock);
  return r;
}

int
znbd_zones_redo(struct znbd_zones *zs, struct znbd_zone_write *w, bool anywhere,
                znbd_zone_same_fn same, void *opaque)
{
  if (w->len == 0 || w->off >= zs->size) {
    errno = EINVAL;
    return -1;
  }
  uint32_t zno = znbd_zones_zone_no(zs, w->off);
  struct znbd_zone *z = &zs->zone[zno];
  uint64_t end = w->off + w->len;
  int r = 0;

  if (z->type != ZNBD_ZONE_TYPE_SEQWRITE_REQ || end > z->start + z->len)
    return 0;
  pthread_mutex_lock(&z->lock);
  if (z->held) {
    pthread_mutex_unlock(&z->lock);
    errno = EBUSY;
    return -1;
  }
  uint64_t wp = z->wp;
  if (wp == ZNBD_WP_INVALID || w->off >= wp || (!anywhere && end < wp))
    goto out;
  /* The bytes the dead server stored: all of them, or up to the wp. */
  r = same(opaque, w->off, (end < wp ? end : wp) - w->off);
  if (r == 1 && end > wp) {
    /* Killed while storing it: the rest goes at the wp now, as a write
     * of its own (the rules decide; a refusal fails the redo). */
    struct znbd_zone_write tail = *w;
    tail.off = wp;
    tail.len = end - wp;
    tail.data = (const uint8_t *)w->data + (wp - w->off);
    if (znbd_zones_run_write(zs, &tail, zno, zno, false) < 0)
      r = -1;
  }
out:
  pthread_mutex_unlock(&z->lock);
  if (r == 1 && end > wp) /* done: errno is no longer the result */
    drain(zs, zno, zno);
  return r;
}
