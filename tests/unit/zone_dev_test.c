/* Zoned lib/dev.c: start-up fault lists, pipelined writes (waiting for the
 * wp, NOWAIT, timeout, pipelining off), many threads writing one zone out
 * of order, many threads opening zones under an open limit (implicit
 * close with trylocked victims), trim, extents, the description line,
 * the wire errno map, and reads by zone type and condition. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "znbd/dev.h"
#include "znbd/request.h"
#include "check.h"
#include "testdev.h"
#include "dev_unfenced.h"

static enum znbd_zone_cond
cond(struct znbd_dev *d, uint32_t z)
{
  struct znbd_zone_info i;
  znbd_dev_report(d, z, 1, &i);
  return i.cond;
}

static void
test_start_lists(void)
{
  static const char *const kv[] = {"size",
                                   "1M",
                                   "zone_size",
                                   "128K",
                                   "zone_nr_conv",
                                   "1",
                                   "zone_readonly",
                                   "2,3",
                                   "zone_offline",
                                   "3-4",
                                   "zone_full",
                                   "true",
                                   NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  uint8_t buf[512];

  CHECK_EQ(znbd_dev_nr_zones(d), 8);
  CHECK_EQ(cond(d, 0), ZNBD_ZONE_COND_NOT_WP);
  CHECK_EQ(cond(d, 1), ZNBD_ZONE_COND_FULL);
  CHECK_EQ(test_wp(d, 1), 256 * 1024);
  CHECK_EQ(cond(d, 2), ZNBD_ZONE_COND_READONLY);
  CHECK_EQ(cond(d, 3), ZNBD_ZONE_COND_OFFLINE); /* offline after readonly */
  CHECK_EQ(cond(d, 4), ZNBD_ZONE_COND_OFFLINE);
  CHECK_EQ(test_wp(d, 4), ZNBD_WP_INVALID);
  CHECK_EQ(cond(d, 5), ZNBD_ZONE_COND_FULL);
  /* READONLY readable, OFFLINE not (rule `read-offline`), neither
   * writable. */
  CHECK_EQ(znbd_dev_read(d, buf, 512, 2 * 128 * 1024, 0), 0);
  errno = 0;
  CHECK(znbd_dev_read(d, buf, 512, 3 * 128 * 1024, 0) < 0 && errno == EIO);
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 512, 2 * 128 * 1024, 0) < 0 && errno == EIO);
  /* Whole-device trim = reset-all, FULL zones reset, faulty ones kept
   * (rule `trim-reset`). */
  CHECK_EQ(znbd_dev_trim(d, 1 << 20, 0), 0);
  CHECK_EQ(cond(d, 1), ZNBD_ZONE_COND_EMPTY);
  CHECK_EQ(cond(d, 2), ZNBD_ZONE_COND_READONLY);
  CHECK_EQ(cond(d, 4), ZNBD_ZONE_COND_OFFLINE);
  CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_ONLINE, 4), 0);
  CHECK_EQ(cond(d, 4), ZNBD_ZONE_COND_EMPTY);
  znbd_dev_free(d);
}

struct seq_writer {
  struct znbd_dev *d;
  uint64_t zone_start;
  unsigned id, nthreads, chunks;
  int failures;
};

/* Thread ID writes chunks ID, ID+N, ID+2N... of one zone: they can only
 * succeed in order, so they depend on waiting for the wp. */
static void *
seq_write(void *opaque)
{
  struct seq_writer *w = opaque;
  uint8_t buf[4096];

  for (unsigned c = w->id; c < w->chunks; c += w->nthreads) {
    memset(buf, (int)(c & 0xff), sizeof buf);
    if (znbd_dev_write(w->d, buf, sizeof buf, w->zone_start + c * 4096ULL, 0))
      w->failures++;
  }
  return NULL;
}

