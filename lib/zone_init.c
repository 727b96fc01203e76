/* znbd: the zone engine's life: laying the zones out from the geometry
 * (lib/geometry.c derives it) and tearing them down.  Each part of the
 * engine sets up and tears down its own state (the parked-write pipeline
 * in lib/zone_park.c); this file only calls them in order, so that the
 * state machine (lib/zone.c) and the pipeline, which calls into it, stay
 * in a line.  All offsets and lengths are bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "zone_impl.h"
#include "znbd/geometry.h"

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
  znbd_zones_park_init(zs);

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
  znbd_zones_park_destroy(zs);
  for (i = 0; i < zs->nr_zones; i++) {
    pthread_mutex_destroy(&zs->zone[i].lock);
  }
  pthread_mutex_destroy(&zs->res_lock);
  free(zs->zone);
  zs->zone = NULL;
}
