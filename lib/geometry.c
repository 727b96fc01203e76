/* znbd: a device's geometry derived once from what was asked for
 * (include/znbd/geometry.h), by Linux null_blk's rules
 * (drivers/block/null_blk/zoned.c, null_init_zoned_dev()), in one place
 * as Linux zloop's zloop_ctl_add() (drivers/block/zloop.c) derives and
 * validates its device once.  No other file applies these rules.
 */
#include <errno.h>

#include "znbd/geometry.h"

int
znbd_geometry_derive(struct znbd_geometry *g,
                     const struct znbd_geometry_request *r)
{
  struct znbd_geometry n = {
      .size = r->size, .blocksize = r->blocksize, .zoned = r->zoned};

  if (r->size == 0) {
    errno = EINVAL;
    return -1;
  }
  if (!r->zoned) {
    n.conv_end = r->size;
    *g = n;
    return 0;
  }
  uint64_t cap = r->zone_capacity ? r->zone_capacity : r->zone_size;
  if (r->zone_size == 0 || cap > r->zone_size) {
    errno = EINVAL;
    return -1;
  }
  uint64_t nr = r->size / r->zone_size + (r->size % r->zone_size != 0);
  if (nr > UINT32_MAX) {
    errno = EINVAL;
    return -1;
  }
  n.zone_size = r->zone_size;
  n.zone_capacity = cap;
  n.nr_zones = (uint32_t)nr;
  n.last_zone_len = r->size - (nr - 1) * r->zone_size;
  n.has_gaps = cap < r->zone_size;

  /* The clamps of null_init_zoned_dev(). */
  n.nr_conv = r->nr_conv >= n.nr_zones ? n.nr_zones - 1 : r->nr_conv;
  uint32_t nr_seq = n.nr_zones - n.nr_conv;
  n.max_active = r->max_active >= nr_seq ? 0 : r->max_active;
  n.max_open = r->max_open;
  if (n.max_active && n.max_open > n.max_active)
    n.max_open = n.max_active;
  else if (n.max_open >= nr_seq)
    n.max_open = 0;
  n.conv_end = (uint64_t)n.nr_conv * n.zone_size;
  if (n.conv_end > n.size)
    n.conv_end = n.size;
  *g = n;
  return 0;
}

struct znbd_geometry_span
znbd_geometry_span(const struct znbd_geometry *g, uint32_t i)
{
  uint64_t zsize = znbd_geometry_span_size(g);
  struct znbd_geometry_span s = {.start = (uint64_t)i * zsize};
  s.len = g->size - s.start < zsize ? g->size - s.start : zsize;
  s.seq = g->zoned && i >= g->nr_conv;
  s.cap = s.seq && g->zone_capacity < s.len ? g->zone_capacity : s.len;
  return s;
}
