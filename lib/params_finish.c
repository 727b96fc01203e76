/* znbd: finishing the parameters (znbd_params_finish): a dir= that
 * holds a device gives its recorded geometry, then the checks that
 * involve several parameters, then the geometry derived once with
 * null_blk's clamps (lib/geometry.c; doc/zone-rules.md, rule
 * clamp-limits), each clamp reported as a note.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "znbd/params.h"
#include "znbd/log.h"
#include "err.h"
#include "params_impl.h"
#include "store_dir_meta.h"

struct list_check {
  uint32_t nr_conv;
  uint32_t bad;
};

static int
refuse_conv(void *opaque, uint32_t zone)
{
  struct list_check *c = opaque;
  if (zone < c->nr_conv) {
    c->bad = zone;
    return 1;
  }
  return 0;
}

static int
check_list(const char *key, const char *list, uint32_t nr_zones,
           uint32_t nr_conv, char *err, size_t errlen)
{
  struct list_check c = {nr_conv, 0};
  int r = znbd_parse_zone_list(list, nr_zones, refuse_conv, &c);
  if (r < 0) {
    set_err(err, errlen,
            "%s: '%s' names a zone outside 0-%" PRIu32
            " (the device has %" PRIu32 " zones)",
            key, list, nr_zones - 1, nr_zones);
    return -1;
  }
  if (r > 0) {
    set_err(err, errlen,
            "%s: zone %" PRIu32 " is conventional (zone_nr_conv=%" PRIu32
            "); only sequential zones can be made readonly or offline",
            key, c.bad, nr_conv);
    return -1;
  }
  return 0;
}

/* Whether NAME's value V is a multiple of the block size BS; if not, a
 * message naming NAME in ERR. */
static bool
block_multiple(const char *name, uint64_t v, uint32_t bs, char *err,
               size_t errlen)
{
  if (v % bs == 0)
    return true;
  set_err(err, errlen,
          "%s: %" PRIu64 " is not a multiple of blocksize (%" PRIu32 ")", name,
          v, bs);
  return false;
}

/* Whether NAME's value V fits in what holds it, OUTER of size MAX; if
 * not, a message naming both in ERR. */
static bool
fits_within(const char *name, uint64_t v, const char *outer, uint64_t max,
            char *err, size_t errlen)
{
  if (v <= max)
    return true;
  set_err(err, errlen, "%s: %" PRIu64 " is larger than %s (%" PRIu64 ")", name,
          v, outer, max);
  return false;
}

/* What every device needs: a size, a block size dividing it, and each
 * UINT entry at least its table minimum. */
static int
check_device(struct znbd_params *p, char *err, size_t errlen)
{
  if (p->size == 0) {
    set_err(err, errlen, "size: required and must not be 0 (e.g. size=4G)");
    return -1;
  }
  if (p->blocksize != 512 && p->blocksize != 4096) {
    set_err(err, errlen, "blocksize: must be 512 or 4096");
    return -1;
  }
  if (!block_multiple("size", p->size, p->blocksize, err, errlen))
    return -1;
  for (size_t k = 0; k < znbd_param_nr; k++) {
    const struct param *e = &znbd_param_table[k];
    if (e->i.type == ZNBD_PARAM_T_UINT &&
        *(uint32_t *)znbd_param_field(p, e, sizeof(uint32_t)) < e->i.min) {
      set_err(err, errlen, "%s: must be at least %" PRIu32, e->i.name,
              e->i.min);
      return -1;
    }
  }
  return 0;
}

/* Zone size and capacity against the block size and the device
 * (doc/zone-rules.md, rules zone-layout, zone-capacity, zone-size-any). */
static int
check_zones(struct znbd_params *p, char *err, size_t errlen)
{
  if (p->zone_size == 0 || p->zone_size % p->blocksize) {
    set_err(err, errlen,
            "zone_size: %" PRIu64
            " must be a non-zero multiple of blocksize (%" PRIu32 ")",
            p->zone_size, p->blocksize);
    return -1;
  }
  if (!fits_within("zone_size", p->zone_size, "size", p->size, err, errlen) ||
      !block_multiple("zone_capacity", p->zone_capacity, p->blocksize, err,
                      errlen) ||
      !fits_within("zone_capacity", p->zone_capacity, "zone_size", p->zone_size,
                   err, errlen))
    return -1;
  uint64_t nz = p->size / p->zone_size + (p->size % p->zone_size != 0);
  if (nz > UINT32_MAX) {
    set_err(err, errlen,
            "zone_size: %" PRIu64 " gives %" PRIu64 " zones for size %" PRIu64
            " (at most %" PRIu32 ")",
            p->zone_size, nz, p->size, UINT32_MAX);
    return -1;
  }
  return 0;
}

