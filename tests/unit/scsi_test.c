/* znbd-tcmu's SCSI/ZBC emulation (tcmu/scsi.c) against a RAM device:
 * CDBs in, data and sense out, checked against the values sd expects
 * (the probe sequence of drivers/scsi/sd.c, sd_zbc.c) and ZBC-2's zone
 * sense codes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "scsi.h"
#include "testdev.h"
#include "dev_unfenced.h"

static struct znbd_scsi s;
static uint8_t data[1 << 16];

/* Run CDB (LEN bytes) with DATA as the one buffer of N bytes; returns
 * the status. */
static struct znbd_scsi_cmd last;
static int
run_on(const uint8_t *cdb, size_t len, uint8_t *buf, size_t n)
{
  struct iovec iov = {buf, n};
  memset(&last, 0, sizeof last);
  last.cdb = cdb;
  last.cdb_len = len;
  last.iov = &iov;
  last.iovcnt = 1;
  return znbd_scsi_exec(&s, &last);
}

static int
run(const uint8_t *cdb, size_t len, size_t n)
{
  return run_on(cdb, len, data, n);
}

/* The sense of the last command as key << 16 | asc << 8 | ascq. */
static unsigned
sense(void)
{
  return last.sense[2] << 16 | last.sense[12] << 8 | last.sense[13];
}

#define be znbd_scsi_be

static void
rw16(uint8_t op, uint64_t lba, uint32_t blocks, uint8_t *cdb)
{
  memset(cdb, 0, 16);
  cdb[0] = op;
  for (int i = 0; i < 8; i++)
    cdb[2 + i] = lba >> (56 - 8 * i);
  for (int i = 0; i < 4; i++)
    cdb[10 + i] = blocks >> (24 - 8 * i);
}

static void
zbc_out(uint8_t sa, uint64_t lba, bool all, uint8_t *cdb)
{
  rw16(0x94, lba, 0, cdb);
  cdb[1] = sa;
  cdb[14] = all;
}

/* 16 MiB, 1 MiB zones = 2048 LBAs, 2 conventional, max_open 2. */
#define ZLBA 2048

static void
test_probe(void)
{
  uint8_t inq[6] = {0x12, 0, 0, 0, 36, 0};
  CHECK_EQ(run(inq, 6, 36), ZNBD_SCSI_GOOD);
  CHECK_EQ(data[0], 0x14);
  CHECK_EQ(last.read_len, 36);
  CHECK(memcmp(data + 8, "ZNBD    ", 8) == 0);

  uint8_t vpd0[6] = {0x12, 1, 0x00, 0, 0xff, 0};
  CHECK_EQ(run(vpd0, 6, 255), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data + 2, 2), 6);
  CHECK_EQ(data[9], 0xb6);

  uint8_t vpd80[6] = {0x12, 1, 0x80, 0, 0xff, 0};
  CHECK_EQ(run(vpd80, 6, 255), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data + 2, 2), 4);
  CHECK(memcmp(data + 4, "zbd0", 4) == 0);

  uint8_t vpdb1[6] = {0x12, 1, 0xb1, 0, 0x40, 0};
  CHECK_EQ(run(vpdb1, 6, 64), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data + 4, 2), 1); /* non-rotating */
  CHECK_EQ(data[8] & 0x30, 0);

  uint8_t vpdb6[6] = {0x12, 1, 0xb6, 0, 0x40, 0};
  CHECK_EQ(run(vpdb6, 6, 64), ZNBD_SCSI_GOOD);
  CHECK_EQ(data[4] & 1, 1); /* URSWRZ */
  CHECK_EQ(be(data + 16, 4), 2);
  CHECK_EQ(data[23], 0); /* capacity = size: no zone alignment method */
  CHECK_EQ(be(data + 24, 8), 0);

  uint8_t vpdbad[6] = {0x12, 1, 0x89, 0, 0x40, 0};
  CHECK_EQ(run(vpdbad, 6, 64), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);

  uint8_t rc16[16] = {0x9e, 0x10, [13] = 32};
  CHECK_EQ(run(rc16, 16, 32), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 8), 16 * ZLBA - 1);
  CHECK_EQ(be(data + 8, 4), 512);
  CHECK_EQ(data[12], 0x10);

  uint8_t rc10[10] = {0x25};
  CHECK_EQ(run(rc10, 10, 8), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 16 * ZLBA - 1);

  uint8_t ms6[6] = {0x1a, 0, 0x08, 0, 0x18, 0};
  CHECK_EQ(run(ms6, 6, 24), ZNBD_SCSI_GOOD);
  CHECK_EQ(data[0], 23);
  CHECK_EQ(data[4], 0x08);
  CHECK_EQ(data[6] & 0x04, 0x04); /* WCE: write_cache=true */
  uint8_t ms10[10] = {0x5a, 0, 0x3f, [8] = 0xff};
  CHECK_EQ(run(ms10, 10, 255), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 2), 8 + 32 - 2);
  CHECK_EQ(data[8 + 20], 0x0a);

  uint8_t tur[6] = {0};
  CHECK_EQ(run(tur, 6, 0), ZNBD_SCSI_GOOD);
  uint8_t rdd[10] = {0x37}; /* READ DEFECT DATA(10): not served */
  CHECK_EQ(run(rdd, 10, 16), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052000);
  CHECK_EQ(last.sense[0], 0x70);
  CHECK_EQ(last.sense[7], 0x0a);
}

/* REPORT ZONES from LBA with ALLOC bytes, option OPT, PARTIAL. */
static int
report(uint64_t lba, uint32_t alloc, uint8_t opt, bool partial)
{
  uint8_t cdb[16];
  rw16(0x95, lba, alloc, cdb);
  cdb[14] = opt | (partial ? 0x80 : 0);
  return run(cdb, 16, alloc);
}

