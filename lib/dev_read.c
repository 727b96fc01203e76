/* znbd: the device's one read call (znbd_dev_read() of
 * include/znbd/dev.h, and znbd_req_read() of the request contract): the
 * range, the zone types (ZNBD_READ_ONE_TYPE) and the bad blocks checked,
 * then a plain disk read straight from the store, a zoned one span by span
 * under each sequential zone's lock (lib/zone_read.c), into the caller's
 * buffer, into a sink (ZNBD_READ_SINK), or not at all (ZNBD_READ_CHECK,
 * ZNBD_READ_REF).  Each refusal sets its reason (znbd/refusal.h) where
 * the rule decides. */
#include <errno.h>
#include <string.h>

#include "znbd/dev.h"
#include "dev_impl.h"
#include "refusal.h"
#include "store.h"
#include "zone.h"

struct read_ctx {
  struct znbd_dev *d;
  uint8_t *buf; /* where byte OFF of the request goes */
  uint64_t off;
  /* ZNBD_READ_SINK: where the bytes go (BUF is its bounce). */
  const struct znbd_read_sink *sink;
};

/* LEN bytes of the read at OFF to C->sink: from the store in place when
 * it can (znbd_store_ref(): RAM pages all allocated), else through BUF. */
static int
read_store(struct read_ctx *c, uint8_t *buf, uint64_t len, uint64_t off)
{
  const void *p = znbd_store_ref(c->d->store, len, off);
  if (p)
    return c->sink->drain(c->sink->opaque, p, len, off - c->off);
  if (znbd_store_read(c->d->store, buf, len, off) < 0)
    return -1;
  return c->sink->drain(c->sink->opaque, buf, len, off - c->off);
}

/* ZONED: one span of a read (znbd_zones_spans; a sequential zone's lock
 * is held).  OFFLINE: EIO (null_process_zoned_cmd), reason ZONE_OFFLINE.
 * Bytes at or past the wp, and past the capacity, are "past the wp"
 * (null_zone_valid_read_len) and read per zone_read_past_wp, but for the
 * gap of a finished or READONLY zone (ZNBD_SPAN_GAP): null_blk reads it
 * from memory, so it reads zeros (EIO with zone_read_past_wp=error,
 * reason READ_PAST_WP). */
static int
read_span(void *opaque, uint64_t off, uint64_t len, enum znbd_zone_span span)
{
  struct read_ctx *c = opaque;
  uint8_t *buf = c->buf + (off - c->off);
  enum znbd_read_past_wp past = c->d->p.zone_read_past_wp;

  switch (span) {
  case ZNBD_SPAN_CONV:
  case ZNBD_SPAN_DATA:
    return znbd_store_read(c->d->store, buf, len, off);
  case ZNBD_SPAN_GAP: /* null_blk reads these never-written bytes: zeros */
  case ZNBD_SPAN_PAST_WP:
    if (past == ZNBD_READ_PAST_WP_ERROR)
      return znbd_refuse(ZNBD_REFUSAL_READ_PAST_WP, EIO);
    memset(buf,
           past == ZNBD_READ_PAST_WP_ONES && span == ZNBD_SPAN_PAST_WP ? 0xff
                                                                       : 0,
           len);
    return 0;
  case ZNBD_SPAN_OFFLINE:
    break;
  }
  return znbd_refuse(ZNBD_REFUSAL_ZONE_OFFLINE, EIO);
}

/* read_span() for ZNBD_READ_SINK: data from the store in place where it
 * can be; zeros (or ones) past the wp as read_span() makes them, in the
 * bounce buffer, then drained.  A callback of its own, so that a plain
 * read's read_span() stays a tail call into the store. */
static int
sink_span(void *opaque, uint64_t off, uint64_t len, enum znbd_zone_span span)
{
  struct read_ctx *c = opaque;
  uint8_t *buf = c->buf + (off - c->off);
  if (span == ZNBD_SPAN_CONV || span == ZNBD_SPAN_DATA)
    return read_store(c, buf, len, off);
  if (read_span(opaque, off, len, span) < 0)
    return -1;
  return c->sink->drain(c->sink->opaque, buf, len, off - c->off);
}

static int
zoned_read(struct znbd_dev *d, uint8_t *buf, uint64_t len, uint64_t off,
           const struct znbd_read_sink *sink)
{
  struct read_ctx c = {d, buf, off, sink};
  return znbd_zones_spans(&d->zs, off, len, sink ? sink_span : read_span, &c)
             ? -1
             : 0;
}

/* ZONED, ZNBD_READ_ONE_TYPE: whether [OFF, OFF+LEN) (LEN > 0) touches
 * zones of more than one type, which a ZBC read may not (ZBC-2 4.5.3).
 * A zone's type is fixed at start-up, so no lock is taken. */
static bool
mixes_types(const struct znbd_dev *d, uint64_t len, uint64_t off)
{
  const struct znbd_zone *z = d->zs.zone;
  uint32_t i = znbd_zones_zone_no(&d->zs, off);
  uint32_t last = znbd_zones_zone_no(&d->zs, off + len - 1);
  for (uint32_t j = i + 1; j <= last; j++)
    if (z[j].type != z[i].type)
      return true;
  return false;
}

/* The checks every read makes before it touches the store. */
static int
read_check(struct znbd_dev *d, uint64_t len, uint64_t off, unsigned flags)
{
  uint64_t ok;
  if (dev_check_range(d, len, off) < 0)
    return -1;
  if (len == 0)
    return 0;
  if ((flags & ZNBD_READ_ONE_TYPE) && dev_is_zoned(d) &&
      mixes_types(d, len, off))
    return znbd_refuse(ZNBD_REFUSAL_READ_MIXED_TYPES, EIO);
  if (dev_badblock_hit(d, "read", len, off, &ok))
    /* a partial read carries nothing over NBD */
    return znbd_refuse(ZNBD_REFUSAL_BAD_BLOCK, EIO);
  return 0;
}

/* ZNBD_READ_REF: *REF the store's bytes in place, or NULL (zoned: reads
 * depend on the wp, under the zone lock; a hole; dir=). */
static int
read_ref(struct znbd_dev *d, const void **ref, uint64_t len, uint64_t off,
         unsigned flags)
{
  *ref = NULL;
  if (dev_is_zoned(d)) /* the read by copy that follows checks */
    return 0;
  if (read_check(d, len, off, flags) < 0)
    return -1;
  *ref = znbd_store_ref(d->store, len, off);
  return 0;
}

int
znbd_dev_read(struct znbd_dev *d, void *buf, uint64_t len, uint64_t off,
              unsigned flags)
{
  if (flags & ZNBD_READ_REF)
    return read_ref(d, buf, len, off, flags);
  if (read_check(d, len, off, flags) < 0)
    return -1;
  if (flags & ZNBD_READ_CHECK)
    return 0;
  if (flags & ZNBD_READ_SINK) {
    const struct znbd_read_sink *sink = buf;
    if (dev_is_zoned(d))
      return zoned_read(d, sink->bounce, len, off, sink);
    struct read_ctx c = {d, sink->bounce, off, sink};
    return read_store(&c, sink->bounce, len, off);
  }
  if (dev_is_zoned(d))
    return zoned_read(d, buf, len, off, NULL);
  return znbd_store_read(d->store, buf, len, off);
}
