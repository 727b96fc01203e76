/* znbd: what a read of the zoned device returns, zone by zone: the
 * spans of a byte range (conventional, written data, the gap null_blk
 * reads below its wp, past the wp, offline) under each sequential zone's
 * lock, as null_blk's null_zone_valid_read_len() splits a read.  See
 * lib/zone.h for the contract and doc/zone-rules.md for the rules; all
 * offsets and lengths are bytes. */
#include <errno.h>

#include "zone_impl.h"

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
    pthread_mutex_unlock(&z->lock); /* keeps errno */
    if (r)
      return r;
  }
  return 0;
}
