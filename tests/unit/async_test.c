/* Requests whose store I/O the caller does (include/znbd/async.h,
 * lib/dev_async.c, the zone engine's holds in lib/zone_hold.c) on dir=
 * devices: the file bytes each begin names, what a held zone refuses,
 * the wp and condition after an end that succeeded and after one that
 * failed (null_blk's rule), reads planned as data and fill, FLUSH's
 * files, and the synchronous callers that wait for a held zone. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "testdev.h"
#include "znbd/async.h"
#include "znbd/redo.h"
#include "znbd/request.h"
#include "dev_unfenced.h"

#define KiB 1024u
#define MiB (1024u * 1024u)
#define ZS MiB

static char base[4096], dir[4200];
static int ndirs;
static uint8_t a[256 * KiB], got[256 * KiB];

/* A device on a new directory: 8 zones of 1 MiB, the first conventional,
 * then the extra KEY, VALUE pairs of EXTRA (NULL-terminated). */
static struct znbd_dev *
dir_dev(const char *const *extra)
{
  const char *kv[32] = {"size",         "8M", "zone_size", "1M",
                        "zone_nr_conv", "1",  "dir",       dir};
  unsigned n = 8;
  snprintf(dir, sizeof dir, "%s/d%d", base, ndirs++);
  for (; extra && *extra && n < 30; extra++)
    kv[n++] = *extra;
  kv[n] = NULL;
  return test_dev_kv(kv);
}

/* LEN bytes of A at the file place W or R names, as a front-end's own
 * I/O would put them. */
static void
file_write(const struct znbd_file_io *io, const uint8_t *buf, uint64_t len)
{
  CHECK_EQ(pwrite(io->fd, buf, len, (off_t)io->at), (ssize_t)len);
}

static uint64_t
file_size(uint32_t zone)
{
  char path[4300];
  struct stat st;
  snprintf(path, sizeof path, "%s/seq-%06u", dir, zone);
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : UINT64_MAX;
}

static void
test_write(void)
{
  struct znbd_dev *d = dir_dev(NULL);
  struct znbd_req_ctx c;
  struct znbd_async_write w, w2;
  znbd_req_ctx_init(&c, d);
  znbd_req_ctx_busy_ok(&c);
  CHECK(znbd_dev_async(d));
  test_fill(a, sizeof a, 1);

  /* Zone 1 held: its file and place named, the zone IMP_OPEN, its wp
   * not moved yet. */
  CHECK_EQ(znbd_req_write_begin(&c, 64 * KiB, ZS, 0, true, &w), 0);
  CHECK_EQ(w.off, ZS);
  CHECK_EQ(w.io.at, 0);
  CHECK_EQ(w.io.len, 64 * KiB);
  CHECK(!w.io.direct); /* buffered_io=true */
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_IMP_OPEN);
  CHECK_EQ(test_wp(d, 1), ZS);
  /* Rule `held-write`.  Held: another write, an append, a zone operation
   * get EBUSY and change nothing; another zone is not held. */
  CHECK(znbd_req_write_begin(&c, 4 * KiB, ZS, 0, true, &w2) == -1 &&
        errno == EBUSY);
  uint64_t at;
  CHECK(znbd_req_append(&c, a, 4 * KiB, ZS, &at) == -1 && errno == EBUSY);
  CHECK(znbd_req_zone_op(&c, ZNBD_ZONE_OP_RESET, 1) == -1 && errno == EBUSY);
  CHECK(znbd_req_zone_op(&c, ZNBD_ZONE_OP_FINISH, 1) == -1 && errno == EBUSY);
  CHECK(znbd_req_zone_op(&c, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES) == -1 &&
        errno == EBUSY);
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_IMP_OPEN);
  /* Off the wp and past the capacity: refused as ever, nothing held. */
  CHECK(znbd_req_write_begin(&c, 4 * KiB, 2 * ZS + 4 * KiB, 0, true, &w2) ==
            -1 &&
        errno == EIO);
  CHECK_EQ(test_zone(d, 2).cond, ZNBD_ZONE_COND_EMPTY);
  /* The data goes in, the end moves the wp, it reads back. */
  file_write(&w.io, a, 64 * KiB);
  CHECK_EQ(znbd_req_write_end(&c, &w, 0), 0);
  CHECK_EQ(test_wp(d, 1), ZS + 64 * KiB);
  CHECK_EQ(znbd_dev_read(d, got, 64 * KiB, ZS, 0), 0);
  CHECK(memcmp(got, a, 64 * KiB) == 0);
  /* Not held any more. */
  CHECK_EQ(znbd_req_write_begin(&c, 4 * KiB, ZS + 64 * KiB, 0, true, &w2), 0);
  file_write(&w2.io, a, 4 * KiB);
  CHECK_EQ(znbd_req_write_end(&c, &w2, 0), 0);
  CHECK_EQ(test_wp(d, 1), ZS + 68 * KiB);

  /* A write that reaches the capacity: FULL at its end, not before. */
  CHECK_EQ(znbd_req_write_begin(&c, ZS - 68 * KiB, ZS + 68 * KiB, 0, true, &w),
           0);
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_IMP_OPEN);
  CHECK_EQ(znbd_req_write_end(&c, &w, 0), 0);
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_FULL);

  /* A conventional zone: nothing held, two writes at once. */
  CHECK_EQ(znbd_req_write_begin(&c, 4 * KiB, 0, 0, true, &w), 0);
  CHECK_EQ(znbd_req_write_begin(&c, 4 * KiB, 4 * KiB, 0, true, &w2), 0);
  file_write(&w.io, a, 4 * KiB);
  file_write(&w2.io, a + 4 * KiB, 4 * KiB);
  CHECK_EQ(znbd_req_write_end(&c, &w2, 0), 0);
  CHECK_EQ(znbd_req_write_end(&c, &w, 0), 0);
  CHECK_EQ(znbd_dev_read(d, got, 8 * KiB, 0, 0), 0);
  CHECK(memcmp(got, a, 8 * KiB) == 0);
  znbd_dev_free(d);
}

