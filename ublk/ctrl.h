/* znbd-ublk: control commands on /dev/ublk-control (ADD_DEV, SET_PARAMS,
 * START_DEV, STOP_DEV, DEL_DEV, GET_FEATURES): io_uring URING_CMDs on an
 * SQE128 ring, the struct ublksrv_ctrl_cmd in the SQE's command area
 * (include/uapi/linux/ublk_cmd.h; drivers/block/ublk_drv.c,
 * ublk_ctrl_uring_cmd()). */
#ifndef ZNBD_UBLK_CTRL_H
#define ZNBD_UBLK_CTRL_H

#include <liburing.h>
#include <stddef.h>
#include <stdint.h>

struct znbd_ublk_ctrl {
  int fd; /* /dev/ublk-control */
  struct io_uring ring;
};

/* Open /dev/ublk-control and its ring.  Returns 0, or -1 with errno
 * (ENOENT: no ublk_drv) and a message in ERR. */
int znbd_ublk_ctrl_open(struct znbd_ublk_ctrl *c, char *err, size_t errlen);
void znbd_ublk_ctrl_close(struct znbd_ublk_ctrl *c);

/* Send control command OP (ZNBD_UBLK_U_CMD_*) for device DEV_ID
 * (UINT32_MAX: ADD_DEV lets the kernel pick; GET_FEATURES: none) with
 * LEN bytes at ADDR and DATA0 (START_DEV: the server's pid), and wait
 * for its answer: START_DEV waits until every queue fetched every tag
 * and the disk was added.  Returns the kernel's result (>= 0), or a
 * negative errno (the kernel's, or io_uring's). */
int znbd_ublk_ctrl_cmd(struct znbd_ublk_ctrl *c, uint32_t op, uint32_t dev_id,
                       void *addr, uint16_t len, uint64_t data0);

#endif