static void
test_report(void)
{
  CHECK_EQ(report(0, 512, 0, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 16 * 64); /* all 16 zones counted */
  CHECK_EQ(be(data + 8, 8), 16 * ZLBA - 1);
  CHECK_EQ(be(data + 16, 8), 0); /* no zone starting LBA granularity */
  CHECK_EQ(last.read_len, 512);
  CHECK_EQ(data[64], 0x01); /* conventional */
  CHECK_EQ(data[64 + 1] >> 4, 0);
  CHECK_EQ(data[128 + 64], 0x02); /* zone 2 sequential, EMPTY */
  CHECK_EQ(data[128 + 65] >> 4, 1);
  CHECK_EQ(be(data + 128 + 64 + 8, 8), ZLBA);
  CHECK_EQ(be(data + 128 + 64 + 16, 8), 2 * ZLBA);
  CHECK_EQ(be(data + 128 + 64 + 24, 8), 2 * ZLBA);

  CHECK_EQ(report(0, 512, 0, true), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 7 * 64); /* PARTIAL: only what fits */

  CHECK_EQ(report(0, 4096, 0x3f, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 2 * 64); /* not write pointer: the 2 conv */
  CHECK_EQ(report(5 * ZLBA + 7, 4096, 0x00, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 11 * 64);
  CHECK_EQ(be(data + 64 + 16, 8), 5 * ZLBA);
  CHECK_EQ(report(16 * ZLBA, 4096, 0, false), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052100);
  CHECK_EQ(report(0, 4096, 0x09, false), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
}

static uint64_t
wp_of(uint32_t zone)
{
  report(zone * ZLBA, 128, 0, true);
  return be(data + 64 + 24, 8);
}

static unsigned
cond_of(uint32_t zone)
{
  report(zone * ZLBA, 128, 0, true);
  return data[64 + 1] >> 4;
}

static void
test_rw(void)
{
  uint8_t cdb[16];

  /* A write at the wp moves it; the bytes read back. */
  memset(data, 0xa5, 4096);
  rw16(0x8a, 2 * ZLBA, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(wp_of(2), 2 * ZLBA + 8);
  CHECK_EQ(cond_of(2), 2); /* IMP_OPEN */
  memset(data, 0, 4096);
  rw16(0x88, 2 * ZLBA, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(last.read_len, 4096);
  CHECK_EQ(data[0], 0xa5);
  CHECK_EQ(data[4095], 0xa5);

  /* Off the wp: 21/04, nothing changes. */
  memset(data, 0x5a, 4096);
  rw16(0x8a, 2 * ZLBA + 16, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052104);
  CHECK_EQ(wp_of(2), 2 * ZLBA + 8);
  rw16(0x88, 2 * ZLBA + 16, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD); /* above wp: zeros */
  CHECK_EQ(data[0], 0);

  /* Conventional -> sequential: 21/05 for writes, 21/06 for reads. */
  rw16(0x8a, 2 * ZLBA - 4, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052105);
  rw16(0x88, 2 * ZLBA - 4, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052106);
  /* Conventional writes anywhere, WRITE(10) and READ(12). */
  memset(data, 0x11, 4096);
  uint8_t w10[10] = {0x2a, 0, 0, 0, 0x01, 0x00, 0, 0, 8, 0};
  CHECK_EQ(run(w10, 10, 4096), ZNBD_SCSI_GOOD);
  memset(data, 0, 4096);
  uint8_t r12[12] = {0xa8, 0, 0, 0, 0x01, 0x00, 0, 0, 0, 8};
  CHECK_EQ(run(r12, 12, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(data[100], 0x11);

  /* Out of range. */
  rw16(0x88, 16 * ZLBA - 4, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052100);

  /* Across a sequential zone's end: 21/05. */
  zbc_out(0x02, 3 * ZLBA, false, cdb); /* finish 3 */
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(3), 0xe);
  rw16(0x8a, 3 * ZLBA, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400); /* FULL */
  rw16(0x8a, 2 * ZLBA + 8, ZLBA, cdb);
  static uint8_t big[ZLBA * 512];
  struct iovec iov = {big, sizeof big};
  struct znbd_scsi_cmd c = {
      .cdb = cdb, .cdb_len = 16, .iov = &iov, .iovcnt = 1};
  CHECK_EQ(znbd_scsi_exec(&s, &c), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(c.sense[12] << 8 | c.sense[13], 0x2105);
  CHECK_EQ(wp_of(2), 2 * ZLBA + 8);

  uint8_t sync16[16] = {0x91};
  CHECK_EQ(run(sync16, 16, 0), ZNBD_SCSI_GOOD);
}

static void
test_zbc_out(void)
{
  uint8_t cdb[16];

  /* Open two (max_open 2), a third fails with 07/55/0E. */
  zbc_out(0x03, 4 * ZLBA, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(4), 3);
  zbc_out(0x03, 5 * ZLBA, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD); /* zone 2 closed implicitly */
  zbc_out(0x03, 6 * ZLBA, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x075500 | 0x0e);
  CHECK_EQ(cond_of(6), 1);
  /* Write to an EMPTY zone with both slots explicitly open. */
  uint8_t w[16];
  rw16(0x8a, 7 * ZLBA, 8, w);
  CHECK_EQ(run(w, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x07550e);
  CHECK_EQ(wp_of(7), 7 * ZLBA);

  /* Close zone 4, on a conventional zone / not a zone start: 24/00. */
  zbc_out(0x01, 4 * ZLBA, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(4), 1); /* closing an empty open zone: EMPTY */
  zbc_out(0x03, 0, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  zbc_out(0x03, 4 * ZLBA + 1, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);

  /* Close ALL, finish ALL, reset ALL. */
  zbc_out(0x01, 0, true, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(5), 1);
  CHECK_EQ(cond_of(2), 4); /* CLOSED with data */
  zbc_out(0x02, 0, true, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(2), 0xe);
  zbc_out(0x04, 0, true, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  for (uint32_t z = 2; z < 16; z++)
    CHECKF(cond_of(z) == 1 && wp_of(z) == z * ZLBA, "zone %u", z);

  /* READONLY and OFFLINE zones. */
  CHECK(znbd_dev_zone_op(s.dev, ZNBD_ZONE_OP_SET_READONLY, 8) == 0);
  CHECK(znbd_dev_zone_op(s.dev, ZNBD_ZONE_OP_SET_OFFLINE, 9) == 0);
  rw16(0x8a, 8 * ZLBA, 8, w);
  CHECK_EQ(run(w, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x072708);
  /* A READONLY zone is read as any other (null_blk fails only writes). */
  rw16(0x88, 8 * ZLBA, 8, w);
  CHECK_EQ(run(w, 16, 4096), ZNBD_SCSI_GOOD);
  rw16(0x88, 9 * ZLBA, 8, w);
  CHECK_EQ(run(w, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x072c0e);
  /* Written, and the zone operations: the core's reason, the same sense. */
  rw16(0x8a, 9 * ZLBA, 8, w);
  CHECK_EQ(run(w, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x072c0e);
  zbc_out(0x03, 8 * ZLBA, false, cdb); /* open READONLY */
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x072708);
  zbc_out(0x02, 9 * ZLBA, false, cdb); /* finish OFFLINE */
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x072c0e);
  CHECK_EQ(cond_of(9), 0xf);
  /* Close of an EMPTY zone: a condition the op does not take, 24/00. */
  zbc_out(0x01, 10 * ZLBA, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  CHECK_EQ(cond_of(10), 1);
}

static void
test_badblocks(void)
{
  char err[128];
  uint8_t cdb[16];
  CHECK(znbd_dev_badblocks_edit(s.dev, "100", true, err, sizeof err) == 0);
  rw16(0x88, 96, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x031100);
  rw16(0x8a, 96, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x030c00);
}

/* Zone capacity 768 KiB (1536 LBAs) in 1 MiB zones: each sequential
 * zone is followed by a 512-LBA gap zone (type 5h). */
#define ZCAP 1536
static struct znbd_scsi g;
static uint8_t gbuf[ZLBA * 512];

/* Run CDB on the gap device with GBUF's first N bytes as the buffer. */
static int
run_gap(const uint8_t *cdb, size_t n)
{
  struct iovec iov = {n <= sizeof data ? data : gbuf, n};
  memset(&last, 0, sizeof last);
  last.cdb = cdb;
  last.cdb_len = 16;
  last.iov = &iov;
  last.iovcnt = 1;
  return znbd_scsi_exec(&g, &last);
}

static int
report_gap(uint64_t lba, uint32_t alloc, uint8_t opt, bool partial)
{
  uint8_t cdb[16];
  rw16(0x95, lba, alloc, cdb);
  cdb[14] = opt | (partial ? 0x80 : 0);
  return run_gap(cdb, alloc);
}

/* Descriptor N of the last report: type, condition, start, length, wp. */
static bool
desc_is(unsigned n, unsigned type, unsigned cond, uint64_t start, uint64_t len,
        uint64_t wp)
{
  const uint8_t *d = data + 64 + 64 * n;
  return (d[0] & 0xf) == type && d[1] >> 4 == cond && be(d + 16, 8) == start &&
         be(d + 8, 8) == len && be(d + 24, 8) == wp;
}
#define GAP_WP UINT64_MAX

/* The gap zone's bytes as the device holds them are all zero. */
static bool
gap_untouched(uint32_t zone)
{
  static uint8_t buf[(ZLBA - ZCAP) * 512];
  memset(buf, 0xee, sizeof buf);
  if (znbd_dev_read(g.dev, buf, sizeof buf,
                    ((uint64_t)zone * ZLBA + ZCAP) * 512, 0) != 0)
    return false;
  for (size_t i = 0; i < sizeof buf; i++)
    if (buf[i])
      return false;
  return true;
}

static void
test_gaps(void)
{
  struct znbd_params p;
  char err[256];
  test_params(&p, (const char *const[]){"size", "16M", "zone_size", "1M",
                                        "zone_capacity", "768K", "zone_nr_conv",
                                        "2", "zone_max_open", "2", NULL});
  CHECK(znbd_scsi_check_params(&p, err, sizeof err) == 0);
  znbd_scsi_init(&g, test_dev(&p), "gap0");
  uint8_t cdb[16];

  /* VPD B6: constant zone starting LBA offset, granularity = zone size. */
  uint8_t vpdb6[16] = {0x12, 1, 0xb6, 0, 0x40, 0};
  CHECK_EQ(run_gap(vpdb6, 64), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data + 2, 2), 0x3c);
  CHECK_EQ(data[23] & 0x0f, 0x08);
  CHECK_EQ(be(data + 24, 8), ZLBA);
  CHECK_EQ(be(data + 16, 4), 2);
  /* READ CAPACITY(16): the whole device, gaps included. */
  uint8_t rc16[16] = {0x9e, 0x10, [13] = 32};
  CHECK_EQ(run_gap(rc16, 32), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 8), 16 * ZLBA - 1);

  /* Option 00h: 2 conventional, then 14 sequential + gap pairs. */
  CHECK_EQ(report_gap(0, 4096, 0x00, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 30 * 64);
  CHECK_EQ(be(data + 8, 8), 16 * ZLBA - 1);
  CHECK_EQ(be(data + 16, 8), ZLBA);
  CHECK_EQ(last.read_len, 64 + 30 * 64);
  CHECK(desc_is(0, 0x1, 0x0, 0, ZLBA, ZLBA));
  CHECK(desc_is(1, 0x1, 0x0, ZLBA, ZLBA, 2 * ZLBA));
  CHECK(desc_is(2, 0x2, 0x1, 2 * ZLBA, ZCAP, 2 * ZLBA));
  CHECK(desc_is(3, 0x5, 0x0, 2 * ZLBA + ZCAP, ZLBA - ZCAP, GAP_WP));
  CHECK(desc_is(4, 0x2, 0x1, 3 * ZLBA, ZCAP, 3 * ZLBA));
  CHECK(desc_is(29, 0x5, 0x0, 15 * ZLBA + ZCAP, ZLBA - ZCAP, GAP_WP));
  /* Without PARTIAL the list length counts all, the data stops at ALLOC. */
  CHECK_EQ(report_gap(0, 512, 0x00, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 30 * 64);
  CHECK_EQ(last.read_len, 512);
  /* PARTIAL: the 7 descriptors that fit, the 7th a sequential zone. */
  CHECK_EQ(report_gap(0, 512, 0x00, true), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 7 * 64);
  CHECK(desc_is(5, 0x5, 0x0, 3 * ZLBA + ZCAP, ZLBA - ZCAP, GAP_WP));
  CHECK(desc_is(6, 0x2, 0x1, 4 * ZLBA, ZCAP, 4 * ZLBA));
  /* A zone locator inside a gap zone starts the list at that gap. */
  CHECK_EQ(report_gap(2 * ZLBA + ZCAP + 100, 4096, 0x00, false),
           ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 27 * 64);
  CHECK(desc_is(0, 0x5, 0x0, 2 * ZLBA + ZCAP, ZLBA - ZCAP, GAP_WP));
  CHECK(desc_is(1, 0x2, 0x1, 3 * ZLBA, ZCAP, 3 * ZLBA));
  /* Inside a sequential zone: that zone, then its gap. */
  CHECK_EQ(report_gap(5 * ZLBA + 7, 4096, 0x00, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 22 * 64);
  CHECK(desc_is(0, 0x2, 0x1, 5 * ZLBA, ZCAP, 5 * ZLBA));
  CHECK(desc_is(1, 0x5, 0x0, 5 * ZLBA + ZCAP, ZLBA - ZCAP, GAP_WP));
  /* 3Fh "not write pointer": the conventional and the gap zones. */
  CHECK_EQ(report_gap(0, 4096, 0x3f, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 16 * 64);
  CHECK(desc_is(1, 0x1, 0x0, ZLBA, ZLBA, 2 * ZLBA));
  CHECK(desc_is(2, 0x5, 0x0, 2 * ZLBA + ZCAP, ZLBA - ZCAP, GAP_WP));
  CHECK(desc_is(15, 0x5, 0x0, 15 * ZLBA + ZCAP, ZLBA - ZCAP, GAP_WP));
  /* 3Eh: all but the gap zones. */
  CHECK_EQ(report_gap(0, 4096, 0x3e, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 16 * 64);
  CHECK(desc_is(2, 0x2, 0x1, 2 * ZLBA, ZCAP, 2 * ZLBA));
  CHECK(desc_is(15, 0x2, 0x1, 15 * ZLBA, ZCAP, 15 * ZLBA));
  /* 01h EMPTY: the 14 sequential zones, no gap; PARTIAL with 3. */
  CHECK_EQ(report_gap(0, 4096, 0x01, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 14 * 64);
  CHECK(desc_is(1, 0x2, 0x1, 3 * ZLBA, ZCAP, 3 * ZLBA));
  CHECK_EQ(report_gap(0, 4 * 64, 0x01, true), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 3 * 64);
  CHECK(desc_is(2, 0x2, 0x1, 4 * ZLBA, ZCAP, 4 * ZLBA));

  /* A write at the wp up to the capacity: the zone is FULL. */
  for (size_t i = 0; i < ZCAP * 512; i++)
    gbuf[i] = (uint8_t)(i * 7 + 1);
  rw16(0x8a, 2 * ZLBA, ZCAP, cdb);
  CHECK_EQ(run_gap(cdb, ZCAP * 512), ZNBD_SCSI_GOOD);
  CHECK_EQ(report_gap(2 * ZLBA, 192, 0x00, true), ZNBD_SCSI_GOOD);
  CHECK(desc_is(0, 0x2, 0xe, 2 * ZLBA, ZCAP, 2 * ZLBA + ZCAP));
  CHECK(desc_is(1, 0x5, 0x0, 2 * ZLBA + ZCAP, ZLBA - ZCAP, GAP_WP));
  CHECK_EQ(report_gap(0, 4096, 0x05, false), ZNBD_SCSI_GOOD); /* FULL */
  CHECK_EQ(be(data, 4), 64);
  memset(gbuf, 0, ZCAP * 512);
  rw16(0x88, 2 * ZLBA, ZCAP, cdb);
  CHECK_EQ(run_gap(cdb, ZCAP * 512), ZNBD_SCSI_GOOD);
  CHECK_EQ(last.read_len, ZCAP * 512);
  CHECK(gbuf[0] == 1 &&
        gbuf[ZCAP * 512 - 1] == (uint8_t)((ZCAP * 512 - 1) * 7 + 1));

  /* Reads in a gap zone or into one succeed with what the device reads
   * past the capacity (zeros here, as null_blk's FULL zone); writes
   * touching one: 05/21/09, nothing written. */
  memset(data, 0x77, 4096);
  rw16(0x88, 2 * ZLBA + ZCAP, 8, cdb); /* read in the gap */
  CHECK_EQ(run_gap(cdb, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(last.read_len, 4096);
  CHECK(data[0] == 0 && data[4095] == 0);
  memset(data, 0x77, 4096);
  rw16(0x88, 2 * ZLBA + ZCAP - 4, 8, cdb); /* read across into it */
  CHECK_EQ(run_gap(cdb, 4096), ZNBD_SCSI_GOOD);
  CHECK(data[0] == (uint8_t)(((ZCAP - 4) * 512) * 7 + 1) && data[4095] == 0);
  memset(data, 0x5a, 4096);
  rw16(0x8a, 4 * ZLBA + ZCAP, 8, cdb); /* write at a gap's start */
  CHECK_EQ(run_gap(cdb, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052109);
  CHECK(gap_untouched(4));
  memset(gbuf, 0x5a, (ZCAP + 8) * 512);
  rw16(0x8a, 3 * ZLBA, ZCAP + 8, cdb); /* at the wp, past the capacity */
  CHECK_EQ(run_gap(cdb, (ZCAP + 8) * 512), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052109);
  CHECK(gap_untouched(3));
  CHECK_EQ(report_gap(3 * ZLBA, 128, 0x00, true), ZNBD_SCSI_GOOD);
  CHECK(desc_is(0, 0x2, 0x1, 3 * ZLBA, ZCAP, 3 * ZLBA)); /* still EMPTY */
  memset(data, 0x77, 4096);
  rw16(0x88, 3 * ZLBA, 8, cdb);
  CHECK_EQ(run_gap(cdb, 4096), ZNBD_SCSI_GOOD);
  CHECK(data[0] == 0 && data[4095] == 0);

  /* ZBC OUT: a gap zone's start 05/21/09, inside a gap 05/24/00. */
  zbc_out(0x03, 5 * ZLBA + ZCAP, false, cdb);
  CHECK_EQ(run_gap(cdb, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052109);
  zbc_out(0x04, 5 * ZLBA + ZCAP + 8, false, cdb);
  CHECK_EQ(run_gap(cdb, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  zbc_out(0x03, 5 * ZLBA, false, cdb);
  CHECK_EQ(run_gap(cdb, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(report_gap(0, 4096, 0x03, false), ZNBD_SCSI_GOOD); /* EXP_OPEN */
  CHECK_EQ(be(data, 4), 64);
  CHECK(desc_is(0, 0x2, 0x3, 5 * ZLBA, ZCAP, 5 * ZLBA));
  /* FINISH: FULL with the wp at the capacity (the device puts it at the
   * zone end); RESET ALL empties the zones, the gaps stay. */
  zbc_out(0x02, 5 * ZLBA, false, cdb);
  CHECK_EQ(run_gap(cdb, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(report_gap(5 * ZLBA, 192, 0x00, true), ZNBD_SCSI_GOOD);
  CHECK(desc_is(0, 0x2, 0xe, 5 * ZLBA, ZCAP, 5 * ZLBA + ZCAP));
  zbc_out(0x04, 0, true, cdb);
  CHECK_EQ(run_gap(cdb, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(report_gap(0, 4096, 0x01, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 14 * 64);
  CHECK_EQ(report_gap(0, 4096, 0x00, false), ZNBD_SCSI_GOOD);
  CHECK_EQ(be(data, 4), 30 * 64);
  znbd_dev_free(g.dev);
}

/* ZBC OUT with ALL follows the one rule of znbd_dev_zone_op_all(), as
 * the control socket does: FINISH ALL finishes the open zones before the
 * CLOSED ones (so a CLOSED zone finds an open slot), and OPEN ALL is
 * refused, changing nothing, when the CLOSED and EXP_OPEN zones exceed
 * max_open (2 here). */
static void
test_all(void)
{
  uint8_t cdb[16];
  zbc_out(0x04, 0, true, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  rw16(0x8a, 2 * ZLBA, 8, cdb); /* zone 2: written, then CLOSED */
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD);
  zbc_out(0x01, 2 * ZLBA, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  zbc_out(0x03, 3 * ZLBA, false, cdb); /* zones 3 and 4 EXP_OPEN */
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  zbc_out(0x03, 4 * ZLBA, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  /* OPEN ALL: 1 CLOSED + 2 EXP_OPEN > 2: refused, zone 2 stays CLOSED. */
  zbc_out(0x03, 0, true, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x07550e);
  CHECK_EQ(cond_of(2), ZNBD_ZONE_COND_CLOSED);
  CHECK_EQ(cond_of(3), ZNBD_ZONE_COND_EXP_OPEN);
  /* FINISH ALL: 3 and 4 first, then 2 has a slot. */
  zbc_out(0x02, 0, true, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(2), ZNBD_ZONE_COND_FULL);
  CHECK_EQ(cond_of(3), ZNBD_ZONE_COND_FULL);
  CHECK_EQ(cond_of(4), ZNBD_ZONE_COND_FULL);
  zbc_out(0x04, 0, true, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(2), ZNBD_ZONE_COND_EMPTY);
}

/* drop-reply: the command is executed and marked to be left unanswered,
 * for the kinds asked, every N-th; the others are answered. */
static void
test_drop_reply(void)
{
  uint8_t cdb[16];
  uint64_t z = 7 * ZLBA;
  struct znbd_dev_stats st0, st1;
  znbd_dev_stats(s.dev, &st0);
  znbd_dev_drop_reply_set(s.dev, 2, ZNBD_IO_WRITE);
  memset(data, 0x5a, 4096);
  rw16(0x8a, z, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD);
  CHECK(!last.drop_reply);
  rw16(0x8a, z + 8, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD);
  CHECK(last.drop_reply);     /* the second write: dropped */
  CHECK_EQ(wp_of(7), z + 16); /* ... and executed */
  CHECK(!last.drop_reply);    /* REPORT ZONES is not a write */
  rw16(0x88, z, 16, cdb);
  CHECK_EQ(run(cdb, 16, 8192), ZNBD_SCSI_GOOD);
  CHECK(!last.drop_reply);
  CHECK_EQ(data[8191], 0x5a);
  znbd_dev_drop_reply_set(s.dev, 1, ZNBD_IO_READ);
  CHECK_EQ(run(cdb, 16, 8192), ZNBD_SCSI_GOOD);
  CHECK(last.drop_reply);
  CHECK_EQ(last.read_len, 8192);
  znbd_dev_drop_reply_set(s.dev, 0, 0);
  CHECK_EQ(run(cdb, 16, 8192), ZNBD_SCSI_GOOD);
  CHECK(!last.drop_reply);
  znbd_dev_stats(s.dev, &st1);
  CHECK_EQ(st1.dropped_replies - st0.dropped_replies, 2);
  zbc_out(0x04, z, false, cdb);
  CHECK_EQ(run(cdb, 16, 0), ZNBD_SCSI_GOOD);
}

/* Run CDB (copied to a heap block of exactly LEN bytes) with one heap
 * buffer of exactly N bytes, so the sanitizer build catches any byte read
 * or written outside them; the data-in comes back in OUT (N bytes). */
static int
run_exact(const uint8_t *cdb, size_t len, size_t n, uint8_t *out)
{
  uint8_t *c = malloc(len ? len : 1), *buf = malloc(n ? n : 1);
  CHECK(c && buf);
  memcpy(c, cdb, len);
  memset(buf, 0xee, n);
  int st = run_on(c, len, buf, n);
  if (out)
    memcpy(out, buf, n);
  free(c);
  free(buf);
  return st;
}

/* Data-in follows SPC-5 4.2.5.6: min(allocation length, buffers) bytes,
 * whichever is smaller, and an allocation length of 0 moves nothing and
 * is no error. */
static void
test_alloc_lengths(void)
{
  uint8_t cdb[16], out[4096];
  /* REPORT ZONES with a large allocation length and a 1-byte buffer
   * (an iSCSI initiator chooses its transfer length apart from the CDB):
   * one byte, the list length's first. */
  rw16(0x95, 0, 4096, cdb);
  CHECK_EQ(run_exact(cdb, 16, 1, out), ZNBD_SCSI_GOOD);
  CHECK_EQ(last.read_len, 1);
  CHECK_EQ(out[0], 0);
  for (size_t n = 2; n < 200; n += 7) {
    CHECK_EQ(run_exact(cdb, 16, n, out), ZNBD_SCSI_GOOD);
    CHECKF(last.read_len == (n < 64 ? n : 64 + (n - 64) / 64 * 64),
           "%zu-byte buffer: %u bytes", n, last.read_len);
    if (n >= 4)
      CHECK_EQ(be(out, 4), 16 * 64);
  }
  /* An allocation length below the header: the header's first bytes,
   * not zeros. */
  rw16(0x95, 0, 32, cdb);
  CHECK_EQ(run_exact(cdb, 16, 4096, out), ZNBD_SCSI_GOOD);
  CHECK_EQ(last.read_len, 32);
  CHECK_EQ(be(out, 4), 16 * 64);
  CHECK_EQ(be(out + 8, 8), 16 * ZLBA - 1);
  CHECK_EQ(out[32], 0xee);

  /* Allocation length 0: GOOD, nothing moved. */
  const uint8_t zero_alloc[][16] = {
      {0x95},             /* REPORT ZONES */
      {0x12},             /* INQUIRY */
      {0x12, 0x01, 0x80}, /* INQUIRY, VPD 80h */
      {0x1a, 0, 0x3f},    /* MODE SENSE(6) */
      {0x5a, 0, 0x3f},    /* MODE SENSE(10) */
      {0x9e, 0x10},       /* READ CAPACITY(16) */
      {0xa3, 0x0c},       /* REPORT SUPPORTED OPCODES */
      {0x03},             /* REQUEST SENSE */
  };
  for (size_t i = 0; i < sizeof zero_alloc / sizeof zero_alloc[0]; i++) {
    size_t len = znbd_scsi_cdb_len(zero_alloc[i][0]);
    CHECKF(run_exact(zero_alloc[i], len, 512, out) == ZNBD_SCSI_GOOD,
           "opcode %02x, allocation length 0", zero_alloc[i][0]);
    CHECK_EQ(last.read_len, 0);
    CHECK_EQ(out[0], 0xee);
  }

  /* MODE SENSE(6) changeable values of all pages: each page keeps its
   * own code and length; nothing is changeable. */
  uint8_t ms[6] = {0x1a, 0x08, 0x40 | 0x3f, 0, 255, 0};
  CHECK_EQ(run_exact(ms, 6, 255, out), ZNBD_SCSI_GOOD);
  CHECK_EQ(last.read_len, 4 + 32);
  CHECK_EQ(out[4], 0x08);
  CHECK_EQ(out[5], 0x12);
  CHECK_EQ(out[6], 0x00); /* WCE not changeable */
  CHECK_EQ(out[4 + 20], 0x0a);
  CHECK_EQ(out[4 + 21], 0x0a);
}

/* CDBs that are too short, that set reserved bits, or whose buffers are
 * shorter than their transfer: INVALID FIELD IN CDB 05/24/00, nothing
 * read past the CDB, no byte and no wp changed. */
static void
test_malformed(void)
{
  uint8_t cdb[16], out[8192];
  uint64_t z = 6 * ZLBA; /* zone 6, sequential, EMPTY */
  CHECK_EQ(znbd_scsi_cdb_len(0x00), 6);
  CHECK_EQ(znbd_scsi_cdb_len(0x28), 10);
  CHECK_EQ(znbd_scsi_cdb_len(0x5a), 10);
  CHECK_EQ(znbd_scsi_cdb_len(0x88), 16);
  CHECK_EQ(znbd_scsi_cdb_len(0xa3), 12);
  CHECK_EQ(znbd_scsi_cdb_len(0x7f), 6);
  CHECK_EQ(znbd_scsi_cdb_len(0xc0), 6);

  /* Short CDBs: each one byte short of its group. */
  rw16(0x95, 0, 4096, cdb);
  CHECK_EQ(run_exact(cdb, 15, 4096, NULL), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  rw16(0x94, z, 0, cdb);
  cdb[1] = 0x03;
  CHECK_EQ(run_exact(cdb, 10, 0, NULL), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  CHECK_EQ(cond_of(6), ZNBD_ZONE_COND_EMPTY);
  uint8_t r10[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0};
  CHECK_EQ(run_exact(r10, 9, 4096, NULL), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  CHECK_EQ(last.read_len, 0);
  uint8_t inq[6] = {0x12, 0, 0, 0, 36, 0};
  CHECK_EQ(run_exact(inq, 5, 36, NULL), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(run_exact(inq, 0, 36, NULL), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  CHECK_EQ(run_exact(inq, 6, 36, NULL), ZNBD_SCSI_GOOD);

  /* Reserved bits, one command at a time. */
  struct {
    uint8_t cdb[16];
    const char *what;
  } rsv[] = {
      {{0x00, 0, 1}, "TEST UNIT READY byte 2"},
      {{0x12, 0x02, 0, 0, 36}, "INQUIRY CMDDT"},
      {{0x03, 0x01, 0, 0, 18}, "REQUEST SENSE DESC"},
      {{0x88, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8}, "READ(16) RDPROTECT"},
      {{0x8a, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8}, "WRITE(16) bit 2"},
      {{0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0x38}, "READ(10) CONTROL bits 5-3"},
      {{0x94, 0x03, 0, 0, 0, 0, 0, 0, 0x30, 0, 0, 0, 0, 0, 0x02}, "ZBC OUT"},
      {{0x95, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0x40},
       "REPORT ZONES"},
      {{0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0x02},
       "READ CAPACITY(16)"},
      {{0xa3, 0x0c, 0x00, 0, 0, 0, 0, 0, 0x10, 0, 0x01}, "REPORT OPCODES"},
  };
  for (size_t i = 0; i < sizeof rsv / sizeof rsv[0]; i++) {
    int st = run_exact(rsv[i].cdb, znbd_scsi_cdb_len(rsv[i].cdb[0]), 4096, out);
    CHECKF(st == ZNBD_SCSI_CHECK_CONDITION && sense() == 0x052400,
           "%s: status %d sense %06x", rsv[i].what, st, sense());
    CHECK_EQ(last.read_len, 0);
  }
  CHECK_EQ(cond_of(6), ZNBD_ZONE_COND_EMPTY);
  CHECK_EQ(wp_of(6), z);
  /* ZONE COUNT 2: several zones at once are not offered; 1 is one. */
  zbc_out(0x03, z, false, cdb);
  cdb[13] = 2;
  CHECK_EQ(run_exact(cdb, 16, 0, NULL), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  CHECK_EQ(cond_of(6), ZNBD_ZONE_COND_EMPTY);
  cdb[13] = 1;
  CHECK_EQ(run_exact(cdb, 16, 0, NULL), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(6), ZNBD_ZONE_COND_EXP_OPEN);
  zbc_out(0x01, z, false, cdb); /* close it again: EMPTY */
  CHECK_EQ(run_exact(cdb, 16, 0, NULL), ZNBD_SCSI_GOOD);
  CHECK_EQ(cond_of(6), ZNBD_ZONE_COND_EMPTY);

  /* Buffers shorter than the transfer: refused before anything moves. */
  rw16(0x8a, z, 8, cdb);
  CHECK_EQ(run_exact(cdb, 16, 8 * 512 - 1, NULL), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  CHECK_EQ(wp_of(6), z);
  CHECK_EQ(cond_of(6), ZNBD_ZONE_COND_EMPTY);
  rw16(0x88, 0, 8, cdb);
  CHECK_EQ(run_exact(cdb, 16, 8 * 512 - 1, out), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  CHECK_EQ(last.read_len, 0);
  CHECK_EQ(out[0], 0xee);
  /* The right length still works. */
  rw16(0x8a, z, 8, cdb);
  CHECK_EQ(run_exact(cdb, 16, 8 * 512, NULL), ZNBD_SCSI_GOOD);
  CHECK_EQ(wp_of(6), z + 8);
  zbc_out(0x04, z, false, cdb);
  CHECK_EQ(run_exact(cdb, 16, 0, NULL), ZNBD_SCSI_GOOD);
  CHECK_EQ(wp_of(6), z);
}

/* REPORT SUPPORTED OPERATION CODES: the list, one opcode, one service
 * action, and the refusals SPC-5 6.35 asks for. */
static void
test_opcodes(void)
{
  uint8_t cdb[12] = {0xa3, 0x0c, 0x00, 0, 0, 0, 0, 0, 0x10, 0, 0, 0};
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_GOOD);
  uint32_t len = (uint32_t)be(data, 4);
  CHECK_EQ(len % 8, 0);
  CHECK_EQ(last.read_len, 4 + len);
  bool report_zones = false, write16 = false, bogus = false;
  for (uint32_t o = 4; o < 4 + len; o += 8) {
    const uint8_t *d = data + o;
    if (d[0] == 0x95 && be(d + 2, 2) == 0 && (d[5] & 1) && be(d + 6, 2) == 16)
      report_zones = true;
    if (d[0] == 0x8a && !(d[5] & 1) && be(d + 6, 2) == 16)
      write16 = true;
    if (d[0] == 0x04 || d[0] == 0x42) /* FORMAT UNIT, UNMAP: not served */
      bogus = true;
  }
  CHECK(report_zones && write16 && !bogus);
  /* Listed in table order, which must be by opcode: the executor finds
   * a CDB's entry by binary search. */
  for (uint32_t o = 12; o < 4 + len; o += 8)
    CHECKF(data[o - 8] <= data[o], "opcode %02x listed after %02x", data[o],
           data[o - 8]);
  /* Every listed command is served: none answers INVALID COMMAND
   * OPERATION CODE. */
  cdb[2] = 0x01; /* one opcode: WRITE(16) */
  cdb[3] = 0x8a;
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(data[1] & 0x07, 3);
  CHECK_EQ(be(data + 2, 2), 16);
  CHECK_EQ(data[4], 0x8a);
  CHECK_EQ(data[5], 0x18);      /* usage map: DPO, FUA; no WRPROTECT */
  CHECK_EQ(data[4 + 15], 0xc7); /* CONTROL: bits 5-3 reserved */
  CHECK_EQ(last.read_len, 20);
  cdb[3] = 0x04; /* FORMAT UNIT: not supported */
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(data[1] & 0x07, 1);
  cdb[3] = 0x95; /* has service actions: 001b is invalid */
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  cdb[2] = 0x02; /* opcode and service action: ZBC OUT OPEN ZONE */
  cdb[3] = 0x94;
  cdb[5] = 0x03;
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(data[1] & 0x07, 3);
  CHECK_EQ(data[5], 0x03);      /* the service action in its field */
  CHECK_EQ(data[4 + 14], 0x01); /* ALL; the rest of byte 14 reserved */
  cdb[5] = 0x09;                /* a service action ZBC OUT lacks */
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(data[1] & 0x07, 1);
  cdb[3] = 0x28; /* READ(10) has no service actions: 010b is invalid */
  cdb[5] = 0;
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x052400);
  cdb[2] = 0x80; /* RCTD: no timeouts descriptor */
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_CHECK_CONDITION);
  cdb[2] = 0x00; /* allocation length 8: truncated, still GOOD */
  cdb[8] = 0;
  cdb[9] = 8;
  CHECK_EQ(run(cdb, 12, 4096), ZNBD_SCSI_GOOD);
  CHECK_EQ(last.read_len, 8);
}

static void
test_refusals(void)
{
  char err[256];
  struct znbd_params p;
  test_params(&p,
              (const char *const[]){"size", "24M", "zone_size", "3M", NULL});
  CHECK(znbd_scsi_check_params(&p, err, sizeof err) == -1);
  CHECK(strstr(err, "zone_size") != NULL);
  znbd_params_free(&p);
  test_params(&p, (const char *const[]){"size", "16M", "zone_size", "1M",
                                        "zone_read_past_wp", "error", NULL});
  CHECK(znbd_scsi_check_params(&p, err, sizeof err) == -1);
  CHECK(strstr(err, "zone_read_past_wp") != NULL);
  znbd_params_free(&p);
  test_params(&p,
              (const char *const[]){"size", "16M", "zone_size", "1M", NULL});
  CHECK(znbd_scsi_check_params(&p, err, sizeof err) == 0);
  znbd_params_free(&p);
}

static uint64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Injected latency per command: completion_nsec for every one, plus the
 * zone operation's own for ZBC OUT. */
static void
test_delay(void)
{
  struct znbd_params p;
  test_params(&p, (const char *const[]){"size", "16M", "zone_size", "1M",
                                        "completion_nsec", "1000",
                                        "zone_reset_nsec", "50000",
                                        "zone_open_nsec", "7000", NULL});
  struct znbd_scsi d;
  znbd_scsi_init(&d, test_dev(&p), "lat0");
  uint8_t cdb[16];
  rw16(0x88, 0, 8, cdb);
  CHECK_EQ(znbd_scsi_delay_nsec(&d, cdb), 1000);
  zbc_out(0x04, ZLBA, false, cdb);
  CHECK_EQ(znbd_scsi_delay_nsec(&d, cdb), 51000);
  zbc_out(0x03, ZLBA, true, cdb);
  CHECK_EQ(znbd_scsi_delay_nsec(&d, cdb), 8000);
  zbc_out(0x07, ZLBA, false, cdb); /* no such service action */
  CHECK_EQ(znbd_scsi_delay_nsec(&d, cdb), 1000);
  znbd_dev_free(d.dev);
  znbd_params_free(&p);

  /* mbps=1: each READ or WRITE waits its turn on the link, 1 MiB/s:
   * 64 KiB then another 64 KiB complete about 1/16 s and 2/16 s from now;
   * a command that moves no data waits only completion_nsec. */
  test_params(&p, (const char *const[]){"size", "16M", "zone_size", "1M",
                                        "mbps", "1", NULL});
  znbd_scsi_init(&d, test_dev(&p), "lat0");
  const uint64_t cost = 62500000; /* 64 KiB at 1 MiB/s, ns */
  rw16(0x88, 0, 128, cdb);
  uint64_t t0 = now_ns(), first = znbd_scsi_delay_nsec(&d, cdb);
  rw16(0x8a, ZLBA, 128, cdb);
  uint64_t second = znbd_scsi_delay_nsec(&d, cdb), t1 = now_ns();
  /* Each ends COST after the previous one's end, the first COST after
   * its call: so both ends lie within [t1 - t0] of that. */
  CHECKF(first <= cost && first + (t1 - t0) >= cost, "first %llu ns",
         (unsigned long long)first);
  CHECKF(second <= 2 * cost && second + (t1 - t0) >= 2 * cost, "second %llu ns",
         (unsigned long long)second);
  zbc_out(0x04, ZLBA, false, cdb);
  CHECK_EQ(znbd_scsi_delay_nsec(&d, cdb), 0);
  znbd_dev_free(d.dev);
}

/* After a power cut every command fails with NOT READY 02/04/00 (the
 * disk the kernel knew is gone), and the unflushed write is undone. */
static void
test_power_cut(void)
{
  uint8_t cdb[16];
  uint64_t z = 4 * ZLBA; /* zone 4, sequential */
  memset(data, 0xa5, 8192);
  rw16(0x8a, z, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD);
  uint8_t sync16[16] = {0x91};
  CHECK_EQ(run(sync16, 16, 0), ZNBD_SCSI_GOOD);
  rw16(0x8a, z + 8, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD);
  CHECK(znbd_dev_power_cut(s.dev, 0) == 0);
  struct znbd_zone_info zi;
  CHECK(znbd_dev_report(s.dev, 4, 1, &zi) == 1);
  CHECK_EQ(zi.wp - zi.start, 4096);
  CHECK_EQ(zi.cond, ZNBD_ZONE_COND_CLOSED);
  uint8_t tur[6] = {0};
  CHECK_EQ(run(tur, 6, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x020400);
  rw16(0x88, z, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x020400);
  CHECK_EQ(last.read_len, 0);
  rw16(0x8a, z + 8, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x020400);
  CHECK_EQ(run(sync16, 16, 0), ZNBD_SCSI_CHECK_CONDITION);
  CHECK_EQ(sense(), 0x020400);
  CHECK(znbd_dev_report(s.dev, 4, 1, &zi) == 1);
  CHECK_EQ(zi.wp - zi.start, 4096);
  /* A new session (znbd-tcmu started again) sees the rolled-back disk. */
  znbd_scsi_init(&s, s.dev, s.name);
  rw16(0x8a, z + 8, 8, cdb);
  CHECK_EQ(run(cdb, 16, 4096), ZNBD_SCSI_GOOD);
}

int
main(void)
{
  struct znbd_params p;
  test_params(&p, (const char *const[]){"size", "16M", "zone_size", "1M",
                                        "zone_nr_conv", "2", "zone_max_open",
                                        "2", "write_cache", "true", NULL});
  znbd_scsi_init(&s, test_dev(&p), "zbd0");
  test_probe();
  test_report();
  test_rw();
  test_zbc_out();
  test_badblocks();
  test_refusals();
  test_delay();
  test_gaps();
  test_opcodes();
  test_alloc_lengths();
  test_malformed();
  test_all();
  test_drop_reply();
  test_power_cut();
  znbd_dev_free(s.dev);
  return check_done("scsi_test");
}
