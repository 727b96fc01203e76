/* The ublk ABI znbd-ublk uses, as the kernel's uapi header
 * include/uapi/linux/ublk_cmd.h defines it (Linux 6.6 and later: zoned
 * devices, user copy, ioctl-encoded commands).  Debian 12's
 * <linux/ublk_cmd.h> comes from 6.1, which has none of the zoned parts,
 * so only what is used is written here, with the kernel's names prefixed
 * znbd_ to stay clear of a newer system header.  Zone reports are arrays
 * of struct blk_zone (<linux/blkzoned.h>), part of the ublk ABI. */
#ifndef ZNBD_UBLK_UAPI_H
#define ZNBD_UBLK_UAPI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

/* struct ublksrv_ctrl_cmd: a control command, in an SQE128's command
 * area, sent to /dev/ublk-control. */
struct znbd_ublksrv_ctrl_cmd {
  uint32_t dev_id;
  uint16_t queue_id; /* UINT16_MAX: not for a queue */
  uint16_t len;      /* bytes at addr */
  uint64_t addr;
  uint64_t data[1];
  uint16_t dev_path_len;
  uint16_t pad;
  uint32_t reserved;
};

/* struct ublksrv_ctrl_dev_info: ADD_DEV's argument and answer. */
struct znbd_ublksrv_ctrl_dev_info {
  uint16_t nr_hw_queues;
  uint16_t queue_depth;
  uint16_t state;
  uint16_t pad0;
  uint32_t max_io_buf_bytes;
  uint32_t dev_id;
  int32_t ublksrv_pid;
  uint32_t pad1;
  uint64_t flags;
  uint64_t ublksrv_flags;
  uint32_t owner_uid;
  uint32_t owner_gid;
  uint64_t reserved1;
  uint64_t reserved2;
};

#define ZNBD_UBLK_U_CMD_ADD_DEV _IOWR('u', 0x04, struct znbd_ublksrv_ctrl_cmd)
#define ZNBD_UBLK_U_CMD_DEL_DEV _IOWR('u', 0x05, struct znbd_ublksrv_ctrl_cmd)
#define ZNBD_UBLK_U_CMD_START_DEV _IOWR('u', 0x06, struct znbd_ublksrv_ctrl_cmd)
#define ZNBD_UBLK_U_CMD_STOP_DEV _IOWR('u', 0x07, struct znbd_ublksrv_ctrl_cmd)
#define ZNBD_UBLK_U_CMD_SET_PARAMS                                             \
  _IOWR('u', 0x08, struct znbd_ublksrv_ctrl_cmd)
#define ZNBD_UBLK_U_CMD_GET_FEATURES                                           \
  _IOR('u', 0x13, struct znbd_ublksrv_ctrl_cmd)
/* User recovery (UBLK_F_USER_RECOVERY): the device info (and the state
 * below) and the parameters of an existing device, then START and END of
 * a new server's recovery; END carries the new server's pid in data[0]. */
#define ZNBD_UBLK_U_CMD_GET_DEV_INFO                                           \
  _IOR('u', 0x02, struct znbd_ublksrv_ctrl_cmd)
#define ZNBD_UBLK_U_CMD_GET_PARAMS _IOR('u', 0x09, struct znbd_ublksrv_ctrl_cmd)
#define ZNBD_UBLK_U_CMD_START_USER_RECOVERY                                    \
  _IOWR('u', 0x10, struct znbd_ublksrv_ctrl_cmd)
#define ZNBD_UBLK_U_CMD_END_USER_RECOVERY                                      \
  _IOWR('u', 0x11, struct znbd_ublksrv_ctrl_cmd)

/* ublksrv_ctrl_dev_info.state: DEAD (added, not started, or stopped),
 * LIVE (served), QUIESCED (its server died, I/O waits for a new one:
 * UBLK_F_USER_RECOVERY), FAIL_IO (its server died, I/O fails:
 * UBLK_F_USER_RECOVERY_FAIL_IO, not used here). */
