/* znbd: the device's requests that change data (include/znbd/dev.h,
 * lib/dev_unfenced.h, lib/dev_fenced.h): writes, appends and trims.  A
 * write goes down one chain, each step calling only the ones above it:
 * the range checked and the write cache entered (dev_write), the bad
 * blocks (dev_write_faults), then the store (write_checked) or, zoned,
 * the zone engine (zoned_write), which parks a write ahead of the wp
 * (park_write) and stores through the callbacks at the top. */
#include <errno.h>
#include <stdlib.h>

#include "znbd/dev.h"
#include "znbd/redo.h"
#include "busy.h"
#include "dev_fenced.h"
#include "dev_impl.h"
#include "dev_unfenced.h"
#include "intent.h"
#include "refusal.h"
#include "store.h"
#include "wcache.h"
#include "zone.h"

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
  int r;
  if (done) {
    struct async_write *a = malloc(sizeof *a);
    if (!a)
      return -1; /* ENOMEM */
    *a = (struct async_write){*w, done, opaque};
    a->w.done = async_done;
    r = znbd_zones_write(zs, &a->w);
    if (r == ZNBD_ZONE_PARKED)
      return ZNBD_WRITE_PARKED;
    free(a); /* keeps errno */
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

/* A write whose range is checked and free of bad blocks. */
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

/* Between wc_begin and wc_end: FUA of [OFF, OFF+LEN) within the same
 * hold of the cut lock (ZNBD_WRITE_FUA). */
static int
sync_held(struct znbd_dev *d, uint64_t len, uint64_t off)
{
  return d->wc ? znbd_wcache_sync_held(d->wc, len, off)
               : znbd_store_sync(d->store, len, off);
}

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

void
znbd_dev_close_parking(struct znbd_dev *d)
{
  if (dev_is_zoned(d))
    znbd_zones_close_parking(&d->zs);
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
    znbd_zones_mgmt(&d->zs, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES,
                    dev_discard_release, d);
  for (; off < end; off += plen) {
    struct znbd_zone *z = znbd_zones_piece(&d->zs, off, end, &plen);
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL) {
      if (znbd_store_zero(d->store, plen, off, 0) < 0) /* no zone state */
        return -1;
    } else if (!all && (uint32_t)(z - d->zs.zone) >= first &&
               (uint32_t)(z - d->zs.zone) < last) {
      znbd_zones_mgmt(&d->zs, ZNBD_ZONE_OP_RESET, (uint32_t)(z - d->zs.zone),
                      dev_discard_release, d);
    }
  }
  return 0;
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
znbd_dev_trim(struct znbd_dev *d, uint64_t len, uint64_t off)
{
  unsigned tries = 0;
  int r;
  while (znbd_busy_again(
      false, r = znbd_dev_trim_fenced(d, ZNBD_NO_FENCE, len, off, 0), &tries))
    ;
  return r;
}
