/* znbd-ublk's control commands (ctrl.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctrl.h"
#include "uapi.h"
#include "../lib/err.h"

int
znbd_ublk_ctrl_open(struct znbd_ublk_ctrl *c, char *err, size_t errlen)
{
  c->fd = open("/dev/ublk-control", O_RDWR | O_CLOEXEC);
  if (c->fd < 0) {
    set_err(err, errlen, "/dev/ublk-control: %s (is ublk_drv loaded?)",
            strerror(errno));
    return -1;
  }
  int r = io_uring_queue_init(4, &c->ring, IORING_SETUP_SQE128);
  if (r < 0) {
    close(c->fd);
    return fail_err(err, errlen, -r, "io_uring_queue_init: %s", strerror(-r));
  }
  return 0;
}

void
znbd_ublk_ctrl_close(struct znbd_ublk_ctrl *c)
{
  io_uring_queue_exit(&c->ring);
  close(c->fd);
}

int
znbd_ublk_ctrl_cmd(struct znbd_ublk_ctrl *c, uint32_t op, uint32_t dev_id,
                   void *addr, uint16_t len, uint64_t data0)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
  struct io_uring_cqe *cqe;
  if (!sqe)
    return -EBUSY;
  memset(sqe, 0, 2 * sizeof *sqe); /* SQE128: two slots */
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = c->fd;
  sqe->cmd_op = op;
  struct znbd_ublksrv_ctrl_cmd *cmd = (void *)sqe->cmd;
  cmd->dev_id = dev_id;
  cmd->queue_id = UINT16_MAX;
  cmd->addr = (uintptr_t)addr;
  cmd->len = len;
  cmd->data[0] = data0;
  int r = io_uring_submit(&c->ring);
  if (r < 0)
    return r;
  do
    r = io_uring_wait_cqe(&c->ring, &cqe);
  while (r == -EINTR);
  if (r < 0)
    return r;
  r = cqe->res;
  io_uring_cqe_seen(&c->ring, cqe);
  return r;
}
