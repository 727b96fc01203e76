/* znbd-ublk's user recovery, the control side (recover.h).  Sources:
 * drivers/block/ublk_drv.c (ublk_ctrl_get_dev_info(),
 * ublk_ctrl_get_params(), ublk_ctrl_start_recovery(),
 * ublk_ch_release_work_fn(): the state a dead server leaves),
 * include/uapi/linux/ublk_cmd.h. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "recover.h"
#include "../lib/err.h"
#include "znbd/request.h"

int
znbd_ublk_recover_check(const struct znbd_ublksrv_ctrl_dev_info *info,
                        const struct znbd_ublk_params *got,
                        const struct znbd_ublk_params *want, char *err,
                        size_t errlen)
{
  const struct znbd_ublk_param_basic *g = &got->basic, *w = &want->basic;
  uint32_t id = info->dev_id;
  bool want_zoned = want->types & ZNBD_UBLK_PARAM_TYPE_ZONED;
  /* The attributes this server sets (setup.c); the kernel keeps them as
   * SET_PARAMS gave them. */
  uint32_t attrs = ZNBD_UBLK_ATTR_ROTATIONAL | ZNBD_UBLK_ATTR_VOLATILE_CACHE |
                   ZNBD_UBLK_ATTR_FUA;

  if (!(info->flags & ZNBD_UBLK_F_USER_RECOVERY))
    return fail_err(err, errlen, EINVAL,
                    "device %" PRIu32 " was added without user recovery "
                    "(UBLK_F_USER_RECOVERY)",
                    id);
  if (!(info->flags & ZNBD_UBLK_F_USER_COPY))
    return fail_err(err, errlen, EINVAL,
                    "device %" PRIu32 " was added without user copy "
                    "(UBLK_F_USER_COPY): not a znbd-ublk device",
                    id);
  if (!!(info->flags & ZNBD_UBLK_F_ZONED) != want_zoned)
    return fail_err(err, errlen, EINVAL, "device %" PRIu32 " is %s, not %s", id,
                    want_zoned ? "not zoned" : "zoned",
                    want_zoned ? "zoned" : "plain");
  if (!(got->types & ZNBD_UBLK_PARAM_TYPE_BASIC))
    return fail_err(err, errlen, EINVAL,
                    "device %" PRIu32 " has no parameters (never set up)", id);
  if (g->dev_sectors != w->dev_sectors)
    return fail_err(err, errlen, EINVAL,
                    "device %" PRIu32 " has %" PRIu64 " sectors, size= gives "
                    "%" PRIu64,
                    id, (uint64_t)g->dev_sectors, (uint64_t)w->dev_sectors);
  if (g->logical_bs_shift != w->logical_bs_shift)
    return fail_err(err, errlen, EINVAL,
                    "device %" PRIu32
                    " has %u-byte blocks, blocksize= gives %u",
                    id, 1u << g->logical_bs_shift, 1u << w->logical_bs_shift);
  if (g->max_sectors != w->max_sectors)
    return fail_err(err, errlen, EINVAL,
                    "device %" PRIu32 " takes requests of %" PRIu32
                    " sectors, this server %" PRIu32,
                    id, g->max_sectors, w->max_sectors);
  if ((g->attrs & attrs) != (w->attrs & attrs))
    return fail_err(
        err, errlen, EINVAL,
        "device %" PRIu32 " has attributes 0x%" PRIx32
        " (write cache, FUA, rotational), these parameters 0x%" PRIx32,
        id, g->attrs & attrs, w->attrs & attrs);
  if (!want_zoned)
    return 0;
  if (g->chunk_sectors != w->chunk_sectors)
    return fail_err(err, errlen, EINVAL,
                    "device %" PRIu32 " has zones of %" PRIu32
                    " sectors, zone_size= gives %" PRIu32,
                    id, g->chunk_sectors, w->chunk_sectors);
  if (got->zoned.max_open_zones != want->zoned.max_open_zones ||
      got->zoned.max_active_zones != want->zoned.max_active_zones)
    return fail_err(err, errlen, EINVAL,
                    "device %" PRIu32 " has max open %" PRIu32
                    ", max active %" PRIu32 " zones, these parameters %" PRIu32
                    ", %" PRIu32,
                    id, got->zoned.max_open_zones, got->zoned.max_active_zones,
                    want->zoned.max_open_zones, want->zoned.max_active_zones);
  return 0;
}

