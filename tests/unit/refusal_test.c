/* Every reason the core gives for a refusal (znbd/refusal.h), made to
 * happen through the request contract on a zoned RAM device, and what
 * each front-end answers for it: the errno, znbd-tcmu's SCSI sense
 * (znbd_scsi_refusal_sense()), the NBD error that znbd and the nbdkit
 * plugin send (znbd_dev_wire_errno(): NBD's error numbers are Linux's)
 * and znbd-ublk's result (znbd_ublk_errno_result()).  Zone rule
 * `zone-refusal`: each reason is the one the refusing rule names. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "io.h"
#include "scsi.h"
#include "testdev.h"
#include "znbd/refusal.h"
#include "znbd/request.h"

#define Z (64 * 1024) /* zone size; capacity 48K */

/* What each front-end answers for one reason. */
struct answer {
  int err;         /* errno */
  uint32_t sense;  /* key << 16 | ASC << 8 | ASCQ, for a write */
  uint32_t rsense; /* the same for a read (0: not walked with one) */
  int nbd;         /* NBD error */
  int32_t ublk;    /* znbd-ublk's result */
};

static const struct answer answers[ZNBD_REFUSAL_COUNT] = {
    [ZNBD_REFUSAL_UNALIGNED_WRITE] = {EIO, 0x052104, 0, EIO, -EIO},
    [ZNBD_REFUSAL_PAST_CAPACITY] = {EIO, 0x052109, 0, EIO, -EIO},
    [ZNBD_REFUSAL_WRITE_BOUNDARY] = {EIO, 0x052105, 0, EIO, -EIO},
    [ZNBD_REFUSAL_ZONE_FULL] = {EIO, 0x052400, 0, EIO, -EIO},
    [ZNBD_REFUSAL_ZONE_READONLY] = {EIO, 0x072708, 0, EIO, -EIO},
    [ZNBD_REFUSAL_ZONE_OFFLINE] = {EIO, 0x072c0e, 0x072c0e, EIO, -EIO},
    [ZNBD_REFUSAL_ZONE_OPEN_RESOURCE] = {ETOOMANYREFS, 0x07550e, 0, ENOSPC,
                                         -ETOOMANYREFS},
    [ZNBD_REFUSAL_ZONE_ACTIVE_RESOURCE] = {EOVERFLOW, 0x07550e, 0, ENOSPC,
                                           -EOVERFLOW},
    [ZNBD_REFUSAL_CONVENTIONAL_ZONE] = {EIO, 0x052400, 0, EIO, -EIO},
    [ZNBD_REFUSAL_ZONE_COND] = {EIO, 0x052400, 0, EIO, -EIO},
    [ZNBD_REFUSAL_BAD_BLOCK] = {EIO, 0x030c00, 0x031100, EIO, -EIO},
    [ZNBD_REFUSAL_FENCED] = {ESHUTDOWN, 0x020400, 0, ESHUTDOWN, -EIO},
    [ZNBD_REFUSAL_READ_MIXED_TYPES] = {EIO, 0, 0x052106, EIO, -EIO},
    [ZNBD_REFUSAL_READ_PAST_WP] = {EIO, 0, 0x031100, EIO, -EIO},
    [ZNBD_REFUSAL_OUT_OF_RANGE] = {EINVAL, 0x052100, 0x052100, EINVAL, -EINVAL},
};

static uint8_t buf[Z];
static unsigned walked; /* a bit per reason seen */

/* R, a contract call's result (a write or zone operation, or with READ a
 * read), was a refusal for WHY: check it and what every front-end
 * answers. */
static void
refused(int r, enum znbd_refusal why, bool read, int line)
{
  int err = errno;
  enum znbd_refusal got = znbd_req_refusal();
  const struct answer *a = &answers[why];
  CHECKF(r == -1, "line %d: %s: returned %d", line, znbd_refusal_name(why), r);
  CHECKF(got == why, "line %d: reason %s, expected %s", line,
         znbd_refusal_name(got), znbd_refusal_name(why));
  CHECKF(err == a->err && znbd_refusal_errno(why) == err,
         "line %d: %s: errno %d, expected %d", line, znbd_refusal_name(why),
         err, a->err);
  uint32_t sense = znbd_scsi_refusal_sense(got, err, !read);
  uint32_t want = read ? a->rsense : a->sense;
  CHECKF(want && sense == want, "line %d: %s: sense %06x, expected %06x", line,
         znbd_refusal_name(why), sense, want);
  int nbd = znbd_dev_wire_errno(err);
  CHECKF(nbd == a->nbd, "line %d: %s: NBD error %d, expected %d", line,
         znbd_refusal_name(why), nbd, a->nbd);
  int32_t ublk = znbd_ublk_errno_result(err);
  CHECKF(ublk == a->ublk, "line %d: %s: ublk %d, expected %d", line,
         znbd_refusal_name(why), ublk, a->ublk);
  walked |= 1u << why;
}
#define REFUSED(r, why) refused((r), (why), false, __LINE__)
#define REFUSED_READ(r, why) refused((r), (why), true, __LINE__)