#define ZNBD_UBLK_S_DEV_DEAD 0
#define ZNBD_UBLK_S_DEV_LIVE 1
#define ZNBD_UBLK_S_DEV_QUIESCED 2
#define ZNBD_UBLK_S_DEV_FAIL_IO 3

/* struct ublksrv_io_cmd: an I/O command, in a plain SQE's command area,
 * sent to /dev/ublkcN.  With UBLK_F_USER_COPY addr must be 0, except
 * that a zone append's commit carries the sector written (the union's
 * zone_append_lba). */
struct znbd_ublksrv_io_cmd {
  uint16_t q_id;
  uint16_t tag;
  int32_t result;
  uint64_t addr; /* zone_append_lba for a ZONE_APPEND commit */
};

#define ZNBD_UBLK_U_IO_FETCH_REQ _IOWR('u', 0x20, struct znbd_ublksrv_io_cmd)
#define ZNBD_UBLK_U_IO_COMMIT_AND_FETCH_REQ                                    \
  _IOWR('u', 0x21, struct znbd_ublksrv_io_cmd)

/* A fetch completes with OK (a request is in the tag's descriptor) or
 * ABORT (-ENODEV: the device stops; fetch no more). */
#define ZNBD_UBLK_IO_RES_OK 0
#define ZNBD_UBLK_IO_RES_ABORT (-19) /* -ENODEV */

/* Where the descriptors and the request buffers are in /dev/ublkcN:
 * descriptors are mmap()ed at UBLKSRV_CMD_BUF_OFFSET + queue * (the
 * area of UBLK_MAX_QUEUE_DEPTH descriptors, page-rounded); request data
 * is read and written with pread/pwrite at UBLKSRV_IO_BUF_OFFSET +
 * (queue << UBLK_QID_OFF) + (tag << UBLK_TAG_OFF) + offset. */
#define ZNBD_UBLKSRV_CMD_BUF_OFFSET 0
#define ZNBD_UBLKSRV_IO_BUF_OFFSET 0x80000000ULL
#define ZNBD_UBLK_MAX_QUEUE_DEPTH 4096
#define ZNBD_UBLK_IO_BUF_BITS 25 /* a request's buffer: at most 32 MiB */
#define ZNBD_UBLK_TAG_OFF ZNBD_UBLK_IO_BUF_BITS
#define ZNBD_UBLK_TAG_BITS 16
#define ZNBD_UBLK_QID_OFF (ZNBD_UBLK_TAG_OFF + ZNBD_UBLK_TAG_BITS)

/* Device flags (ublksrv_ctrl_dev_info.flags, GET_FEATURES).  With
 * USER_RECOVERY the device outlives its server: its queue waits until a
 * new server recovers it; with USER_RECOVERY_REISSUE too, the requests
 * the dead server had fetched but not committed go to the new one again
 * (ublk_drv.c, ublk_nosrv_should_reissue_outstanding()). */
#define ZNBD_UBLK_F_USER_RECOVERY (1ULL << 3)
#define ZNBD_UBLK_F_USER_RECOVERY_REISSUE (1ULL << 4)
#define ZNBD_UBLK_F_CMD_IOCTL_ENCODE (1ULL << 6)
#define ZNBD_UBLK_F_USER_COPY (1ULL << 7)
#define ZNBD_UBLK_F_ZONED (1ULL << 8)
/* Linux 6.16: the kernel registers each request's pages in the fetching
 * ring's fixed-buffer table, at the index the FETCH_REQ or
 * COMMIT_AND_FETCH_REQ SQE carries in sqe->addr (struct
 * ublk_auto_buf_reg: index in bits 0-15, flags in 16-23), and takes them
 * out at the commit; READ_FIXED and WRITE_FIXED then move a request's data
 * with no copy in user space.  With UBLK_AUTO_BUF_REG_FALLBACK a request
 * whose pages could not be registered comes with UBLK_IO_F_NEED_REG_BUF
 * set instead of failing (ublk_drv.c, ublk_do_auto_buf_reg()). */
#define ZNBD_UBLK_F_AUTO_BUF_REG (1ULL << 11)
#define ZNBD_UBLK_AUTO_BUF_REG_FALLBACK (1u << 0)

