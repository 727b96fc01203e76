/* znbd: what a byte range of the device holds, as the NBD metadata
 * contexts describe it (include/znbd/dev.h): base:allocation
 * (znbd_dev_extents()) from the store and each sequential zone's wp, and
 * the zone context (znbd_dev_zone_extents()) of each zone's condition,
 * type and the part that lies past its wp, so that a front-end maps
 * extents to its protocol and never reads a wp itself. */
#include <errno.h>

#include "znbd/dev.h"
#include "dev_impl.h"
#include "store.h"
#include "zone.h"

struct extents_ctx {
  struct znbd_dev *d;
  int (*fn)(void *opaque, uint64_t off, uint64_t len, uint32_t flags);
  void *opaque;
};

/* Unallocated pages read as zeros: HOLE|ZERO. */
static int
store_extent(void *opaque, uint64_t off, uint64_t len, bool allocated)
{
  struct extents_ctx *c = opaque;
  return c->fn(c->opaque, off, len,
               allocated ? 0 : ZNBD_EXTENT_HOLE | ZNBD_EXTENT_ZERO);
}

/* ZONED: base:allocation of one span (znbd_zones_spans).  Conventional:
 * the store's allocation.  Sequential: [start, wp) data, [wp, zone end)
 * a hole (and past the capacity too); the hole reads as zeros
 * (HOLE|ZERO) only with zone_read_past_wp=zero, else it is HOLE alone.
 * READONLY: data up to the capacity.  OFFLINE: HOLE (reads fail). */
static int
extent_span(void *opaque, uint64_t off, uint64_t len, enum znbd_zone_span span)
{
  struct extents_ctx *c = opaque;

  switch (span) {
  case ZNBD_SPAN_CONV:
    return znbd_store_extents(c->d->store, off, len, store_extent, c);
  case ZNBD_SPAN_DATA:
    return c->fn(c->opaque, off, len, 0);
  case ZNBD_SPAN_GAP: /* reads as zeros unless zone_read_past_wp=error */
    return c->fn(c->opaque, off, len,
                 c->d->p.zone_read_past_wp != ZNBD_READ_PAST_WP_ERROR
                     ? ZNBD_EXTENT_HOLE | ZNBD_EXTENT_ZERO
                     : ZNBD_EXTENT_HOLE);
  case ZNBD_SPAN_PAST_WP:
    return c->fn(c->opaque, off, len,
                 c->d->p.zone_read_past_wp == ZNBD_READ_PAST_WP_ZERO
                     ? ZNBD_EXTENT_HOLE | ZNBD_EXTENT_ZERO
                     : ZNBD_EXTENT_HOLE);
  case ZNBD_SPAN_OFFLINE:
    break;
  }
  return c->fn(c->opaque, off, len, ZNBD_EXTENT_HOLE);
}

int
znbd_dev_extents(struct znbd_dev *d, uint64_t off, uint64_t len,
                 int (*fn)(void *opaque, uint64_t off, uint64_t len,
                           uint32_t flags),
                 void *opaque)
{
  if (dev_check_range(d, len, off) < 0)
    return -1;
  struct extents_ctx c = {d, fn, opaque};
  if (dev_is_zoned(d))
    return znbd_zones_spans(&d->zs, off, len, extent_span, &c);
  return znbd_store_extents(d->store, off, len, store_extent, &c);
}

/* One zone's extents of znbd_dev_zone_extents(): Q clipped below at OFF.
 * Returns FN's result, 0 to go on. */
static int
zone_extent(const struct znbd_zone_info *q, uint64_t off,
            znbd_zone_extent_fn fn, void *opaque)
{
  uint64_t zs = q->start > off ? q->start : off, ze = q->start + q->len;
  struct znbd_zone_extent e = {zs, ze - zs, q->cond, q->type, false};
  if (q->type != ZNBD_ZONE_TYPE_SEQWRITE_REQ || q->wp == ZNBD_WP_INVALID ||
      q->cond == ZNBD_ZONE_COND_FULL)
    return fn(opaque, &e);
  uint64_t wp = q->wp < ze ? q->wp : ze;
  int r = 0;
  if (wp > zs) {
    e.len = wp - zs;
    r = fn(opaque, &e);
  }
  if (r == 0 && wp < ze && (wp > zs ? wp : zs) < ze) {
    e.off = wp > zs ? wp : zs;
    e.len = ze - e.off;
    e.past_wp = true;
    r = fn(opaque, &e);
  }
  return r;
}

int
znbd_dev_zone_extents(struct znbd_dev *d, uint64_t off, uint64_t len,
                      znbd_zone_extent_fn fn, void *opaque)
{
  if (!dev_is_zoned(d)) {
    errno = EINVAL;
    return -1;
  }
  if (dev_check_range(d, len, off) < 0)
    return -1;
  struct znbd_zone_info q;
  for (uint32_t z = znbd_dev_zone_index(d, off);
       znbd_dev_report(d, z, 1, &q) == 1 && q.start < off + len; z++) {
    int r = zone_extent(&q, off, fn, opaque);
    if (r)
      return r;
  }
  return 0;
}