static int
wr(const struct znbd_req_ctx *c, uint64_t off, uint64_t len, unsigned flags)
{
  return znbd_req_write(c, buf, len, off, ZNBD_WRITE_NOWAIT | flags, NULL,
                        NULL);
}

/* zone_read_past_wp=error: a read of bytes at or past the wp, none below
 * it. */
static void
past_wp_error(void)
{
  struct znbd_params p;
  const char *const kv[] = {"size",
                            "1M",
                            "zone_size",
                            "64K",
                            "zone_nr_conv",
                            "1",
                            "zone_read_past_wp",
                            "error",
                            NULL};
  test_params(&p, kv);
  struct znbd_dev *d = test_dev(&p);
  struct znbd_req_ctx c;
  znbd_req_ctx_init(&c, d);
  CHECK_EQ(wr(&c, 1 * Z, 8192, 0), 0);
  CHECK_EQ(znbd_req_read(&c, buf, 8192, 1 * Z, 0), 0);
  REFUSED_READ(znbd_req_read(&c, buf, 12288, 1 * Z, 0),
               ZNBD_REFUSAL_READ_PAST_WP);
  REFUSED_READ(znbd_req_read(&c, buf, 4096, 2 * Z, 0),
               ZNBD_REFUSAL_READ_PAST_WP);
  znbd_dev_free(d);
}