/* Rule `pipelined-write`: waiting for the wp, NOWAIT, the timeout. */
static void
test_pipeline(void)
{
  /* The wait for the wp is bounded far above any scheduling delay of a
   * loaded machine (a writer descheduled for 2 s failed the next one's
   * wait): the timeout itself is checked below with 50 ms. */
  static const char *const kv[] = {
      "size", "4M", "zone_size", "1M", "zone_write_timeout", "60000", NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  uint8_t buf[4096], got[4096];
  pthread_t th[8];
  struct seq_writer w[8];
  int failures = 0;

  memset(buf, 7, sizeof buf);
  /* NOWAIT ahead of the wp: EAGAIN, nothing changes. */
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 4096, 8192, ZNBD_WRITE_NOWAIT) < 0 &&
        errno == EAGAIN);
  CHECK_EQ(cond(d, 0), ZNBD_ZONE_COND_EMPTY);
  CHECK_EQ(znbd_dev_wire_errno(EAGAIN), EIO);
  /* Behind the wp never waits. */
  CHECK_EQ(znbd_dev_write(d, buf, 4096, 0, 0), 0);
  /* Zoned reads depend on the wp: never zero-copy. */
  const void *ref = buf;
  CHECK(znbd_dev_read(d, &ref, 4096, 0, ZNBD_READ_REF) == 0 && !ref);
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 4096, 0, 0) < 0 && errno == EIO);

  /* 8 threads, 256 chunks of 4 KiB into zone 1 (1 MiB), out of order. */
  for (unsigned i = 0; i < 8; i++) {
    w[i] = (struct seq_writer){d, 1 << 20, i, 8, 256, 0};
    pthread_create(&th[i], NULL, seq_write, &w[i]);
  }
  for (unsigned i = 0; i < 8; i++) {
    pthread_join(th[i], NULL);
    failures += w[i].failures;
  }
  CHECK_EQ(failures, 0);
  CHECK_EQ(cond(d, 1), ZNBD_ZONE_COND_FULL);
  int bad = 0;
  for (unsigned c = 0; c < 256; c++) {
    znbd_dev_read(d, got, 4096, (1 << 20) + c * 4096ULL, 0);
    for (unsigned k = 0; k < 4096; k++)
      bad += got[k] != (uint8_t)c;
  }
  CHECK_EQ(bad, 0);
  znbd_dev_free(d);

  /* A short timeout and nobody to move the wp: EIO. */
  static const char *const kv2[] = {
      "size", "4M", "zone_size", "1M", "zone_write_timeout", "50", NULL};
  d = test_dev_kv(kv2);
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 4096, 4096, 0) < 0 && errno == EIO);
  CHECK_EQ(test_wp(d, 0), 0);
  CHECK_EQ(cond(d, 0), ZNBD_ZONE_COND_EMPTY);
  znbd_dev_free(d);

  /* Pipelining off: ahead of the wp fails at once, as a drive would. */
  static const char *const kv3[] = {
      "size", "4M", "zone_size", "1M", "pipeline_zoned_writes", "false", NULL};
  d = test_dev_kv(kv3);
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 4096, 4096, 0) < 0 && errno == EIO);
  znbd_dev_free(d);
}

struct ahead {
  struct znbd_dev *d;
  int r, e;
};

static void *
write_ahead(void *opaque)
{
  struct ahead *a = opaque;
  uint8_t buf[4096] = {3};
  a->r = znbd_dev_write(a->d, buf, 4096, (2 << 20) + 8192, 0);
  a->e = errno;
  return NULL;
}

/* Poll D's stats (up to 10 s) until its park_waits and park_sleeps
 * reach WAITS and SLEEPS; returns whether they did. */
static bool
park_counts_reach(struct znbd_dev *d, uint64_t waits, uint64_t sleeps)
{
  struct timespec nap = {0, 1000000L};
  struct znbd_dev_stats st;
  for (unsigned i = 0; i < 10000; i++) {
    znbd_dev_stats(d, &st);
    if (st.park_waits >= waits && st.park_sleeps >= sleeps)
      return st.park_waits == waits && st.park_sleeps == sleeps;
    nanosleep(&nap, NULL);
  }
  return false;
}

/* A waiting write is woken, not left to time out, when its zone stops
 * being writable (finished by a management op): it fails with EIO.  The
 * stats count the thread that waited, and its sleep: the finish comes
 * only once the thread gave up yielding and sleeps. */
static void
test_wait_woken_by_finish(void)
{
  static const char *const kv[] = {
      "size", "4M", "zone_size", "1M", "zone_write_timeout", "20000", NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  struct ahead a = {d, 0, 0};
  struct timespec t0, t1;
  struct znbd_dev_stats st;
  pthread_t th;

  znbd_dev_stats(d, &st);
  CHECK_EQ(st.park_waits, 0);
  CHECK_EQ(st.park_sleeps, 0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_create(&th, NULL, write_ahead, &a);
  CHECK(park_counts_reach(d, 1, 1));
  CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_FINISH, 2), 0);
  pthread_join(th, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK(a.r < 0 && a.e == EIO);
  /* Woken by the finish, long before the 20 s timeout. */
  CHECK(t1.tv_sec - t0.tv_sec < 15);
  CHECK_EQ(cond(d, 2), ZNBD_ZONE_COND_FULL);
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.park_waits, 1);
  CHECK_EQ(st.park_sleeps, 1);
  znbd_dev_free(d);
}

struct opener {
  struct znbd_dev *d;
  unsigned id;
  unsigned long ok, refused, other;
};

/* Open zones by writing their first block, reset them, over and over. */
static void *
open_loop(void *opaque)
{
  struct opener *o = opaque;
  uint8_t buf[512] = {1};
  uint64_t x = o->id * 7919 + 1;

  for (unsigned n = 0; n < 20000; n++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t z = (uint32_t)(x >> 33) % 16;
    uint64_t zs = z * 65536ULL;
    int r;
    if ((x >> 20) % 4 == 0)
      r = znbd_dev_zone_op(o->d, ZNBD_ZONE_OP_RESET, z);
    else if ((x >> 20) % 4 == 1)
      r = znbd_dev_zone_op(o->d, ZNBD_ZONE_OP_OPEN, z);
    else
      r = znbd_dev_write(o->d, buf, 512, zs + test_wp(o->d, z) % 65536,
                         ZNBD_WRITE_NOWAIT);
    if (r == 0)
      o->ok++;
    else if (errno == ETOOMANYREFS || errno == EOVERFLOW)
      o->refused++;
    else if (errno != EIO && errno != EAGAIN)
      o->other++;
  }
  return NULL;
}