/* Rule `held-write-failed`: a store write that failed: the wp where it was, the
 * zone IMP_OPEN as null_blk leaves it, the bytes past the wp cut off, the data
 * below it intact; ENOSPC said as such. */
static void
test_failed(void)
{
  struct znbd_dev *d = dir_dev(NULL);
  struct znbd_req_ctx c;
  struct znbd_async_write w;
  znbd_req_ctx_init(&c, d);
  test_fill(a, sizeof a, 2);
  CHECK_EQ(znbd_dev_write(d, a, 16 * KiB, 3 * ZS, 0), 0);
  CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_CLOSE, 3), 0);
  CHECK_EQ(test_zone(d, 3).cond, ZNBD_ZONE_COND_CLOSED);
  CHECK_EQ(znbd_req_write_begin(&c, 64 * KiB, 3 * ZS + 16 * KiB, 0, true, &w),
           0);
  file_write(&w.io, a + 16 * KiB, 20 * KiB); /* a part, then it failed */
  CHECK_EQ(file_size(3), 36 * KiB);
  CHECK(znbd_req_write_end(&c, &w, EIO) == -1 && errno == EIO);
  CHECK_EQ(test_wp(d, 3), 3 * ZS + 16 * KiB);
  CHECK_EQ(test_zone(d, 3).cond, ZNBD_ZONE_COND_IMP_OPEN);
  CHECK_EQ(file_size(3), 16 * KiB);
  CHECK_EQ(znbd_dev_read(d, got, 16 * KiB, 3 * ZS, 0), 0);
  CHECK(memcmp(got, a, 16 * KiB) == 0);
  /* The zone takes the write again. */
  CHECK_EQ(znbd_req_write_begin(&c, 4 * KiB, 3 * ZS + 16 * KiB, 0, true, &w),
           0);
  CHECK(znbd_req_write_end(&c, &w, ENOSPC) == -1 && errno == ENOSPC);
  CHECK(znbd_req_write_begin(&c, 4 * KiB, 3 * ZS + 16 * KiB, 0, true, &w) == 0);
  CHECK(znbd_req_write_end(&c, &w, EDQUOT) == -1 && errno == ENOSPC);
  CHECK_EQ(test_wp(d, 3), 3 * ZS + 16 * KiB);
  znbd_dev_free(d);
}

/* Appends: the sector chosen at the begin, the intent noted before the
 * data; the open limit with a held zone that cannot be closed. */