int
main(void)
{
  struct znbd_params p;
  const char *const kv[] = {"size",
                            "1M",
                            "zone_size",
                            "64K",
                            "zone_capacity",
                            "48K",
                            "zone_nr_conv",
                            "1",
                            "zone_max_open",
                            "1",
                            "zone_max_active",
                            "2",
                            "write_cache",
                            "true",
                            "pipeline_zoned_writes",
                            "false",
                            NULL};
  test_params(&p, kv);
  struct znbd_dev *d = test_dev(&p);
  struct znbd_req_ctx c;
  znbd_req_ctx_init(&c, d);
  char err[128];

  /* A call that passes leaves no reason. */
  CHECK_EQ(wr(&c, 0, 4096, 0), 0);
  CHECK_EQ(znbd_req_refusal(), ZNBD_REFUSAL_NONE);

  REFUSED(wr(&c, 1 * Z + 4096, 4096, 0), ZNBD_REFUSAL_UNALIGNED_WRITE);
  REFUSED(wr(&c, 1 * Z, 52 * 1024, 0), ZNBD_REFUSAL_PAST_CAPACITY);
  /* Conventional into sequential: one write for NBD, two for ZBC. */
  REFUSED(wr(&c, Z - 4096, 8192, ZNBD_WRITE_ONE_ZONE),
          ZNBD_REFUSAL_WRITE_BOUNDARY);
  CHECK_EQ(test_zone(d, 1).wp, 1 * Z);

  CHECK_EQ(znbd_req_zone_op(&c, ZNBD_ZONE_OP_FINISH, 2), 0);
  REFUSED(wr(&c, 2 * Z, 4096, 0), ZNBD_REFUSAL_ZONE_FULL);
  REFUSED(znbd_req_zone_op(&c, ZNBD_ZONE_OP_OPEN, 2), ZNBD_REFUSAL_ZONE_FULL);
  CHECK_EQ(znbd_req_zone_op(&c, ZNBD_ZONE_OP_SET_READONLY, 3), 0);
  REFUSED(wr(&c, 3 * Z, 4096, 0), ZNBD_REFUSAL_ZONE_READONLY);
  CHECK_EQ(znbd_req_zone_op(&c, ZNBD_ZONE_OP_SET_OFFLINE, 4), 0);
  REFUSED(wr(&c, 4 * Z, 4096, 0), ZNBD_REFUSAL_ZONE_OFFLINE);
  REFUSED(znbd_req_zone_op(&c, ZNBD_ZONE_OP_RESET, 4),
          ZNBD_REFUSAL_ZONE_OFFLINE);

  /* zone_max_open 1: one explicitly open zone, no victim for another. */
  CHECK_EQ(znbd_req_zone_op(&c, ZNBD_ZONE_OP_OPEN, 5), 0);
  REFUSED(znbd_req_zone_op(&c, ZNBD_ZONE_OP_OPEN, 6),
          ZNBD_REFUSAL_ZONE_OPEN_RESOURCE);
  /* zone_max_active 2: 5 CLOSED with data, 6 IMP_OPEN; 7 needs a third. */
  CHECK_EQ(wr(&c, 5 * Z, 4096, 0), 0);
  CHECK_EQ(znbd_req_zone_op(&c, ZNBD_ZONE_OP_CLOSE, 5), 0);
  CHECK_EQ(wr(&c, 6 * Z, 4096, 0), 0);
  REFUSED(wr(&c, 7 * Z, 4096, 0), ZNBD_REFUSAL_ZONE_ACTIVE_RESOURCE);

  REFUSED(znbd_req_zone_op(&c, ZNBD_ZONE_OP_OPEN, 0),
          ZNBD_REFUSAL_CONVENTIONAL_ZONE);
  REFUSED(znbd_req_zone_op(&c, ZNBD_ZONE_OP_CLOSE, 8), ZNBD_REFUSAL_ZONE_COND);

  CHECK(znbd_dev_badblocks_edit(d, "1160", true, err, sizeof err) == 0);
  REFUSED(wr(&c, 9 * Z, 8192, 0), ZNBD_REFUSAL_BAD_BLOCK);

  REFUSED(wr(&c, 16 * Z, 4096, 0), ZNBD_REFUSAL_OUT_OF_RANGE);

  /* Reads: refused in the core with the reason, never by a front-end. */
  REFUSED_READ(znbd_req_read(&c, buf, 4096, 4 * Z, 0),
               ZNBD_REFUSAL_ZONE_OFFLINE);
  /* Conventional into sequential: one read for NBD, none for ZBC. */
  REFUSED_READ(znbd_req_read(&c, buf, 8192, Z - 4096, ZNBD_READ_ONE_TYPE),
               ZNBD_REFUSAL_READ_MIXED_TYPES);
  CHECK_EQ(znbd_req_read(&c, buf, 8192, Z - 4096, 0), 0);
  CHECK_EQ(znbd_req_refusal(), ZNBD_REFUSAL_NONE);
  CHECK_EQ(znbd_req_read(&c, buf, 8192, 2 * Z, ZNBD_READ_ONE_TYPE), 0);
  REFUSED_READ(znbd_req_read(&c, buf, 8192, 9 * Z, 0), ZNBD_REFUSAL_BAD_BLOCK);
  REFUSED_READ(znbd_req_read(&c, NULL, 8192, 9 * Z, ZNBD_READ_CHECK),
               ZNBD_REFUSAL_BAD_BLOCK);
  REFUSED_READ(znbd_req_read(&c, buf, 4096, 16 * Z, 0),
               ZNBD_REFUSAL_OUT_OF_RANGE);
  REFUSED_READ(znbd_req_read(&c, buf, 4096, 4096 + 100, 0),
               ZNBD_REFUSAL_OUT_OF_RANGE);
  past_wp_error();

  CHECK_EQ(znbd_dev_power_cut(d, 0), 0);
  REFUSED(wr(&c, 0, 4096, 0), ZNBD_REFUSAL_FENCED);

  /* Every reason walked, each with a name of its own. */
  for (unsigned r = 1; r < ZNBD_REFUSAL_COUNT; r++) {
    CHECKF(walked & 1u << r, "reason %s not walked", znbd_refusal_name(r));
    CHECKF(strcmp(znbd_refusal_name(r), "UNKNOWN") != 0, "reason %u", r);
  }
  CHECK(strcmp(znbd_refusal_name(ZNBD_REFUSAL_COUNT), "UNKNOWN") == 0);

  znbd_dev_free(d);
  return check_done("refusal_test");
}