int
znbd_ublk_recover_begin(znbd_ublk_cmd_fn *cmd, void *opaque, uint32_t dev_id,
                        const struct znbd_ublk_params *want, unsigned tries,
                        unsigned wait_ms,
                        struct znbd_ublksrv_ctrl_dev_info *info, char *err,
                        size_t errlen)
{
  struct znbd_ublk_params got;
  int r;

  /* The kernel moves a device whose server died to QUIESCED from a work
   * item once /dev/ublkcN is released: LIVE may still show for a moment
   * after the old server is gone. */
  for (unsigned i = 0;; i++) {
    memset(info, 0, sizeof *info);
    r = cmd(opaque, ZNBD_UBLK_U_CMD_GET_DEV_INFO, dev_id, info, sizeof *info,
            0);
    if (r == -ENODEV)
      return fail_err(err, errlen, ENODEV, "no ublk device %" PRIu32, dev_id);
    if (r < 0)
      return fail_err(err, errlen, -r, "GET_DEV_INFO: %s", strerror(-r));
    if (info->state == ZNBD_UBLK_S_DEV_QUIESCED)
      break;
    if (info->state == ZNBD_UBLK_S_DEV_FAIL_IO)
      return fail_err(err, errlen, EINVAL,
                      "device %" PRIu32 " fails its I/O since its server died "
                      "(UBLK_F_USER_RECOVERY_FAIL_IO): not a znbd-ublk device",
                      dev_id);
    if (info->state != ZNBD_UBLK_S_DEV_LIVE)
      return fail_err(err, errlen, EINVAL,
                      "device %" PRIu32 " is not started (state %u): nothing "
                      "to recover",
                      dev_id, (unsigned)info->state);
    if (!(info->flags & ZNBD_UBLK_F_USER_RECOVERY))
      break; /* znbd_ublk_recover_check() says why */
    if (info->ublksrv_pid > 0 &&
        (kill(info->ublksrv_pid, 0) == 0 || errno == EPERM))
      return fail_err(err, errlen, EBUSY,
                      "device %" PRIu32 " is served by process %" PRId32,
                      dev_id, info->ublksrv_pid);
    if (i + 1 >= tries)
      return fail_err(err, errlen, EBUSY,
                      "device %" PRIu32 " is still LIVE though its server "
                      "(process %" PRId32 ") is gone",
                      dev_id, info->ublksrv_pid);
    znbd_sleep_ns((uint64_t)wait_ms * 1000000u);
  }
  memset(&got, 0, sizeof got);
  got.len = sizeof got;
  r = cmd(opaque, ZNBD_UBLK_U_CMD_GET_PARAMS, dev_id, &got, sizeof got, 0);
  if (r < 0)
    return fail_err(err, errlen, -r, "GET_PARAMS: %s", strerror(-r));
  if (znbd_ublk_recover_check(info, &got, want, err, errlen) < 0)
    return -1;
  for (unsigned i = 0;; i++) {
    r = cmd(opaque, ZNBD_UBLK_U_CMD_START_USER_RECOVERY, dev_id, NULL, 0, 0);
    if (r >= 0)
      return 0;
    if (r != -EBUSY || i + 1 >= tries)
      return fail_err(err, errlen, -r, "START_USER_RECOVERY: %s", strerror(-r));
    znbd_sleep_ns((uint64_t)wait_ms * 1000000u);
  }
}
