/* znbd-tcmu: SCSI command emulation of a znbd device as a host-managed
 * ZBC disk (or a plain disk when zoned=false), on buffers only: a CDB and
 * the command's data buffers in, data and sense out, no ring and no I/O
 * of its own, so a host unit test can drive it (tests/unit/scsi_test.c).
 *
 * Sources: SPC-5 (INQUIRY, VPD pages, MODE SENSE, sense data), SBC-4
 * (READ/WRITE, READ CAPACITY, SYNCHRONIZE CACHE, VPD B0/B1), ZBC-2
 * (REPORT ZONES, ZBC OUT, VPD B6, the zone sense codes); what Linux's sd
 * expects is in drivers/scsi/sd.c and sd_zbc.c.
 */
#ifndef ZNBD_TCMU_SCSI_H
#define ZNBD_TCMU_SCSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "znbd/dev.h"
#include "znbd/params.h"
#include "znbd/request.h"

/* SAM status codes. */
#define ZNBD_SCSI_GOOD 0x00
#define ZNBD_SCSI_CHECK_CONDITION 0x02

/* Sense buffer size, as TCMU's struct tcmu_cmd_entry rsp.sense_buffer. */
#define ZNBD_SCSI_SENSE_LEN 96

/* One command: CDB (CDB_LEN bytes, at least what the opcode's group
 * needs: znbd_scsi_cdb_len()), the data buffers IOV (data-in for reads,
 * data-out for writes; lengths in bytes), and what comes back. */
struct znbd_scsi_cmd {
  const uint8_t *cdb;
  size_t cdb_len;
  const struct iovec *iov;
  size_t iovcnt;
  /* Out: fixed-format sense data when the status is CHECK CONDITION. */
  uint8_t sense[ZNBD_SCSI_SENSE_LEN];
  /* Out: data-in bytes produced (<= the buffers' total). */
  uint32_t read_len;
  /* Out: the command was executed but its reply is to be dropped
   * (drop-reply on the control socket, znbd_dev_drop_reply()): the
   * front-end never completes it, and the kernel fails it after its
   * command timeout. */
  bool drop_reply;
};

/* The SCSI view of device DEV, named NAME (unit serial number, VPD 80).
 * RQ is the kernel session's request context (znbd/request.h), fenced
 * when the session began: once a power cut moved the device's
 * generation on, every command fails with NOT READY 02/04/00. */
struct znbd_scsi {
  struct znbd_dev *dev;
  const char *name;
  struct znbd_req_ctx rq;
};

/* Set S up for a kernel session beginning now on device D, named NAME
 * (kept, not copied).  Never fails. */
void znbd_scsi_init(struct znbd_scsi *s, struct znbd_dev *d, const char *name);

/* Whether params P can be shown as SCSI: Linux's sd needs power-of-two
 * zone sizes (sd_zbc_check_capacity()) and URSWRZ=1, so reads past the wp
 * must not fail (zone_read_past_wp=error).  zone_capacity < zone_size is
 * shown with ZBC-2 gap zones (scsi.c).  Returns 0, or -1 with errno
 * EINVAL and a message naming the parameter in ERR. */
int znbd_scsi_check_params(const struct znbd_params *p, char *err,
                           size_t errlen);

/* The N-byte big-endian number at P (SCSI's byte order for every field). */
static inline uint64_t
znbd_scsi_be(const uint8_t *p, int n)
{
  uint64_t v = 0;
  for (int i = 0; i < n; i++)
    v = v << 8 | p[i];
  return v;
}

/* The length in bytes of a CDB whose operation code is OP, from its
 * group (SAM-5 5.2): 6, 10, 12 or 16; 6 for the reserved and vendor
 * groups, of which nothing is served.  The TCMU ring copies that many
 * bytes; znbd_scsi_exec() refuses a shorter CMD.cdb_len. */
size_t znbd_scsi_cdb_len(uint8_t op);

/* Execute C on S.  Returns ZNBD_SCSI_GOOD, or ZNBD_SCSI_CHECK_CONDITION
 * with C->sense filled (fixed format, response code 70h).  Zone errors
 * use ZBC-2's codes: unaligned write 05/21/04, write boundary 05/21/05,
 * read across zone types 05/21/06, any access to a gap zone 05/21/09,
 * FULL zone or bad zone id 05/24/00,
 * open/active limit 07/55/0E, READONLY 07/27/08, OFFLINE 07/2C/0E, bad
 * block 03/11/00 (read) or 03/0C/00 (write), LBA out of range 05/21/00,
 * unknown opcode 05/20/00, any command after a power cut 02/04/00.
 * A CDB shorter than its opcode's group (CMD.cdb_len), a bit set in a
 * reserved field of a served command, or data buffers shorter than a
 * READ or WRITE's transfer get INVALID FIELD IN CDB 05/24/00, as LIO
 * answers a WRITE whose data length differs from its CDB's.  Data-in is
 * at most min(allocation length, the buffers' total) bytes (SPC-5
 * 4.2.5.6); an allocation length of 0 is GOOD with no data.  Nothing is
 * ever read or written outside CMD's CDB and buffers.
 * Never fails otherwise. */
int znbd_scsi_exec(struct znbd_scsi *s, struct znbd_scsi_cmd *c);

/* The sense (key << 16 | ASC << 8 | ASCQ, fixed format) for a request the
 * core refused with reason WHY and errno ERR (znbd/refusal.h); WRITE: a
 * medium error is a write error.  ZBC-2's zone sense codes: UNALIGNED
 * WRITE COMMAND 05/21/04, ATTEMPT TO ACCESS GAP ZONE 05/21/09, WRITE
 * BOUNDARY VIOLATION 05/21/05, ZONE IS READ ONLY 07/27/08, ZONE IS
 * OFFLINE 07/2C/0E, INSUFFICIENT ZONE RESOURCES 07/55/0E; a write to a
 * FULL zone, an op on a conventional zone or in a condition that does not
 * take it INVALID FIELD IN CDB 05/24/00; a bad block MEDIUM ERROR
 * (03/0C/00 write, 03/11/00 read); fenced by a power cut LOGICAL UNIT
 * NOT READY 02/04/00; out of range 05/21/00; a read mixing zone types
 * ATTEMPT TO READ INVALID DATA 05/21/06, one past the wp (with
 * zone_read_past_wp=error) a medium error 03/11/00.  Without a reason, by ERR:
 * ETOOMANYREFS and EOVERFLOW as the resources, EINVAL INVALID FIELD IN
 * CDB, ESHUTDOWN NOT READY, else a medium error.  Never fails. */
uint32_t znbd_scsi_refusal_sense(enum znbd_refusal why, int err, bool write);

/* The injected latency of the command whose CDB is CDB (16 bytes, zero
 * past its length), in ns: the device's completion_nsec, plus
 * zone_open/close/finish/reset_nsec for a ZBC OUT (the same parameters
 * as znbd's other front-ends; with ALL the operation's latency counts
 * once), plus for a READ or WRITE the wait the mbps bucket gives its
 * transfer (all of it znbd_dev_request_delay()).  It takes from that bucket:
 * call it once per command. */
uint64_t znbd_scsi_delay_nsec(struct znbd_scsi *s, const uint8_t *cdb);

#endif