static void
test_concurrent_limits(void)
{
  static const char *const kv[] = {
      "size", "1M", "zone_size", "64K", "zone_max_open", "3", "zone_max_active",
      "5",    NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  pthread_t th[4];
  struct opener o[4];
  unsigned long ok = 0, other = 0;

  for (unsigned i = 0; i < 4; i++) {
    o[i] = (struct opener){d, i, 0, 0, 0};
    pthread_create(&th[i], NULL, open_loop, &o[i]);
  }
  for (unsigned i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    ok += o[i].ok;
    other += o[i].other;
  }
  CHECK(ok > 0);
  CHECK_EQ(other, 0);
  /* The counters must match the conditions and respect the limits. */
  struct znbd_zone_info zi[16];
  struct znbd_dev_stats st;
  unsigned io = 0, eo = 0, cl = 0;
  CHECK_EQ(znbd_dev_report(d, 0, 16, zi), 16);
  for (unsigned i = 0; i < 16; i++) {
    io += zi[i].cond == ZNBD_ZONE_COND_IMP_OPEN;
    eo += zi[i].cond == ZNBD_ZONE_COND_EXP_OPEN;
    cl += zi[i].cond == ZNBD_ZONE_COND_CLOSED;
  }
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.nr_imp_open, io);
  CHECK_EQ(st.nr_exp_open, eo);
  CHECK_EQ(st.nr_closed, cl);
  CHECK(io + eo <= 3 && io + eo + cl <= 5);
  printf("concurrent opens: %lu ok, IO/EO/CL at the end %u/%u/%u\n", ok, io, eo,
         cl);
  znbd_dev_free(d);
}

