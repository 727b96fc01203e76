/* Data moved in place between a front-end and the store (znbd/dev.h).
 * Writes from a source (ZNBD_WRITE_SOURCE): on a zoned RAM device the
 * data is filled in place once the zone rules took the write, never for
 * a refused one; a failed fill fails the write with its errno and moves
 * no wp; without NOWAIT the flag is refused; a plain RAM disk and a dir=
 * store (through the bounce buffer) take the same writes;
 * badblocks_partial_io fills only the part before the bad block.  Reads
 * into a sink (ZNBD_READ_SINK): RAM's written bytes drained from the
 * store in place, zeros past the wp and dir='s bytes through the bounce
 * buffer, every byte where it belongs, a failed drain's errno. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testdev.h"
#include "znbd/dev.h"
#include "dev_unfenced.h"

#define KiB 1024u

/* The source: LEN bytes of PATTERN; counts its calls and what they
 * asked for; fails with FAIL (an errno) when set. */
struct src {
  uint8_t pattern;
  int calls;
  uint64_t asked;
  int fail;
};

static int
fill(void *opaque, void *dst, uint64_t len)
{
  struct src *s = opaque;
  s->calls++;
  s->asked = len;
  if (s->fail) {
    memset(dst, 0xee, len / 2); /* a copy that broke half way */
    errno = s->fail;
    return -1;
  }
  memset(dst, s->pattern, len);
  return 0;
}

static uint8_t bounce[256 * KiB];

static int
write_src(struct znbd_dev *d, struct src *s, uint64_t len, uint64_t off,
          unsigned flags)
{
  struct znbd_write_source ws = {fill, s, bounce};
  return znbd_dev_write(d, &ws, len, off, ZNBD_WRITE_SOURCE | flags);
}

/* Whether LEN bytes at OFF of D read as BYTE. */
static bool
reads_as(struct znbd_dev *d, uint64_t len, uint64_t off, uint8_t byte)
{
  static uint8_t buf[256 * KiB];
  if (len > sizeof buf || znbd_dev_read(d, buf, len, off, 0) < 0)
    return false;
  for (uint64_t i = 0; i < len; i++)
    if (buf[i] != byte)
      return false;
  return true;
}

/* 4 zones of 64 KiB, the first conventional; in RAM (DIR NULL), or in
 * DIR. */
