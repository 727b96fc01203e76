/* znbd-ublk's request handler (ublk/io.c) against RAM devices: ublk
 * descriptors in (include/uapi/linux/ublk_cmd.h), the request buffer a
 * plain array here where the runner uses pread/pwrite on /dev/ublkcN;
 * results, bytes, zone reports (struct blk_zone) and conditions out. */
#include <errno.h>
#include <linux/blkzoned.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "io.h"
#include "recover.h"
#include "setup.h"
#include "testdev.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

static uint8_t req[1 << 20]; /* the request's buffer, as the kernel's */
static uint8_t bounce[1 << 20];

static int
copy_in(void *opaque, void *buf, size_t len, uint64_t off)
{
  (void)opaque;
  memcpy(buf, req + off, len);
  return 0;
}

static int
copy_out(void *opaque, const void *buf, size_t len, uint64_t off)
{
  (void)opaque;
  memcpy(req + off, buf, len);
  return 0;
}

static const struct znbd_ublk_copy copy = {copy_in, copy_out, NULL};
static struct znbd_ublk_io h;
static struct znbd_ublk_done done;

static int32_t
run(uint32_t op_flags, uint64_t sector, uint32_t nr)
{
  struct znbd_ublksrv_io_desc iod = {op_flags, nr, sector, 0};
  return znbd_ublk_io_exec(&h, &iod, ZNBD_NO_SLOT, &copy, NULL, &done);
}

/* Zone I as the handler reports it (one REPORT_ZONES of one zone). */
static struct blk_zone
zone(uint32_t i)
{
  struct blk_zone z;
  memset(req, 0xaa, sizeof z);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_REPORT_ZONES, (uint64_t)i * 8192, 1), sizeof z);
  memcpy(&z, req, sizeof z);
  return z;
}

/* 8 zones of 4 MiB (8192 sectors), the first conventional, capacity
 * 3 MiB, at most 2 open. */