/* struct ublksrv_io_desc: one request, in the mmap()ed area, by tag. */
struct znbd_ublksrv_io_desc {
  uint32_t op_flags;   /* op: bits 0-7, flags: bits 8-31 */
  uint32_t nr_sectors; /* nr_zones for REPORT_ZONES */
  uint64_t start_sector;
  uint64_t addr;
};

#define ZNBD_UBLK_IO_OP_READ 0
#define ZNBD_UBLK_IO_OP_WRITE 1
#define ZNBD_UBLK_IO_OP_FLUSH 2
#define ZNBD_UBLK_IO_OP_DISCARD 3
#define ZNBD_UBLK_IO_OP_WRITE_SAME 4
#define ZNBD_UBLK_IO_OP_WRITE_ZEROES 5
#define ZNBD_UBLK_IO_OP_ZONE_OPEN 10
#define ZNBD_UBLK_IO_OP_ZONE_CLOSE 11
#define ZNBD_UBLK_IO_OP_ZONE_FINISH 12
#define ZNBD_UBLK_IO_OP_ZONE_APPEND 13
#define ZNBD_UBLK_IO_OP_ZONE_RESET_ALL 14
#define ZNBD_UBLK_IO_OP_ZONE_RESET 15
#define ZNBD_UBLK_IO_OP_REPORT_ZONES 18

#define ZNBD_UBLK_IO_F_FUA (1U << 13)
#define ZNBD_UBLK_IO_F_NOUNMAP (1U << 15)
#define ZNBD_UBLK_IO_F_NEED_REG_BUF (1U << 17)

/* struct ublk_params and the parts of it used here (SET_PARAMS; len
 * covers basic, discard, devt and zoned: the kernel takes a shorter
 * struct than its own). */
struct znbd_ublk_param_basic {
#define ZNBD_UBLK_ATTR_ROTATIONAL (1 << 1)
#define ZNBD_UBLK_ATTR_VOLATILE_CACHE (1 << 2)
#define ZNBD_UBLK_ATTR_FUA (1 << 3)
  uint32_t attrs;
  uint8_t logical_bs_shift;
  uint8_t physical_bs_shift;
  uint8_t io_opt_shift;
  uint8_t io_min_shift;
  uint32_t max_sectors;
  uint32_t chunk_sectors;
  uint64_t dev_sectors;
  uint64_t virt_boundary_mask;
};

struct znbd_ublk_param_discard {
  uint32_t discard_alignment;
  uint32_t discard_granularity;
  uint32_t max_discard_sectors;
  uint32_t max_write_zeroes_sectors;
  uint16_t max_discard_segments;
  uint16_t reserved0;
};

struct znbd_ublk_param_devt {
  uint32_t char_major;
  uint32_t char_minor;
  uint32_t disk_major;
  uint32_t disk_minor;
};

struct znbd_ublk_param_zoned {
  uint32_t max_open_zones;
  uint32_t max_active_zones;
  uint32_t max_zone_append_sectors;
  uint8_t reserved[20];
};

struct znbd_ublk_params {
  uint32_t len;
#define ZNBD_UBLK_PARAM_TYPE_BASIC (1 << 0)
#define ZNBD_UBLK_PARAM_TYPE_DISCARD (1 << 1)
#define ZNBD_UBLK_PARAM_TYPE_ZONED (1 << 3)
  uint32_t types;
  struct znbd_ublk_param_basic basic;
  struct znbd_ublk_param_discard discard;
  struct znbd_ublk_param_devt devt;
  struct znbd_ublk_param_zoned zoned;
};

_Static_assert(sizeof(struct znbd_ublksrv_ctrl_cmd) == 32, "ctrl cmd");
_Static_assert(sizeof(struct znbd_ublksrv_ctrl_dev_info) == 64, "dev info");
_Static_assert(sizeof(struct znbd_ublksrv_io_cmd) == 16, "io cmd");
_Static_assert(sizeof(struct znbd_ublksrv_io_desc) == 24, "io desc");
_Static_assert(offsetof(struct znbd_ublk_params, zoned) == 76, "params");

#endif