static void
test_append(void)
{
  static const char *const lim[] = {"zone_max_open", "1", NULL};
  struct znbd_dev *d = dir_dev(lim);
  struct znbd_req_ctx c;
  struct znbd_async_write w, w2;
  char err[256];
  znbd_req_ctx_init(&c, d);
  znbd_req_ctx_busy_ok(&c);
  CHECK_EQ(znbd_dev_redo_open(d, 4, false, err, sizeof err), 0);
  test_fill(a, sizeof a, 3);
  CHECK_EQ(znbd_dev_write(d, a, 8 * KiB, 4 * ZS, 0), 0);
  CHECK_EQ(znbd_req_append_begin(&c, 32 * KiB, 4 * ZS, 2, true, &w), 0);
  CHECK_EQ(w.off, 4 * ZS + 8 * KiB);
  CHECK_EQ(w.io.at, 8 * KiB);
  CHECK_EQ(*(uint32_t *)znbd_dev_redo_word(d, 2), 1);
  /* Zone 4 is the one open zone, held: zone 5 cannot close it (rule
   * `busy-victim`). */
  CHECK(znbd_req_append_begin(&c, 4 * KiB, 5 * ZS, 1, true, &w2) == -1 &&
        errno == ETOOMANYREFS);
  CHECK_EQ(test_zone(d, 5).cond, ZNBD_ZONE_COND_EMPTY);
  /* Not a zone start; a conventional zone. */
  CHECK(znbd_req_append_begin(&c, 4 * KiB, 4 * ZS + 4 * KiB, 1, true, &w2) ==
            -1 &&
        errno == EINVAL);
  CHECK(znbd_req_append_begin(&c, 4 * KiB, 0, 1, true, &w2) == -1 &&
        errno == EIO);
  file_write(&w.io, a, 32 * KiB);
  CHECK_EQ(znbd_req_write_end(&c, &w, 0), 0);
  CHECK_EQ(test_wp(d, 4), 4 * ZS + 40 * KiB);
  CHECK_EQ(znbd_dev_read(d, got, 32 * KiB, 4 * ZS + 8 * KiB, 0), 0);
  CHECK(memcmp(got, a, 32 * KiB) == 0);
  /* Now zone 4 can be closed for zone 5. */
  CHECK_EQ(znbd_req_append_begin(&c, 4 * KiB, 5 * ZS, 1, true, &w2), 0);
  CHECK_EQ(test_zone(d, 4).cond, ZNBD_ZONE_COND_CLOSED);
  CHECK_EQ(znbd_req_write_end(&c, &w2, EIO), -1);
  znbd_dev_free(d);
}

/* Reads: the store's bytes then the fill; OFFLINE and error refused. */
static void
test_read(void)
{
  static const char *const ones[] = {"zone_read_past_wp", "ones",
                                     "zone_offline", "7", NULL};
  struct znbd_dev *d = dir_dev(ones);
  struct znbd_req_ctx c;
  struct znbd_async_read r;
  znbd_req_ctx_init(&c, d);
  test_fill(a, sizeof a, 4);
  CHECK_EQ(znbd_dev_write(d, a, 8 * KiB, 2 * ZS, 0), 0);
  CHECK_EQ(znbd_req_read_begin(&c, 16 * KiB, 2 * ZS, true, &r), 0);
  CHECK_EQ(r.io.at, 0);
  CHECK_EQ(r.io.len, 8 * KiB);
  CHECK_EQ(r.fill_len[0], 8 * KiB);
  CHECK_EQ(r.fill[0], 0xff);
  CHECK_EQ(r.fill_len[1], 0);
  CHECK_EQ(pread(r.io.fd, got, r.io.len, (off_t)r.io.at), 8 * KiB);
  CHECK(memcmp(got, a, 8 * KiB) == 0);
  /* Past the wp alone; the conventional zone; an OFFLINE zone. */
  CHECK_EQ(znbd_req_read_begin(&c, 4 * KiB, 3 * ZS, true, &r), 0);
  CHECK_EQ(r.io.len, 0);
  CHECK_EQ(r.fill_len[0], 4 * KiB);
  CHECK_EQ(znbd_req_read_begin(&c, 64 * KiB, 64 * KiB, true, &r), 0);
  CHECK_EQ(r.io.at, 64 * KiB);
  CHECK_EQ(r.io.len, 64 * KiB);
  CHECK_EQ(r.fill_len[0], 0);
  CHECK(znbd_req_read_begin(&c, 4 * KiB, 7 * ZS, true, &r) == -1 &&
        errno == EIO);
  CHECK(znbd_req_read_begin(&c, 4 * KiB, 8 * ZS, true, &r) == ZNBD_ASYNC_SYNC);
  znbd_dev_free(d);

  static const char *const err[] = {"zone_read_past_wp", "error", NULL};
  d = dir_dev(err);
  znbd_req_ctx_init(&c, d);
  CHECK(znbd_req_read_begin(&c, 4 * KiB, 2 * ZS, true, &r) == -1 &&
        errno == EIO);
  znbd_dev_free(d);
}

/* FLUSH: the files written, none twice once synced; one being synced
 * is synced again by a second FLUSH. */