static void
zoned(void)
{
  struct znbd_params p;
  static const char *const kv[] = {"size",
                                   "32M",
                                   "zone_size",
                                   "4M",
                                   "zone_capacity",
                                   "3M",
                                   "zone_nr_conv",
                                   "1",
                                   "zone_max_open",
                                   "2",
                                   NULL};
  test_params(&p, kv);
  struct znbd_dev *d = test_dev(&p);
  znbd_ublk_io_init(&h, d, bounce, sizeof bounce);

  /* The report of every zone: 8 entries and then nothing (a request for
   * 10 zones from zone 0 gets a zero-length ninth and tenth). */
  memset(req, 0xaa, 10 * sizeof(struct blk_zone));
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_REPORT_ZONES, 0, 10),
           10 * sizeof(struct blk_zone));
  struct blk_zone *z = (struct blk_zone *)req;
  CHECK_EQ(z[0].start, 0);
  CHECK_EQ(z[0].len, 8192);
  CHECK_EQ(z[0].capacity, 8192); /* conventional: the whole zone */
  CHECK_EQ(z[0].wp, 8192);       /* null_blk: start + len */
  CHECK_EQ(z[0].type, BLK_ZONE_TYPE_CONVENTIONAL);
  CHECK_EQ(z[0].cond, BLK_ZONE_COND_NOT_WP);
  CHECK_EQ(z[7].start, 7 * 8192);
  CHECK_EQ(z[7].len, 8192);
  CHECK_EQ(z[7].capacity, 6144);
  CHECK_EQ(z[7].wp, 7 * 8192);
  CHECK_EQ(z[7].type, BLK_ZONE_TYPE_SEQWRITE_REQ);
  CHECK_EQ(z[7].cond, BLK_ZONE_COND_EMPTY);
  CHECK_EQ(z[8].len, 0);
  CHECK_EQ(z[9].len, 0);
  CHECK_EQ(z[8].start, 0);

  /* 64 KiB at zone 1's wp, read back. */
  for (unsigned i = 0; i < 64 * KiB; i++)
    req[i] = (uint8_t)(i * 7 + 1);
  uint8_t want[64 * KiB];
  memcpy(want, req, sizeof want);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192, 128), 64 * KiB);
  struct blk_zone z1 = zone(1);
  CHECK_EQ(z1.wp, 8192 + 128);
  CHECK_EQ(z1.cond, BLK_ZONE_COND_IMP_OPEN);
  memset(req, 0, sizeof want);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 8192, 128), 64 * KiB);
  CHECK(memcmp(req, want, sizeof want) == 0);

  /* Off the wp: EIO (null_blk's BLK_STS_IOERR), nothing written, the wp
   * where it was. */
  memset(req, 0x55, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192 + 1024, 8), -EIO);
  z1 = zone(1);
  CHECK_EQ(z1.wp, 8192 + 128);
  CHECK_EQ(z1.cond, BLK_ZONE_COND_IMP_OPEN);
  memset(req, 0x11, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 8192 + 1024, 8), 4 * KiB);
  uint8_t zero[4 * KiB] = {0};
  CHECK(memcmp(req, zero, sizeof zero) == 0);
  /* ... and past the capacity (3 MiB = 6144 sectors) too. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192 + 6144, 8), -EIO);

  /* Append to zone 1: written at its wp, the LBA returned. */
  memset(req, 0x77, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_APPEND, 8192, 8), 4 * KiB);
  CHECK_EQ(done.append_lba, 8192 + 128);
  CHECK_EQ(zone(1).wp, 8192 + 136);
  memset(req, 0, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 8192 + 128, 8), 4 * KiB);
  CHECK(req[0] == 0x77 && req[4 * KiB - 1] == 0x77);
  /* Appending to the conventional zone or not at a zone start fails. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_APPEND, 0, 8), -EIO);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_APPEND, 8192 + 8, 8), -EINVAL);

  /* The conventional zone takes writes anywhere. */
  memset(req, 0x33, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE | ZNBD_UBLK_IO_F_FUA, 4096, 8), 4 * KiB);
  memset(req, 0, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 4096, 8), 4 * KiB);
  CHECK(req[0] == 0x33 && req[4 * KiB - 1] == 0x33);

  /* Open limit 2, zone 1 implicitly open: opening zone 2 and then zone 3
   * closes zone 1 (null_blk's null_close_imp_open_zone()); with both
   * open explicitly, opening zone 4 fails with ETOOMANYREFS
   * (BLK_STS_ZONE_OPEN_RESOURCE) and changes nothing. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_OPEN, 2 * 8192, 0), 0);
  CHECK_EQ(zone(2).cond, BLK_ZONE_COND_EXP_OPEN);
  CHECK_EQ(zone(1).cond, BLK_ZONE_COND_IMP_OPEN);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_OPEN, 3 * 8192, 0), 0);
  CHECK_EQ(zone(1).cond, BLK_ZONE_COND_CLOSED);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_OPEN, 4 * 8192, 0), -ETOOMANYREFS);
  CHECK_EQ(zone(4).cond, BLK_ZONE_COND_EMPTY);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_CLOSE, 3 * 8192, 0), 0);
  CHECK_EQ(zone(3).cond, BLK_ZONE_COND_EMPTY); /* nothing written */
  /* Finish zone 2: FULL, its wp at the zone's end (null_blk's
   * null_finish_zone(): start + len, whatever the capacity). */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_FINISH, 2 * 8192, 0), 0);
  struct blk_zone z2 = zone(2);
  CHECK_EQ(z2.cond, BLK_ZONE_COND_FULL);
  CHECK_EQ(z2.wp, 3 * 8192);
  /* A refused append's commit carries its zone's start, where the
   * kernel logs the error, never sector 0. */
  done.append_lba = 1;
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_APPEND, 2 * 8192, 8), -EIO);
  CHECK_EQ(done.append_lba, 2 * 8192);
  /* A zone op on the conventional zone: EIO as null_blk. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_RESET, 0, 0), -EIO);
  /* Reset zone 1 alone, then all. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_RESET, 8192, 0), 0);
  CHECK_EQ(zone(1).cond, BLK_ZONE_COND_EMPTY);
  CHECK_EQ(zone(1).wp, 8192);
  memset(req, 0x44, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 5 * 8192, 8), 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_RESET_ALL, 0, 0), 0);
  for (uint32_t i = 1; i < 8; i++) {
    struct blk_zone zi = zone(i);
    CHECKF(zi.cond == BLK_ZONE_COND_EMPTY && zi.wp == zi.start,
           "zone %u after reset-all: cond %u wp %llu", i, zi.cond,
           (unsigned long long)zi.wp);
  }
  /* The conventional zone keeps its data through reset-all. */
  memset(req, 0, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 4096, 8), 4 * KiB);
  CHECK(req[0] == 0x33);
  /* A write of zeros at a wp moves it; FLUSH succeeds. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE_ZEROES, 6 * 8192, 16), 0);
  CHECK_EQ(zone(6).wp, 6 * 8192 + 16);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_FLUSH, 0, 0), 0);
  /* Past the end, larger than the buffer, an unknown op. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 65536, 8), -EINVAL);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 0, 4096), -EINVAL);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE_SAME, 0, 8), -EOPNOTSUPP);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_REPORT_ZONES, 8 * 8192, 1), -EINVAL);
  znbd_dev_free(d);
}

/* zoned=false: a plain RAM disk; discard and write-zeroes read back
 * zeros, zone requests fail. */