static void
test_extents_trim_describe(void)
{
  static const char *const kv[] = {
      "size",          "3M",   "zone_size", "1M", "zone_nr_conv", "1",
      "zone_capacity", "768K", NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  static uint8_t buf[8192];
  struct ext e = {0};
  char desc[256];

  memset(buf, 9, sizeof buf);
  CHECK_EQ(znbd_dev_write(d, buf, 8192, 1 << 20, 0), 0);
  CHECK_EQ(znbd_dev_extents(d, 1 << 20, 2 << 20, ext_add, &e), 0);
  /* Rule `extents-wp`: zone 1: [start, wp) data, [wp, end) hole+zero;
   * zone 2 all hole. */
  CHECK_EQ(e.n, 3);
  CHECK(e.off[0] == 1 << 20 && e.len[0] == 8192 && e.flags[0] == 0);
  CHECK(e.off[1] == (1 << 20) + 8192 && e.len[1] == (1 << 20) - 8192 &&
        e.flags[1] == 3);
  CHECK(e.off[2] == 2 << 20 && e.len[2] == 1 << 20 && e.flags[2] == 3);
  /* A partial trim of a sequential zone changes nothing (`trim-reset`). */
  CHECK_EQ(znbd_dev_trim(d, 4096, 1 << 20), 0);
  CHECK_EQ(test_wp(d, 1), (1 << 20) + 8192);
  /* Rule `zero-write`: write zeros to the capacity: the zone is FULL,
   * nothing allocated. */
  struct znbd_dev_stats st0, st1;
  znbd_dev_stats(d, &st0);
  CHECK_EQ(znbd_dev_write(d, NULL, 768 * 1024 - 8192, (1 << 20) + 8192, 0), 0);
  CHECK_EQ(cond(d, 1), ZNBD_ZONE_COND_FULL);
  znbd_dev_stats(d, &st1);
  CHECK_EQ(st1.allocated, st0.allocated);
  /* Whole-zone trim resets it and frees its pages. */
  CHECK_EQ(znbd_dev_trim(d, 1 << 20, 1 << 20), 0);
  CHECK_EQ(cond(d, 1), ZNBD_ZONE_COND_EMPTY);
  znbd_dev_stats(d, &st1);
  CHECK_EQ(st1.allocated, 0);
  /* Append returns where it wrote. */
  uint64_t at = 0;
  CHECK_EQ(znbd_dev_append(d, buf, 4096, 2 << 20, &at), 0);
  CHECK_EQ(at, 2 << 20);
  CHECK_EQ(znbd_dev_append(d, buf, 4096, 2 << 20, &at), 0);
  CHECK_EQ(at, (2 << 20) + 4096);
  errno = 0;
  CHECK(znbd_dev_append(d, buf, 4096, 0, &at) < 0 && errno == EIO);
  /* A range passing the end of the device (zone 2 ends it at 3 MiB) is
   * EIO as in null_blk, not check_range()'s EINVAL, also for a length
   * that would wrap around; nothing moves. */
  errno = 0;
  CHECK(znbd_dev_append(d, buf, (1 << 20) + 4096, 2 << 20, &at) < 0 &&
        errno == EIO);
  errno = 0;
  CHECK(znbd_dev_append(d, buf, UINT64_MAX - 4095, 2 << 20, &at) < 0 &&
        errno == EIO);
  CHECK_EQ(test_wp(d, 2), (2 << 20) + 8192);
  CHECK_EQ(cond(d, 2), ZNBD_ZONE_COND_IMP_OPEN);
  /* Misaligned length or start: EINVAL, as a write. */
  errno = 0;
  CHECK(znbd_dev_append(d, buf, 100, 2 << 20, &at) < 0 && errno == EINVAL);
  errno = 0;
  CHECK(znbd_dev_append(d, buf, 4096, 4096 + (2 << 20), &at) < 0 &&
        errno == EINVAL);
  CHECK_EQ(znbd_dev_zone_index(d, (2 << 20) - 1), 1);
  znbd_dev_describe(d, desc, sizeof desc);
  CHECK(strcmp(desc, "znbd model=host-managed size=3145728 zone_size=1048576 "
                     "zone_capacity=786432 nr_zones=3 nr_conv=1 max_open=0 "
                     "max_active=0 blocksize=512") == 0);
  /* Rule `wire-errno`. */
  CHECK_EQ(znbd_dev_wire_errno(ETOOMANYREFS), ENOSPC);
  CHECK_EQ(znbd_dev_wire_errno(EOVERFLOW), ENOSPC);
  znbd_dev_free(d);
}

/* Count the bytes of BUF[0..LEN) equal to V. */
static uint64_t
count_bytes(const uint8_t *buf, uint64_t len, uint8_t v)
{
  uint64_t n = 0;
  for (uint64_t i = 0; i < len; i++)
    n += buf[i] == v;
  return n;
}

/* The extents znbd_dev_zone_extents() gave, up to 8; with STOP_AT, the
 * callback returns 7 once it has that many. */
struct zext {
  struct znbd_zone_extent e[8];
  unsigned n, stop_at;
};

static int
zext_add(void *opaque, const struct znbd_zone_extent *e)
{
  struct zext *z = opaque;
  if (z->n < 8)
    z->e[z->n] = *e;
  z->n++;
  return z->stop_at && z->n >= z->stop_at ? 7 : 0;
}

/* Rule `read-past-wp`: zone_read_past_wp=ones with capacity < zone size, as
 * null_blk's null_zone_valid_read_len(): a finished zone's wp is start + zone
 * size and a READONLY zone's wp is invalid, so their [capacity, zone end) gap
 * is read from memory (zeros); a zone filled by writes keeps its wp at
 * the capacity, so its gap is past the wp (0xFF), as is everything past
 * the wp of a zone that is not full. */
static void
test_ones_gap(void)
{
  static const char *const kv[] = {"size",
                                   "4M",
                                   "zone_size",
                                   "1M",
                                   "zone_nr_conv",
                                   "0",
                                   "zone_capacity",
                                   "768K",
                                   "zone_read_past_wp",
                                   "ones",
                                   NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  const uint64_t M = 1 << 20, cap = 768 * 1024, gap = M - cap;
  static uint8_t buf[1 << 20];
  struct ext e = {0};

  memset(buf, 7, 8192);
  /* Zone 0: 8 KiB written then finished; zone 1: filled by writes;
   * zone 2: 8 KiB written, still open; zone 3: READONLY. */
  CHECK_EQ(znbd_dev_write(d, buf, 8192, 0, 0), 0);
  CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_FINISH, 0), 0);
  CHECK_EQ(znbd_dev_write(d, NULL, cap, M, 0), 0);
  CHECK_EQ(cond(d, 1), ZNBD_ZONE_COND_FULL);
  CHECK_EQ(znbd_dev_write(d, buf, 8192, 2 * M, 0), 0);
  CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_SET_READONLY, 3), 0);

  CHECK_EQ(znbd_dev_read(d, buf, M, 0, 0), 0);
  CHECK_EQ(count_bytes(buf, 8192, 7), 8192);
  /* [8K, capacity) is below the finished zone's wp, discarded: zeros;
   * so is the gap. */
  CHECK_EQ(count_bytes(buf + 8192, M - 8192, 0), M - 8192);
  CHECK_EQ(znbd_dev_read(d, buf, M, M, 0), 0);
  CHECK_EQ(count_bytes(buf, cap, 0), cap);
  CHECK_EQ(count_bytes(buf + cap, gap, 0xff), gap);
  CHECK_EQ(znbd_dev_read(d, buf, M, 2 * M, 0), 0);
  CHECK_EQ(count_bytes(buf + 8192, M - 8192, 0xff), M - 8192);
  CHECK_EQ(znbd_dev_read(d, buf, M, 3 * M, 0), 0);
  CHECK_EQ(count_bytes(buf, M, 0), M);
  /* A read straddling zones 1 and 2 splits at the zone boundary. */
  CHECK_EQ(znbd_dev_read(d, buf, 8192, 2 * M - 4096, 0), 0);
  CHECK_EQ(count_bytes(buf, 4096, 0xff), 4096);
  CHECK_EQ(count_bytes(buf + 4096, 4096, 7), 4096);

  /* Extents: the gap reads zeros, so it is HOLE|ZERO; past the wp HOLE. */
  CHECK_EQ(znbd_dev_extents(d, 0, 2 * M, ext_add, &e), 0);
  CHECK_EQ(e.n, 4);
  CHECK(e.off[0] == 0 && e.len[0] == cap && e.flags[0] == 0);
  CHECK(e.off[1] == cap && e.len[1] == gap && e.flags[1] == 3);
  CHECK(e.off[2] == M && e.len[2] == cap && e.flags[2] == 0);
  CHECK(e.off[3] == M + cap && e.len[3] == gap && e.flags[3] == 1);

  /* The zone context: FULL and READONLY zones whole, the open zone split
   * at its wp; the first extent starts at the offset asked. */
  struct zext z = {0};
  CHECK_EQ(znbd_dev_zone_extents(d, 4096, 4 * M - 4096, zext_add, &z), 0);
  CHECK_EQ(z.n, 5);
  CHECK(z.e[0].off == 4096 && z.e[0].len == M - 4096 &&
        z.e[0].cond == ZNBD_ZONE_COND_FULL && !z.e[0].past_wp);
  CHECK(z.e[1].off == M && z.e[1].len == M &&
        z.e[1].cond == ZNBD_ZONE_COND_FULL && !z.e[1].past_wp);
  CHECK(z.e[2].off == 2 * M && z.e[2].len == 8192 &&
        z.e[2].cond == ZNBD_ZONE_COND_IMP_OPEN && !z.e[2].past_wp &&
        z.e[2].type == ZNBD_ZONE_TYPE_SEQWRITE_REQ);
  CHECK(z.e[3].off == 2 * M + 8192 && z.e[3].len == M - 8192 &&
        z.e[3].cond == ZNBD_ZONE_COND_IMP_OPEN && z.e[3].past_wp);
  CHECK(z.e[4].off == 3 * M && z.e[4].len == M &&
        z.e[4].cond == ZNBD_ZONE_COND_READONLY && !z.e[4].past_wp);
  /* A range inside one zone gives that zone only, to its end; FN's
   * result stops the walk. */
  z.n = 0;
  CHECK_EQ(znbd_dev_zone_extents(d, 2 * M, 4096, zext_add, &z), 0);
  CHECK(z.n == 2 && z.e[1].off == 2 * M + 8192 && z.e[1].len == M - 8192);
  z.n = 0;
  z.stop_at = 1;
  CHECK_EQ(znbd_dev_zone_extents(d, 0, 4 * M, zext_add, &z), 7);
  CHECK_EQ(z.n, 1);
  CHECK(znbd_dev_zone_extents(d, 100, 4096, zext_add, &z) == -1 &&
        errno == EINVAL);
  znbd_dev_free(d);
}

