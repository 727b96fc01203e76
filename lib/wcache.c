/* znbd: the volatile write cache and power cuts (lib/wcache.h).  This
 * file: the undo table, the journal as the server writes it, flush and
 * cut; the journal's format is lib/wcache_journal.h, its replay after a
 * crash lib/wcache_replay.c.
 *
 * Design, and why:
 *
 * - Sequential zones need no copy of old data: writes only append, so the
 *   durable state of a zone is one number, the bytes written from its
 *   start at the last flush (FLUSHED[zone]).  A cut truncates the zone
 *   back to it, as zloop's discard_write_cache truncates each zone file to
 *   its size at the last flush.
 *
 * - Conventional zones (and a device without zones) are overwritten in
 *   place, so the first write to a 4 KiB page since the last flush copies
 *   the page's durable contents into an undo table first (copy on first
 *   write); a cut writes them back (a page that was a hole is zeroed, so
 *   the store frees it and allocated= stays exact).  FLUSH empties the
 *   table.  With write_cache=true a RAM disk therefore needs up to twice
 *   the memory of the pages written between flushes.
 *
 * - Zone management (reset, finish, online, and TRIM of whole zones) is
 *   durable when it completes: a drive does not cache it, and the data a
 *   reset dropped could not be brought back anyway.
 *
 * - One read-write lock: every request that changes the device holds it
 *   shared; FLUSH and the cut hold it exclusive, so they see no write half
 *   done (a RAM zoned write copies its data after unlocking its zone).
 *   Reads take nothing: a read racing a cut sees the old or the new bytes.
 *
 * - A persistent store also keeps the durable state in its journal file:
 *   a header (magic, the number of zones, FLUSHED of each zone, UINT64_MAX
 *   for conventional ones), then one record per page kept (page number,
 *   kind, length, the 4 KiB).  Records are written before the page is
 *   overwritten; FLUSHED entries when they change (flush, FUA, zone
 *   management).  The journal goes through the page cache without fsync:
 *   it survives the end of the server process (kill -9), which is the
 *   crash emulated here, not a power failure of the host.  Host byte
 *   order: the journal is not meant to move between machines.
 *
 * - The journal's lease: after a crash the files may have been changed by
 *   someone else (Linux zloop adding the directory, a user) before the
 *   next start, and rolling those changes back would destroy them.  Exact
 *   sizes and times of every file cannot be kept: that is a journal write
 *   per data write, and a crash between the two would make the server
 *   refuse its own directory.  Instead the header holds a time (the
 *   lease, CLOCK_REALTIME ns) before which every change of a zone file by
 *   the server began: the store calls lease_guard() before each system
 *   call that changes a file, which writes a new lease (now + 10 s) into
 *   the journal first when less than 5 s is left (and again after the
 *   call, so a thread stalled past the lease renews it at once).  The
 *   kernel stamps a
 *   change with a status change time (ctime) no later than the moment it
 *   is made, and no tool can set a ctime back (touch and rsync set the
 *   mtime), so at the next start a zone file whose ctime is past the
 *   lease was changed after the server stopped: the replay refuses
 *   (ESTALE) before it changes anything.  Not detected: a change within
 *   the lease (up to 10 s after the server's last change), on a file
 *   system whose clock is not this machine's (a network file system), or
 *   after the clock was set back.  A clean stop empties the journal
 *   (znbd_wcache_retire), so nothing is checked or rolled back then.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "refusal.h"
#include "wcache.h"
#include "wcache_journal.h"

struct undo {
  uint64_t page;
  uint64_t jpos; /* record offset in the journal */
  uint8_t kind;  /* K_VOID: durable as it is now (FUA), keep again */
  uint8_t *data; /* K_DATA: the durable bytes (len) */
};

struct znbd_wcache {
  struct znbd_store *st;
  struct znbd_zones *zs;   /* NULL: not zoned */
  uint64_t size, undo_end; /* pages below undo_end are kept */
  uint32_t nr;             /* FLUSHED entries: zones, or 1 */
  uint64_t *flushed;
  int jfd; /* journal, or -1 */
  uint64_t jend;