static void
plain(void)
{
  struct znbd_params p;
  static const char *const kv[] = {"size", "16M", "zoned", "false", NULL};
  test_params(&p, kv);
  struct znbd_dev *d = test_dev(&p);
  znbd_ublk_io_init(&h, d, bounce, sizeof bounce);
  uint8_t zero[64 * KiB] = {0};

  memset(req, 0x5a, 64 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 2048, 128), 64 * KiB);
  memset(req, 0, 64 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 2048, 128), 64 * KiB);
  CHECK(req[0] == 0x5a && req[64 * KiB - 1] == 0x5a);
  /* Discard the first 32 KiB, write zeros over the next 16 KiB. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_DISCARD, 2048, 64), 0);
  CHECK_EQ(
      run(ZNBD_UBLK_IO_OP_WRITE_ZEROES | ZNBD_UBLK_IO_F_NOUNMAP, 2048 + 64, 32),
      0);
  memset(req, 0xff, 64 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 2048, 128), 64 * KiB);
  CHECK(memcmp(req, zero, 48 * KiB) == 0);
  CHECK(req[48 * KiB] == 0x5a && req[64 * KiB - 1] == 0x5a);
  /* Zone requests on a plain device. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_REPORT_ZONES, 0, 1), -EOPNOTSUPP);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_RESET, 0, 0), -EINVAL);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_RESET_ALL, 0, 0), -EINVAL);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_ZONE_APPEND, 0, 8), -EINVAL);
  znbd_dev_free(d);
}

/* A power cut (write_cache=true): the unflushed write is gone, and the
 * queue made before the cut fails every request with EIO, reads too; a
 * queue made after it works. */
static void
power_cut(void)
{
  struct znbd_params p;
  static const char *const kv[] = {"size",        "16M",  "zone_size", "4M",
                                   "write_cache", "true", NULL};
  test_params(&p, kv);
  struct znbd_dev *d = test_dev(&p);
  znbd_ublk_io_init(&h, d, bounce, sizeof bounce);
  memset(req, 0x66, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 0, 8), 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_FLUSH, 0, 0), 0);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8, 8), 4 * KiB);
  CHECK_EQ(znbd_dev_power_cut(d, 0), 0);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 0, 8), -EIO);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 16, 8), -EIO);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_REPORT_ZONES, 0, 1), -EIO);
  znbd_ublk_io_init(&h, d, bounce, sizeof bounce);
  CHECK_EQ(zone(0).wp, 8);
  memset(req, 0, 4 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 0, 8), 4 * KiB);
  CHECK(req[0] == 0x66 && req[4 * KiB - 1] == 0x66);
  znbd_dev_free(d);
}

/* SET_PARAMS from key=value words: ERR_WORD "" when accepted, else a
 * word the refusal must name. */
static void
setup_of(const char *const *kv, struct znbd_ublk_params *up,
         const char *err_word)
{
  struct znbd_params p;
  char err[256] = "";
  test_params(&p, kv);
  int r = znbd_ublk_setup_params(&p, 512 * KiB, up, err, sizeof err);
  if (!*err_word)
    CHECKF(r == 0, "refused: %s", err);
  else
    CHECKF(r == -1 && errno == EINVAL && strstr(err, err_word),
           "expected a refusal naming %s, got %d: %s", err_word, r, err);
  znbd_params_free(&p);
}