/* Rules `conv-zones`, `read-data`, `read-past-wp` (zone_read_past_wp=
 * error), `read-no-backing` and `fault-list`, each on a device of its
 * own: 4 zones of 1 MiB, capacity 768 KiB, zone 0 conventional. */
static void
test_read_rules(void)
{
  static const char *const err_kv[] = {"size",
                                       "4M",
                                       "zone_size",
                                       "1M",
                                       "zone_nr_conv",
                                       "1",
                                       "zone_capacity",
                                       "768K",
                                       "zone_read_past_wp",
                                       "error",
                                       NULL};
  const uint64_t M = 1 << 20, cap = 768 * 1024;
  struct znbd_dev *d = test_dev_kv(err_kv);
  static uint8_t buf[1 << 20], pat[8192];
  struct znbd_zone_info z;

  /* `conv-zones`: NOT_WP, no wp, capacity = length; any write order, the
   * state never changes. */
  z = test_zone(d, 0);
  CHECK_EQ(z.type, ZNBD_ZONE_TYPE_CONVENTIONAL);
  CHECK_EQ(z.cond, ZNBD_ZONE_COND_NOT_WP);
  CHECK_EQ(z.wp, ZNBD_WP_INVALID);
  CHECK_EQ(z.len, M);
  CHECK_EQ(z.capacity, M);
  memset(pat, 5, sizeof pat);
  CHECK_EQ(znbd_dev_write(d, pat, 4096, 12 * 1024, 0), 0);
  CHECK_EQ(znbd_dev_write(d, pat, 4096, 8 * 1024, 0), 0);
  CHECK_EQ(znbd_dev_write(d, pat, 4096, 8 * 1024, 0), 0); /* again */
  z = test_zone(d, 0);
  CHECK_EQ(z.cond, ZNBD_ZONE_COND_NOT_WP);
  CHECK_EQ(z.wp, ZNBD_WP_INVALID);

  /* `read-data`: a conventional zone reads what was written, zeros
   * around it (even with zone_read_past_wp=error: it has no wp). */
  memset(buf, 0xaa, 24 * 1024);
  CHECK_EQ(znbd_dev_read(d, buf, 24 * 1024, 0, 0), 0);
  CHECK_EQ(count_bytes(buf, 8192, 0), 8192);
  CHECK_EQ(count_bytes(buf + 8192, 8192, 5), 8192);
  CHECK_EQ(count_bytes(buf + 16384, 8192, 0), 8192);

  /* A sequential zone below its wp reads its data; at or past the wp
   * `read-past-wp` with error refuses the whole read with EIO. */
  memset(pat, 6, sizeof pat);
  CHECK_EQ(znbd_dev_write(d, pat, 8192, M, 0), 0);
  CHECK_EQ(znbd_dev_read(d, buf, 8192, M, 0), 0);
  CHECK_EQ(count_bytes(buf, 8192, 6), 8192);
  errno = 0;
  CHECK(znbd_dev_read(d, buf, 4096, M + 8192, 0) < 0 && errno == EIO);
  errno = 0;
  CHECK(znbd_dev_read(d, buf, 8192, M + 4096, 0) < 0 && errno == EIO);
  /* A READONLY zone reads its data up to its capacity, zeros where
   * nothing was written: no wp to read past any more. */
  CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_SET_READONLY, 1), 0);
  memset(buf, 0xaa, cap);
  CHECK_EQ(znbd_dev_read(d, buf, cap, M, 0), 0);
  CHECK_EQ(count_bytes(buf, 8192, 6), 8192);
  CHECK_EQ(count_bytes(buf + 8192, cap - 8192, 0), cap - 8192);
  znbd_dev_free(d);

  /* `read-no-backing`: memory_backed=false stores nothing, reads zeros,
   * and keeps the zone state: the wp moved, a write off it fails. */
  static const char *const nb_kv[] = {
      "size",          "4M",    "zone_size", "1M", "zone_nr_conv", "1",
      "memory_backed", "false", NULL};
  struct znbd_dev_stats st;
  d = test_dev_kv(nb_kv);
  CHECK_EQ(znbd_dev_write(d, pat, 8192, M, 0), 0);
  CHECK_EQ(znbd_dev_write(d, pat, 8192, 0, 0), 0);
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_IMP_OPEN);
  CHECK_EQ(test_wp(d, 1), M + 8192);
  memset(buf, 0xaa, 8192);
  CHECK_EQ(znbd_dev_read(d, buf, 8192, M, 0), 0);
  CHECK_EQ(count_bytes(buf, 8192, 0), 8192);
  memset(buf, 0xaa, 8192);
  CHECK_EQ(znbd_dev_read(d, buf, 8192, 0, 0), 0);
  CHECK_EQ(count_bytes(buf, 8192, 0), 8192);
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.allocated, 0);
  errno = 0;
  CHECK(znbd_dev_write(d, pat, 4096, M, 0) < 0 && errno == EIO);
  CHECK_EQ(test_wp(d, 1), M + 8192);
  znbd_dev_free(d);

  /* `fault-list`: a zone named twice in zone_readonly stays READONLY
   * (configfs would toggle it back); one in both lists ends OFFLINE. */
  static const char *const fl_kv[] = {
      "size",  "4M",           "zone_size", "1M", "zone_readonly",
      "1,1,2", "zone_offline", "2",         NULL};
  d = test_dev_kv(fl_kv);
  CHECK_EQ(cond(d, 1), ZNBD_ZONE_COND_READONLY);
  CHECK_EQ(test_wp(d, 1), ZNBD_WP_INVALID);
  CHECK_EQ(cond(d, 2), ZNBD_ZONE_COND_OFFLINE);
  CHECK_EQ(cond(d, 3), ZNBD_ZONE_COND_EMPTY);
  znbd_dev_free(d);
}