  pthread_rwlock_t cut; /* shared: changes; exclusive: flush, cut */
  pthread_mutex_t lock; /* the undo table and the journal */
  struct undo *u;
  size_t nu, capu;
  uint32_t *slot; /* hash of page -> index+1 into u (0: empty) */
  size_t nslot;   /* power of 2 */

  _Atomic int64_t tickets; /* writes left before an armed cut; -1: none */
  _Atomic uint64_t gen;
  void (*on_cut)(void *);
  void *on_cut_opaque;

  /* The lease (see the top of this file): no zone file changes at or
   * after LEASE (ns since the epoch, CLOCK_REALTIME) without a later
   * lease in the journal first.  Under lease_lock when renewed. */
  _Atomic int64_t lease;
  pthread_mutex_t lease_lock;
};

/* ------------------------------------------------------------- journal */

/* Header with FLUSHED, no records.  Caller holds the lock exclusive (or
 * is alone). */
static int
journal_reset(struct znbd_wcache *wc)
{
  if (wc->jfd < 0)
    return 0;
  uint64_t len = hdr_len(wc->nr);
  uint8_t *buf = calloc(1, len);
  if (!buf)
    return -1;
  memcpy(buf, MAGIC, strlen(MAGIC));
  uint64_t nr = wc->nr;
  memcpy(buf + MAGIC_LEN, &nr, 8);
  memcpy(buf + MAGIC_LEN + 8, wc->flushed, 8 * (size_t)wc->nr);
  /* Under lease_lock: a renewal cannot land between the two and be
   * overwritten with the older lease. */
  pthread_mutex_lock(&wc->lease_lock);
  int64_t lease = atomic_load(&wc->lease);
  memcpy(buf + lease_off(nr), &lease, 8);
  int r = ftruncate(wc->jfd, 0) < 0 || pwrite_full(wc->jfd, buf, len, 0) < 0 ||
                  fdatasync(wc->jfd) < 0
              ? -1
              : 0;
  pthread_mutex_unlock(&wc->lease_lock);
  free(buf);
  wc->jend = len;
  if (r < 0)
    errno = EIO;
  return r;
}

/* The store's before_change hook: a zone file is about to change.  When
 * less than the margin of the lease is left, a new one goes into the
 * journal first (one 8-byte write at most once every 5 s under load).  A
 * failed write keeps the old lease: the restart after a crash may then
 * refuse the directory, it never rolls back blindly. */
static void
lease_guard(void *opaque)
{
  struct znbd_wcache *wc = opaque;
  int64_t now = now_ns();
  if (now + LEASE_MARGIN_NS < atomic_load(&wc->lease))
    return;
  pthread_mutex_lock(&wc->lease_lock);
  if (now + LEASE_MARGIN_NS >= atomic_load(&wc->lease)) {
    int64_t l = now + LEASE_NS;
    if (pwrite_full(wc->jfd, &l, 8, lease_off(wc->nr)) == 0)
      atomic_store(&wc->lease, l);
  }
  pthread_mutex_unlock(&wc->lease_lock);
}

static void
journal_flushed(struct znbd_wcache *wc, uint32_t zno)
{
  if (wc->jfd >= 0)
    (void)pwrite_full(wc->jfd, &wc->flushed[zno], 8,
                      MAGIC_LEN + 8 + 8 * (uint64_t)zno);
}

/* Write undo entry U's record (at its jpos). */
static int
journal_rec(struct znbd_wcache *wc, const struct undo *u, uint64_t len)
{
  if (wc->jfd < 0)
    return 0;
  struct rec_hdr h = {u->page, u->kind, len};
  if (u->kind == K_DATA &&
      pwrite_full(wc->jfd, u->data, len, u->jpos + sizeof h) < 0)
    return -1;
  return pwrite_full(wc->jfd, &h, sizeof h, u->jpos);
}

