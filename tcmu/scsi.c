/* znbd-tcmu: SCSI/ZBC command emulation on buffers (see scsi.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scsi.h"

/* Sense keys (SPC-5 table 48). */
enum {
  KEY_NO_SENSE = 0x0,
  KEY_NOT_READY = 0x2,
  KEY_MEDIUM_ERROR = 0x3,
  KEY_ILLEGAL_REQUEST = 0x5,
  KEY_DATA_PROTECT = 0x7,
};

/* Sense as key << 16 | ASC << 8 | ASCQ. */
#define SENSE(k, asc, ascq) ((k) << 16 | (asc) << 8 | (ascq))
#define S_BAD_OPCODE SENSE(KEY_ILLEGAL_REQUEST, 0x20, 0x00)
#define S_LBA_RANGE SENSE(KEY_ILLEGAL_REQUEST, 0x21, 0x00)
#define S_UNALIGNED_WRITE SENSE(KEY_ILLEGAL_REQUEST, 0x21, 0x04)
#define S_WRITE_BOUNDARY SENSE(KEY_ILLEGAL_REQUEST, 0x21, 0x05)
#define S_READ_INVALID SENSE(KEY_ILLEGAL_REQUEST, 0x21, 0x06)
#define S_GAP_ZONE SENSE(KEY_ILLEGAL_REQUEST, 0x21, 0x09)
#define S_INVALID_FIELD SENSE(KEY_ILLEGAL_REQUEST, 0x24, 0x00)
#define S_ZONE_RESOURCES SENSE(KEY_DATA_PROTECT, 0x55, 0x0e)
#define S_ZONE_READONLY SENSE(KEY_DATA_PROTECT, 0x27, 0x08)
#define S_ZONE_OFFLINE SENSE(KEY_DATA_PROTECT, 0x2c, 0x0e)
#define S_READ_ERROR SENSE(KEY_MEDIUM_ERROR, 0x11, 0x00)
#define S_WRITE_ERROR SENSE(KEY_MEDIUM_ERROR, 0x0c, 0x00)
/* LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE: after a power cut. */
#define S_NOT_READY SENSE(KEY_NOT_READY, 0x04, 0x00)

static void
put_be(uint8_t *p, uint64_t v, int n)
{
  for (int i = n - 1; i >= 0; i--, v >>= 8)
    p[i] = v & 0xff;
}

/* CHECK CONDITION with fixed-format sense SENSE (SPC-5 4.4.3). */
static int
fail(struct znbd_scsi_cmd *c, uint32_t sense)
{
  memset(c->sense, 0, sizeof c->sense);
  c->sense[0] = 0x70;
  c->sense[2] = sense >> 16;
  c->sense[7] = 0x0a;
  c->sense[12] = sense >> 8 & 0xff;
  c->sense[13] = sense & 0xff;
  c->read_len = 0;
  return ZNBD_SCSI_CHECK_CONDITION;
}

static size_t
iov_total(const struct znbd_scsi_cmd *c)
{
  size_t n = 0;
  for (size_t i = 0; i < c->iovcnt; i++)
    n += c->iov[i].iov_len;
  return n;
}

/* Copy LEN bytes of BUF into the data-in buffers, at most ALLOC (the
 * CDB's allocation length) and what the buffers hold. */
static int
data_in(struct znbd_scsi_cmd *c, const void *buf, size_t len, size_t alloc)
{
  const uint8_t *p = buf;
  size_t n = len < alloc ? len : alloc, done = 0;
  for (size_t i = 0; i < c->iovcnt && done < n; i++) {
    size_t k = c->iov[i].iov_len;
    if (k > n - done)
      k = n - done;
    memcpy(c->iov[i].iov_base, p + done, k);
    done += k;
  }
  c->read_len = done;
  return ZNBD_SCSI_GOOD;
}

/* Gather (TO_BUF) or scatter the buffers' first LEN bytes. */
static void
iov_copy(const struct znbd_scsi_cmd *c, uint8_t *buf, size_t len, bool to_buf)
{
  size_t done = 0;
  for (size_t i = 0; i < c->iovcnt && done < len; i++) {
    size_t k = c->iov[i].iov_len;
    if (k > len - done)
      k = len - done;
    if (to_buf)
      memcpy(buf + done, c->iov[i].iov_base, k);
    else
      memcpy(c->iov[i].iov_base, buf + done, k);
    done += k;
  }
}