/* A parked write's completion (znbd_req_write with DONE). */
struct parked {
  _Atomic int calls;
  _Atomic int err;
  _Atomic int why; /* znbd_req_refusal() in DONE */
};

static void
parked_done(void *opaque, int err)
{
  struct parked *p = opaque;
  p->err = err;
  p->why = (int)znbd_req_refusal();
  p->calls++;
}

/* Wait (up to 20 s: only a broken sweeper takes that long) for P's
 * completion. */
static void
parked_wait(struct parked *p)
{
  struct timespec nap = {0, 1000000L};
  for (unsigned i = 0; i < 20000 && p->calls == 0; i++)
    nanosleep(&nap, NULL);
}

/* Writes ahead of the wp park without blocking the caller, keep their
 * buffer, and run when the write filling the gap lands (in that write's
 * thread, before it returns); a reset fails them, and so does the
 * timeout; NOWAIT still refuses at once. */
static void
test_parked_async(void)
{
  static const char *const kv[] = {
      "size", "4M", "zone_size", "1M", "zone_write_timeout", "60000", NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  struct znbd_req_ctx c; /* a connection's: parked writes complete by DONE */
  znbd_req_ctx_init(&c, d);
  static uint8_t a[3][4096];
  uint8_t got[3 * 4096];
  struct parked p[3] = {0};

  for (int i = 0; i < 3; i++)
    memset(a[i], 0x11 * (i + 1), 4096);
  /* Blocks 2 then 1 arrive before block 0. */
  CHECK_EQ(znbd_req_write(&c, a[2], 4096, 8192, 0, parked_done, &p[2]),
           ZNBD_WRITE_PARKED);
  CHECK_EQ(znbd_req_write(&c, a[1], 4096, 4096, 0, parked_done, &p[1]),
           ZNBD_WRITE_PARKED);
  CHECK_EQ(test_wp(d, 0), 0);
  CHECK_EQ(p[1].calls + p[2].calls, 0);
  CHECK_EQ(znbd_req_write(&c, a[0], 4096, 0, 0, parked_done, &p[0]), 0);
  CHECK_EQ(p[0].calls, 0); /* not parked: no callback */
  CHECK_EQ(p[1].calls, 1);
  CHECK_EQ(p[2].calls, 1);
  CHECK_EQ(p[1].err, 0);
  CHECK_EQ(p[2].err, 0);
  CHECK_EQ(test_wp(d, 0), 3 * 4096);
  CHECK_EQ(znbd_dev_read(d, got, sizeof got, 0, 0), 0);
  for (int i = 0; i < 3; i++)
    CHECK(memcmp(got + i * 4096, a[i], 4096) == 0);

  /* A reset fails the writes parked in the zone with EIO. */
  struct parked r = {0};
  CHECK_EQ(znbd_req_write(&c, a[0], 4096, (1 << 20) + 8192, 0, parked_done, &r),
           ZNBD_WRITE_PARKED);
  CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 1), 0);
  CHECK_EQ(r.calls, 1);
  CHECK_EQ(r.err, EIO);
  CHECK_EQ(r.why, ZNBD_REFUSAL_NONE); /* no rule: the zone went */
  CHECK_EQ(test_wp(d, 1), 1 << 20);
  /* A write that jumps past a parked one fails it (EIO), and a second
   * write for the same offset runs in its place. */
  struct parked j = {0};
  CHECK_EQ(znbd_req_write(&c, a[0], 4096, (2 << 20) + 4096, 0, parked_done, &j),
           ZNBD_WRITE_PARKED);
  CHECK_EQ(znbd_req_write(&c, NULL, 8192, 2 << 20, 0, NULL, NULL), 0);
  CHECK_EQ(j.calls, 1);
  CHECK_EQ(j.err, EIO);
  CHECK_EQ(j.why, ZNBD_REFUSAL_UNALIGNED_WRITE);
  CHECK_EQ(znbd_req_refusal(), ZNBD_REFUSAL_NONE); /* the writer's own */
  CHECK_EQ(test_wp(d, 2), (2 << 20) + 8192);
  /* A bounded caller whose waiting threads are at their limit: refused
   * at once; in order it writes as usual. */
  struct znbd_req_ctx bounded;
  _Atomic unsigned waiting = 2;
  znbd_req_ctx_init(&bounded, d);
  znbd_req_ctx_bound(&bounded, &waiting, 2);
  errno = 0;
  CHECK(znbd_req_write(&bounded, a[0], 4096, (3 << 20) + 4096, 0, NULL, NULL) <
            0 &&
        errno == EAGAIN);
  CHECK_EQ(waiting, 2);
  CHECK_EQ(znbd_req_write(&bounded, a[0], 4096, 3 << 20, 0, NULL, NULL), 0);
  CHECK_EQ(test_wp(d, 3), (3 << 20) + 4096);
  /* NOWAIT: refused, nothing parked. */
  errno = 0;
  CHECK(znbd_req_write(&c, a[0], 4096, (3 << 20) + 8192, ZNBD_WRITE_NOWAIT,
                       parked_done, &j) < 0 &&
        errno == EAGAIN);
  /* No thread waited for any of these: the asynchronous writes parked
   * without one, the refused ones not at all. */
  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.park_waits, 0);
  CHECK_EQ(st.park_sleeps, 0);
  znbd_dev_free(d);
}