/* ----------------------------------------------------------- the table */

static size_t
hash(uint64_t page, size_t nslot)
{
  return (size_t)((page * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (nslot - 1);
}

static struct undo *
lookup(struct znbd_wcache *wc, uint64_t page)
{
  if (!wc->nslot)
    return NULL;
  for (size_t i = hash(page, wc->nslot);; i = (i + 1) & (wc->nslot - 1)) {
    uint32_t v = wc->slot[i];
    if (!v)
      return NULL;
    if (wc->u[v - 1].page == page)
      return &wc->u[v - 1];
  }
}

static void
slot_put(uint32_t *slot, size_t nslot, uint64_t page, uint32_t v)
{
  size_t i = hash(page, nslot);
  while (slot[i])
    i = (i + 1) & (nslot - 1);
  slot[i] = v;
}

/* A new entry for PAGE (not in the table). */
static struct undo *
add(struct znbd_wcache *wc, uint64_t page)
{
  if (wc->nu == wc->capu) {
    size_t cap = wc->capu ? 2 * wc->capu : 64;
    struct undo *u = realloc(wc->u, cap * sizeof *u);
    if (!u)
      return NULL;
    wc->u = u;
    wc->capu = cap;
  }
  if (2 * (wc->nu + 1) > wc->nslot) {
    size_t n = wc->nslot ? 2 * wc->nslot : 128;
    uint32_t *s = calloc(n, sizeof *s);
    if (!s)
      return NULL;
    for (size_t i = 0; i < wc->nu; i++)
      slot_put(s, n, wc->u[i].page, (uint32_t)i + 1);
    free(wc->slot);
    wc->slot = s;
    wc->nslot = n;
  }
  struct undo *u = &wc->u[wc->nu++];
  memset(u, 0, sizeof *u);
  u->page = page;
  u->jpos = wc->jend;
  wc->jend += sizeof(struct rec_hdr) + PAGE;
  slot_put(wc->slot, wc->nslot, page, (uint32_t)wc->nu);
  return u;
}

static void
clear_table(struct znbd_wcache *wc)
{
  for (size_t i = 0; i < wc->nu; i++)
    free(wc->u[i].data);
  wc->nu = 0;
  if (wc->slot)
    memset(wc->slot, 0, wc->nslot * sizeof *wc->slot);
}

static int
any_allocated(void *opaque, uint64_t off, uint64_t len, bool allocated)
{
  (void)opaque;
  (void)off;
  (void)len;
  return allocated ? 1 : 0;
}

static uint64_t
page_len(const struct znbd_wcache *wc, uint64_t page)
{
  uint64_t off = page * PAGE;
  return wc->size - off < PAGE ? wc->size - off : PAGE;
}

/* Keep PAGE's durable contents in U (new or K_VOID). */
static int
keep(struct znbd_wcache *wc, struct undo *u)
{
  uint64_t off = u->page * PAGE, len = page_len(wc, u->page);
  int a = znbd_store_extents(wc->st, off, len, any_allocated, NULL);
  if (a) {
    if (!u->data && !(u->data = malloc(PAGE)))
      return -1;
    if (znbd_store_read(wc->st, u->data, len, off) < 0)
      return -1;
    u->kind = K_DATA;
  } else {
    u->kind = K_HOLE;
  }
  if (journal_rec(wc, u, len) < 0) {
    int e = errno;
    u->kind = K_VOID;
    /* A record the file system refused may have left part of its page
     * allocated: give it back (its header is still zero, so the record
     * reads as not made; the slot is kept for the next try). */
    if (wc->jfd >= 0 && u->jpos + sizeof(struct rec_hdr) + PAGE == wc->jend &&
        ftruncate(wc->jfd, (off_t)u->jpos) < 0) {
      /* best effort, as the comment says (no (void): see store_dir.c) */
    }
    errno = e;
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ the API */

/* FLUSHED[i] = the zone's bytes now, for every zone with a wp (the
 * caller excludes writers). */
static void
take_wps(struct znbd_wcache *wc)
{
  if (!wc->zs)
    return;
  for (uint32_t i = wc->zs->nr_conv; i < wc->zs->nr_zones; i++)
    (void)znbd_zones_written(wc->zs, i, &wc->flushed[i]);
}

struct znbd_wcache *
znbd_wcache_new(struct znbd_store *st, struct znbd_zones *zs, uint64_t size)
{
  struct znbd_wcache *wc = calloc(1, sizeof *wc);
  if (!wc)
    return NULL;
  wc->st = st;
  wc->zs = zs;
  wc->size = size;
  wc->undo_end = zs ? (uint64_t)zs->nr_conv * zs->zone_size : size;
  if (wc->undo_end > size)
    wc->undo_end = size;
  wc->nr = zs ? zs->nr_zones : 1;
  wc->jfd = -1;
  atomic_init(&wc->tickets, -1);
  atomic_init(&wc->gen, 0);
  /* glibc's default prefers readers: a write waiting for its wp (holding
   * the lock shared) never blocks the write it waits for behind a FLUSH
   * waiting for the lock. */
  pthread_rwlock_init(&wc->cut, NULL);
  pthread_mutex_init(&wc->lock, NULL);
  pthread_mutex_init(&wc->lease_lock, NULL);
  atomic_init(&wc->lease, now_ns() + LEASE_NS);
  wc->flushed = malloc(8 * (size_t)wc->nr);
  if (!wc->flushed) {
    znbd_wcache_free(wc);
    errno = ENOMEM;
    return NULL;
  }
  for (uint32_t i = 0; i < wc->nr; i++)
    wc->flushed[i] = NONE;
  take_wps(wc);
  if (st->ops->persist) {
    wc->jfd = st->ops->persist->journal(st, true);
    if (wc->jfd < 0 || journal_reset(wc) < 0) {
      znbd_wcache_free(wc);
      errno = EIO;
      return NULL;
    }
    st->before_change = lease_guard;
    st->before_change_opaque = wc;
  }
  return wc;
}

void
znbd_wcache_free(struct znbd_wcache *wc)
{
  if (!wc)
    return;
  if (wc->st->before_change_opaque == wc) {
    wc->st->before_change = NULL;
    wc->st->before_change_opaque = NULL;
  }
  clear_table(wc);
  free(wc->u);
  free(wc->slot);
  free(wc->flushed);
  pthread_rwlock_destroy(&wc->cut);
  pthread_mutex_destroy(&wc->lock);
  pthread_mutex_destroy(&wc->lease_lock);
  free(wc);
}

/* znbd_zone_cut_fn: the store drops zone Z's bytes past KEEP. */
static int
cut_zone(void *opaque, uint32_t zno, const struct znbd_zone *z, uint64_t keep)
{
  struct znbd_store *st = opaque;
  return znbd_store_zone_truncate(st, zno, z->start, z->len, keep);
}

/* Roll back to the durable state.  Caller holds the lock exclusive. */
static int
rollback(struct znbd_wcache *wc)
{
  int r = 0;
  if (wc->zs)
    for (uint32_t i = wc->zs->nr_conv; i < wc->zs->nr_zones; i++)
      if (znbd_zones_power_cycle(wc->zs, i, &wc->flushed[i], cut_zone, wc->st) <
          0)
        r = -1;
  if (wc->zs)
    znbd_zones_fail_parked(wc->zs);
  for (size_t i = 0; i < wc->nu; i++) {
    struct undo *u = &wc->u[i];
    uint64_t off = u->page * PAGE, len = page_len(wc, u->page);
    if ((u->kind == K_DATA &&
         znbd_store_write(wc->st, u->data, len, off) < 0) ||
        (u->kind == K_HOLE && znbd_store_zero(wc->st, len, off, 0) < 0))
      r = -1;
  }
  clear_table(wc);
  if (journal_reset(wc) < 0 || znbd_store_flush(wc->st) < 0)
    r = -1;
  atomic_fetch_add(&wc->gen, 1);
  if (r < 0)
    errno = EIO;
  return r;
}

/* An armed cut is due: carry it out (once). */
static int
cut_now(struct znbd_wcache *wc)
{
  int r = 0;
  pthread_rwlock_wrlock(&wc->cut);
  int64_t t = 0;
  if (atomic_compare_exchange_strong(&wc->tickets, &t, -1))
    r = rollback(wc);
  pthread_rwlock_unlock(&wc->cut);
  if (wc->on_cut)
    wc->on_cut(wc->on_cut_opaque);
  return r;
}

/* A due cut happens now: -1 ESHUTDOWN.  WRITE takes a ticket. */
static int
check_due(struct znbd_wcache *wc, bool write)
{
  for (;;) {
    int64_t t = atomic_load(&wc->tickets);
    if (t < 0)
      return 0;
    if (t == 0) {
      (void)cut_now(wc);
      znbd_refuse(ZNBD_REFUSAL_FENCED, ESHUTDOWN);
      return -1;
    }
    if (!write || atomic_compare_exchange_weak(&wc->tickets, &t, t - 1))
      return 0;
  }
}

/* Holding the cut lock (either way): a request fenced at FENCE, made
 * before a cut that has happened since, is refused (ESHUTDOWN).  Under
 * the lock the generation cannot move, so a request either ran wholly
 * before the cut (and the rollback undid what was not durable) or does
 * not run at all. */
static int
fenced_out(struct znbd_wcache *wc, uint64_t fence)
{
  if (fence == ZNBD_WCACHE_NO_FENCE || fence == atomic_load(&wc->gen))
    return 0;
  znbd_refuse(ZNBD_REFUSAL_FENCED, ESHUTDOWN);
  return -1;
}

int
znbd_wcache_enter(struct znbd_wcache *wc, bool write, uint64_t fence)
{
  if (check_due(wc, write) < 0)
    return -1;
  pthread_rwlock_rdlock(&wc->cut);
  if (fenced_out(wc, fence) < 0) {
    pthread_rwlock_unlock(&wc->cut);
    if (write)
      znbd_wcache_refund(wc); /* it did not run: it does not count */
    znbd_refuse(ZNBD_REFUSAL_FENCED, ESHUTDOWN);
    return -1;
  }
  return 0;
}

void
znbd_wcache_leave(struct znbd_wcache *wc)
{
  pthread_rwlock_unlock(&wc->cut);
}

void
znbd_wcache_refund(struct znbd_wcache *wc)
{
  int64_t t = atomic_load(&wc->tickets);
  while (t >= 0 && !atomic_compare_exchange_weak(&wc->tickets, &t, t + 1))
    ;
}

int
znbd_wcache_save(struct znbd_wcache *wc, uint64_t len, uint64_t off)
{
  if (len == 0 || off >= wc->undo_end)
    return 0;
  uint64_t end = off + len < wc->undo_end ? off + len : wc->undo_end;
  int r = 0;
  pthread_mutex_lock(&wc->lock);
  for (uint64_t p = off / PAGE; p <= (end - 1) / PAGE && r == 0; p++) {
    struct undo *u = lookup(wc, p);
    if (u && u->kind != K_VOID)
      continue;
    if (!u && !(u = add(wc, p))) {
      r = -1;
      errno = ENOMEM;
      break;
    }
    r = keep(wc, u);
  }
  pthread_mutex_unlock(&wc->lock);
  return r;
}

void
znbd_wcache_zone_durable(struct znbd_wcache *wc, uint32_t zno, uint64_t written)
{
  pthread_mutex_lock(&wc->lock);
  wc->flushed[zno] = written;
  journal_flushed(wc, zno);
  pthread_mutex_unlock(&wc->lock);
}

int
znbd_wcache_flush(struct znbd_wcache *wc, uint64_t fence)
{
  if (check_due(wc, false) < 0)
    return -1;
  pthread_rwlock_wrlock(&wc->cut);
  if (fenced_out(wc, fence) < 0) {
    pthread_rwlock_unlock(&wc->cut);
    znbd_refuse(ZNBD_REFUSAL_FENCED, ESHUTDOWN);
    return -1;
  }
  int r = znbd_store_flush(wc->st);
  if (r == 0) {
    take_wps(wc);
    clear_table(wc);
    r = journal_reset(wc);
  }
  pthread_rwlock_unlock(&wc->cut);
  return r;
}

int
znbd_wcache_retire(struct znbd_wcache *wc)
{
  if (wc->jfd < 0)
    return 0;
  pthread_rwlock_wrlock(&wc->cut);
  int r = ftruncate(wc->jfd, 0) < 0 || fdatasync(wc->jfd) < 0 ? -1 : 0;
  wc->jend = 0;
  pthread_rwlock_unlock(&wc->cut);
  if (r < 0)
    errno = EIO;
  return r;
}

int
znbd_wcache_sync_held(struct znbd_wcache *wc, uint64_t len, uint64_t off)
{
  if (len == 0)
    return 0;
  int r = znbd_store_sync(wc->st, len, off);
  uint64_t end = off + len;
  if (r == 0 && off < wc->undo_end) {
    uint64_t cend = end < wc->undo_end ? end : wc->undo_end;
    pthread_mutex_lock(&wc->lock);
    for (uint64_t p = off / PAGE; p <= (cend - 1) / PAGE; p++) {
      struct undo *u = lookup(wc, p);
      if (u && u->kind != K_VOID) {
        u->kind = K_VOID;
        (void)journal_rec(wc, u, 0);
      }
    }
    pthread_mutex_unlock(&wc->lock);
  }
  if (r == 0 && wc->zs && end > wc->undo_end) {
    struct znbd_zones *zs = wc->zs;
    uint64_t pos = off > wc->undo_end ? off : wc->undo_end;
    for (uint32_t i = znbd_zones_zone_no(zs, pos);
         i < zs->nr_zones && zs->zone[i].start < end; i++) {
      const struct znbd_zone *z = &zs->zone[i];
      uint64_t now,
          upto = (end < z->start + z->len ? end : z->start + z->len) - z->start;
      if (!znbd_zones_written(zs, i, &now))
        continue;
      if (upto > now) /* the wp only grows: what is below it stays */
        upto = now;
      pthread_mutex_lock(&wc->lock);
      if (upto > wc->flushed[i]) {
        wc->flushed[i] = upto;
        journal_flushed(wc, i);
      }
      pthread_mutex_unlock(&wc->lock);
    }
  }
  return r;
}

int
znbd_wcache_sync(struct znbd_wcache *wc, uint64_t len, uint64_t off,
                 uint64_t fence)
{
  if (len == 0)
    return 0;
  pthread_rwlock_rdlock(&wc->cut);
  if (fenced_out(wc, fence) < 0) {
    pthread_rwlock_unlock(&wc->cut);
    znbd_refuse(ZNBD_REFUSAL_FENCED, ESHUTDOWN);
    return -1;
  }
  int r = znbd_wcache_sync_held(wc, len, off);
  pthread_rwlock_unlock(&wc->cut); /* keeps errno */
  return r;
}

int
znbd_wcache_cut(struct znbd_wcache *wc, uint64_t after)
{
  if (after > 0) {
    atomic_store(&wc->tickets, after > INT64_MAX ? INT64_MAX : (int64_t)after);
    return 0;
  }
  atomic_store(&wc->tickets, 0);
  return cut_now(wc);
}

uint64_t
znbd_wcache_generation(struct znbd_wcache *wc)
{
  return atomic_load(&wc->gen);
}

void
znbd_wcache_on_cut(struct znbd_wcache *wc, void (*fn)(void *opaque),
                   void *opaque)
{
  wc->on_cut = fn;
  wc->on_cut_opaque = opaque;
}