static void
test_flush(void)
{
  struct znbd_dev *d = dir_dev(NULL);
  struct znbd_req_ctx c;
  struct znbd_async_write w;
  struct znbd_async_flush f, f2;
  znbd_req_ctx_init(&c, d);
  CHECK_EQ(znbd_req_flush_begin(&c, &f), 0);
  CHECK_EQ(znbd_req_flush_end(&c, &f, 0), 0);
  CHECK_EQ(znbd_req_write_begin(&c, 4 * KiB, 5 * ZS, 0, true, &w), 0);
  file_write(&w.io, a, 4 * KiB);
  CHECK_EQ(znbd_req_write_end(&c, &w, 0), 0);
  CHECK_EQ(znbd_req_flush_begin(&c, &f), 0);
  CHECK_EQ(f.n, 1);
  CHECK_EQ(f.zones[0], 5);
  CHECK_EQ(fdatasync(f.fds[0]), 0);
  CHECK_EQ(znbd_req_flush_begin(&c, &f2), 0);
  CHECK_EQ(f2.n, 1); /* still being synced by the first */
  CHECK_EQ(znbd_req_flush_end(&c, &f, 0), 0);
  CHECK_EQ(znbd_req_flush_end(&c, &f2, 0), 0);
  CHECK_EQ(znbd_req_flush_begin(&c, &f), 0);
  CHECK_EQ(f.n, 0);
  CHECK_EQ(znbd_req_flush_end(&c, &f, 0), 0);
  /* A failed sync leaves the file to sync. */
  CHECK_EQ(znbd_req_write_begin(&c, 4 * KiB, 5 * ZS + 4 * KiB, 0, true, &w), 0);
  CHECK_EQ(znbd_req_write_end(&c, &w, 0), 0);
  CHECK_EQ(znbd_req_flush_begin(&c, &f), 0);
  CHECK(znbd_req_flush_end(&c, &f, EIO) == -1 && errno == EIO);
  CHECK_EQ(znbd_req_flush_begin(&c, &f), 0);
  CHECK_EQ(f.n, 1);
  CHECK_EQ(znbd_req_flush_end(&c, &f, 0), 0);
  znbd_dev_free(d);
}

/* Where the asynchronous path does not go. */
static void
test_sync_only(void)
{
  static const char *const ram[] = {"size", "8M", "zone_size", "1M", NULL};
  struct znbd_dev *d = test_dev_kv(ram);
  struct znbd_req_ctx c;
  struct znbd_async_write w;
  znbd_req_ctx_init(&c, d);
  CHECK(!znbd_dev_async(d));
  CHECK(znbd_req_write_begin(&c, 4 * KiB, ZS, 0, true, &w) == ZNBD_ASYNC_SYNC);
  CHECK(znbd_req_append_begin(&c, 4 * KiB, ZS, 0, true, &w) == ZNBD_ASYNC_SYNC);
  znbd_dev_free(d);
  static const char *const wc[] = {"write_cache", "true", NULL};
  d = dir_dev(wc);
  znbd_req_ctx_init(&c, d);
  CHECK(!znbd_dev_async(d));
  CHECK(znbd_req_write_begin(&c, 4 * KiB, ZS, 0, true, &w) == ZNBD_ASYNC_SYNC);
  znbd_dev_free(d);
  static const char *const bb[] = {"badblocks", "4096", NULL};
  d = dir_dev(bb);
  znbd_req_ctx_init(&c, d);
  CHECK(znbd_req_write_begin(&c, 4 * KiB, ZS, 0, true, &w) == ZNBD_ASYNC_SYNC);
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_EMPTY);
  znbd_dev_free(d);
}

/* A synchronous caller (the control socket's unfenced calls) waits for a
 * held zone: its reset lands after the write ended, so the zone ends
 * EMPTY (a reset that came first would have left the write's wp). */
struct resetter {
  struct znbd_dev *d;
  int r;
};

static void *
reset_zone6(void *arg)
{
  struct resetter *rs = arg;
  rs->r = znbd_dev_zone_op(rs->d, ZNBD_ZONE_OP_RESET, 6);
  return NULL;
}

static void
test_wait(void)
{
  struct znbd_dev *d = dir_dev(NULL);
  struct znbd_req_ctx c;
  struct znbd_async_write w;
  znbd_req_ctx_init(&c, d);
  CHECK_EQ(znbd_req_write_begin(&c, 8 * KiB, 6 * ZS, 0, true, &w), 0);
  struct resetter rs = {d, -2};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, reset_zone6, &rs) == 0);
  file_write(&w.io, a, 8 * KiB);
  CHECK_EQ(znbd_req_write_end(&c, &w, 0), 0);
  pthread_join(t, NULL);
  CHECK_EQ(rs.r, 0);
  CHECK_EQ(test_zone(d, 6).cond, ZNBD_ZONE_COND_EMPTY);
  CHECK_EQ(test_wp(d, 6), 6 * ZS);
  CHECK_EQ(file_size(6), 0);
  znbd_dev_free(d);
}

int
main(void)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(base, sizeof base, "%s/async_test.XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  test_write();
  test_failed();
  test_append();
  test_read();
  test_flush();
  test_sync_only();
  test_wait();
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", base);
  return check_done("async_test");
}
