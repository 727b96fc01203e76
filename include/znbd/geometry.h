/* znbd: a device's geometry, derived once (lib/geometry.c).
 *
 * The zone count, the conventional zones, the zones' lengths and
 * capacities and the open/active limits follow from a few parameters by
 * Linux null_blk's rules (drivers/block/null_blk/zoned.c,
 * null_init_zoned_dev(): the zone count, the clamps of zone_nr_conv,
 * zone_max_active and zone_max_open), as Linux zloop derives its own once
 * when a device is added (drivers/block/zloop.c, zloop_ctl_add()).
 * znbd_params_finish() fills a struct znbd_geometry once, in the params'
 * field geo, after its checks; the zone engine, the directory store, the
 * write cache's journal, the export description and the SCSI pages read
 * it instead of deriving it again.  All sizes are bytes.
 */
#ifndef ZNBD_GEOMETRY_H
#define ZNBD_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

struct znbd_geometry {
  uint64_t size;          /* device, bytes */
  uint32_t blocksize;     /* logical block, bytes */
  bool zoned;             /* host-managed zones; false: no field below is set */
  uint64_t zone_size;     /* bytes (any value, power of 2 or not) */
  uint64_t zone_capacity; /* bytes writable in a zone, <= zone_size */
  uint32_t nr_zones;      /* ceil(size / zone_size) */
  uint32_t nr_conv;       /* conventional zones at the start, < nr_zones */
  uint64_t last_zone_len; /* bytes; zone_size unless size is not a multiple */
  uint32_t max_open;      /* 0: no limit; < sequential zones */
  uint32_t max_active;    /* 0: no limit; < sequential zones */
  bool has_gaps;          /* zone_capacity < zone_size (ZBC gap zones) */
  uint64_t conv_end;      /* bytes of the conventional zones at the start
                             (zoned=false: size, the whole device) */
};

/* The geometry asked for, as given (before null_blk's clamps). */
struct znbd_geometry_request {
  uint64_t size;          /* bytes, > 0 */
  uint32_t blocksize;     /* bytes */
  bool zoned;             /* false: the fields below are not read */
  uint64_t zone_size;     /* bytes, > 0 */
  uint64_t zone_capacity; /* bytes, <= zone_size; 0 = zone_size */
  uint32_t nr_conv;       /* conventional zones asked for */
  uint32_t max_open;      /* 0 = no limit */
  uint32_t max_active;    /* 0 = no limit */
};

/* Fill G from R, applying null_init_zoned_dev()'s clamps: nr_conv >=
 * nr_zones -> nr_zones - 1; max_active >= sequential zones -> 0; max_open
 * > max_active (when set) -> max_active, else max_open >= sequential
 * zones -> 0.  A caller that reports clamps compares R with G.  Checks
 * only what the derivation needs (the callers check the rest with their
 * own messages, lib/params_finish.c).  Returns 0, or -1 with errno EINVAL (size
 * 0; zoned with zone_size 0, zone_capacity > zone_size, or more than
 * UINT32_MAX zones), G then unchanged. */
int znbd_geometry_derive(struct znbd_geometry *g,
                         const struct znbd_geometry_request *r);

/* One span of G: a zone, or for zoned=false the whole device (one
 * conventional span).  Bytes. */
struct znbd_geometry_span {
  uint64_t start, len; /* len: the last zone may be shorter */
  uint64_t cap;        /* writable bytes: len for a conventional span */
  bool seq;            /* a sequential-write-required zone */
};

/* The number of spans of G: nr_zones, or 1 when not zoned. */
static inline uint32_t
znbd_geometry_nr_spans(const struct znbd_geometry *g)
{
  return g->zoned ? g->nr_zones : 1;
}

/* The length of every span but the last: zone_size, or size when not
 * zoned.  Bytes. */
static inline uint64_t
znbd_geometry_span_size(const struct znbd_geometry *g)
{
  return g->zoned ? g->zone_size : g->size;
}

/* Span I of G (I < znbd_geometry_nr_spans(G)).  Never fails. */
struct znbd_geometry_span znbd_geometry_span(const struct znbd_geometry *g,
                                             uint32_t i);

#endif