static void
setup(void)
{
  struct znbd_ublk_params up;
  static const char *const zoned_kv[] = {"size",
                                         "64M",
                                         "zone_size",
                                         "4M",
                                         "zone_nr_conv",
                                         "1",
                                         "zone_max_open",
                                         "3",
                                         "zone_max_active",
                                         "5",
                                         NULL};
  setup_of(zoned_kv, &up, "");
  CHECK_EQ(up.len, sizeof up);
  CHECK_EQ(up.types, ZNBD_UBLK_PARAM_TYPE_BASIC | ZNBD_UBLK_PARAM_TYPE_DISCARD |
                         ZNBD_UBLK_PARAM_TYPE_ZONED);
  CHECK_EQ(up.basic.dev_sectors, 131072);
  CHECK_EQ(up.basic.chunk_sectors, 8192);
  CHECK_EQ(up.basic.logical_bs_shift, 9);
  CHECK_EQ(up.basic.max_sectors, 1024);
  CHECK_EQ(up.zoned.max_open_zones, 3);
  CHECK_EQ(up.zoned.max_active_zones, 5);
  CHECK_EQ(up.zoned.max_zone_append_sectors, 1024);
  CHECK_EQ(up.discard.max_discard_sectors, 0);
  CHECK_EQ(up.discard.max_write_zeroes_sectors, 1024);
  static const char *const npo2[] = {"size", "60M", "zone_size", "3M", NULL};
  setup_of(npo2, &up, "zone_size");
  static const char *const runt[] = {"size", "66M", "zone_size", "4M", NULL};
  setup_of(runt, &up, "size");
  static const char *const plain_kv[] = {"size",        "1G",        "zoned",
                                         "false",       "blocksize", "4096",
                                         "write_cache", "true",      NULL};
  setup_of(plain_kv, &up, "");
  CHECK_EQ(up.types, ZNBD_UBLK_PARAM_TYPE_BASIC | ZNBD_UBLK_PARAM_TYPE_DISCARD);
  CHECK_EQ(up.basic.chunk_sectors, 0);
  CHECK_EQ(up.basic.logical_bs_shift, 12);
  CHECK_EQ(up.basic.dev_sectors, 2097152);
  CHECK_EQ(up.basic.attrs, ZNBD_UBLK_ATTR_VOLATILE_CACHE | ZNBD_UBLK_ATTR_FUA);
  CHECK_EQ(up.discard.max_discard_sectors, 1024);
  CHECK_EQ(up.discard.max_discard_segments, 1);
}

/* redo_writes (a recovered server): a write the core refuses succeeds
 * when it ends at its sequential zone's wp over the same bytes, and
 * changes nothing; any other refused write still fails. */
static void
redo(void)
{
  struct znbd_params p;
  static const char *const kv[] = {"size",         "32M", "zone_size", "4M",
                                   "zone_nr_conv", "1",   NULL};
  test_params(&p, kv);
  struct znbd_dev *d = test_dev(&p);
  znbd_ublk_io_init(&h, d, bounce, sizeof bounce);
  CHECK(!h.redo_writes);

  for (unsigned i = 0; i < 64 * KiB; i++)
    req[i] = (uint8_t)(i * 13 + 5);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192, 128), 64 * KiB);
  /* The same write again: below the wp, refused as on null_blk. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192, 128), -EIO);
  h.redo_writes = true;
  /* Reissued after a recovery: done, the wp where it was. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE | ZNBD_UBLK_IO_F_FUA, 8192, 128),
           64 * KiB);
  CHECK_EQ(zone(1).wp, 8192 + 128);
  CHECK_EQ(zone(1).cond, BLK_ZONE_COND_IMP_OPEN);
  /* Its second half alone ends at the wp too, over the same bytes. */
  memmove(req, req + 32 * KiB, 32 * KiB);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192 + 64, 64), 32 * KiB);
  CHECK_EQ(h.redone, 2);
  /* Its first half does not end at the wp: refused. */
  for (unsigned i = 0; i < 32 * KiB; i++)
    req[i] = (uint8_t)(i * 13 + 5);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192, 64), -EIO);
  /* One byte different: refused, the stored byte kept. */
  for (unsigned i = 0; i < 64 * KiB; i++)
    req[i] = (uint8_t)(i * 13 + 5);
  req[4097] ^= 1;
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192, 128), -EIO);
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_READ, 8192 + 8, 8), 4 * KiB);
  CHECK_EQ(req[1], (uint8_t)(4097 * 13 + 5));
  CHECK_EQ(zone(1).wp, 8192 + 128);
  /* An empty zone's wp is its start: nothing ends there. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 2 * 8192 + 8, 8), -EIO);
  CHECK_EQ(zone(2).cond, BLK_ZONE_COND_EMPTY);
  /* A write at the wp is an ordinary write. */
  CHECK_EQ(run(ZNBD_UBLK_IO_OP_WRITE, 8192 + 128, 8), 4 * KiB);
  CHECK_EQ(zone(1).wp, 8192 + 136);
  CHECK_EQ(h.redone, 2);
  znbd_dev_free(d);
  znbd_params_free(&p);
}