static struct znbd_dev *
zoned_dev(const char *dir)
{
  const char *const kv[] = {"size",
                            "256K",
                            "zone_size",
                            "64K",
                            "zone_nr_conv",
                            "1",
                            dir ? "dir" : NULL,
                            dir,
                            NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  return d;
}

/* Writes from a source on zoned_dev(DIR). */
static void
zoned(const char *what, const char *dir)
{
  struct znbd_dev *d = zoned_dev(dir);
  struct src s = {.pattern = 0x5a};
  printf("%s\n", what);

  /* At the wp of zone 1: filled once, whole, reads back, wp moves. */
  CHECK_EQ(write_src(d, &s, 8 * KiB, 64 * KiB, ZNBD_WRITE_NOWAIT), 0);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(s.asked, 8 * KiB);
  CHECK(reads_as(d, 8 * KiB, 64 * KiB, 0x5a));
  CHECK_EQ(test_wp(d, 1), 72 * KiB);

  /* Off the wp: refused by the rules (below it EIO, ahead of it EAGAIN
   * with NOWAIT), no fill, nothing changed. */
  s.calls = 0;
  s.pattern = 0x11;
  for (int i = 0; i < 2; i++) {
    uint64_t at = i ? 80 * KiB : 68 * KiB;
    errno = 0;
    CHECK_EQ(write_src(d, &s, 4 * KiB, at, ZNBD_WRITE_NOWAIT), -1);
    CHECK_EQ(errno, i ? EAGAIN : EIO);
  }
  CHECK_EQ(s.calls, 0);
  CHECK_EQ(test_wp(d, 1), 72 * KiB);
  CHECK(reads_as(d, 8 * KiB, 64 * KiB, 0x5a));

  /* A failed fill: its errno, the wp where it was, nothing readable. */
  s.fail = EFAULT;
  errno = 0;
  CHECK_EQ(write_src(d, &s, 4 * KiB, 72 * KiB, ZNBD_WRITE_NOWAIT), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(test_wp(d, 1), 72 * KiB);
  CHECK(reads_as(d, 8 * KiB, 64 * KiB, 0x5a));
  CHECK(reads_as(d, 4 * KiB, 72 * KiB, 0)); /* past the wp: zeros */

  /* ... and the next write at the wp goes in. */
  s.fail = 0;
  s.pattern = 0x22;
  CHECK_EQ(
      write_src(d, &s, 4 * KiB, 72 * KiB, ZNBD_WRITE_NOWAIT | ZNBD_WRITE_FUA),
      0);
  CHECK(reads_as(d, 4 * KiB, 72 * KiB, 0x22));
  CHECK_EQ(test_wp(d, 1), 76 * KiB);

  /* A conventional zone, anywhere in it. */
  s.pattern = 0x33;
  CHECK_EQ(write_src(d, &s, 4 * KiB, 12 * KiB, ZNBD_WRITE_NOWAIT), 0);
  CHECK(reads_as(d, 4 * KiB, 12 * KiB, 0x33));
  CHECK(reads_as(d, 4 * KiB, 8 * KiB, 0));

  /* Without NOWAIT (a parked write would outlive the source): EINVAL,
   * no fill. */
  s.calls = 0;
  errno = 0;
  CHECK_EQ(write_src(d, &s, 4 * KiB, 76 * KiB, 0), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(s.calls, 0);
  CHECK_EQ(test_wp(d, 1), 76 * KiB);
  znbd_dev_free(d);
}

/* zoned=false RAM: in place, and a failed fill reports its errno. */
static void
plain(void)
{
  static const char *const kv[] = {"size", "256K", "zoned", "false", NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  struct src s = {.pattern = 0x44};
  printf("plain RAM disk\n");
  CHECK_EQ(write_src(d, &s, 12 * KiB, 100 * KiB, ZNBD_WRITE_NOWAIT), 0);
  CHECK_EQ(s.asked, 12 * KiB);
  CHECK(reads_as(d, 12 * KiB, 100 * KiB, 0x44));
  s.fail = ENOMEM;
  errno = 0;
  CHECK_EQ(write_src(d, &s, 4 * KiB, 0, ZNBD_WRITE_NOWAIT), -1);
  CHECK_EQ(errno, ENOMEM);
  znbd_dev_free(d);
}

/* badblocks_partial_io: the blocks before the bad one are filled and
 * written as a write of their own, then EIO (null_handle_badblocks()). */
static void
partial(void)
{
  static const char *const kv[] = {
      "size",      "256K", "zone_size", "64K",   "zone_nr_conv",         "0",
      "blocksize", "4096", "badblocks", "16-23", "badblocks_partial_io", "true",
      NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  struct src s = {.pattern = 0x66};
  printf("badblocks_partial_io\n");
  errno = 0;
  CHECK_EQ(write_src(d, &s, 16 * KiB, 0, ZNBD_WRITE_NOWAIT), -1);
  CHECK_EQ(errno, EIO);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(s.asked, 8 * KiB); /* sectors 0-15 */
  CHECK_EQ(test_wp(d, 0), 8 * KiB);
  CHECK(reads_as(d, 8 * KiB, 0, 0x66));
  znbd_dev_free(d);
}

/* The sink: the bytes drained into OUT at their place; the calls, how
 * many came from the bounce buffer; FAIL: an errno to fail with. */
struct sink {
  uint8_t out[256 * KiB];
  int calls, bounced, fail;
};

static int
drain(void *opaque, const void *src, uint64_t len, uint64_t at)
{
  struct sink *k = opaque;
  const uint8_t *p = src;
  k->calls++;
  if (p >= bounce && p < bounce + sizeof bounce)
    k->bounced++;
  if (k->fail) {
    errno = k->fail;
    return -1;
  }
  memcpy(k->out + at, p, len);
  return 0;
}

static int
read_sink(struct znbd_dev *d, struct sink *k, uint64_t len, uint64_t off)
{
  struct znbd_read_sink s = {drain, k, bounce};
  memset(k->out, 0xcc, sizeof k->out);
  k->calls = k->bounced = 0;
  memset(bounce, 0xdd, sizeof bounce);
  return znbd_dev_read(d, &s, len, off, ZNBD_READ_SINK);
}

/* Whether LEN bytes of K->out from AT are BYTE. */
static bool
drained_as(const struct sink *k, uint64_t len, uint64_t at, uint8_t byte)
{
  for (uint64_t i = 0; i < len; i++)
    if (k->out[at + i] != byte)
      return false;
  return true;
}

/* Reads into a sink on zoned_dev(DIR). */
static void
sinks(const char *what, const char *dir)
{
  struct znbd_dev *d = zoned_dev(dir);
  static struct sink k;
  uint8_t data[8 * KiB];
  printf("%s\n", what);
  memset(data, 0x77, sizeof data);
  CHECK_EQ(znbd_dev_write(d, data, sizeof data, 64 * KiB, 0), 0);
  CHECK_EQ(znbd_dev_write(d, data, sizeof data, 8 * KiB, 0), 0);

  /* Zone 1: 8 KiB written, then 8 KiB past the wp. */
  CHECK_EQ(read_sink(d, &k, 16 * KiB, 64 * KiB), 0);
  CHECK(drained_as(&k, 8 * KiB, 0, 0x77));
  CHECK(drained_as(&k, 8 * KiB, 8 * KiB, 0));
  CHECK(drained_as(&k, 4 * KiB, 16 * KiB, 0xcc)); /* nothing beyond */
  CHECK_EQ(k.calls, 2);
  CHECK_EQ(k.bounced, dir ? 2 : 1); /* RAM's data in place */

  /* The conventional zone: never-written, written, never-written. */
  CHECK_EQ(read_sink(d, &k, 24 * KiB, 4 * KiB), 0);
  CHECK(drained_as(&k, 4 * KiB, 0, 0));
  CHECK(drained_as(&k, 8 * KiB, 4 * KiB, 0x77));
  CHECK(drained_as(&k, 12 * KiB, 12 * KiB, 0));
  CHECK(k.calls >= 1);

  /* A failed drain: its errno. */
  k.fail = EFAULT;
  errno = 0;
  CHECK_EQ(read_sink(d, &k, 16 * KiB, 64 * KiB), -1);
  CHECK_EQ(errno, EFAULT);
  CHECK_EQ(k.calls, 1);
  k.fail = 0;

  /* Past the end: EINVAL, nothing drained. */
  errno = 0;
  CHECK_EQ(read_sink(d, &k, 8 * KiB, 252 * KiB), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(k.calls, 0);
  znbd_dev_free(d);
}

int
main(void)
{
  char base[] = "/tmp/znbd-source-test.XXXXXX";
  char dir[sizeof base + 8], cmd[64];
  zoned("zoned RAM", NULL);
  sinks("reads into a sink, RAM", NULL);
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  /* A directory each: a dir= device keeps its zones. */
  snprintf(dir, sizeof dir, "%s/w", base);
  zoned("zoned dir= (the bounce buffer)", dir);
  snprintf(dir, sizeof dir, "%s/r", base);
  sinks("reads into a sink, dir=", dir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  CHECK_EQ(system(cmd), 0);
  plain();
  partial();
  return check_done("source_test");
}
