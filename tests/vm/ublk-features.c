/* ublk-features: print the ublk driver's feature mask (UBLK_F_* bits) as
 * 0x..., asked through /dev/ublk-control; run in a vm-run guest whose
 * kernel has ublk_drv (ublk.test).  Exit status 1 with a message if the
 * control node cannot be opened or the command fails.
 *
 * Control commands are io_uring URING_CMDs on an SQE128 ring, the command
 * in the SQE's second half.  Debian 12's <linux/ublk_cmd.h> (from 6.1)
 * predates GET_FEATURES, so the command's layout and number are written
 * here as the kernel's uapi header defines them. */
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct ublk_ctrl_cmd { /* struct ublksrv_ctrl_cmd */
  uint32_t dev_id;
  uint16_t queue_id;
  uint16_t len;
  uint64_t addr;
  uint64_t data[1];
  uint16_t dev_path_len;
  uint16_t pad;
  uint32_t reserved;
};
#define UBLK_U_CMD_GET_FEATURES _IOR('u', 0x13, struct ublk_ctrl_cmd)

int
main(void)
{
  uint64_t features = 0;
  struct io_uring ring;
  struct io_uring_sqe *sqe;
  struct io_uring_cqe *cqe;
  struct ublk_ctrl_cmd *cmd;
  int fd, ret;

  fd = open("/dev/ublk-control", O_RDWR);
  if (fd < 0) {
    perror("ublk-features: /dev/ublk-control");
    return 1;
  }
  ret = io_uring_queue_init(4, &ring, IORING_SETUP_SQE128);
  if (ret < 0) {
    fprintf(stderr, "ublk-features: io_uring_queue_init: %s\n", strerror(-ret));
    return 1;
  }
  sqe = io_uring_get_sqe(&ring);
  if (!sqe) {
    fprintf(stderr, "ublk-features: no SQE\n");
    return 1;
  }
  memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128: two slots */
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  sqe->cmd_op = UBLK_U_CMD_GET_FEATURES;
  cmd = (struct ublk_ctrl_cmd *)sqe->cmd;
  cmd->dev_id = UINT32_MAX; /* no device */
  cmd->queue_id = UINT16_MAX;
  cmd->len = sizeof(features);
  cmd->addr = (uintptr_t)&features;
  ret = io_uring_submit_and_wait(&ring, 1);
  if (ret >= 0)
    ret = io_uring_wait_cqe(&ring, &cqe);
  if (ret < 0) {
    fprintf(stderr, "ublk-features: io_uring: %s\n", strerror(-ret));
    return 1;
  }
  if (cqe->res < 0) {
    fprintf(stderr, "ublk-features: GET_FEATURES: %s\n", strerror(-cqe->res));
    return 1;
  }
  io_uring_cqe_seen(&ring, cqe);
  io_uring_queue_exit(&ring);
  close(fd);
  printf("0x%llx\n", (unsigned long long)features);
  return 0;
}
