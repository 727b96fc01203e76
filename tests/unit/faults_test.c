/* Unit test of the injected faults through include/znbd/dev.h: the
 * bad-block list (parsing, merging, splitting, all-or-nothing edits),
 * EIO exactly on the listed 512-byte sectors, badblocks_once,
 * badblocks_partial_io on a RAM disk and on a sequential zone (the wp
 * moves to the bad block), the drop-reply interval and its counter, and
 * the mbps delay's arithmetic. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/dev.h"
#include "check.h"
#include "testdev.h"
#include "dev_unfenced.h"

static const char *
list(struct znbd_dev *d)
{
  static char buf[256];
  znbd_dev_badblocks_list(d, buf, sizeof buf);
  return buf;
}

static void
test_list(void)
{
  const char *const kv[] = {"size", "1M", "zoned", "false", NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  char err[256];
  CHECK(d != NULL);
  if (!d)
    return;
  CHECK_EQ(strcmp(list(d), ""), 0);
  CHECK_EQ(znbd_dev_badblocks_edit(d, "10-19,30", true, err, sizeof err), 0);
  CHECK_EQ(strcmp(list(d), "10-19,30"), 0);
  /* Adjacent and overlapping ranges merge. */
  CHECK_EQ(znbd_dev_badblocks_edit(d, "20-29,5-12", true, err, sizeof err), 0);
  CHECK_EQ(strcmp(list(d), "5-30"), 0);
  /* del splits. */
  CHECK_EQ(znbd_dev_badblocks_edit(d, "8-9,30", false, err, sizeof err), 0);
  CHECK_EQ(strcmp(list(d), "5-7,10-29"), 0);
  /* Refused edits change nothing: past the end (2048 sectors), reversed,
   * empty, malformed. */
  const char *bad[] = {"2048", "7,2048", "9-8", "", ",", "1,,2", "x", "3-"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    errno = 0;
    CHECK_EQ(znbd_dev_badblocks_edit(d, bad[i], true, err, sizeof err), -1);
    CHECK_EQ(errno, EINVAL);
  }
  CHECK_EQ(strcmp(list(d), "5-7,10-29"), 0);
  CHECK_EQ(znbd_dev_badblocks_edit(d, "2047", true, err, sizeof err), 0);
  CHECK_EQ(znbd_dev_badblocks_edit(d, "0-2047", false, err, sizeof err), 0);
  CHECK_EQ(strcmp(list(d), ""), 0);
  znbd_dev_free(d);
}

static void
test_io(void)
{
  const char *const kv[] = {"size",           "1M",        "zoned",
                            "false",          "badblocks", "8,17",
                            "badblocks_once", "false",     NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  uint8_t buf[4096];
  struct znbd_dev_stats st;
  CHECK(d != NULL);
  if (!d)
    return;
  memset(buf, 7, sizeof buf);
  int fails = 0;
  for (uint64_t s = 0; s < 64; s++) {
    int r = znbd_dev_read(d, buf, 512, s * 512, 0);
    int w = znbd_dev_write(d, buf, 512, s * 512, 0);
    bool bad = s == 8 || s == 17;
    CHECK_EQ(r, bad ? -1 : 0);
    CHECK_EQ(w, bad ? -1 : 0);
    fails += (r < 0) + (w < 0);
  }
  CHECK_EQ(fails, 4);
  errno = 0;
  CHECK_EQ(znbd_dev_write(d, NULL, 4096, 4096, 0), -1); /* zeroes: 8 */
  CHECK_EQ(errno, EIO);
  CHECK_EQ(znbd_dev_trim(d, 4096, 4096), 0); /* TRIM is not checked */
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.badblock_errors, 5);
  znbd_dev_free(d);
}

static void
test_once_and_partial(void)
{
  const char *const once[] = {"size",           "1M",        "zoned",
                              "false",          "badblocks", "16-23",
                              "badblocks_once", "true",      NULL};
  struct znbd_dev *d = test_dev_kv(once);
  uint8_t buf[8192], got[8192];
  CHECK(d != NULL);
  if (!d)
    return;
  memset(buf, 9, sizeof buf);
  CHECK_EQ(znbd_dev_write(d, buf, 8192, 4096, 0), -1);
  CHECK_EQ(strcmp(list(d), ""), 0); /* the whole range cleared */
  CHECK_EQ(znbd_dev_write(d, buf, 8192, 4096, 0), 0);
  znbd_dev_free(d);

  /* Partial I/O on a RAM disk: 4 sectors before the bad one are written. */
  const char *const part[] = {
      "size", "1M", "zoned", "false", "badblocks", "12", "badblocks_partial_io",
      "true", NULL};
  d = test_dev_kv(part);
  CHECK(d != NULL);
  if (!d)
    return;
  CHECK_EQ(znbd_dev_write(d, buf, 8192, 4096, 0), -1);
  CHECK_EQ(errno, EIO);
  CHECK_EQ(znbd_dev_badblocks_edit(d, "12", false, NULL, 0), 0);
  CHECK_EQ(znbd_dev_read(d, got, 8192, 4096, 0), 0);
  CHECK(got[0] == 9 && got[2047] == 9 && got[2048] == 0 && got[8191] == 0);
  znbd_dev_free(d);

  /* On a sequential zone with 4096-byte blocks: the bad sector 2058 lies
   * in the block at 2056, so the wp stops there (null_handle_badblocks
   * rounds down). */
  const char *const zkv[] = {"size",      "4M",        "zone_size",
                             "1M",        "blocksize", "4096",
                             "badblocks", "2058",      "badblocks_partial_io",
                             "true",      NULL};
  d = test_dev_kv(zkv);
  CHECK(d != NULL);
  if (!d)
    return;
  struct znbd_zone_info z;
  CHECK_EQ(znbd_dev_write(d, buf, 8192, 1 << 20, 0), -1);
  znbd_dev_report(d, 1, 1, &z);
  CHECK_EQ(z.wp, (1 << 20) + 4096);
  CHECK_EQ(z.cond, ZNBD_ZONE_COND_IMP_OPEN);
  /* A bad block at the wp: nothing before it to write, nothing changes. */
  CHECK_EQ(znbd_dev_badblocks_edit(d, "4096", true, NULL, 0), 0);
  const struct znbd_params *p = znbd_dev_params(d);
  CHECK(p->badblocks_partial_io);
  CHECK_EQ(znbd_dev_write(d, buf, 4096, 2 << 20, 0), -1); /* 0 bytes good */
  znbd_dev_report(d, 2, 1, &z);
  CHECK_EQ(z.wp, 2 << 20);
  CHECK_EQ(z.cond, ZNBD_ZONE_COND_EMPTY);
  /* An append over a bad block writes nothing. */
  uint64_t at = 0;
  CHECK_EQ(znbd_dev_append(d, buf, 4096, 2 << 20, &at), -1);
  znbd_dev_report(d, 2, 1, &z);
  CHECK_EQ(z.wp, 2 << 20);
  znbd_dev_free(d);
}

