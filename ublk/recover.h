/* znbd-ublk: user recovery (UBLK_F_USER_RECOVERY), the control side.  A
 * device added with that flag outlives its server: when the server dies
 * (its /dev/ublkcN is released), ublk_drv.c quiesces the disk and keeps
 * it, requests wait, and the device's state becomes QUIESCED.  A new
 * server then takes it over: GET_DEV_INFO and GET_PARAMS (the device is
 * the one this server would make), START_USER_RECOVERY, FETCH_REQ of
 * every tag on every queue (queue.c, as at START_DEV), and
 * END_USER_RECOVERY with its pid, which waits for those fetches and
 * makes the device LIVE again (drivers/block/ublk_drv.c,
 * ublk_ctrl_start_recovery(), ublk_ctrl_end_recovery()).  The commands
 * go through a function so that this file needs no ring (and the unit
 * test gives a fake kernel). */
#ifndef ZNBD_UBLK_RECOVER_H
#define ZNBD_UBLK_RECOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uapi.h"

/* Send control command OP for device DEV_ID with LEN bytes at ADDR and
 * DATA0, as znbd_ublk_ctrl_cmd() (ctrl.h).  Returns >= 0 or a negative
 * errno. */
typedef int znbd_ublk_cmd_fn(void *opaque, uint32_t op, uint32_t dev_id,
                             void *addr, uint16_t len, uint64_t data0);

/* Whether device INFO, whose parameters are GOT (GET_PARAMS), is the
 * device WANT describes (SET_PARAMS of this server's parameters, setup.h)
 * and can be recovered: added with USER_RECOVERY and USER_COPY, zoned as
 * WANT, of the same size, block size, request size, zone size, open and
 * active limits and cache attributes.  Its state is not looked at.
 * Returns 0, or -1 with errno EINVAL and a message naming the first
 * difference in ERR. */
int znbd_ublk_recover_check(const struct znbd_ublksrv_ctrl_dev_info *info,
                            const struct znbd_ublk_params *got,
                            const struct znbd_ublk_params *want, char *err,
                            size_t errlen);

/* Begin the recovery of device DEV_ID by this server (its parameters
 * WANT), with CMD (OPAQUE its first argument): GET_DEV_INFO until the
 * kernel has seen the old server die (state QUIESCED; a LIVE device whose
 * server pid is gone may not be there yet), GET_PARAMS and
 * znbd_ublk_recover_check(), then START_USER_RECOVERY, again while the
 * kernel answers EBUSY (the old server's /dev/ublkcN not yet released).
 * Waits at most TRIES times WAIT_MS milliseconds in all.  On success
 * INFO holds the device (nr_hw_queues, queue_depth: the queues to set up
 * before END_USER_RECOVERY) and 0 is returned; else -1 with errno and a
 * message in ERR: ENODEV (no such device), EBUSY (served by a live
 * server, or never QUIESCED within the wait), EINVAL (not recoverable, or
 * not this device: znbd_ublk_recover_check()), or the kernel's errno. */
int znbd_ublk_recover_begin(znbd_ublk_cmd_fn *cmd, void *opaque,
                            uint32_t dev_id,
                            const struct znbd_ublk_params *want, unsigned tries,
                            unsigned wait_ms,
                            struct znbd_ublksrv_ctrl_dev_info *info, char *err,
                            size_t errlen);

#endif
