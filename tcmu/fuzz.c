/* znbd-tcmu: libFuzzer harness over the SCSI/ZBC emulation (scsi.c), on
 * buffers, with invariants checked after every command beyond "no
 * crash": what an initiator could send through LIO (iSCSI included) is
 * any CDB with any data buffers, so
 *   - the status is GOOD or CHECK CONDITION, and CHECK CONDITION carries
 *     fixed-format sense (70h, additional length 0Ah, a sense key of
 *     this disk, an ASC) and no data;
 *   - no byte of the buffers past the data-in length is written, and the
 *     data-in length is at most the buffers' total;
 *   - the zones stay ones the zone rules allow (doc/zone-rules.md): each
 *     wp inside its zone, EMPTY at the start, CLOSED past it, open and
 *     active zones within zone_max_open/zone_max_active;
 *   - REPORT ZONES agrees with the device's own zone table
 *     (znbd_dev_report()), descriptor by descriptor, gap zones included.
 * A violation aborts, which libFuzzer reports as a crash.
 *
 * Input layout:
 *   byte 0   the device: bits 0-1: 0 a plain RAM disk, 1 zoned (16 zones
 *            of 64 KiB), 2 zoned with 2 conventional zones, zone_max_open
 *            2 and zone_max_active 3, 3 zoned with zone_capacity 48 KiB
 *            (gap zones); bit 2: 4096-byte blocks; bit 3: write_cache;
 *            bit 4: bad sectors 300-301.
 *   then commands, each: a byte L (the CDB length, L % 17), L CDB bytes,
 *   a byte N (N % 4 data buffers), N little-endian 16-bit buffer lengths
 *   (each % 20480).  Data-out bytes are a pattern of the offset.
 * Build and run: make -C tcmu fuzz (clang, -fsanitize=fuzzer). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scsi.h"

#define FILL 0xa5

static struct znbd_dev *
make_dev(unsigned g, struct znbd_params *p)
{
  char err[256];
  znbd_params_init(p);
  znbd_params_set(p, "size", "1M", err, sizeof err);
  znbd_params_set(p, "zoned", (g & 3) ? "true" : "false", err, sizeof err);
  znbd_params_set(p, "blocksize", (g & 4) ? "4096" : "512", err, sizeof err);
  znbd_params_set(p, "write_cache", (g & 8) ? "true" : "false", err,
                  sizeof err);
  if (g & 16)
    znbd_params_set(p, "badblocks", "300-301", err, sizeof err);
  if (g & 3) {
    znbd_params_set(p, "zone_size", "64k", err, sizeof err);
    znbd_params_set(p, "pipeline_zoned_writes", "false", err, sizeof err);
  }
  if ((g & 3) == 2) {
    znbd_params_set(p, "zone_nr_conv", "2", err, sizeof err);
    znbd_params_set(p, "zone_max_open", "2", err, sizeof err);
    znbd_params_set(p, "zone_max_active", "3", err, sizeof err);
  }
  if ((g & 3) == 3)
    znbd_params_set(p, "zone_capacity", "48k", err, sizeof err);
  if (znbd_params_finish(p, err, sizeof err) == -1 ||
      znbd_scsi_check_params(p, err, sizeof err) == -1) {
    fprintf(stderr, "fuzz-scsi: device %#x: %s\n", g, err);
    abort();
  }
  struct znbd_dev *d = znbd_dev_new(p, err, sizeof err);
  if (!d) {
    fprintf(stderr, "fuzz-scsi: device %#x: %s\n", g, err);
    abort();
  }
  return d;
}

#define REQUIRE(cond, ...)                                                     \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "fuzz-scsi: invariant broken: " __VA_ARGS__);            \
      fputc('\n', stderr);                                                     \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#define be znbd_scsi_be

/* Status, sense and data-in of command C against its buffers. */
static void
check_reply(const struct znbd_scsi_cmd *c, int st, uint8_t *const bufs[],
            const size_t lens[], size_t n)
{
  REQUIRE(st == ZNBD_SCSI_GOOD || st == ZNBD_SCSI_CHECK_CONDITION, "status %d",
          st);
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += lens[i];
  REQUIRE(c->read_len <= total, "read_len %u > buffers %zu", c->read_len,
          total);
  if (st == ZNBD_SCSI_CHECK_CONDITION) {
    const uint8_t *s = c->sense;
    unsigned key = s[2] & 0x0f;
    REQUIRE(s[0] == 0x70 && s[7] == 0x0a, "sense not fixed format");
    REQUIRE(key == 0x2 || key == 0x3 || key == 0x5 || key == 0x7,
            "sense key %x", key);
    REQUIRE(s[12] != 0, "sense without an ASC");
    REQUIRE(c->read_len == 0, "data with CHECK CONDITION");
  }
  /* Nothing past the data-in length was written; a failed read may
   * have filled its transfer's buffers before it met the bad sector
   * (SPC: data-in is undefined with CHECK CONDITION). */
  if (st == ZNBD_SCSI_CHECK_CONDITION && c->cdb_len &&
      (c->cdb[0] == 0x28 || c->cdb[0] == 0xa8 || c->cdb[0] == 0x88))
    return;
  size_t pos = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < lens[i]; k++, pos++)
      if (pos >= c->read_len)
        REQUIRE(bufs[i][k] == (uint8_t)(FILL ^ pos),
                "buffer byte %zu written past read_len %u", pos, c->read_len);
}