int
znbd_scsi_check_params(const struct znbd_params *p, char *err, size_t errlen)
{
  if (!p->zoned)
    return 0;
  if (p->zone_size & (p->zone_size - 1)) {
    snprintf(err, errlen,
             "zone_size=%llu: SCSI needs a power-of-two zone size "
             "(Linux sd refuses others)",
             (unsigned long long)p->zone_size);
    errno = EINVAL;
    return -1;
  }
  if (p->zone_read_past_wp == ZNBD_READ_PAST_WP_ERROR) {
    snprintf(err, errlen,
             "zone_read_past_wp=error: SCSI disks must allow reads past "
             "the wp (URSWRZ=1, which Linux sd requires)");
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* ---- The zones the initiator sees (ZBC-2 gap zones) -----------------
 *
 * A sequential zone of the device whose capacity is below its size is
 * shown as two ZBC-2 zones, as scsi_debug does with zone_cap_mb: the
 * sequential write required zone [start, start + capacity) (half 0) and
 * a gap zone [start + capacity, start + size) (half 1), zone type 5h,
 * condition NOT WRITE POINTER.  VPD B6 then says "constant zone starting
 * LBA offset" with the zone size as the granularity, so that sd merges
 * each pair back into one zone of that size and capacity
 * (sd_zbc_check_zoned_characteristics(), sd_zbc_parse_report()) and
 * skips the gap zones (sd_zbc_report_zones()).  Conventional zones, and
 * sequential zones at full capacity, are one zone (half 0). */

enum {
  ZT_CONVENTIONAL = 0x1,
  ZT_SEQ_REQUIRED = 0x2,
  ZT_GAP = 0x5,
};

/* Whether device zone Z is followed by a gap zone. */
static bool
zone_has_gap(const struct znbd_zone_info *z)
{
  return z->type == ZNBD_ZONE_TYPE_SEQWRITE_REQ && z->capacity < z->len;
}

/* The half of device zone Z that byte OFF (inside Z) is in. */
static unsigned
half_of(const struct znbd_zone_info *z, uint64_t off)
{
  return zone_has_gap(z) && off >= z->start + z->capacity;
}

/* The zone descriptor (ZBC-2 REPORT ZONES, 64 bytes, BS-byte blocks) of half
 * HALF of device zone Z.  A gap zone has no write pointer: its WRITE
 * POINTER LBA field is all ones, as scsi_debug fills it. */
static void
zone_descriptor(const struct znbd_zone_info *z, unsigned half, uint64_t bs,
                uint8_t d[64])
{
  memset(d, 0, 64);
  if (half) {
    d[0] = ZT_GAP;
    d[1] = ZNBD_ZONE_COND_NOT_WP << 4;
    put_be(d + 8, (z->len - z->capacity) / bs, 8);
    put_be(d + 16, (z->start + z->capacity) / bs, 8);
    put_be(d + 24, UINT64_MAX, 8);
    return;
  }
  bool conv = z->type == ZNBD_ZONE_TYPE_CONVENTIONAL;
  uint64_t end = z->start + (conv ? z->len : z->capacity);
  uint64_t wp = z->wp == ZNBD_WP_INVALID || z->wp > end ? end : z->wp;
  d[0] = conv ? ZT_CONVENTIONAL : ZT_SEQ_REQUIRED;
  d[1] = z->cond << 4;
  put_be(d + 8, (end - z->start) / bs, 8);
  put_be(d + 16, z->start / bs, 8);
  put_be(d + 24, wp / bs, 8);
}

/* ---- INQUIRY (SPC-5 6.7, VPD pages 7.7) ---------------------------- */

static int
inquiry_std(struct znbd_scsi *s, struct znbd_scsi_cmd *c, size_t alloc)
{
  uint8_t b[36] = {0};
  b[0] = znbd_dev_params(s->dev)->zoned ? 0x14 : 0x00; /* PDT: ZBC/disk */
  b[2] = 0x07;                                         /* SPC-5 */
  b[3] = 0x02;                                         /* response format */
  b[4] = sizeof b - 5;
  b[7] = 0x02; /* CMDQUE */
  memcpy(b + 8, "ZNBD    ", 8);
  memcpy(b + 16, "znbd zoned disk ", 16);
  memcpy(b + 32, "0001", 4);
  return data_in(c, b, sizeof b, alloc);
}

static int
inquiry_vpd(struct znbd_scsi *s, struct znbd_scsi_cmd *c, unsigned page,
            size_t alloc)
{
  const struct znbd_params *p = znbd_dev_params(s->dev);
  uint8_t b[256] = {0};
  size_t len;

  b[0] = p->zoned ? 0x14 : 0x00;
  b[1] = page;
  switch (page) {
  case 0x00: { /* supported pages */
    static const uint8_t pages[] = {0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb6};
    len = sizeof pages - (p->zoned ? 0 : 1);
    memcpy(b + 4, pages, len);
    break;
  }
  case 0x80: /* unit serial number: the device name */
    len = strnlen(s->name, 64);
    memcpy(b + 4, s->name, len);
    break;
  case 0x83: { /* device identification: one T10 vendor ID designator */
    size_t n = strnlen(s->name, 64);
    b[4] = 0x02; /* code set ASCII */
    b[5] = 0x01; /* association LU, type T10 vendor ID */
    b[7] = 8 + n;
    memcpy(b + 8, "ZNBD    ", 8);
    memcpy(b + 16, s->name, n);
    len = 4 + 8 + n;
    break;
  }
  case 0xb0: /* block limits (SBC-4 6.6.4): 8 MiB transfers */
    len = 0x3c;
    put_be(b + 8, (8u << 20) / p->blocksize, 4);  /* maximum */
    put_be(b + 12, (1u << 20) / p->blocksize, 4); /* optimal */
    break;
  case 0xb1: /* block device characteristics (SBC-4 6.6.2) */
    len = 0x3c;
    put_be(b + 4, p->rotational ? 7200 : 1, 2); /* 0001h: non-rotating */
    b[8] = 0x00; /* ZONED 00b: host-managed is said by the PDT */
    break;
  case 0xb6: /* zoned block device characteristics (ZBC-2 6.5.2) */
    if (!p->zoned)
      return fail(c, S_INVALID_FIELD);
    len = 0x3c;
    b[4] = 0x01;                        /* URSWRZ */
    put_be(b + 8, 0xffffffff, 4);       /* optimal open: none */
    put_be(b + 12, 0xffffffff, 4);      /* optimal non-seq: none */
    put_be(b + 16, p->geo.max_open, 4); /* max open (0: no limit) */
    if (p->geo.has_gaps) { /* sequential zones come with gap zones */
      b[23] = 0x08; /* zone alignment: constant zone starting LBA offset */
      put_be(b + 24, p->geo.zone_size / p->geo.blocksize, 8); /* granularity */
    }
    break;
  default:
    return fail(c, S_INVALID_FIELD);
  }
  put_be(b + 2, len, 2);
  return data_in(c, b, 4 + len, alloc);
}

/* ---- READ CAPACITY (SBC-4 5.20, 5.21) ------------------------------- */

static int
read_capacity(struct znbd_scsi *s, struct znbd_scsi_cmd *c, bool sixteen)
{
  const struct znbd_params *p = znbd_dev_params(s->dev);
  uint64_t last = znbd_dev_size(s->dev) / p->blocksize - 1;
  uint8_t b[32] = {0};

  if (!sixteen) {
    put_be(b, last > 0xffffffff ? 0xffffffff : last, 4);
    put_be(b + 4, p->blocksize, 4);
    return data_in(c, b, 8, 8);
  }
  put_be(b, last, 8);
  put_be(b + 8, p->blocksize, 4);
  if (p->zoned)
    b[12] = 0x10; /* RC BASIS 01b: the last LBA of the whole device */
  return data_in(c, b, sizeof b, znbd_scsi_be(c->cdb + 10, 4));
}

/* ---- MODE SENSE (SPC-5 6.13, 6.14; caching page SBC-4 6.5.5) ------- */

/* The mode pages PAGE (08h caching, 0Ah control, 3Fh both) into B;
 * CHANGEABLE: the changeable-values mask, all zeros (nothing can be
 * changed) under each page's own header.  Returns their length. */
static size_t
mode_pages(const struct znbd_params *p, unsigned page, bool changeable,
           uint8_t *b)
{
  size_t n = 0;
  if (page == 0x08 || page == 0x3f) {
    b[n] = 0x08;
    b[n + 1] = 0x12;
    if (p->write_cache && !changeable)
      b[n + 2] = 0x04; /* WCE */
    n += 20;
  }
  if (page == 0x0a || page == 0x3f) {
    b[n] = 0x0a;
    b[n + 1] = 0x0a;
    n += 12;
  }
  return n;
}

static int
mode_sense(struct znbd_scsi *s, struct znbd_scsi_cmd *c, bool ten)
{
  const struct znbd_params *p = znbd_dev_params(s->dev);
  unsigned page = c->cdb[2] & 0x3f, pc = c->cdb[2] >> 6;
  uint8_t b[128] = {0};
  size_t hdr = ten ? 8 : 4;

  if (pc == 3) /* saved values */
    return fail(c, SENSE(KEY_ILLEGAL_REQUEST, 0x39, 0x00));
  if (c->cdb[3] != 0) /* subpages */
    return fail(c, S_INVALID_FIELD);
  size_t n = mode_pages(p, page, pc == 1, b + hdr);
  if (n == 0)
    return fail(c, S_INVALID_FIELD);
  /* Device-specific byte 0: no write protect, DPOFUA 0 (no FUA). */
  if (ten) {
    put_be(b, hdr + n - 2, 2);
    return data_in(c, b, hdr + n, znbd_scsi_be(c->cdb + 7, 2));
  }
  b[0] = hdr + n - 1;
  return data_in(c, b, hdr + n, c->cdb[4]);
}

/* ---- REPORT ZONES (ZBC-2 5.4) and ZBC OUT (5.2, 5.3, 5.5, 5.6) ----- */

/* Whether the zone descriptor D is reported with reporting option OPT
 * (ZBC-2 REPORT ZONES; a gap zone has condition NOT WRITE POINTER, so 3Fh
 * lists it with the conventional zones, and 3Eh is "all but gap zones",
 * as in scsi_debug). */
static bool
zone_matches(const uint8_t d[64], unsigned opt)
{
  unsigned type = d[0] & 0x0f, cond = d[1] >> 4;
  switch (opt) {
  case 0x00:
    return true;
  case 0x01 ... 0x04: /* EMPTY, IMP_OPEN, EXP_OPEN, CLOSED */
    return cond == opt;
  case 0x05:
    return cond == ZNBD_ZONE_COND_FULL;
  case 0x06:
    return cond == ZNBD_ZONE_COND_READONLY;
  case 0x07:
    return cond == ZNBD_ZONE_COND_OFFLINE;
  case 0x10: /* RWP recommended */
  case 0x11: /* non-sequential write resources active */
    return false;
  case 0x3e:
    return type != ZT_GAP;
  case 0x3f:
    return cond == ZNBD_ZONE_COND_NOT_WP;
  default:
    return false;
  }
}

static bool
valid_option(unsigned opt)
{
  return opt <= 0x07 || opt == 0x10 || opt == 0x11 || opt == 0x3e ||
         opt == 0x3f;
}

/* REPORT ZONES: the zones from the one holding the zone locator LBA
 * (which may be a gap zone) to the end, those that OPT selects; the zone
 * list length counts them all, or with PARTIAL only those returned. */
static int
report_zones(struct znbd_scsi *s, struct znbd_scsi_cmd *c)
{
  const struct znbd_params *p = znbd_dev_params(s->dev);
  uint64_t bs = p->blocksize, lba = znbd_scsi_be(c->cdb + 2, 8);
  size_t alloc = znbd_scsi_be(c->cdb + 10, 4);
  bool partial = c->cdb[14] & 0x80;
  unsigned opt = c->cdb[14] & 0x3f;
  uint32_t nr = znbd_dev_nr_zones(s->dev);

  if (c->cdb[1] != 0x00 || !nr || !valid_option(opt))
    return fail(c, S_INVALID_FIELD);
  if (lba >= znbd_dev_size(s->dev) / bs)
    return fail(c, S_LBA_RANGE);
  /* Descriptors that fit both the allocation length and the buffers the
   * initiator gave (an iSCSI initiator sizes its transfer apart from the
   * CDB: either may be the smaller, and either may be below the 64-byte
   * header); never more than the zones can give, two per device zone. */
  size_t room = alloc < iov_total(c) ? alloc : iov_total(c);
  size_t max_desc = room > 64 ? (room - 64) / 64 : 0;
  if (max_desc > 2 * (size_t)nr)
    max_desc = 2 * (size_t)nr;
  uint8_t *b = calloc(1 + max_desc, 64);
  if (!b)
    return fail(c, S_WRITE_ERROR);

  uint64_t listed = 0, put = 0;
  struct znbd_zone_info z[64];
  uint32_t i = znbd_dev_zone_index(s->dev, lba * bs);
  bool first = true, done = false;
  while (i < nr && !done) {
    uint32_t got = znbd_dev_report(s->dev, i, 64, z);
    if (!got)
      break;
    for (uint32_t k = 0; k < got && !done; k++) {
      unsigned half = first ? half_of(&z[k], lba * bs) : 0;
      first = false;
      for (; half <= (unsigned)zone_has_gap(&z[k]); half++) {
        uint8_t d[64];
        zone_descriptor(&z[k], half, bs, d);
        if (!zone_matches(d, opt))
          continue;
        if (put < max_desc)
          memcpy(b + 64 + put++ * 64, d, 64);
        listed++;
        if (partial && put == max_desc) {
          done = true;
          break;
        }
      }
    }
    i += got;
  }
  put_be(b, (partial ? put : listed) * 64, 4);
  put_be(b + 8, znbd_dev_size(s->dev) / bs - 1, 8);
  if (p->geo.has_gaps) /* zone starting LBA granularity, as in VPD B6 */
    put_be(b + 16, p->geo.zone_size / bs, 8);
  int st = data_in(c, b, 64 + put * 64, alloc);
  free(b);
  return st;
}

/* Sense for a failed call with errno ERR and no reason; WRITE: medium
 * errors are write errors. */
static uint32_t
errno_sense(int err, bool write)
{
  switch (err) {
  case ETOOMANYREFS:
  case EOVERFLOW:
    return S_ZONE_RESOURCES;
  case EINVAL:
    return S_INVALID_FIELD;
  case ESHUTDOWN: /* a power cut since the session began */
    return S_NOT_READY;
  default:
    return write ? S_WRITE_ERROR : S_READ_ERROR;
  }
}

uint32_t
znbd_scsi_refusal_sense(enum znbd_refusal why, int err, bool write)
{
  switch (why) {
  case ZNBD_REFUSAL_UNALIGNED_WRITE:
    return S_UNALIGNED_WRITE;
  case ZNBD_REFUSAL_PAST_CAPACITY:
    return S_GAP_ZONE;
  case ZNBD_REFUSAL_WRITE_BOUNDARY:
    return S_WRITE_BOUNDARY;
  case ZNBD_REFUSAL_ZONE_READONLY:
    return S_ZONE_READONLY;
  case ZNBD_REFUSAL_ZONE_OFFLINE:
    return S_ZONE_OFFLINE;
  case ZNBD_REFUSAL_ZONE_OPEN_RESOURCE:
  case ZNBD_REFUSAL_ZONE_ACTIVE_RESOURCE:
    return S_ZONE_RESOURCES;
  /* A write to a FULL zone, an op on a conventional zone or one its
   * condition does not take: the CDB's LBA or zone ID is the bad field
   * (as libzbc's conformance tests expect). */
  case ZNBD_REFUSAL_ZONE_FULL:
  case ZNBD_REFUSAL_CONVENTIONAL_ZONE:
  case ZNBD_REFUSAL_ZONE_COND:
    return S_INVALID_FIELD;
  case ZNBD_REFUSAL_BAD_BLOCK:
    return write ? S_WRITE_ERROR : S_READ_ERROR;
  case ZNBD_REFUSAL_FENCED:
    return S_NOT_READY;
  case ZNBD_REFUSAL_OUT_OF_RANGE:
    return S_LBA_RANGE;
  case ZNBD_REFUSAL_READ_MIXED_TYPES:
    return S_READ_INVALID;
  case ZNBD_REFUSAL_READ_PAST_WP: /* refused at start-up (URSWRZ=1) */
    return S_READ_ERROR;
  default:
    return errno_sense(err, write);
  }
}

/* CHECK CONDITION for C after a request of the contract failed (errno
 * set), from the core's reason. */
static int
refused(struct znbd_scsi_cmd *c, bool write)
{
  int err = errno;
  return fail(c, znbd_scsi_refusal_sense(znbd_req_refusal(), err, write));
}

/* ZBC OUT service actions (ZBC-2 6.4): the zone operation of each. */
static const enum znbd_zone_op zbc_out_ops[] = {
    [0x01] = ZNBD_ZONE_OP_CLOSE,
    [0x02] = ZNBD_ZONE_OP_FINISH,
    [0x03] = ZNBD_ZONE_OP_OPEN,
    [0x04] = ZNBD_ZONE_OP_RESET,
};

static int
zbc_out(struct znbd_scsi *s, struct znbd_scsi_cmd *c)
{
  const struct znbd_params *p = znbd_dev_params(s->dev);
  unsigned sa = c->cdb[1] & 0x1f;
  bool all = c->cdb[14] & 0x01;
  uint64_t lba = znbd_scsi_be(c->cdb + 2, 8);
  uint32_t nr = znbd_dev_nr_zones(s->dev);

  if (!nr || sa < 0x01 || sa > 0x04)
    return fail(c, S_INVALID_FIELD);
  /* ZONE COUNT (ZBC-2): 0 and 1 both mean the one zone; operations on
   * several zones at once are not offered (znbd-tcmu(1), DEVIATIONS). */
  if (!all && znbd_scsi_be(c->cdb + 12, 2) > 1)
    return fail(c, S_INVALID_FIELD);
  enum znbd_zone_op op = zbc_out_ops[sa];
  if (all) {
    /* ZBC-2: ALL applies the operation to every zone it fits, by the
     * rule the control socket's "OP all" follows too. */
    struct znbd_zone_all res;
    if (znbd_req_zone_op_all(&s->rq, op, &res) < 0)
      return refused(c, true);
    return ZNBD_SCSI_GOOD;
  }
  if (lba >= znbd_dev_size(s->dev) / p->blocksize)
    return fail(c, S_LBA_RANGE);
  uint32_t i = znbd_dev_zone_index(s->dev, lba * p->blocksize);
  struct znbd_zone_info z;
  if (znbd_dev_report(s->dev, i, 1, &z) != 1)
    return fail(c, S_INVALID_FIELD);
  /* The start of a gap zone: ATTEMPT TO ACCESS GAP ZONE (ZBC-2, as
   * libzbc's conformance tests expect; scsi_debug ignores the op). */
  if (zone_has_gap(&z) && lba * p->blocksize == z.start + z.capacity)
    return fail(c, S_GAP_ZONE);
  if (z.start != lba * p->blocksize)
    return fail(c, S_INVALID_FIELD); /* not a zone ID (ZBC-2 4.5.3) */
  if (znbd_req_zone_op(&s->rq, op, i) < 0)
    return refused(c, true);
  return ZNBD_SCSI_GOOD;
}

/* ---- READ / WRITE (SBC-4 5.15-5.17, 5.39-5.41) ---------------------- */

/* The kind (ZNBD_IO_READ or ZNBD_IO_WRITE) of the READ or WRITE
 * opcode OP, or 0 for another command. */
static unsigned
rw_kind(uint8_t op)
{
  switch (op) {
  case 0x28:
  case 0xa8:
  case 0x88:
    return ZNBD_IO_READ;
  case 0x2a:
  case 0xaa:
  case 0x8a:
    return ZNBD_IO_WRITE;
  default:
    return 0;
  }
}

/* The LBA and transfer length (blocks) of the READ or WRITE CDB. */
static void
rw_extent(const uint8_t *cdb, uint64_t *lba, uint64_t *blocks)
{
  switch (cdb[0]) {
  case 0x28: /* READ(10) */
  case 0x2a:
    *lba = znbd_scsi_be(cdb + 2, 4);
    *blocks = znbd_scsi_be(cdb + 7, 2);
    break;
  case 0xa8: /* READ(12) */
  case 0xaa:
    *lba = znbd_scsi_be(cdb + 2, 4);
    *blocks = znbd_scsi_be(cdb + 6, 4);
    break;
  default: /* READ(16), WRITE(16) */
    *lba = znbd_scsi_be(cdb + 2, 8);
    *blocks = znbd_scsi_be(cdb + 10, 4);
    break;
  }
}

static int
read_write(struct znbd_scsi *s, struct znbd_scsi_cmd *c, bool write)
{
  const struct znbd_params *p = znbd_dev_params(s->dev);
  uint64_t lba, blocks;
  bool fua = c->cdb[1] & 0x08;

  rw_extent(c->cdb, &lba, &blocks);
  uint64_t nblocks = znbd_dev_size(s->dev) / p->blocksize;
  if (lba > nblocks || blocks > nblocks - lba)
    return fail(c, S_LBA_RANGE);
  if (blocks == 0)
    return ZNBD_SCSI_GOOD;
  uint64_t off = lba * p->blocksize, len = blocks * p->blocksize;
  if (iov_total(c) < len)
    return fail(c, S_INVALID_FIELD);
  /* Data in one buffer (the usual case) is used where it lies, in the
   * ring's data area; only a scattered one is gathered into a copy. */
  bool direct = c->iovcnt >= 1 && c->iov[0].iov_len >= len;
  uint8_t *buf = direct ? c->iov[0].iov_base : malloc(len);
  if (!buf)
    return fail(c, write ? S_WRITE_ERROR : S_READ_ERROR);
  int r;
  if (write) {
    if (!direct)
      iov_copy(c, buf, len, true);
    r = znbd_req_write(&s->rq, buf, len, off,
                       ZNBD_WRITE_NOWAIT | ZNBD_WRITE_ONE_ZONE, NULL, NULL);
    if (r == 0 && fua)
      r = znbd_req_sync(&s->rq, len, off);
  } else {
    /* Reads may touch a gap zone, and get what null_blk returns past a
     * zone's capacity (the kernel splits reads at the zone size, gap
     * included: see znbd-tcmu(1), DEVIATIONS); they may not mix zone
     * types (ZBC-2 4.5.3), nor touch an OFFLINE zone: the core refuses
     * (ZNBD_READ_ONE_TYPE, znbd_scsi_refusal_sense()). */
    r = znbd_req_read(&s->rq, buf, len, off, ZNBD_READ_ONE_TYPE);
    if (r == 0 && !direct)
      iov_copy(c, buf, len, false);
  }
  if (!direct)
    free(buf); /* keeps errno */
  if (r < 0)
    return refused(c, write);
  c->read_len = write ? 0 : len;
  return ZNBD_SCSI_GOOD;
}

/* ---- The commands served, their CDB usage maps ---------------------- */

/* The CONTROL byte's bits a CDB may set: vendor specific (7-6), NACA (2)
 * and the obsolete LINK (0); 5-3 are reserved (SAM-5 5.2). */
#define CTL 0xc7
/* READ/WRITE byte 1: DPO and FUA only, since RDPROTECT/WRPROTECT need
 * protection information, which these disks do not have (SBC-4 5.16:
 * INVALID FIELD IN CDB then). */
#define RW1 0x18
#define FF4 0xff, 0xff, 0xff, 0xff
/* A 16-byte CDB's map: byte 1, an 8-byte LBA or zone field, bytes 10-13
 * (the rest of the arguments), byte 14, CONTROL. */
#define MAP16(b1, b14, ...)                                                    \
  {                                                                            \
    0xff, b1, FF4, FF4, __VA_ARGS__, b14, CTL                                  \
  }

/* Every command znbd_scsi_exec() serves, sorted by opcode: opcode, service
 * action (with HAS_SA), whether only a zoned device has it, the CDB length, and
 * its CDB usage map (SPC-5 6.35.3): a bit set where the command reads a field,
 * clear where the field is reserved.  The map is what REPORT SUPPORTED
 * OPERATION CODES returns, and a CDB with a bit set outside it fails INVALID
 * FIELD IN CDB (SPC-5 4.2.1: reserved fields are checked; a nonzero one is an
 * error). */
static const struct opcode {
  uint8_t op;
  uint8_t sa;
  bool has_sa, zoned;
  uint8_t len;
  uint8_t usage[16];
} opcodes[] = {
    /* One command a line: */
    /* clang-format off */
    /* TEST UNIT READY */
    {0x00, 0, false, false, 6, {0xff, 0, 0, 0, 0, CTL}},
    /* REQUEST SENSE: DESC must be 0, fixed-format sense only */
    {0x03, 0, false, false, 6, {0xff, 0, 0, 0, 0xff, CTL}},
    /* INQUIRY: EVPD, page code, allocation length */
    {0x12, 0, false, false, 6, {0xff, 0x01, 0xff, 0xff, 0xff, CTL}},
    /* MODE SELECT(6): PF, SP, parameter list length */
    {0x15, 0, false, false, 6, {0xff, 0x11, 0, 0, 0xff, CTL}},
    /* MODE SENSE(6): DBD, PC and page, subpage, allocation length */
    {0x1a, 0, false, false, 6, {0xff, 0x08, 0xff, 0xff, 0xff, CTL}},
    /* READ CAPACITY(10): the obsolete LBA and PMI */
    {0x25, 0, false, false, 10, {0xff, 0, FF4, 0, 0, 0x01, CTL}},
    /* READ(10), WRITE(10): byte 6 is the group number */
    {0x28, 0, false, false, 10, {0xff, RW1, FF4, 0x3f, 0xff, 0xff, CTL}},
    {0x2a, 0, false, false, 10, {0xff, RW1, FF4, 0x3f, 0xff, 0xff, CTL}},
    /* SYNCHRONIZE CACHE(10): IMMED (and the obsolete SYNC_NV) */
    {0x35, 0, false, false, 10, {0xff, 0x06, FF4, 0x3f, 0xff, 0xff, CTL}},
    /* MODE SELECT(10) */
    {0x55, 0, false, false, 10, {0xff, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, CTL}},
    /* MODE SENSE(10): LLBAA, DBD */
    {0x5a, 0, false, false, 10, {0xff, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, CTL}},
    /* READ(16), WRITE(16): byte 14 holds DLD1-0 and the group number */
    {0x88, 0, false, false, 16, MAP16(RW1, 0xff, FF4)},
    {0x8a, 0, false, false, 16, MAP16(RW1, 0xff, FF4)},
    /* SYNCHRONIZE CACHE(16): IMMED */
    {0x91, 0, false, false, 16, MAP16(0x02, 0x3f, FF4)},
    /* ZBC OUT (ZBC-2 6.4): zone id, ZONE COUNT (bytes 12-13), ALL */
    {0x94, 0x01, true, true, 16, MAP16(0x1f, 0x01, 0, 0, 0xff, 0xff)}, /* CLOSE ZONE */
    {0x94, 0x02, true, true, 16, MAP16(0x1f, 0x01, 0, 0, 0xff, 0xff)}, /* FINISH ZONE */
    {0x94, 0x03, true, true, 16, MAP16(0x1f, 0x01, 0, 0, 0xff, 0xff)}, /* OPEN ZONE */
    {0x94, 0x04, true, true, 16, MAP16(0x1f, 0x01, 0, 0, 0xff, 0xff)}, /* RESET WRITE POINTER */
    /* ZBC IN: REPORT ZONES (ZBC-2 6.3): PARTIAL and reporting options */
    {0x95, 0x00, true, true, 16, MAP16(0x1f, 0xbf, FF4)},
    /* SERVICE ACTION IN(16): READ CAPACITY(16), the obsolete LBA and PMI */
    {0x9e, 0x10, true, false, 16, MAP16(0x1f, 0x01, FF4)},
    /* MAINTENANCE IN: REPORT SUPPORTED OPERATION CODES: RCTD and the
     * reporting options, opcode, service action, allocation length */
    {0xa3, 0x0c, true, false, 12, {0xff, 0x1f, 0x87, 0xff, 0xff, 0xff, FF4, 0, CTL}},
    /* READ(12), WRITE(12): byte 10 is the group number */
    {0xa8, 0, false, false, 12, {0xff, RW1, FF4, FF4, 0x3f, CTL}},
    {0xaa, 0, false, false, 12, {0xff, RW1, FF4, FF4, 0x3f, CTL}},
    /* clang-format on */
};

#define NR_OPCODES (sizeof opcodes / sizeof opcodes[0])

size_t
znbd_scsi_cdb_len(uint8_t op)
{
  switch (op >> 5) {
  case 1: /* groups 1 and 2: 10 bytes */
  case 2:
    return 10;
  case 4: /* group 4: 16 bytes */
    return 16;
  case 5: /* group 5: 12 bytes */
    return 12;
  default: /* group 0 (6 bytes); 3 (reserved, variable length) and the
              vendor groups 6, 7, which no command here is in: only the
              opcode is read before INVALID COMMAND OPERATION CODE */
    return 6;
  }
}

/* The entry of the command CDB names on S, or NULL if none is served.
 * Every command passes here: the table is sorted by opcode, so a binary
 * search finds the opcode's first entry, then its service actions follow. */
static const struct opcode *
find_opcode(struct znbd_scsi *s, const uint8_t *cdb)
{
  bool zoned = znbd_dev_params(s->dev)->zoned;
  size_t lo = 0, hi = NR_OPCODES;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (opcodes[mid].op < cdb[0])
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < NR_OPCODES && opcodes[i].op == cdb[0]; i++) {
    const struct opcode *o = &opcodes[i];
    if ((!o->zoned || zoned) && (!o->has_sa || o->sa == (cdb[1] & 0x1f)))
      return o;
  }
  return NULL;
}

/* Whether CDB sets a reserved bit: one outside O's usage map. */
static bool
reserved_bits_set(const struct opcode *o, const uint8_t *cdb)
{
  for (size_t i = 1; i < o->len; i++)
    if (cdb[i] & ~o->usage[i])
      return true;
  return false;
}

/* ---- REPORT SUPPORTED OPERATION CODES (SPC-5 6.35) ----------------- */

/* Reporting options 000b (all commands), 001b (one opcode without a
 * service action) and 010b (opcode and service action); RCTD (timeouts)
 * is not offered.  For one command the CDB usage map is the table's. */
static int
report_opcodes(struct znbd_scsi *s, struct znbd_scsi_cmd *c)
{
  const uint8_t *cdb = c->cdb;
  unsigned opt = cdb[2] & 0x07;
  size_t alloc = znbd_scsi_be(cdb + 6, 4);
  bool zoned = znbd_dev_params(s->dev)->zoned;
  size_t n = NR_OPCODES;
  uint8_t b[4 + NR_OPCODES * 8] = {0};

  if (cdb[2] & 0x80) /* RCTD */
    return fail(c, S_INVALID_FIELD);
  if (opt == 0) {
    size_t len = 4;
    for (size_t i = 0; i < n; i++) {
      if (opcodes[i].zoned && !zoned)
        continue;
      uint8_t *d = b + len;
      d[0] = opcodes[i].op;
      put_be(d + 2, opcodes[i].sa, 2);
      d[5] = opcodes[i].has_sa ? 0x01 : 0; /* SERVACTV */
      put_be(d + 6, opcodes[i].len, 2);
      len += 8;
    }
    put_be(b, len - 4, 4);
    return data_in(c, b, len, alloc);
  }
  if (opt != 1 && opt != 2)
    return fail(c, S_INVALID_FIELD);
  unsigned op = cdb[3], sa = (unsigned)znbd_scsi_be(cdb + 4, 2);
  for (size_t i = 0; i < n; i++) {
    if (opcodes[i].op != op || (opcodes[i].zoned && !zoned))
      continue;
    /* 001b names an opcode that has service actions: INVALID FIELD. */
    if (opt == 1 && opcodes[i].has_sa)
      return fail(c, S_INVALID_FIELD);
    if (opt == 2 && (!opcodes[i].has_sa || opcodes[i].sa != sa))
      continue;
    b[1] = 0x03; /* SUPPORT: supported as the standard says */
    put_be(b + 2, opcodes[i].len, 2);
    /* The usage map, with the opcode in byte 0 and the service action in
     * its field (SPC-5 6.35.3). */
    memcpy(b + 4, opcodes[i].usage, opcodes[i].len);
    b[4] = op;
    if (opcodes[i].has_sa)
      b[5] = (b[5] & 0xe0) | opcodes[i].sa;
    return data_in(c, b, 4u + opcodes[i].len, alloc);
  }
  /* 010b names an opcode that has no service actions: INVALID FIELD. */
  for (size_t i = 0; opt == 2 && i < n; i++)
    if (opcodes[i].op == op && !opcodes[i].has_sa)
      return fail(c, S_INVALID_FIELD);
  b[1] = 0x01; /* SUPPORT: not supported */
  return data_in(c, b, 4, alloc);
}

/* Execute C, whose CDB holds at least its group's length. */
static int
exec_cdb(struct znbd_scsi *s, struct znbd_scsi_cmd *c)
{
  const uint8_t *cdb = c->cdb;

  /* After a power cut the disk the kernel knows is gone: every command
   * fails until znbd-tcmu starts again, as znbd drops the NBD
   * connections made before a cut.  The session's fence (S->rq) makes a
   * write, flush or zone operation that races the cut fail with
   * ESHUTDOWN having changed nothing; the check covers the other
   * commands. */
  if (znbd_req_cut(&s->rq))
    return fail(c, S_NOT_READY);
  const struct opcode *o = find_opcode(s, cdb);
  if (o && reserved_bits_set(o, cdb))
    return fail(c, S_INVALID_FIELD);
  switch (cdb[0]) {
  case 0x00: /* TEST UNIT READY */
  case 0x15: /* MODE SELECT(6): accepted, nothing is changeable */
  case 0x55: /* MODE SELECT(10) */
    return ZNBD_SCSI_GOOD;
  case 0x03: { /* REQUEST SENSE: no deferred errors are kept */
    uint8_t b[18] = {0x70, 0, KEY_NO_SENSE, 0, 0, 0, 0, 0x0a};
    return data_in(c, b, sizeof b, cdb[4]);
  }
  case 0x12: /* INQUIRY */
    if (cdb[1] & 0x01)
      return inquiry_vpd(s, c, cdb[2], znbd_scsi_be(cdb + 3, 2));
    if (cdb[2])
      return fail(c, S_INVALID_FIELD);
    return inquiry_std(s, c, znbd_scsi_be(cdb + 3, 2));
  case 0x25: /* READ CAPACITY(10) */
    return read_capacity(s, c, false);
  case 0x9e: /* SERVICE ACTION IN(16) */
    if ((cdb[1] & 0x1f) == 0x10)
      return read_capacity(s, c, true);
    return fail(c, S_INVALID_FIELD);
  case 0x1a: /* MODE SENSE(6) */
    return mode_sense(s, c, false);
  case 0x5a: /* MODE SENSE(10) */
    return mode_sense(s, c, true);
  case 0x28: /* READ(10), (12), (16) */
  case 0xa8:
  case 0x88:
  case 0x2a: /* WRITE(10), (12), (16) */
  case 0xaa:
  case 0x8a:
    return read_write(s, c, rw_kind(cdb[0]) == ZNBD_IO_WRITE);
  case 0x35: /* SYNCHRONIZE CACHE(10) */
  case 0x91: /* SYNCHRONIZE CACHE(16) */
    if (znbd_req_flush(&s->rq) < 0)
      return refused(c, true);
    return ZNBD_SCSI_GOOD;
  case 0x95: /* ZBC IN: REPORT ZONES */
    return report_zones(s, c);
  case 0x94: /* ZBC OUT */
    return zbc_out(s, c);
  case 0xa3: /* MAINTENANCE IN */
    if ((cdb[1] & 0x1f) == 0x0c)
      return report_opcodes(s, c);
    return fail(c, S_INVALID_FIELD);
  default:
    return fail(c, S_BAD_OPCODE);
  }
}

/* The request kind (ZNBD_IO_*) of CDB, for drop-reply: RESET WRITE
 * POINTER is the TRIM of a zoned NBD export, the commands that neither
 * move data nor change zones are "other". */
static unsigned
io_kind(const uint8_t *cdb)
{
  unsigned kind = rw_kind(cdb[0]);
  if (kind)
    return kind;
  if (cdb[0] == 0x35 || cdb[0] == 0x91)
    return ZNBD_IO_FLUSH;
  if (cdb[0] == 0x94 && (cdb[1] & 0x1f) == 0x04)
    return ZNBD_IO_TRIM;
  return ZNBD_IO_OTHER;
}

void
znbd_scsi_init(struct znbd_scsi *s, struct znbd_dev *d, const char *name)
{
  s->dev = d;
  s->name = name;
  /* NOWAIT writes (read_write()): nothing waits, no bound needed. */
  znbd_req_ctx_init(&s->rq, d);
}

int
znbd_scsi_exec(struct znbd_scsi *s, struct znbd_scsi_cmd *c)
{
  c->read_len = 0;
  c->drop_reply = false;
  /* A CDB shorter than its operation code's group says (SAM-5 5.2) has
   * fields missing: nothing past its end is read, by exec_cdb() or
   * io_kind(). */
  if (c->cdb_len < 1 || c->cdb_len < znbd_scsi_cdb_len(c->cdb[0]))
    return fail(c, S_INVALID_FIELD);
  int st = exec_cdb(s, c);
  /* drop-reply (znbd_req_drop_reply()): executed, then never answered,
   * as znbd and the plugin drop an NBD reply. */
  c->drop_reply = znbd_req_drop_reply(&s->rq, io_kind(c->cdb));
  return st;
}

uint64_t
znbd_scsi_delay_nsec(struct znbd_scsi *s, const uint8_t *cdb)
{
  const struct znbd_params *p = znbd_dev_params(s->dev);
  uint64_t lba, blocks, len = 0;
  unsigned sa = cdb[1] & 0x1f, kind = rw_kind(cdb[0]);
  if (cdb[0] == 0x94 && sa >= 0x01 && sa <= 0x04)
    return znbd_req_delay(&s->rq, ZNBD_IO_ZONE_MGMT, 0, zbc_out_ops[sa]);
  if (kind && p->mbps) { /* the length matters to the mbps bucket only */
    rw_extent(cdb, &lba, &blocks);
    len = blocks * p->blocksize;
  }
  return znbd_req_delay(&s->rq, kind ? kind : ZNBD_IO_OTHER, len, 0);
}