/* A fake ublk_drv for znbd_ublk_recover_begin(): device 3, LIVE for the
 * first LIVE_ROUNDS GET_DEV_INFOs (its server's pid PID), QUIESCED
 * after; START_USER_RECOVERY answers EBUSY BUSY times first.  Records
 * the commands. */
struct fake {
  struct znbd_ublksrv_ctrl_dev_info info;
  struct znbd_ublk_params params, want; /* the device's, this server's */
  unsigned live_rounds, busy;
  uint32_t ops[32];
  unsigned nops;
};

static int
fake_cmd(void *opaque, uint32_t op, uint32_t dev_id, void *addr, uint16_t len,
         uint64_t data0)
{
  struct fake *f = opaque;
  CHECK_EQ(data0, 0);
  if (f->nops < 32)
    f->ops[f->nops++] = op;
  if (dev_id != 3)
    return -ENODEV;
  if (op == ZNBD_UBLK_U_CMD_GET_DEV_INFO) {
    CHECK_EQ(len, sizeof f->info);
    struct znbd_ublksrv_ctrl_dev_info i = f->info;
    i.state = f->live_rounds ? ZNBD_UBLK_S_DEV_LIVE : ZNBD_UBLK_S_DEV_QUIESCED;
    if (f->live_rounds)
      f->live_rounds--;
    memcpy(addr, &i, sizeof i);
    return 0;
  }
  if (op == ZNBD_UBLK_U_CMD_GET_PARAMS) {
    struct znbd_ublk_params *out = addr;
    CHECK_EQ(len, sizeof f->params);
    CHECK_EQ(out->len, sizeof f->params); /* the kernel copies that much */
    memcpy(out, &f->params, sizeof f->params);
    return 0;
  }
  if (op == ZNBD_UBLK_U_CMD_START_USER_RECOVERY) {
    CHECK(addr == NULL && len == 0);
    if (f->busy) {
      f->busy--;
      return -EBUSY;
    }
    return 0;
  }
  return -EOPNOTSUPP;
}

/* A pid no process has (a child, reaped). */
static int32_t
dead_pid(void)
{
  pid_t pid = fork();
  if (pid == 0)
    _exit(0);
  CHECK(pid > 0);
  waitpid(pid, NULL, 0);
  return pid;
}

static void
fake_init(struct fake *f, const struct znbd_ublk_params *want)
{
  memset(f, 0, sizeof *f);
  f->info.nr_hw_queues = 2;
  f->info.queue_depth = 32;
  f->info.dev_id = 3;
  f->info.ublksrv_pid = dead_pid();
  f->info.flags = ZNBD_UBLK_F_USER_COPY | ZNBD_UBLK_F_ZONED |
                  ZNBD_UBLK_F_USER_RECOVERY | ZNBD_UBLK_F_USER_RECOVERY_REISSUE;
  f->params = *want;
  f->want = *want;
  f->params.types |= 1 << 2; /* UBLK_PARAM_TYPE_DEVT, as GET_PARAMS fills */
}

/* znbd_ublk_recover_begin() of device DEV_ID on F (3 tries) refuses
 * with errno E and a message holding WORD, after NOPS commands. */
static void
refused_as(struct fake *f, uint32_t dev_id, int e, const char *word,
           unsigned nops)
{
  struct znbd_ublksrv_ctrl_dev_info info;
  char err[256] = "";
  int r = znbd_ublk_recover_begin(fake_cmd, f, dev_id, &f->want, 3, 0, &info,
                                  err, sizeof err);
  CHECKF(r == -1 && errno == e && strstr(err, word),
         "expected a refusal (errno %d) naming '%s', got %d: %s", e, word, r,
         err);
  CHECKF(f->nops == nops, "%u commands, not %u", f->nops, nops);
}

