/* znbd-ublk: the ublk device's parameters (SET_PARAMS, struct
 * ublk_params of include/uapi/linux/ublk_cmd.h) from a znbd device's
 * parameters, refusing at start what the block layer cannot take.  On
 * buffers only, for tests/unit/ublk_test.c. */
#ifndef ZNBD_UBLK_SETUP_H
#define ZNBD_UBLK_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include "uapi.h"
#include "znbd/params.h"

/* The ublk parameters of the device P describes (finished params,
 * znbd_params_finish() done), whose requests are at most MAX_IO_BYTES
 * bytes (the device's max_io_buf_bytes, a multiple of 4096): basic
 * (size in 512-byte sectors, the block size, max_sectors, and for a
 * zoned device chunk_sectors = the zone size in sectors; write_cache:
 * a volatile cache with FUA; rotational), discard (a plain device:
 * discard and write-zeroes up to MAX_IO_BYTES; a zoned one: write-zeroes
 * only, as null_blk has no discard on zoned devices) and, when zoned,
 * zoned (max_open_zones, max_active_zones as the core enforces them
 * after null_blk's clamps, max_zone_append_sectors = max_sectors, which
 * ublk_drv.c requires non-zero).  A zoned device must have a power-of-two
 * zone size (ublk_drv.c counts zones with ilog2(chunk_sectors)) and a
 * size that is a whole number of zones (the block layer's
 * blk_revalidate_disk_zones() refuses a smaller last zone that ublk
 * would not report).  Returns 0, or -1 with errno EINVAL and a message
 * naming the parameter in ERR. */
int znbd_ublk_setup_params(const struct znbd_params *p, uint32_t max_io_bytes,
                           struct znbd_ublk_params *out, char *err,
                           size_t errlen);

#endif