/* Derive P's geometry once (lib/geometry.c: zone count, capacity 0 ->
 * zone_size, null_blk's clamps; doc/zone-rules.md, rule clamp-limits),
 * report each clamp as a note (znbd_log) and write the clamped values
 * back to their keys.  P is checked: derivation cannot fail then (EINVAL
 * otherwise). */
static int
derive_geometry(struct znbd_params *p)
{
  const struct znbd_geometry_request r = {
      .size = p->size,
      .blocksize = p->blocksize,
      .zoned = p->zoned,
      .zone_size = p->zone_size,
      .zone_capacity = p->zone_capacity,
      .nr_conv = p->zone_nr_conv,
      .max_open = p->zone_max_open,
      .max_active = p->zone_max_active,
  };
  struct znbd_geometry *g = &p->geo;
  if (znbd_geometry_derive(g, &r) < 0)
    return -1;
  if (!g->zoned)
    return 0;
  if (g->nr_conv != r.nr_conv)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_nr_conv: %" PRIu32 " leaves no sequential zone of %" PRIu32
             "; clamped to %" PRIu32 " (as null_blk)",
             r.nr_conv, g->nr_zones, g->nr_conv);
  uint32_t nr_seq = g->nr_zones - g->nr_conv;
  if (g->max_active != r.max_active)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_max_active: %" PRIu32 " >= %" PRIu32
             " sequential zones; set to 0 (no limit, as null_blk)",
             r.max_active, nr_seq);
  if (g->max_open != r.max_open && g->max_active && r.max_open > g->max_active)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_max_open: %" PRIu32 " > zone_max_active %" PRIu32
             "; clamped to %" PRIu32 " (as null_blk)",
             r.max_open, g->max_active, g->max_active);
  else if (g->max_open != r.max_open)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_max_open: %" PRIu32 " >= %" PRIu32
             " sequential zones; set to 0 (no limit, as null_blk)",
             r.max_open, nr_seq);
  p->zone_capacity = g->zone_capacity;
  p->zone_nr_conv = g->nr_conv;
  p->zone_max_open = g->max_open;
  p->zone_max_active = g->max_active;
  return 0;
}

/* Entry E's value in P as a number, and setting it: a bool, uint32_t or
 * uint64_t field (the keys PATH/znbd.meta records). */
static uint64_t
get_number(const struct znbd_params *p, const struct param *e)
{
  const char *f = (const char *)p + e->off;
  return e->size == sizeof(bool)       ? *(const bool *)f
         : e->size == sizeof(uint32_t) ? *(const uint32_t *)f
                                       : *(const uint64_t *)f;
}

static void
set_number(struct znbd_params *p, const struct param *e, uint64_t v)
{
  char *f = (char *)p + e->off;
  if (e->size == sizeof(bool))
    *(bool *)f = v != 0;
  else if (e->size == sizeof(uint32_t))
    *(uint32_t *)f = (uint32_t)v;
  else
    *(uint64_t *)f = v;
}

/* The blocksize of a directory formatted now (zoned): zloop's block size
 * of the file system (512 up to 512 bytes, 4096 for 1024 to 4096: the
 * sequential files' sizes are then multiples of it, as zloop requires),
 * 4096 when zloop's is not known.  A given blocksize smaller than zloop's
 * is kept, with a note (znbd_log) that zloop may refuse the files. */
static void
default_blocksize(struct znbd_params *p)
{
  uint32_t zbs = znbd_dir_zloop_block_size(p->dir);
  if (!znbd_params_given(p, "blocksize")) {
    p->blocksize = zbs && zbs <= 512 ? 512 : 4096;
    return;
  }
  if (zbs && p->blocksize < zbs)
    znbd_log(ZNBD_LOG_NOTE,
             "blocksize: %" PRIu32 " is smaller than the file system's "
             "block size %" PRIu32 " under dir=%s: Linux zloop refuses a "
             "sequential zone file whose size is not a multiple of %" PRIu32,
             p->blocksize, zbs, p->dir, zbs);
}

/* dir=, before any check: when P->dir holds a formatted device, its
 * recorded geometry (size, zoned, blocksize, zone_size, zone_capacity,
 * zone_nr_conv, zone_max_open, zone_max_active) fills the parameters that
 * were not given; a given layout key that differs fails with EINVAL and a
 * message naming it and both values.  A zoned directory not formatted yet
 * gets the file system's block size when blocksize is not given (Linux
 * zloop's zloop_get_block_size(): 512 or 4096, see there), and a note
 * (znbd_log) says when a given one is smaller.  zone_full is only used
 * when formatting (a note says so if it is given).  Returns 0 (also
 * when PATH is absent or not formatted yet), or -1 with errno EINVAL or
 * EIO (unreadable or corrupt PATH/znbd.meta, named in ERR).  Reads the
 * directory's record only (lib/store_dir_meta.c); the store opens it later. */