/* Refused as not this device, or not recoverable: EINVAL after
 * GET_DEV_INFO and GET_PARAMS. */
static void
refused(struct fake *f, const char *word)
{
  refused_as(f, 3, EINVAL, word, 2);
  CHECK_EQ(f->ops[1], ZNBD_UBLK_U_CMD_GET_PARAMS);
}

static void
recover(void)
{
  struct znbd_params p;
  struct znbd_ublk_params want;
  struct znbd_ublksrv_ctrl_dev_info info;
  struct fake f;
  char err[256];
  static const char *const kv[] = {"size",          "64M", "zone_size", "4M",
                                   "zone_max_open", "4",   NULL};
  test_params(&p, kv);
  CHECK_EQ(znbd_ublk_setup_params(&p, 512 * KiB, &want, err, sizeof err), 0);

  /* LIVE twice (its server's death not yet seen), then QUIESCED; EBUSY
   * once (its /dev/ublkcN not yet released): the device's queues. */
  fake_init(&f, &want);
  f.live_rounds = 2;
  f.busy = 1;
  CHECKF(znbd_ublk_recover_begin(fake_cmd, &f, 3, &want, 10, 0, &info, err,
                                 sizeof err) == 0,
         "refused: %s", err);
  CHECK_EQ(info.nr_hw_queues, 2);
  CHECK_EQ(info.queue_depth, 32);
  CHECK_EQ(info.state, ZNBD_UBLK_S_DEV_QUIESCED);
  static const uint32_t seq[] = {
      ZNBD_UBLK_U_CMD_GET_DEV_INFO,        ZNBD_UBLK_U_CMD_GET_DEV_INFO,
      ZNBD_UBLK_U_CMD_GET_DEV_INFO,        ZNBD_UBLK_U_CMD_GET_PARAMS,
      ZNBD_UBLK_U_CMD_START_USER_RECOVERY, ZNBD_UBLK_U_CMD_START_USER_RECOVERY};
  CHECK_EQ(f.nops, 6);
  for (unsigned i = 0; i < 6; i++)
    CHECKF(f.ops[i] == seq[i], "command %u: %#x, not %#x", i, f.ops[i], seq[i]);

  /* Served by a live process (this one): EBUSY, nothing else asked. */
  fake_init(&f, &want);
  f.info.ublksrv_pid = getpid();
  f.live_rounds = 1;
  refused_as(&f, 3, EBUSY, "served by process", 1);
  /* LIVE longer than the wait: EBUSY, no START. */
  fake_init(&f, &want);
  f.live_rounds = 5;
  refused_as(&f, 3, EBUSY, "still LIVE", 3);
  /* EBUSY from START beyond the wait. */
  fake_init(&f, &want);
  f.busy = 5;
  refused_as(&f, 3, EBUSY, "START_USER_RECOVERY", 5);
  /* No such device. */
  fake_init(&f, &want);
  refused_as(&f, 4, ENODEV, "no ublk device 4", 1);

  /* Not this device, or not recoverable: EINVAL naming why, and no
   * START_USER_RECOVERY. */
  fake_init(&f, &want);
  f.info.flags &= ~ZNBD_UBLK_F_USER_RECOVERY;
  refused(&f, "without user recovery");
  fake_init(&f, &want);
  f.info.flags &= ~ZNBD_UBLK_F_ZONED;
  refused(&f, "is not zoned");
  fake_init(&f, &want);
  f.params.basic.dev_sectors *= 2;
  refused(&f, "has 262144 sectors, size= gives 131072");
  fake_init(&f, &want);
  f.params.basic.chunk_sectors /= 2;
  refused(&f, "zones of 4096 sectors");
  fake_init(&f, &want);
  f.params.zoned.max_open_zones = 0;
  refused(&f, "max open 0");
  fake_init(&f, &want);
  f.params.basic.attrs |= ZNBD_UBLK_ATTR_VOLATILE_CACHE;
  refused(&f, "attributes");
  fake_init(&f, &want);
  f.params.basic.logical_bs_shift = 12;
  refused(&f, "4096-byte blocks");
  fake_init(&f, &want);
  f.params.types = 0;
  refused(&f, "no parameters");
  znbd_params_free(&p);
}