/* How a parked write ends when nothing fills its gap: the timeout, and
 * parking closed. */
static void
test_parked_ends(void)
{
  static const char *const kv[] = {
      "size", "4M", "zone_size", "1M", "zone_write_timeout", "60000", NULL};
  static uint8_t a[2][4096];
  struct znbd_req_ctx c;
  struct znbd_dev *d;
  memset(a[0], 0x11, 4096);
  memset(a[1], 0x22, 4096);

  /* The timeout: nobody fills the gap, the sweeper fails it with EIO and
   * nothing changed. */
  static const char *const kv2[] = {
      "size", "4M", "zone_size", "1M", "zone_write_timeout", "30", NULL};
  d = test_dev_kv(kv2);
  znbd_req_ctx_init(&c, d);
  struct parked t = {0};
  CHECK_EQ(znbd_req_write(&c, a[0], 4096, 4096, 0, parked_done, &t),
           ZNBD_WRITE_PARKED);
  parked_wait(&t);
  CHECK_EQ(t.calls, 1);
  CHECK_EQ(t.err, EIO);
  CHECK_EQ(test_wp(d, 0), 0);
  CHECK_EQ(cond(d, 0), ZNBD_ZONE_COND_EMPTY);
  /* Then the gap filled: the timed-out write does not run. */
  CHECK_EQ(znbd_dev_write(d, a[1], 4096, 0, 0), 0);
  CHECK_EQ(test_wp(d, 0), 4096);
  CHECK_EQ(t.calls, 1);
  znbd_dev_free(d);

  /* Parking closed (a server stopping): the parked write fails now, the
   * next one ahead of the wp at once; in order still works. */
  d = test_dev_kv(kv);
  znbd_req_ctx_init(&c, d);
  struct parked s = {0};
  CHECK_EQ(znbd_req_write(&c, a[0], 4096, 8192, 0, parked_done, &s),
           ZNBD_WRITE_PARKED);
  znbd_dev_close_parking(d);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(s.err, EIO);
  errno = 0;
  CHECK(znbd_req_write(&c, a[0], 4096, 8192, 0, parked_done, &s) < 0 &&
        errno == EIO);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(znbd_dev_write(d, a[0], 4096, 0, 0), 0);
  CHECK_EQ(test_wp(d, 0), 4096);
  znbd_dev_free(d);
}