static void
test_drop_and_delay(void)
{
  const char *const kv[] = {"size", "1M", "zoned", "false", "mbps", "1", NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  struct znbd_dev_stats st;
  uint32_t every;
  unsigned kinds;
  CHECK(d != NULL);
  if (!d)
    return;
  CHECK(!znbd_dev_drop_reply(d, ZNBD_IO_READ)); /* off */
  znbd_dev_drop_reply_set(d, 3, ZNBD_IO_WRITE | ZNBD_IO_FLUSH);
  znbd_dev_drop_reply_get(d, &every, &kinds);
  CHECK_EQ(every, 3);
  CHECK_EQ(kinds, ZNBD_IO_WRITE | ZNBD_IO_FLUSH);
  int pattern = 0;
  for (int i = 0; i < 6; i++) {
    CHECK(!znbd_dev_drop_reply(d, ZNBD_IO_READ)); /* not selected */
    pattern = pattern << 1 | znbd_dev_drop_reply(d, ZNBD_IO_WRITE);
  }
  CHECK_EQ(pattern, 0x9); /* 001001: the 3rd and 6th */
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.dropped_replies, 2);
  znbd_dev_drop_reply_set(d, 0, 0);
  CHECK(!znbd_dev_drop_reply(d, ZNBD_IO_WRITE));

  /* mbps=1: 1 MiB takes a second on the link; the second request waits
   * behind the first.  Bounds are loose: the clock runs between the calls
   * (the first is exact: the link was free). */
  uint64_t a = znbd_dev_delay_nsec(d, ZNBD_IO_WRITE, 1 << 20);
  uint64_t b = znbd_dev_delay_nsec(d, ZNBD_IO_READ, 1 << 19);
  CHECK_EQ(a, 1000000000ull);
  CHECK(b > 1000000000ull && b <= 1500000000ull);
  CHECK_EQ(znbd_dev_delay_nsec(d, ZNBD_IO_FLUSH, 0), 0);
  znbd_dev_free(d);
}

/* znbd_dev_request_delay(), the one sum every front-end waits:
 * completion_nsec always; a zone operation's own latency for
 * ZNBD_IO_ZONE_MGMT (OP read for it only); zone_reset_nsec for a TRIM of
 * a zoned device; the mbps bucket for READ/WRITE (not asked here: 0). */
static void
test_request_delay(void)
{
  static const char *const kv[] = {"size",
                                   "8M",
                                   "zone_size",
                                   "1M",
                                   "completion_nsec",
                                   "1000",
                                   "zone_open_nsec",
                                   "7000",
                                   "zone_close_nsec",
                                   "300",
                                   "zone_finish_nsec",
                                   "40",
                                   "zone_reset_nsec",
                                   "50000",
                                   NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_READ, 4096, 0), 1000);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_WRITE, 4096, 0), 1000);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_FLUSH, 0, 0), 1000);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_OTHER, 0, 0), 1000);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_TRIM, 1 << 20, 0), 51000);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_ZONE_MGMT, 0, ZNBD_ZONE_OP_OPEN),
           8000);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_ZONE_MGMT, 0, ZNBD_ZONE_OP_CLOSE),
           1300);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_ZONE_MGMT, 0, ZNBD_ZONE_OP_FINISH),
           1040);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_ZONE_MGMT, 0, ZNBD_ZONE_OP_RESET),
           51000);
  CHECK_EQ(
      znbd_dev_request_delay(d, ZNBD_IO_ZONE_MGMT, 0, ZNBD_ZONE_OP_SET_OFFLINE),
      1000);
  /* Every delay handed out is counted, for `stats`: the ten above. */
  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.delayed_requests, 10);
  CHECK_EQ(st.delay_nsec, 1000 * 4 + 51000 + 8000 + 1300 + 1040 + 51000 + 1000);
  znbd_dev_free(d);

  /* Not zoned: a TRIM frees pages, it resets nothing. */
  static const char *const plain[] = {"size",
                                      "8M",
                                      "zoned",
                                      "false",
                                      "completion_nsec",
                                      "1000",
                                      "zone_reset_nsec",
                                      "50000",
                                      NULL};
  d = test_dev_kv(plain);
  CHECK_EQ(znbd_dev_request_delay(d, ZNBD_IO_TRIM, 1 << 20, 0), 1000);
  znbd_dev_free(d);
}

int
main(void)
{
  test_list();
  test_io();
  test_once_and_partial();
  test_drop_and_delay();
  test_request_delay();
  return check_done("faults_test");
}
