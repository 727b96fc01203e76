/* znbd: the device (include/znbd/dev.h): a store (RAM, or a directory
 * with dir=), optionally with zones on top.
 *
 * Structure: every entry point checks the range and alignment first
 * (dev_check_range: EINVAL), then either serves a plain disk straight from
 * the store, or — for a zoned device — hands the request to the zone
 * engine (lib/zone.c).  The zoned branches are marked "ZONED:".  The
 * store is called only through its table of operations (lib/store.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "znbd/dev.h"
#include "znbd/log.h"
#include "znbd/redo.h"
#include "busy.h"
#include "dev_fenced.h"
#include "refusal.h"
#include "dev_impl.h"
#include "intent.h"
#include "store.h"
#include "store_dir.h"
#include "wcache.h"
#include "zone.h"
#include "err.h"
#include "faults.h"
#include "dev_unfenced.h"

static char *
dup_or_null(const char *s, bool *fail)
{
  if (!s)
    return NULL;
  char *c = strdup(s);
  if (!c)
    *fail = true;
  return c;
}

/* ZONED: discard callback of the zone engine (reset, finish, online):
 * the store hears which it was, so a file store can truncate.  A store
 * that fails here (a file system error) says so in the log; the zone's
 * new condition stands, as a drive's would. */
static void
discard_how(struct znbd_dev *d, const struct znbd_zone *z, uint64_t from,
            bool release)
{
  uint32_t zno = (uint32_t)(z - d->zs.zone);
  int r;
  if (z->cond == ZNBD_ZONE_COND_FULL)
    r = znbd_store_zone_finish(d->store, zno, from, z->start + z->len);
  else
    r = znbd_store_zone_reset(d->store, zno, z->start, z->len, release);
  if (r < 0)
    znbd_log(ZNBD_LOG_ERROR, "zone %" PRIu32 ": %s store: %s", zno,
             d->store->ops->name, strerror(errno));
  znbd_intent_zone_gone(d->redo, zno);
  /* Zone management is durable when it completes (lib/wcache.c). */
  if (d->wc)
    znbd_wcache_zone_durable(d->wc, zno,
                             z->cond == ZNBD_ZONE_COND_FULL ? z->capacity : 0);
}

/* Zone management: a reset zone's memory may be kept for its rewrite. */
static void
discard(void *opaque, const struct znbd_zone *z, uint64_t from)
{
  discard_how(opaque, z, from, false);
}

/* NBD TRIM: a reset zone's memory goes back at once. */
static void
discard_release(void *opaque, const struct znbd_zone *z, uint64_t from)
{
  discard_how(opaque, z, from, true);
}

/* ZONED: tell the store a zone's condition changed to or from READONLY /
 * OFFLINE, so a persistent store keeps it. */
static int
keep_fault(struct znbd_dev *d, uint32_t zno)
{
  return znbd_store_zone_fault(d->store, zno, d->zs.zone[zno].cond);
}

struct fault_ctx {
  struct znbd_dev *d;
  enum znbd_zone_op op;
  enum znbd_zone_cond cond;
};

/* One zone of a zone_readonly/zone_offline list at start-up.  The lists
 * set the condition; a zone named twice stays in it (null_blk's configfs
 * toggles back to EMPTY on a second write, which makes no sense for a
 * start-up list). */
static int
apply_fault(void *opaque, uint32_t zone)
{
  struct fault_ctx *c = opaque;
  if (c->d->zs.zone[zone].cond == c->cond)
    return 0;
  if (znbd_zones_mgmt(&c->d->zs, c->op, zone, discard, c->d) < 0)
    return -1;
  return keep_fault(c->d, zone) < 0 ? -1 : 0;
}

/* ZONED: a persistent store's zones come back as after a power cycle
 * (znbd_zones_restore): wp from the bytes written, READONLY and OFFLINE
 * as recorded. */
static int
restore_zones(struct znbd_dev *d, char *err, size_t errlen)
{
  struct znbd_zones *zs = &d->zs;
  uint32_t closed = 0;

  for (uint32_t i = zs->nr_conv; i < zs->nr_zones; i++) {
    uint64_t written;
    unsigned fault;
    if (d->store->ops->zones->load(d->store, i, &written, &fault) < 0) {
      set_err(err, errlen, "dir: zone %" PRIu32 ": %s", i, strerror(errno));
      return -1;
    }
    if (znbd_zones_restore(zs, i, written) < 0) {
      set_err(err, errlen,
              "dir: zone %" PRIu32 " holds %" PRIu64
              " bytes, more than its capacity",
              i, written);
      errno = EINVAL;
      return -1;
    }
    if (fault == ZNBD_ZONE_COND_READONLY || fault == ZNBD_ZONE_COND_OFFLINE)
      znbd_zones_mgmt(zs,
                      fault == ZNBD_ZONE_COND_READONLY
                          ? ZNBD_ZONE_OP_SET_READONLY
                          : ZNBD_ZONE_OP_SET_OFFLINE,
                      i, NULL, NULL);
    closed += zs->zone[i].cond == ZNBD_ZONE_COND_CLOSED;
  }
  if (zs->max_active && closed > zs->max_active)
    znbd_log(ZNBD_LOG_WARNING,
             "dir=%s: %" PRIu32
             " zones are CLOSED after the restart, more than "
             "zone_max_active=%" PRIu32
             "; they stay CLOSED and no other zone can become active until "
             "enough of them are finished or reset",
             d->p.dir, closed, zs->max_active);
  return 0;
}