#define RACE_ZONE (4u << 20)
#define RACE_WRITE (64u << 10)

struct racer {
  struct znbd_dev *d;
  unsigned id;
  _Atomic int *stop;
  unsigned long writes;
};

/* Write 64 KiB at zone 1's wp until told to stop (NOWAIT: losing a race
 * for the wp is an EIO or EAGAIN, not a wait).  Fresh pages make each
 * copy take tens of microseconds, so copies are often in flight. */
static void *
wp_writer(void *opaque)
{
  struct racer *r = opaque;
  static uint8_t buf[2][RACE_WRITE];

  memset(buf[r->id], 0x40 + (int)r->id, RACE_WRITE);
  while (!*r->stop) {
    uint64_t w = test_wp(r->d, 1);
    if (w + RACE_WRITE > 2ULL * RACE_ZONE)
      continue;
    if (znbd_dev_write(r->d, buf[r->id], RACE_WRITE, w, ZNBD_WRITE_NOWAIT) == 0)
      r->writes++;
  }
  return NULL;
}

/* Writes copy their data after the wp commit, outside the zone lock
 * (znbd_zone_copy_begin): a reset racing them must wait for the copies,
 * or a late copy would leave data (and allocated pages) past the wp of a
 * zone that was just reset.  Each round: two writers at the wp, a reset
 * while they run, stop them; then every byte the store holds must lie
 * below the wp (64 KiB writes at the wp: allocated == wp - start). */
static void
test_reset_races_copies(void)
{
  static const char *const kv[] = {"size", "12M", "zone_size", "4M", NULL};
  struct znbd_dev *d = test_dev_kv(kv);
  struct timespec nap = {0, 200 * 1000L};
  unsigned long writes = 0, bad_rounds = 0;

  for (unsigned round = 0; round < 200; round++) {
    _Atomic int stop = 0;
    struct racer r[2];
    pthread_t th[2];
    for (unsigned i = 0; i < 2; i++) {
      r[i] = (struct racer){d, i, &stop, 0};
      pthread_create(&th[i], NULL, wp_writer, &r[i]);
    }
    nanosleep(&nap, NULL);
    CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 1), 0);
    stop = 1;
    for (unsigned i = 0; i < 2; i++) {
      pthread_join(th[i], NULL);
      writes += r[i].writes;
    }
    struct znbd_dev_stats st;
    znbd_dev_stats(d, &st);
    bad_rounds += st.allocated != test_wp(d, 1) - RACE_ZONE;
    CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 1), 0);
  }
  CHECK(writes > 0);
  CHECK_EQ(bad_rounds, 0);
  printf("reset races: %lu writes in 200 rounds, %lu rounds with data past "
         "the wp\n",
         writes, bad_rounds);
  znbd_dev_free(d);
}

int
main(void)
{
  test_start_lists();
  test_pipeline();
  test_wait_woken_by_finish();
  test_reset_races_copies();
  test_concurrent_limits();
  test_extents_trim_describe();
  test_ones_gap();
  test_read_rules();
  test_parked_async();
  test_parked_ends();
  return check_done("zone_dev_test");
}