static int
adopt_dir(struct znbd_params *p, char *err, size_t errlen)
{
  struct znbd_dir_meta m;
  int state = znbd_dir_probe(p->dir, &m, err, errlen);
  if (state < 0)
    return -1;
  if (state != ZNBD_DIR_FORMATTED) { /* formatted when the device is made */
    if (p->size == 0 && state == ZNBD_DIR_ZLOOP) {
      set_err(err, errlen,
              "size: required: dir=%s holds zone files but no %s (a Linux "
              "zloop directory?): give the geometry it was made with, "
              "size= (zloop's capacity_mb), zone_size= (zone_size_mb, "
              "zloop's default 256M), zone_capacity= (zone_capacity_mb) and "
              "zone_nr_conv= (conv_zones, zloop's default 8)",
              p->dir, META_NAME);
      errno = EINVAL;
      return -1;
    }
    if (p->zoned)
      default_blocksize(p);
    if (p->size == 0) {
      set_err(err, errlen,
              "size: required: dir=%s has no %s yet (a new directory is "
              "formatted with the geometry given: size=, and zone_size=, "
              "zone_nr_conv=, ... when not the defaults)",
              p->dir, META_NAME);
      errno = EINVAL;
      return -1;
    }
    return 0;
  }
  /* Not given: the recorded value.  Given and different: the layout keys
   * are refused now (before other checks complain about a consequence),
   * the others when the store opens (znbd_store_dir_open compares them
   * after the clamps, which may change a given value). */
  struct znbd_dir_meta cur;
  for (size_t k = 0; k < ZNBD_DIR_META_NKEYS; k++) {
    const struct param *e = znbd_param_entry(znbd_dir_meta_key(k));
    assert(e); /* every key recorded is a parameter's name */
    bool given = p->given >> (e - znbd_param_table) & 1;
    znbd_dir_meta_put(&cur, k,
                      given ? get_number(p, e) : znbd_dir_meta_get(&m, k));
    if (given && k < ZNBD_DIR_META_LAYOUT_KEYS && (k < 3 || m.zoned) &&
        znbd_dir_meta_mismatch(&m, &cur, k, p->dir, err, errlen) < 0)
      return -1;
  }
  /* The zone keys only for a zoned device; write_cache is not adopted. */
  for (size_t k = 0; k < ZNBD_DIR_META_NKEYS; k++) {
    const struct param *e = znbd_param_entry(znbd_dir_meta_key(k));
    if ((k < 3 || cur.zoned) && strcmp(e->i.name, "write_cache") != 0)
      set_number(p, e, znbd_dir_meta_get(&cur, k));
  }
  if (p->zone_full)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_full: ignored, dir=%s is formatted already (its files "
             "give each zone's write pointer)",
             p->dir);
  return 0;
}

int
znbd_params_finish(struct znbd_params *p, char *err, size_t errlen)
{
  if (err && errlen)
    err[0] = '\0';
  if (p->dir && adopt_dir(p, err, errlen) < 0)
    return -1;
  errno = EINVAL;
  if (p->dir && !p->memory_backed) {
    set_err(err, errlen, "memory_backed: false cannot keep data in dir=%s",
            p->dir);
    return -1;
  }
  if (check_device(p, err, errlen) < 0)
    return -1;
  if (p->badblocks &&
      znbd_parse_sector_list(p->badblocks, p->size / 512, NULL, NULL) < 0) {
    set_err(err, errlen,
            "badblocks: \"%s\" names a sector past the device's last "
            "sector %" PRIu64,
            p->badblocks, p->size / 512 - 1);
    errno = EINVAL;
    return -1;
  }
  if (!p->zoned) {
    if (p->zone_readonly || p->zone_offline || p->zone_full) {
      set_err(err, errlen, "%s: needs zoned=true",
              p->zone_readonly  ? "zone_readonly"
              : p->zone_offline ? "zone_offline"
                                : "zone_full");
      return -1;
    }
    if (derive_geometry(p) < 0) /* size is checked: cannot fail */
      return -1;
    errno = 0;
    return 0;
  }
  if (check_zones(p, err, errlen) < 0)
    return -1;
  if (derive_geometry(p) < 0) {
    set_err(err, errlen, "zone_size: cannot lay out the zones: %s",
            strerror(errno));
    return -1;
  }
  if (p->zone_readonly &&
      check_list("zone_readonly", p->zone_readonly, p->geo.nr_zones,
                 p->geo.nr_conv, err, errlen) < 0) {
    errno = EINVAL;
    return -1;
  }
  if (p->zone_offline &&
      check_list("zone_offline", p->zone_offline, p->geo.nr_zones,
                 p->geo.nr_conv, err, errlen) < 0) {
    errno = EINVAL;
    return -1;
  }
  errno = 0;
  return 0;
}