/* A recovered server on a dir= device: an append the dead server did
 * (its intent noted in its tag's slot, never confirmed) is answered with
 * the same sector and takes no space again; a new append still appends. */
static void
recover_append(void)
{
  char dir[] = "/tmp/ublk_test.XXXXXX", err[256];
  struct znbd_dev *d;
  int kept;
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  static const char *kv[] = {"size", "32M", "zone_size", "4M",
                             "dir",  NULL,  NULL};
  kv[5] = dir;
  d = test_dev_kv(kv);
  CHECK_EQ(znbd_dev_redo_open(d, 8, false, err, sizeof err), 0);
  znbd_ublk_io_init(&h, d, bounce, sizeof bounce);
  for (unsigned i = 0; i < 64 * KiB; i++)
    req[i] = (uint8_t)(i * 31 + 7);
  struct znbd_ublksrv_io_desc iod = {ZNBD_UBLK_IO_OP_ZONE_APPEND, 128, 8192, 0};
  CHECK_EQ(znbd_ublk_io_exec(&h, &iod, 5, &copy, NULL, &done), 64 * KiB);
  CHECK_EQ(done.append_lba, 8192);
  znbd_dev_free(d); /* killed before the commit went in */

  d = test_dev_kv(kv);
  kept = znbd_dev_redo_open(d, 8, true, err, sizeof err);
  CHECK_EQ(kept, 1);
  znbd_ublk_io_init(&h, d, bounce, sizeof bounce);
  h.redo_writes = true;
  done.append_lba = 0;
  CHECK_EQ(znbd_ublk_io_exec(&h, &iod, 1, &copy, NULL, &done), 64 * KiB);
  CHECK_EQ(done.append_lba, 8192);
  CHECK_EQ(h.redone_appends, 1);
  CHECK_EQ(zone(1).wp, 8192 + 128);
  CHECK_EQ(znbd_dev_redo_kept(d), 0);
  /* The same bytes once more: a new append, at the wp. */
  CHECK_EQ(znbd_ublk_io_exec(&h, &iod, 1, &copy, NULL, &done), 64 * KiB);
  CHECK_EQ(done.append_lba, 8192 + 128);
  CHECK_EQ(zone(1).wp, 8192 + 256);
  CHECK_EQ(h.redone_appends, 1);
  znbd_dev_free(d);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

/* A dir= device: READ, WRITE, ZONE_APPEND and FLUSH leave their file
 * I/O to the runner (done here with pread, pwrite and fdatasync), and
 * finish with the result; a request meeting a held zone is to be tried
 * again; a failed file write fails the request and leaves the zone as
 * null_blk does. */
static struct znbd_ublk_async as;

/* The runner's part: the file I/O AS asks for, synchronously. */
static int
do_file_io(void)
{
  ssize_t n = 0;
  switch (as.kind) {
  case ZNBD_UBLK_ASYNC_WRITE:
    n = pwrite(as.w.io.fd, bounce, as.w.io.len, (off_t)as.w.io.at);
    return n == (ssize_t)as.w.io.len ? 0 : EIO;
  case ZNBD_UBLK_ASYNC_READ:
    n = pread(as.r.io.fd, bounce, as.r.io.len, (off_t)as.r.io.at);
    return n == (ssize_t)as.r.io.len ? 0 : EIO;
  case ZNBD_UBLK_ASYNC_FLUSH:
    for (unsigned i = 0; i < as.f.n; i++)
      if (fdatasync(as.f.fds[i]) < 0)
        return EIO;
    return 0;
  case ZNBD_UBLK_ASYNC_NONE:
    break;
  }
  return EINVAL;
}

static int32_t
run_async(uint32_t op_flags, uint64_t sector, uint32_t nr)
{
  struct znbd_ublksrv_io_desc iod = {op_flags, nr, sector, 0};
  return znbd_ublk_io_exec(&h, &iod, 0, &copy, &as, &done);
}

static void
async_dir(void)
{
  char dir[] = "/tmp/ublk_test.XXXXXX", cmd[64];
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  static const char *kv[] = {"size", "32M", "zone_size", "4M", "zone_nr_conv",
                             "1",    "dir", NULL,        NULL};
  kv[7] = dir;
  struct znbd_dev *d = test_dev_kv(kv);
  znbd_ublk_io_init(&h, d, bounce, sizeof bounce);

  for (unsigned i = 0; i < 64 * KiB; i++)
    req[i] = (uint8_t)(i * 11 + 3);
  uint8_t want[64 * KiB];
  memcpy(want, req, sizeof want);
  /* WRITE at zone 1's wp: the data in the buffer, the file I/O named. */
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_WRITE, 8192, 128), 0);
  CHECK_EQ(as.kind, ZNBD_UBLK_ASYNC_WRITE);
  CHECK(memcmp(bounce, want, sizeof want) == 0);
  CHECK_EQ(as.w.io.at, 0);
  /* The zone as the core has it (a report would use the buffer, which
   * holds the write's data: the runner gives each tag its own). */
  CHECK_EQ(test_zone(d, 1).wp, 4 * MiB); /* not moved yet */
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_IMP_OPEN);
  /* Zone 1 held: another write, a reset: try again later. */
  struct znbd_ublk_async held = as;
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_WRITE, 8192, 8), ZNBD_UBLK_RETRY);
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_ZONE_RESET, 8192, 0), ZNBD_UBLK_RETRY);
  as = held;
  CHECK_EQ(do_file_io(), 0);
  CHECK_EQ(znbd_ublk_io_finish(&h, &as, 0, &copy), 64 * KiB);
  CHECK_EQ(zone(1).wp, 8192 + 128);
  /* READ of 128 KiB: 64 KiB from the file, 64 KiB of zeros past the wp. */
  memset(req, 0xaa, 128 * KiB);
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_READ, 8192, 256), 0);
  CHECK_EQ(as.kind, ZNBD_UBLK_ASYNC_READ);
  CHECK_EQ(as.r.io.len, 64 * KiB);
  CHECK_EQ(as.r.fill_len[0], 64 * KiB);
  CHECK_EQ(do_file_io(), 0);
  CHECK_EQ(znbd_ublk_io_finish(&h, &as, 0, &copy), 128 * KiB);
  CHECK(memcmp(req, want, sizeof want) == 0);
  CHECK(req[64 * KiB] == 0 && req[128 * KiB - 1] == 0);
  /* ZONE_APPEND to zone 2: its sector at the begin. */
  memcpy(req, want, sizeof want);
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_ZONE_APPEND, 2 * 8192, 128), 0);
  CHECK_EQ(done.append_lba, 2 * 8192);
  CHECK_EQ(do_file_io(), 0);
  CHECK_EQ(znbd_ublk_io_finish(&h, &as, 0, &copy), 64 * KiB);
  CHECK_EQ(zone(2).wp, 2 * 8192 + 128);
  /* A file write that failed: EIO, the wp where it was, IMP_OPEN. */
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_WRITE, 2 * 8192 + 128, 8), 0);
  CHECK_EQ(znbd_ublk_io_finish(&h, &as, EIO, &copy), -EIO);
  CHECK_EQ(zone(2).wp, 2 * 8192 + 128);
  CHECK_EQ(zone(2).cond, BLK_ZONE_COND_IMP_OPEN);
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_WRITE, 2 * 8192 + 128, 8), 0);
  CHECK_EQ(znbd_ublk_io_finish(&h, &as, ENOSPC, &copy), -ENOSPC);
  /* FLUSH: the two zones' files. */
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_FLUSH, 0, 0), 0);
  CHECK_EQ(as.kind, ZNBD_UBLK_ASYNC_FLUSH);
  CHECK_EQ(as.f.n, 2);
  CHECK_EQ(do_file_io(), 0);
  CHECK_EQ(znbd_ublk_io_finish(&h, &as, 0, &copy), 0);
  CHECK_EQ(as.kind, ZNBD_UBLK_ASYNC_NONE);
  /* Refused before any I/O: off the wp. */
  CHECK_EQ(run_async(ZNBD_UBLK_IO_OP_WRITE, 3 * 8192 + 8, 8), -EIO);
  CHECK_EQ(as.kind, ZNBD_UBLK_ASYNC_NONE);
  znbd_dev_free(d);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int
main(void)
{
  zoned();
  plain();
  power_cut();
  setup();
  redo();
  recover();
  recover_append();
  async_dir();
  return check_done("ublk_test");
}