/* ZONED: lay out the zones from the finished params and apply the
 * zone_readonly and zone_offline lists (in that order). */
static int
zoned_setup(struct znbd_dev *d, char *err, size_t errlen)
{
  const struct znbd_params *p = &d->p;
  /* Already clamped (znbd_params_finish): the engine's clamps change
   * nothing. */
  struct znbd_zone_geometry g = {
      .size = p->geo.size,
      .zone_size = p->geo.zone_size,
      .zone_capacity = p->geo.zone_capacity,
      .nr_conv = p->geo.nr_conv,
      .max_open = p->geo.max_open,
      .max_active = p->geo.max_active,
      /* dir=: the files say which zones are full (store_dir.c formats
       * zone_full=true as full files). */
      .zone_full = p->zone_full && !p->dir,
  };
  if (znbd_zones_init(&d->zs, &g) < 0) {
    int e = errno;
    set_err(err, errlen, "zone_size: cannot lay out %" PRIu32 " zones: %s",
            p->geo.nr_zones, strerror(e));
    errno = e;
    return -1;
  }
  if (d->store->ops->zones && restore_zones(d, err, errlen) < 0)
    return -1;
  struct fault_ctx ro = {d, ZNBD_ZONE_OP_SET_READONLY, ZNBD_ZONE_COND_READONLY};
  struct fault_ctx off = {d, ZNBD_ZONE_OP_SET_OFFLINE, ZNBD_ZONE_COND_OFFLINE};
  if (p->zone_readonly && znbd_parse_zone_list(p->zone_readonly, d->zs.nr_zones,
                                               apply_fault, &ro) != 0) {
    set_err(err, errlen, "zone_readonly: cannot apply \"%s\"",
            p->zone_readonly);
    errno = EINVAL;
    return -1;
  }
  if (p->zone_offline && znbd_parse_zone_list(p->zone_offline, d->zs.nr_zones,
                                              apply_fault, &off) != 0) {
    set_err(err, errlen, "zone_offline: cannot apply \"%s\"", p->zone_offline);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* max_memory=0: 80 % of the physical memory (sysconf), so that a RAM
 * disk larger than the machine fails writes with ENOSPC before the OOM
 * killer ends the server; no limit if the size is unknown. */
static uint64_t
default_max_memory(void)
{
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || psize <= 0)
    return UINT64_MAX;
  return (uint64_t)pages / 5 * 4 * (uint64_t)psize;
}

/* A persistent store's write cache journal left by a crash: apply it
 * before the zones are restored from the files (lib/wcache.c).  Done with
 * write_cache=false too: the files may hold writes that were never
 * flushed.  A damaged journal changes nothing and stops start-up. */
static int
replay_journal(struct znbd_dev *d, char *err, size_t errlen)
{
  struct znbd_store *st = d->store;
  int fd = st->ops->persist ? st->ops->persist->journal(st, false) : -1;
  char why[256] = "";
  if (fd < 0)
    return 0;
  if (znbd_wcache_replay(st, fd, &d->p.geo, why, sizeof why) < 0) {
    int e = errno;
    if (e == EINVAL)
      set_err(err, errlen,
              "write_cache: %s/znbd.wcache, the undo journal of writes not "
              "yet flushed, is damaged: %s; no file was changed. To start "
              "with the zone files as they are (keeping unflushed writes), "
              "move znbd.wcache out of the directory",
              d->p.dir, why);
    else if (e == ESTALE)
      set_err(err, errlen,
              "write_cache: %s/znbd.wcache holds the writes a crash left "
              "unflushed, but %s; no file was changed. To start with the "
              "zone files as they are (nothing rolled back), move "
              "znbd.wcache out of the directory",
              d->p.dir, why);
    else
      set_err(err, errlen,
              "write_cache: %s/znbd.wcache (the undo journal): %s: %s",
              d->p.dir, why, strerror(e));
    errno = e;
    return -1;
  }
  return 0;
}

struct znbd_dev *
znbd_dev_new(const struct znbd_params *p, char *err, size_t errlen)
{
  if (p->size == 0 || (p->blocksize != 512 && p->blocksize != 4096) ||
      p->size % p->blocksize) {
    set_err(err, errlen,
            "device: parameters not finished (size %" PRIu64
            ", blocksize %" PRIu32 ")",
            p->size, p->blocksize);
    errno = EINVAL;
    return NULL;
  }
  struct znbd_dev *d = calloc(1, sizeof *d);
  if (!d)
    goto nomem;
  d->p = *p;
  bool fail = false;
  d->p.zone_readonly = dup_or_null(p->zone_readonly, &fail);
  d->p.zone_offline = dup_or_null(p->zone_offline, &fail);
  d->p.zone_control = dup_or_null(p->zone_control, &fail);
  d->p.dir = dup_or_null(p->dir, &fail);
  d->p.badblocks = dup_or_null(p->badblocks, &fail);
  znbd_faults_init(&d->f, p->size / 512, p->mbps);
  if (fail)
    goto nomem;
  if (p->badblocks &&
      znbd_faults_bb_edit(&d->f, p->badblocks, true, err, errlen) < 0) {
    int e = errno;
    znbd_dev_free(d);
    errno = e;
    return NULL;
  }

  if (p->dir) {
    d->store = znbd_store_dir_open(p, err, errlen);
    if (!d->store) {
      int e = errno;
      znbd_dev_free(d);
      errno = e;
      return NULL;
    }
  } else {
    d->store = znbd_store_new(p->size, p->memory_backed);
    if (!d->store) {
      int e = errno;
      set_err(err, errlen, "size: cannot map a store of %" PRIu64 " bytes: %s",
              p->size, strerror(e));
      znbd_dev_free(d);
      errno = e;
      return NULL;
    }
    znbd_store_ram_limit(d->store,
                         p->max_memory ? p->max_memory : default_max_memory());
  }
  if (replay_journal(d, err, errlen) < 0 ||
      (p->zoned && zoned_setup(d, err, errlen) < 0)) {
    int e = errno;
    znbd_dev_free(d);
    errno = e;
    return NULL;
  }
  if (p->write_cache &&
      !(d->wc = znbd_wcache_new(d->store, p->zoned ? &d->zs : NULL, p->size))) {
    int e = errno;
    set_err(err, errlen, "write_cache: cannot set up: %s", strerror(e));
    znbd_dev_free(d);
    errno = e;
    return NULL;
  }
  return d;

nomem:
  znbd_dev_free(d);
  set_err(err, errlen, "device: out of memory");
  errno = ENOMEM;
  return NULL;
}

void
znbd_dev_free(struct znbd_dev *d)
{
  if (!d)
    return;
  if (d->wc) {
    /* Shutting down: flush as a drive does before power goes. */
    if (znbd_wcache_flush(d->wc, ZNBD_NO_FENCE) < 0)
      znbd_log(ZNBD_LOG_ERROR, "shutdown flush: %s", strerror(errno));
    else if (znbd_wcache_retire(d->wc) < 0)
      znbd_log(ZNBD_LOG_ERROR, "shutdown: emptying the journal: %s",
               strerror(errno));
    znbd_wcache_free(d->wc);
  }
  znbd_intent_free(d->redo);
  znbd_zones_destroy(&d->zs);
  znbd_store_free(d->store);
  znbd_params_free(&d->p);
  znbd_faults_destroy(&d->f);
  free(d);
}

const struct znbd_params *
znbd_dev_params(const struct znbd_dev *d)
{
  return &d->p;
}

uint64_t
znbd_dev_size(const struct znbd_dev *d)
{
  return d->p.size;
}

uint32_t
znbd_dev_nr_zones(const struct znbd_dev *d)
{
  return d->p.geo.nr_zones; /* 0 when not zoned */
}

int
znbd_dev_describe(const struct znbd_dev *d, char *buf, size_t len)
{
  const struct znbd_geometry *g = &d->p.geo;
  if (!dev_is_zoned(d))
    return snprintf(buf, len,
                    "znbd model=none size=%" PRIu64 " blocksize=%" PRIu32,
                    g->size, g->blocksize);
  return snprintf(buf, len,
                  "znbd model=host-managed size=%" PRIu64 " zone_size=%" PRIu64
                  " zone_capacity=%" PRIu64 " nr_zones=%" PRIu32
                  " nr_conv=%" PRIu32 " max_open=%" PRIu32
                  " max_active=%" PRIu32 " blocksize=%" PRIu32,
                  g->size, g->zone_size, g->zone_capacity, g->nr_zones,
                  g->nr_conv, g->max_open, g->max_active, g->blocksize);
}

uint64_t
dev_badblock_ok(struct znbd_dev *d, const char *what, uint64_t len,
                uint64_t off, uint64_t first)
{
  uint64_t bad = first * 512 / d->p.blocksize * d->p.blocksize;
  uint64_t ok = d->p.badblocks_partial_io && bad > off ? bad - off : 0;
  znbd_log(ZNBD_LOG_FAULT,
           "badblock: %s of %" PRIu64 " bytes at %" PRIu64
           ": bad sectors from %" PRIu64 "%s; %" PRIu64 " bytes done",
           what, len, off, first, d->p.badblocks_once ? " (cleared)" : "", ok);
  return ok;
}

/* Store a write's data (DATA NULL: zeros, nothing allocated); the zone
 * engine's store callback (znbd_zone_store_fn). */
int
dev_store_data(void *opaque, const void *data, uint64_t len, uint64_t off)
{
  struct znbd_dev *d = opaque;
  if (data)
    return znbd_store_write(d->store, data, len, off);
  return znbd_store_zero(d->store, len, off, 0);
}

/* Store a ZNBD_WRITE_SOURCE write's data (SRC: its struct
 * znbd_write_source); the zone engine's store callback as dev_store_data. */
static int
store_source(void *opaque, const void *src, uint64_t len, uint64_t off)
{
  struct znbd_dev *d = opaque;
  const struct znbd_write_source *s = src;
  return znbd_store_write_from(d->store, s->fill, s->opaque, s->bounce, len,
                               off);
}

/* An append's store callback (OPAQUE: its struct append_ctx): the
 * offset is known only here, under the zone's lock, so bad blocks are
 * checked here, and the intent record of a server that may be recovered
 * is written here, before the data (include/znbd/redo.h); a failure makes
 * the engine abort the append (nothing written, no partial append). */
struct append_ctx {
  struct znbd_dev *d;
  uint32_t slot; /* ZNBD_NO_SLOT: no intent record */
};

static int
store_append(void *opaque, const void *data, uint64_t len, uint64_t off)
{
  struct append_ctx *a = opaque;
  struct znbd_dev *d = a->d;
  if (dev_badblock_hit(d, "append", len, off, &(uint64_t){0}))
    return znbd_refuse(ZNBD_REFUSAL_BAD_BLOCK, EIO);
  if (d->redo)
    znbd_intent_note(d->redo, a->slot, znbd_zones_zone_no(&d->zs, off), off,
                     len);
  return dev_store_data(d, data, len, off);
}

/* ZONED: a parked write with a DONE callback: the engine's entry
 * and the caller's completion (W first: the engine hands W back). */
struct async_write {
  struct znbd_zone_write w;
  znbd_write_done_fn done;
  void *opaque;
};

static void
async_done(struct znbd_zone_write *w, int err)
{
  struct async_write *a = (struct async_write *)w;
  a->done(a->opaque, err);
  free(a);
}

/* ZONED: park W (a write ahead of the wp that may wait) as H says. */
static int
park_write(const struct znbd_zone_write *w, struct znbd_zones *zs,
           const struct znbd_park_how *h)
{
  znbd_write_done_fn done = h->done;
  void *opaque = h->opaque;
  int r, e;
  if (done) {
    struct async_write *a = malloc(sizeof *a);
    if (!a)
      return -1; /* ENOMEM */
    *a = (struct async_write){*w, done, opaque};
    a->w.done = async_done;
    r = znbd_zones_write(zs, &a->w);
    if (r == ZNBD_ZONE_PARKED)
      return ZNBD_WRITE_PARKED;
    e = errno;
    free(a);
    errno = e;
    return r;
  }
  return znbd_zones_write_wait(zs, w, h->waiting, h->max);
}

/* ZONED: the zone engine runs the write (znbd_zones_write); a store that
 * can fail (dir=), or a source's fill() that can, stores before the
 * commit, so a failed write changes no wp.  A write ahead of the wp is
 * first refused (EAGAIN: nothing allocated for the common, in-order
 * case), then parked if it may wait. */
static int
zoned_write(struct znbd_dev *d, const void *buf, uint64_t len, uint64_t off,
            unsigned flags, const struct znbd_park_how *h)
{
  bool source = flags & ZNBD_WRITE_SOURCE;
  struct znbd_zone_write w = {
      .off = off,
      .len = len,
      .data = buf,
      .store = source ? store_source : dev_store_data,
      .opaque = d,
      .store_may_fail = source || znbd_store_write_may_fail(d->store),
      .pipeline = d->p.pipeline_zoned_writes,
      .one_zone = flags & ZNBD_WRITE_ONE_ZONE,
      .timeout_ms = d->p.zone_write_timeout,
  };
  int r = znbd_zones_write(&d->zs, &w);
  if (r < 0 && errno == EAGAIN && !(flags & ZNBD_WRITE_NOWAIT))
    r = park_write(&w, &d->zs, h);
  return r;
}

static int dev_write(struct znbd_dev *d, const void *buf, uint64_t len,
                     uint64_t off, unsigned flags,
                     const struct znbd_park_how *h);

/* A write whose range is checked and free of bad blocks. */
static int write_checked(struct znbd_dev *d, const void *buf, uint64_t len,
                         uint64_t off, unsigned flags,
                         const struct znbd_park_how *h);

int
znbd_dev_write(struct znbd_dev *d, const void *buf, uint64_t len, uint64_t off,
               unsigned flags)
{
  struct znbd_park_how h = {.fence = ZNBD_NO_FENCE};
  unsigned tries = 0;
  int r;
  while (znbd_busy_again(false, r = dev_write(d, buf, len, off, flags, &h),
                         &tries))
    ;
  return r;
}

int
znbd_dev_write_how(struct znbd_dev *d, const void *buf, uint64_t len,
                   uint64_t off, unsigned flags, const struct znbd_park_how *h)
{
  return dev_write(d, buf, len, off, flags, h);
}

/* write_cache: enter (a due power cut, or FENCE older than the last cut:
 * ESHUTDOWN) and keep the durable contents of [OFF, OFF+LEN) before
 * changing them. */
int
dev_wc_begin(struct znbd_dev *d, uint64_t fence, bool write, uint64_t len,
             uint64_t off)
{
  if (!d->wc)
    return 0;
  if (znbd_wcache_enter(d->wc, write, fence) < 0)
    return -1;
  if (znbd_wcache_save(d->wc, len, off) < 0) {
    int e = errno;
    znbd_wcache_leave(d->wc);
    errno = e;
    return -1;
  }
  return 0;
}

/* Returns R with errno kept. */
int
dev_wc_end(struct znbd_dev *d, int r)
{
  if (d->wc) {
    int e = errno;
    znbd_wcache_leave(d->wc);
    errno = e;
  }
  return r;
}

/* Between wc_begin and wc_end: FUA of [OFF, OFF+LEN) within the same
 * hold of the cut lock (ZNBD_WRITE_FUA). */
static int
sync_held(struct znbd_dev *d, uint64_t len, uint64_t off)
{
  return d->wc ? znbd_wcache_sync_held(d->wc, len, off)
               : znbd_store_sync(d->store, len, off);
}

static int dev_write_faults(struct znbd_dev *d, const void *buf, uint64_t len,
                            uint64_t off, unsigned flags,
                            const struct znbd_park_how *h);

/* With write_cache, between wc_begin and wc_end.  A parked write runs
 * later inside the write that fills its gap (which holds the write
 * cache's lock shared then). */
static int
dev_write(struct znbd_dev *d, const void *buf, uint64_t len, uint64_t off,
          unsigned flags, const struct znbd_park_how *h)
{
  if ((flags & ZNBD_WRITE_SOURCE) && (!buf || !(flags & ZNBD_WRITE_NOWAIT))) {
    errno = EINVAL;
    return -1;
  }
  if (dev_check_range(d, len, off) < 0 ||
      dev_wc_begin(d, h->fence, true, len, off) < 0)
    return -1;
  int r = dev_write_faults(d, buf, len, off, flags, h);
  if (r == 0 && (flags & ZNBD_WRITE_FUA)) /* ran here, not parked */
    r = sync_held(d, len, off);
  if (r < 0 && errno == EAGAIN && d->wc)
    znbd_wcache_refund(d->wc); /* not run: it counts when it is sent again */
  return dev_wc_end(d, r);
}

/* Bad blocks are checked before the zone rules (lib/faults.c); with
 * badblocks_partial_io the part before the first bad block is written as
 * a write of its own (the wp moves that far; ahead of the wp it is not
 * parked but refused), then EIO. */
static int
dev_write_faults(struct znbd_dev *d, const void *buf, uint64_t len,
                 uint64_t off, unsigned flags, const struct znbd_park_how *h)
{
  uint64_t ok;
  if (len &&
      dev_badblock_hit(d, buf ? "write" : "write zeroes", len, off, &ok)) {
    struct znbd_park_how now = {.fence = h->fence};
    if (ok &&
        write_checked(d, buf, ok, off, flags | ZNBD_WRITE_NOWAIT, &now) < 0 &&
        errno != EAGAIN)
      return -1;
    return znbd_refuse(ZNBD_REFUSAL_BAD_BLOCK, EIO);
  }
  return write_checked(d, buf, len, off, flags, h);
}

static int
write_checked(struct znbd_dev *d, const void *buf, uint64_t len, uint64_t off,
              unsigned flags, const struct znbd_park_how *h)
{
  if (dev_is_zoned(d))
    return len ? zoned_write(d, buf, len, off, flags, h) : 0;
  /* WRITE_ZEROES: nothing allocated, whole pages freed, unless NO_HOLE
   * (doc/proto.md, NBD_CMD_FLAG_NO_HOLE) asks the range to stay
   * provisioned. */
  if (!buf)
    return znbd_store_zero(
        d->store, len, off,
        (flags & ZNBD_WRITE_ALLOCATE) ? ZNBD_STORE_ZERO_ALLOCATE : 0);
  if (flags & ZNBD_WRITE_SOURCE)
    return store_source(d, buf, len, off);
  return znbd_store_write(d->store, buf, len, off);
}

void
znbd_dev_close_parking(struct znbd_dev *d)
{
  if (dev_is_zoned(d))
    znbd_zones_close_parking(&d->zs);
}

int
znbd_dev_append(struct znbd_dev *d, const void *buf, uint64_t len,
                uint64_t zone_start, uint64_t *written)
{
  unsigned tries = 0;
  int r;
  while (znbd_busy_again(false,
                         r = znbd_dev_append_fenced(d, ZNBD_NO_FENCE, buf, len,
                                                    zone_start, ZNBD_NO_SLOT,
                                                    written),
                         &tries))
    ;
  return r;
}

int
dev_append_zone(const struct znbd_dev *d, uint64_t len, uint64_t zone_start,
                uint32_t *zno)
{
  /* Not zoned: there is no zone to append to.  Only the start and the
   * alignment are checked here, not dev_check_range()'s end of the range: a
   * length past the zone capacity, and so past the end of the device (the
   * last zone's capacity ends inside it), is refused by the zone checks
   * with EIO, as null_zone_write() (and before it bio_check_eod()) does in
   * Linux. */
  if (!dev_is_zoned(d) || zone_start >= d->p.size || len == 0 ||
      (zone_start | len) % d->p.blocksize) {
    errno = EINVAL;
    return -1;
  }
  *zno = znbd_zones_zone_no(&d->zs, zone_start);
  if (d->zs.zone[*zno].start != zone_start) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

int
znbd_dev_append_fenced(struct znbd_dev *d, uint64_t fence, const void *buf,
                       uint64_t len, uint64_t zone_start, uint32_t slot,
                       uint64_t *written)
{
  uint32_t zno;
  if (dev_append_zone(d, len, zone_start, &zno) < 0 ||
      dev_wc_begin(d, fence, true, 0, 0) < 0)
    return -1;
  /* Always stored before the commit: the offset is known only then. */
  struct append_ctx a = {d, slot};
  struct znbd_zone_write w = {
      .len = len, .data = buf, .store = store_append, .opaque = &a};
  if (znbd_zones_append(&d->zs, zno, &w) < 0)
    return dev_wc_end(d, -1);
  *written = w.off;
  return dev_wc_end(d, 0);
}

/* ZONED: NBD TRIM.  Whole sequential zones are reset (failures, e.g.
 * READONLY, are ignored: TRIM is advisory), the whole device is a
 * reset-all, partly covered sequential zones are left alone, conventional
 * ranges have their pages freed. */
void
znbd_dev_trim_zones(struct znbd_dev *d, uint64_t len, uint64_t off,
                    uint32_t *first, uint32_t *end)
{
  const struct znbd_zones *zs = &d->zs;
  *first = *end = 0;
  if (!dev_is_zoned(d) || len == 0 || off >= d->p.size || len > d->p.size - off)
    return;
  uint32_t f = znbd_zones_zone_no(zs, off);
  if (off != zs->zone[f].start)
    f++; /* partly covered: left alone */
  *first = f < zs->nr_conv ? zs->nr_conv : f;
  /* The zone holding the end is partly covered, unless the end is the
   * device's (a runt last zone ends there). */
  *end =
      off + len >= d->p.size ? zs->nr_zones : znbd_zones_zone_no(zs, off + len);
}

static int
zoned_trim(struct znbd_dev *d, uint64_t len, uint64_t off)
{
  uint64_t end = off + len, plen;
  bool all = off == 0 && len == d->p.size;
  uint32_t first, last;
  znbd_dev_trim_zones(d, len, off, &first, &last);

  if (all)
    znbd_zones_mgmt(&d->zs, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES, discard_release,
                    d);
  for (; off < end; off += plen) {
    struct znbd_zone *z = znbd_zones_piece(&d->zs, off, end, &plen);
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL) {
      if (znbd_store_zero(d->store, plen, off, 0) < 0) /* no zone state */
        return -1;
    } else if (!all && (uint32_t)(z - d->zs.zone) >= first &&
               (uint32_t)(z - d->zs.zone) < last) {
      znbd_zones_mgmt(&d->zs, ZNBD_ZONE_OP_RESET, (uint32_t)(z - d->zs.zone),
                      discard_release, d);
    }
  }
  return 0;
}

int
znbd_dev_trim(struct znbd_dev *d, uint64_t len, uint64_t off)
{
  unsigned tries = 0;
  int r;
  while (znbd_busy_again(
      false, r = znbd_dev_trim_fenced(d, ZNBD_NO_FENCE, len, off, 0), &tries))
    ;
  return r;
}

int
znbd_dev_trim_fenced(struct znbd_dev *d, uint64_t fence, uint64_t len,
                     uint64_t off, unsigned flags)
{
  if (dev_check_range(d, len, off) < 0 ||
      dev_wc_begin(d, fence, false, len, off) < 0)
    return -1;
  int r = dev_is_zoned(d) ? zoned_trim(d, len, off)
                          : znbd_store_zero(d->store, len, off, 0);
  if (r == 0 && (flags & ZNBD_WRITE_FUA))
    r = sync_held(d, len, off);
  return dev_wc_end(d, r);
}

int
znbd_dev_flush(struct znbd_dev *d)
{
  return znbd_dev_flush_fenced(d, ZNBD_NO_FENCE);
}

int
znbd_dev_flush_fenced(struct znbd_dev *d, uint64_t fence)
{
  if (d->wc)
    return znbd_wcache_flush(d->wc, fence);
  return znbd_store_flush(d->store);
}

int
znbd_dev_sync(struct znbd_dev *d, uint64_t len, uint64_t off)
{
  return znbd_dev_sync_fenced(d, ZNBD_NO_FENCE, len, off);
}

int
znbd_dev_sync_fenced(struct znbd_dev *d, uint64_t fence, uint64_t len,
                     uint64_t off)
{
  if (dev_check_range(d, len, off) < 0)
    return -1;
  if (d->wc)
    return znbd_wcache_sync(d->wc, len, off, fence);
  return znbd_store_sync(d->store, len, off);
}

int
znbd_dev_power_cut(struct znbd_dev *d, uint64_t after)
{
  if (!d->wc) {
    errno = EINVAL;
    return -1;
  }
  return znbd_wcache_cut(d->wc, after);
}

uint64_t
znbd_dev_generation(struct znbd_dev *d)
{
  return d->wc ? znbd_wcache_generation(d->wc) : 0;
}

void
znbd_dev_on_power_cut(struct znbd_dev *d, void (*fn)(void *opaque),
                      void *opaque)
{
  if (d->wc)
    znbd_wcache_on_cut(d->wc, fn, opaque);
}

int
znbd_dev_zone_op(struct znbd_dev *d, enum znbd_zone_op op, uint32_t zone)
{
  unsigned tries = 0;
  int r;
  while (znbd_busy_again(
      false, r = znbd_dev_zone_op_fenced(d, ZNBD_NO_FENCE, op, zone), &tries))
    ;
  return r;
}

int
znbd_dev_zone_op_fenced(struct znbd_dev *d, uint64_t fence,
                        enum znbd_zone_op op, uint32_t zone)
{
  /* Not zoned: no zones. */
  if (!dev_is_zoned(d) ||
      (zone == ZNBD_ALL_ZONES && op != ZNBD_ZONE_OP_RESET)) {
    errno = EINVAL;
    return -1;
  }
  if (dev_wc_begin(d, fence, false, 0, 0) < 0)
    return -1;
  if (znbd_zones_mgmt(&d->zs, op, zone, discard, d) < 0)
    return dev_wc_end(d, -1);
  if (op == ZNBD_ZONE_OP_OPEN)
    znbd_store_zone_open(d->store, zone);
  if (op >= ZNBD_ZONE_OP_SET_READONLY)
    return dev_wc_end(d, keep_fault(d, zone));
  return dev_wc_end(d, 0);
}

uint32_t
znbd_dev_report(struct znbd_dev *d, uint32_t first, uint32_t nr,
                struct znbd_zone_info *out)
{
  /* Not zoned: nothing to report. */
  if (!dev_is_zoned(d) || first >= d->zs.nr_zones)
    return 0;
  if (nr > d->zs.nr_zones - first)
    nr = d->zs.nr_zones - first;
  for (uint32_t i = 0; i < nr; i++)
    znbd_zone_info(&d->zs.zone[first + i], &out[i]);
  return nr;
}

uint32_t
znbd_dev_zone_index(const struct znbd_dev *d, uint64_t off)
{
  /* A shift for power-of-2 zone sizes, else one division. */
  return dev_is_zoned(d) ? znbd_zones_zone_no(&d->zs, off) : 0;
}

void
znbd_dev_stats(struct znbd_dev *d, struct znbd_dev_stats *out)
{
  memset(out, 0, sizeof *out);
  if (dev_is_zoned(d)) {
    znbd_zones_counters(&d->zs, &out->nr_imp_open, &out->nr_exp_open,
                        &out->nr_closed);
    out->park_waits = atomic_load(&d->zs.park_waits);
    out->park_sleeps = atomic_load(&d->zs.park_sleeps);
  }
  out->allocated = znbd_store_allocated(d->store);
  out->badblock_errors = atomic_load(&d->f.bb_errors);
  out->dropped_replies = atomic_load(&d->f.dropped);
  out->delayed_requests = atomic_load(&d->f.delayed);
  out->delay_nsec = atomic_load(&d->f.delay_nsec);
}

int
znbd_dev_badblocks_edit(struct znbd_dev *d, const char *list, bool add,
                        char *err, size_t errlen)
{
  return znbd_faults_bb_edit(&d->f, list, add, err, errlen);
}

size_t
znbd_dev_badblocks_list(struct znbd_dev *d, char *buf, size_t len)
{
  return znbd_faults_bb_format(&d->f, buf, len);
}

void
znbd_dev_set_frontend(struct znbd_dev *d, unsigned frontend)
{
  d->frontend = frontend;
}

unsigned
znbd_dev_frontend(const struct znbd_dev *d)
{
  return d->frontend;
}

void
znbd_dev_drop_reply_set(struct znbd_dev *d, uint32_t every, unsigned kinds)
{
  atomic_store(&d->f.drop_every, 0);
  atomic_store(&d->f.drop_kinds, kinds);
  atomic_store(&d->f.drop_seen, 0);
  atomic_store(&d->f.drop_every, every);
}

void
znbd_dev_drop_reply_get(struct znbd_dev *d, uint32_t *every, unsigned *kinds)
{
  *every = (uint32_t)atomic_load(&d->f.drop_every);
  *kinds = atomic_load(&d->f.drop_kinds);
}

bool
znbd_dev_drop_reply(struct znbd_dev *d, unsigned kind)
{
  uint32_t every =
      (uint32_t)atomic_load_explicit(&d->f.drop_every, memory_order_relaxed);
  if (!every || !(atomic_load(&d->f.drop_kinds) & kind))
    return false;
  if ((atomic_fetch_add(&d->f.drop_seen, 1) + 1) % every != 0)
    return false;
  atomic_fetch_add(&d->f.dropped, 1);
  znbd_log(ZNBD_LOG_FAULT, "drop-reply: the reply to this %s is not sent",
           kind == ZNBD_IO_READ    ? "read"
           : kind == ZNBD_IO_WRITE ? "write"
           : kind == ZNBD_IO_FLUSH ? "flush"
           : kind == ZNBD_IO_TRIM  ? "trim"
                                   : "request");
  return true;
}

uint64_t
znbd_dev_delay_nsec(struct znbd_dev *d, unsigned kind, uint64_t len)
{
  if (kind == ZNBD_IO_READ || kind == ZNBD_IO_WRITE)
    return znbd_faults_throttle(&d->f, len);
  if (kind == ZNBD_IO_TRIM && dev_is_zoned(d))
    return d->p.zone_reset_nsec;
  return 0;
}

uint64_t
znbd_dev_request_delay(struct znbd_dev *d, unsigned kind, uint64_t len,
                       enum znbd_zone_op op)
{
  uint64_t ns = d->p.completion_nsec;
  if (kind == ZNBD_IO_ZONE_MGMT)
    ns += znbd_dev_zone_op_nsec(d, op);
  else
    ns += znbd_dev_delay_nsec(d, kind, len);
  if (ns) { /* counted here, so one test can see every front-end ask */
    atomic_fetch_add(&d->f.delayed, 1);
    atomic_fetch_add(&d->f.delay_nsec, ns);
  }
  return ns;
}

uint64_t
znbd_dev_zone_op_nsec(const struct znbd_dev *d, enum znbd_zone_op op)
{
  switch (op) {
  case ZNBD_ZONE_OP_OPEN:
    return d->p.zone_open_nsec;
  case ZNBD_ZONE_OP_CLOSE:
    return d->p.zone_close_nsec;
  case ZNBD_ZONE_OP_FINISH:
    return d->p.zone_finish_nsec;
  case ZNBD_ZONE_OP_RESET:
    return d->p.zone_reset_nsec;
  default:
    return 0;
  }
}

int
znbd_dev_wire_errno(int err)
{
  switch (err) {
  case ETOOMANYREFS: /* open limit */
  case EOVERFLOW:    /* active limit */
    return ENOSPC;
  case EAGAIN:
  case ETIMEDOUT:
    return EIO;
  case EIO:
  case EINVAL:
  case ENOMEM:
  case ENOSPC:
  case EPERM:
  case ESHUTDOWN: /* a power cut (NBD_ESHUTDOWN) */
    return err;
  default:
    return EIO;
  }
}
