/* znbd-ublk: SET_PARAMS from the device's parameters (setup.h).
 * Sources: include/uapi/linux/ublk_cmd.h (struct ublk_params),
 * drivers/block/ublk_drv.c (ublk_validate_params(),
 * ublk_dev_param_zoned_validate()), block/blk-zoned.c
 * (blk_revalidate_disk_zones()). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "setup.h"
#include "../lib/err.h"

int
znbd_ublk_setup_params(const struct znbd_params *p, uint32_t max_io_bytes,
                       struct znbd_ublk_params *out, char *err, size_t errlen)
{
  const struct znbd_geometry *g = &p->geo;
  uint32_t max_sectors = max_io_bytes / 512;

  memset(out, 0, sizeof *out);
  out->len = sizeof *out;
  out->types = ZNBD_UBLK_PARAM_TYPE_BASIC | ZNBD_UBLK_PARAM_TYPE_DISCARD;
  out->basic.logical_bs_shift = g->blocksize == 4096 ? 12 : 9;
  out->basic.physical_bs_shift = out->basic.logical_bs_shift;
  out->basic.io_min_shift = out->basic.logical_bs_shift;
  out->basic.io_opt_shift = out->basic.logical_bs_shift;
  out->basic.max_sectors = max_sectors;
  out->basic.dev_sectors = g->size / 512;
  if (p->write_cache)
    out->basic.attrs |= ZNBD_UBLK_ATTR_VOLATILE_CACHE | ZNBD_UBLK_ATTR_FUA;
  if (p->rotational)
    out->basic.attrs |= ZNBD_UBLK_ATTR_ROTATIONAL;
  out->discard.discard_granularity = g->blocksize;
  out->discard.max_write_zeroes_sectors = max_sectors;
  if (!g->zoned) {
    out->discard.max_discard_sectors = max_sectors;
    out->discard.max_discard_segments = 1;
    return 0;
  }
  uint64_t zs = g->zone_size / 512;
  if (zs & (zs - 1) || zs > UINT32_MAX)
    return fail_err(err, errlen, EINVAL,
                    "zone_size=%" PRIu64 ": a ublk zoned device needs a "
                    "power-of-two zone size (in 512-byte sectors, at most "
                    "%" PRIu64 ")",
                    g->zone_size, (uint64_t)UINT32_MAX);
  if (g->size % g->zone_size)
    return fail_err(err, errlen, EINVAL,
                    "size=%" PRIu64 ": a ublk zoned device is a whole number "
                    "of zones (zone_size=%" PRIu64 ")",
                    g->size, g->zone_size);
  out->types |= ZNBD_UBLK_PARAM_TYPE_ZONED;
  out->basic.chunk_sectors = (uint32_t)zs;
  out->zoned.max_open_zones = g->max_open;
  out->zoned.max_active_zones = g->max_active;
  out->zoned.max_zone_append_sectors = max_sectors;
  return 0;
}