/* The zone rules' invariants over the device's zone table, and the SCSI
 * REPORT ZONES view of it, descriptor by descriptor. */
static void
check_zones(struct znbd_scsi *s, const struct znbd_params *p)
{
  uint32_t nr = znbd_dev_nr_zones(s->dev);
  if (!nr)
    return;
  uint64_t bs = p->blocksize;
  static uint8_t rep[64 + 64 * 64];
  uint8_t cdb[16] = {0x95, 0};
  cdb[12] = sizeof rep >> 8;
  cdb[13] = sizeof rep & 0xff;
  struct iovec iov = {rep, sizeof rep};
  struct znbd_scsi_cmd c = {
      .cdb = cdb, .cdb_len = sizeof cdb, .iov = &iov, .iovcnt = 1};
  int st = znbd_scsi_exec(s, &c);
  /* After a power cut every command fails NOT READY: nothing to compare. */
  if (st == ZNBD_SCSI_CHECK_CONDITION && c.sense[2] == 0x02)
    return;
  REQUIRE(st == ZNBD_SCSI_GOOD, "REPORT ZONES failed: %02x/%02x/%02x",
          c.sense[2], c.sense[12], c.sense[13]);
  uint32_t open = 0, active = 0, d = 0;
  for (uint32_t i = 0; i < nr; i++) {
    struct znbd_zone_info z;
    REQUIRE(znbd_dev_report(s->dev, i, 1, &z) == 1, "zone %u: no report", i);
    bool conv = z.type == ZNBD_ZONE_TYPE_CONVENTIONAL;
    uint64_t cap_end = z.start + (conv ? z.len : z.capacity);
    switch (z.cond) {
    case ZNBD_ZONE_COND_NOT_WP:
      REQUIRE(conv, "zone %u: sequential, NOT WP", i);
      break;
    case ZNBD_ZONE_COND_EMPTY:
      REQUIRE(!conv && z.wp == z.start, "zone %u: EMPTY, wp %#llx", i,
              (unsigned long long)z.wp);
      break;
    case ZNBD_ZONE_COND_IMP_OPEN:
    case ZNBD_ZONE_COND_EXP_OPEN:
      open++;
      active++;
      REQUIRE(!conv && z.wp >= z.start && z.wp < cap_end,
              "zone %u: open, wp %#llx", i, (unsigned long long)z.wp);
      break;
    case ZNBD_ZONE_COND_CLOSED:
      active++;
      REQUIRE(!conv && z.wp > z.start && z.wp < cap_end,
              "zone %u: CLOSED, wp %#llx", i, (unsigned long long)z.wp);
      break;
    case ZNBD_ZONE_COND_FULL:
      /* At the capacity when written full, at the zone's end when
       * finished (null_blk's null_finish_zone()). */
      REQUIRE(!conv && (z.wp == cap_end || z.wp == z.start + z.len ||
                        z.wp == ZNBD_WP_INVALID),
              "zone %u: FULL, wp %#llx", i, (unsigned long long)z.wp);
      break;
    case ZNBD_ZONE_COND_READONLY:
    case ZNBD_ZONE_COND_OFFLINE:
      break;
    default:
      REQUIRE(0, "zone %u: condition %#x", i, z.cond);
    }
    /* Its descriptor, and its gap zone's. */
    REQUIRE(d < 64, "more descriptors than the buffer holds");
    const uint8_t *q = rep + 64 + 64 * d++;
    uint64_t wp =
        conv || z.wp == ZNBD_WP_INVALID || z.wp > cap_end ? cap_end : z.wp;
    REQUIRE((q[0] & 0x0f) == (conv ? 1 : 2) && q[1] >> 4 == z.cond &&
                be(q + 8, 8) == (cap_end - z.start) / bs &&
                be(q + 16, 8) == z.start / bs && be(q + 24, 8) == wp / bs,
            "zone %u: descriptor differs from the zone table", i);
    if (!conv && z.capacity < z.len) {
      REQUIRE(d < 64, "more descriptors than the buffer holds");
      q = rep + 64 + 64 * d++;
      REQUIRE((q[0] & 0x0f) == 5 && be(q + 16, 8) == cap_end / bs &&
                  be(q + 8, 8) == (z.len - z.capacity) / bs,
              "zone %u: gap descriptor wrong", i);
    }
  }
  REQUIRE(be(rep, 4) == d * 64ull, "zone list length %llu, %u descriptors",
          (unsigned long long)be(rep, 4), d);
  REQUIRE(!p->zone_max_open || open <= p->zone_max_open, "%u open zones", open);
  REQUIRE(!p->zone_max_active || active <= p->zone_max_active,
          "%u active zones", active);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  struct znbd_params p;
  struct znbd_scsi s;
  znbd_scsi_init(&s, make_dev(data[0], &p), "fuzz0");
  size_t pos = 1;
  while (pos < size) {
    size_t len = data[pos++] % 17;
    if (size - pos < len + 1)
      break;
    /* The CDB in a block of its own exact length: reading past it is
     * reported by ASan. */
    uint8_t *cdb = malloc(len ? len : 1);
    memcpy(cdb, data + pos, len);
    pos += len;
    size_t n = data[pos++] % 4;
    uint8_t *bufs[3] = {NULL, NULL, NULL};
    size_t lens[3] = {0, 0, 0};
    struct iovec iov[3];
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
      if (size - pos >= 2) {
        lens[i] = (data[pos] | data[pos + 1] << 8) % 20480;
        pos += 2;
      }
      bufs[i] = malloc(lens[i] ? lens[i] : 1);
      for (size_t k = 0; k < lens[i]; k++, off++)
        bufs[i][k] = (uint8_t)(FILL ^ off);
      iov[i] = (struct iovec){bufs[i], lens[i]};
    }
    struct znbd_scsi_cmd c = {
        .cdb = cdb, .cdb_len = len, .iov = iov, .iovcnt = n};
    int st = znbd_scsi_exec(&s, &c);
    check_reply(&c, st, bufs, lens, n);
    check_zones(&s, &p);
    for (size_t i = 0; i < n; i++)
      free(bufs[i]);
    free(cdb);
  }
  znbd_dev_free(s.dev);
  znbd_params_free(&p);
  return 0;
}
