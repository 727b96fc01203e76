/* The directory store (dir=, lib/store_dir.c) through lib/dev.c: format,
 * reopen with the same and with contradicting parameters, every zone's
 * condition, wp and bytes after a restart (a power cycle), more CLOSED
 * zones than zone_max_active, corrupt or foreign files, the lock, and a
 * write the file system refuses half-way (RLIMIT_FSIZE) changing nothing.
 * Every check runs twice: buffered (the default) and with
 * buffered_io=false (O_DIRECT); test_direct adds what only direct I/O
 * has (the page cache left alone, unaligned buffers and offsets).
 * Each check makes its own directory under $TMPDIR. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "check.h"
#include "store.h"
#include "store_dir.h"
#include "testdev.h"
#include "znbd/dev.h"
#include "znbd/params.h"
#include "dev_unfenced.h"

#define K 1024ULL
#define ZS (64 * K) /* zone size of the tests' devices */

static char base[4096];
static int ndirs;
static const char *buffered_io = "true"; /* the round: every device's */

/* A new directory path (not created) under BASE. */
static const char *
new_dir(char *buf, size_t len)
{
  snprintf(buf, len, "%s/d%d", base, ndirs++);
  return buf;
}

/* A device on DIR from the key, value pairs KV (NULL-terminated); NULL
 * with the message in ERR when parameters or the store refuse. */
static struct znbd_dev *
open_dev(const char *dir, const char *const *kv, char *err, size_t errlen)
{
  struct znbd_params p;
  struct znbd_dev *d = NULL;

  err[0] = '\0';
  znbd_params_init(&p);
  if (znbd_params_set(&p, "dir", dir, err, errlen) < 0)
    goto out;
  if (znbd_params_set(&p, "buffered_io", buffered_io, err, errlen) < 0)
    goto out;
  for (; kv[0]; kv += 2)
    if (znbd_params_set(&p, kv[0], kv[1], err, errlen) < 0)
      goto out;
  if (znbd_params_finish(&p, err, errlen) < 0)
    goto out;
  d = znbd_dev_new(&p, err, errlen);
out:
  znbd_params_free(&p);
  return d;
}

/* blocksize=512 given: the tests below write 512-byte pieces (a dir=
 * device defaults to the file system's block size, test_zloop). */
static const char *const geo[] = {
    "size", "512K",          "zone_size", "64K",       "zone_nr_conv",
    "1",    "zone_capacity", "48K",       "blocksize", "512",
    NULL};

/* Bytes [OFF, OFF+N) read back as test_fill(SEED). */
static bool
reads_back(struct znbd_dev *d, uint64_t off, size_t n, unsigned seed)
{
  uint8_t *a = malloc(n), *b = malloc(n);
  bool ok = a && b && znbd_dev_read(d, a, n, off, 0) == 0;
  if (ok) {
    test_fill(b, n, seed);
    ok = memcmp(a, b, n) == 0;
  }
  free(a);
  free(b);
  return ok;
}

static void
put(struct znbd_dev *d, uint64_t off, size_t n, unsigned seed)
{
  uint8_t *b = malloc(n);
  test_fill(b, n, seed);
  CHECK(znbd_dev_write(d, b, n, off, 0) == 0);
  free(b);
}

/* Size of DIR/NAME, or -1. */
static long long
fsize(const char *dir, const char *name)
{
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void
set_size(const char *dir, const char *name, off_t size)
{
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  CHECK(truncate(path, size) == 0);
}

static void
test_format_and_restart(void)
{
  char dir[4200], err[512];
  struct znbd_dev *d = open_dev(new_dir(dir, sizeof dir), geo, err, sizeof err);
  CHECK(d != NULL);
  if (!d) {
    fprintf(stderr, "%s\n", err);
    return;
  }
  /* zloop's layout: cnv-/seq-NNNNNN from zone 0, conv full size. */
  CHECK_EQ(fsize(dir, "cnv-000000"), ZS);
  CHECK_EQ(fsize(dir, "seq-000001"), 0);
  CHECK_EQ(fsize(dir, "seq-000007"), 0);
  CHECK(fsize(dir, "seq-000008") == -1);
  CHECK(fsize(dir, "znbd.meta") > 0);

  put(d, 4 * K, 8 * K, 1);                                 /* conv */
  put(d, 1 * ZS, 12 * K, 2);                               /* -> CLOSED */
  put(d, 2 * ZS, 48 * K, 3);                               /* -> FULL */
  put(d, 3 * ZS, 4 * K, 4);                                /* then finish */
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_FINISH, 3) == 0); /* FULL */
  put(d, 4 * ZS, 4 * K, 5);                                /* then reset */
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 4) == 0);  /* EMPTY */
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_OPEN, 5) == 0);   /* EXP, empty */
  put(d, 6 * ZS, 8 * K, 6);                                /* readonly */
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_SET_READONLY, 6) == 0);
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_SET_OFFLINE, 7) == 0);
  CHECK(znbd_dev_flush(d) == 0);
  CHECK_EQ(fsize(dir, "seq-000001"), 12 * K); /* the file size is the wp */
  CHECK_EQ(fsize(dir, "seq-000003"), 48 * K); /* finish: the capacity */
  CHECK_EQ(fsize(dir, "seq-000004"), 0);      /* reset: empty */
  znbd_dev_free(d);

  /* Reopen with no geometry at all: the directory gives it; the zones
   * take their power-cycle conditions (rule `power-cycle`). */
  static const char *const none[] = {NULL};
  d = open_dev(dir, none, err, sizeof err);
  CHECK(d != NULL);
  if (!d) {
    fprintf(stderr, "%s\n", err);
    return;
  }
  CHECK_EQ(znbd_dev_size(d), 512 * K);
  CHECK_EQ(znbd_dev_nr_zones(d), 8);
  CHECK(reads_back(d, 4 * K, 8 * K, 1));
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_CLOSED);
  CHECK_EQ(test_zone(d, 1).wp, 1 * ZS + 12 * K);
  CHECK(reads_back(d, 1 * ZS, 12 * K, 2));
  CHECK_EQ(test_zone(d, 2).cond, ZNBD_ZONE_COND_FULL);
  CHECK(reads_back(d, 2 * ZS, 48 * K, 3));
  CHECK_EQ(test_zone(d, 3).cond, ZNBD_ZONE_COND_FULL);
  CHECK(reads_back(d, 3 * ZS, 4 * K, 4));
  CHECK_EQ(test_zone(d, 4).cond, ZNBD_ZONE_COND_EMPTY);
  CHECK_EQ(test_zone(d, 4).wp, 4 * ZS);
  CHECK_EQ(test_zone(d, 5).cond,
           ZNBD_ZONE_COND_EMPTY); /* open, never written */
  CHECK_EQ(test_zone(d, 6).cond, ZNBD_ZONE_COND_READONLY);
  CHECK(reads_back(d, 6 * ZS, 8 * K, 6));
  CHECK_EQ(test_zone(d, 7).cond, ZNBD_ZONE_COND_OFFLINE);
  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.nr_closed, 1);
  CHECK_EQ(st.nr_imp_open + st.nr_exp_open, 0);
  /* Writing on at the wp of the restored CLOSED zone works. */
  put(d, 1 * ZS + 12 * K, 4 * K, 7);
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_IMP_OPEN);
  /* Back online: EMPTY, and kept so. */
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_ONLINE, 7) == 0);
  znbd_dev_free(d);
  d = open_dev(dir, geo, err, sizeof err); /* the same geometry: fine */
  CHECK(d != NULL);
  if (d) {
    CHECK_EQ(test_zone(d, 7).cond, ZNBD_ZONE_COND_EMPTY);
    CHECK_EQ(test_zone(d, 6).cond, ZNBD_ZONE_COND_READONLY);
    CHECK(reads_back(d, 1 * ZS + 12 * K, 4 * K, 7));
    znbd_dev_free(d);
  }
  /* zone_offline given on reopen: applied on top of the record, and
   * recorded; zone_full is ignored (the files say what is full). */
  static const char *const more[] = {"zone_offline", "4", "zone_full", "true",
                                     NULL};
  d = open_dev(dir, more, err, sizeof err);
  CHECK(d != NULL);
  znbd_dev_free(d);
  d = open_dev(dir, none, err, sizeof err);
  CHECK(d != NULL);
  if (d) {
    CHECK_EQ(test_zone(d, 4).cond, ZNBD_ZONE_COND_OFFLINE);
    CHECK_EQ(test_zone(d, 6).cond, ZNBD_ZONE_COND_READONLY);
    CHECK_EQ(test_zone(d, 5).cond, ZNBD_ZONE_COND_EMPTY); /* not made FULL */
    znbd_dev_free(d);
  }
  printf("format, restart: conditions, wps and bytes come back\n");
}

/* Each given parameter that contradicts the directory is refused,
 * naming it and both values. */
static void
test_mismatch(void)
{
  char dir[4200], err[512];
  struct znbd_dev *d = open_dev(new_dir(dir, sizeof dir), geo, err, sizeof err);
  CHECK(d != NULL);
  znbd_dev_free(d);
  static const struct {
    const char *key, *value, *given, *recorded;
  } bad[] = {
      {"size", "1M", "1048576", "524288"},
      {"zone_size", "32K", "32768", "65536"},
      {"zone_capacity", "64K", "65536", "49152"},
      {"zone_nr_conv", "2", "2", "1"},
      {"blocksize", "4096", "4096", "512"},
      {"zoned", "false", "0", "1"},
      {"zone_max_open", "3", "3", "0"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *kv[] = {bad[i].key, bad[i].value, NULL};
    d = open_dev(dir, kv, err, sizeof err);
    CHECK(d == NULL);
    znbd_dev_free(d);
    CHECK(strncmp(err, bad[i].key, strlen(bad[i].key)) == 0 &&
          err[strlen(bad[i].key)] == ':');
    CHECK(strstr(err, bad[i].given) && strstr(err, bad[i].recorded));
    if (strncmp(err, bad[i].key, strlen(bad[i].key)) ||
        !strstr(err, bad[i].given))
      fprintf(stderr, "  got: %s\n", err);
  }
  printf("mismatch: %zu contradicting parameters refused by name\n",
         sizeof bad / sizeof bad[0]);
}

/* A damaged directory stops start-up with a message naming the file;
 * nothing is re-formatted. */
static void
test_corrupt(void)
{
  char dir[4200], err[512], path[4300];
  static const char *const none[] = {NULL};
  struct znbd_dev *d = open_dev(new_dir(dir, sizeof dir), geo, err, sizeof err);
  CHECK(d != NULL);
  put(d, 1 * ZS, 4 * K, 1);
  znbd_dev_free(d);

  set_size(dir, "seq-000002", 48 * K + 512); /* beyond the capacity */
  CHECK(open_dev(dir, none, err, sizeof err) == NULL);
  CHECK(strstr(err, "seq-000002") != NULL);
  set_size(dir, "seq-000002", 0);

  set_size(dir, "seq-000002", 8292); /* not a whole number of blocks */
  CHECK(open_dev(dir, none, err, sizeof err) == NULL);
  CHECKF(strstr(err, "seq-000002") && strstr(err, "8292") &&
             strstr(err, "block size 512"),
         "%s", err);
  set_size(dir, "seq-000002", 0);

  /* Two zones sharing one file, by a symbolic or a hard link: each would
   * overwrite the other's data. */
  char f3[4400], f4[4400], f3moved[4500];
  snprintf(f3, sizeof f3, "%s/seq-000003", dir);
  snprintf(f4, sizeof f4, "%s/seq-000004", dir);
  snprintf(f3moved, sizeof f3moved, "%s.moved", f3);
  CHECK(rename(f3, f3moved) == 0);
  CHECK(symlink("seq-000004", f3) == 0);
  errno = 0;
  CHECK(open_dev(dir, none, err, sizeof err) == NULL && errno == ELOOP);
  CHECKF(strstr(err, "seq-000003") && strstr(err, "symbolic link"), "%s", err);
  CHECK(unlink(f3) == 0 && link(f4, f3) == 0);
  errno = 0;
  CHECK(open_dev(dir, none, err, sizeof err) == NULL && errno == EINVAL);
  CHECKF(strstr(err, "seq-000003") && strstr(err, "seq-000004") &&
             strstr(err, "same file"),
         "%s", err);
  CHECK(unlink(f3) == 0 && rename(f3moved, f3) == 0);

  set_size(dir, "cnv-000000", ZS - 512); /* conventional, wrong size */
  CHECK(open_dev(dir, none, err, sizeof err) == NULL);
  CHECK(strstr(err, "cnv-000000") != NULL);
  set_size(dir, "cnv-000000", ZS);

  snprintf(path, sizeof path, "%s/seq-000005", dir); /* missing */
  CHECK(rename(path, "/dev/null/x") < 0);            /* (stays) */
  char moved[4400];
  snprintf(moved, sizeof moved, "%s.moved", path);
  CHECK(rename(path, moved) == 0);
  CHECK(open_dev(dir, none, err, sizeof err) == NULL);
  CHECK(strstr(err, "seq-000005") != NULL);
  CHECK(rename(moved, path) == 0);

  /* Truncated metadata: every prefix without the "end" line. */
  snprintf(path, sizeof path, "%s/znbd.meta", dir);
  long long msize = fsize(dir, "znbd.meta");
  char *keep = malloc((size_t)msize);
  FILE *f = fopen(path, "r");
  CHECK(f && fread(keep, 1, (size_t)msize, f) == (size_t)msize);
  if (f)
    fclose(f);
  for (long long cut = 0; cut < msize - 4; cut += 7) {
    set_size(dir, "znbd.meta", cut);
    d = open_dev(dir, none, err, sizeof err);
    CHECK(d == NULL && strstr(err, "znbd.meta"));
    znbd_dev_free(d);
  }
  f = fopen(path, "w");
  CHECK(f && fwrite("garbage\n", 1, 8, f) == 8);
  if (f)
    fclose(f);
  CHECK(open_dev(dir, none, err, sizeof err) == NULL);
  CHECK(strstr(err, "znbd.meta") && strstr(err, "corrupt"));
  f = fopen(path, "w");
  CHECK(f && fwrite(keep, 1, (size_t)msize, f) == (size_t)msize);
  if (f)
    fclose(f);
  free(keep);
  d = open_dev(dir, none, err, sizeof err); /* repaired: opens, data kept */
  CHECK(d != NULL);
  if (d) {
    CHECK(reads_back(d, 1 * ZS, 4 * K, 1));
    znbd_dev_free(d);
  }

  /* A directory with files of someone else's is not formatted. */
  new_dir(dir, sizeof dir);
  CHECK(mkdir(dir, 0700) == 0);
  snprintf(path, sizeof path, "%s/precious", dir);
  f = fopen(path, "w");
  CHECK(f != NULL);
  if (f)
    fclose(f);
  CHECK(open_dev(dir, geo, err, sizeof err) == NULL);
  CHECK(strstr(err, "precious") != NULL);
  CHECK(fsize(dir, "znbd.meta") == -1);

  /* A missing parent directory. */
  snprintf(path, sizeof path, "%s/no/such", base);
  CHECK(open_dev(path, geo, err, sizeof err) == NULL);
  CHECK(strstr(err, path) != NULL);
  printf("corrupt: wrong sizes, missing file, truncated metadata, foreign "
         "files refused by name\n");
}

static void
test_lock(void)
{
  char dir[4200], err[512];
  struct znbd_dev *a = open_dev(new_dir(dir, sizeof dir), geo, err, sizeof err);
  CHECK(a != NULL);
  struct znbd_dev *b = open_dev(dir, geo, err, sizeof err);
  CHECK(b == NULL && errno == EEXIST);
  CHECK(strstr(err, "in use") && strstr(err, "znbd.lock"));
  znbd_dev_free(b);
  znbd_dev_free(a);
  b = open_dev(dir, geo, err, sizeof err); /* free again */
  CHECK(b != NULL);

  /* Deleting znbd.lock under a running server does not let a second one
   * in: the directory itself is locked. */
  char lock[4300];
  snprintf(lock, sizeof lock, "%s/znbd.lock", dir);
  CHECK(unlink(lock) == 0);
  a = open_dev(dir, geo, err, sizeof err);
  CHECK(a == NULL && errno == EEXIST);
  CHECKF(strstr(err, "in use") && strstr(err, dir), "%s", err);
  znbd_dev_free(a);
  znbd_dev_free(b);
  b = open_dev(dir, geo, err, sizeof err); /* free again */
  CHECK(b != NULL);
  znbd_dev_free(b);
  /* A directory with no znbd.meta and no size: the message says what is
   * missing and why, for a new and for an existing empty directory. */
  static const char *const nosize[] = {"zone_size", "64K", NULL};
  for (int i = 0; i < 2; i++) {
    char fresh[4200];
    new_dir(fresh, sizeof fresh);
    if (i)
      CHECK(mkdir(fresh, 0700) == 0);
    errno = 0;
    a = open_dev(fresh, nosize, err, sizeof err);
    CHECK(a == NULL && errno == EINVAL);
    CHECKF(strstr(err, "size") && strstr(err, "has no znbd.meta") &&
               strstr(err, fresh),
           "%s", err);
    znbd_dev_free(a);
  }
  /* A format cut short (zone files, its mark, no znbd.meta) is done
   * again (zone files without the mark are adopted: test_zloop). */
  char fresh[4200], mark[4300], meta[4300];
  a = open_dev(new_dir(fresh, sizeof fresh), geo, err, sizeof err);
  CHECK(a != NULL);
  put(a, 0, 4 * K, 7);
  znbd_dev_free(a);
  snprintf(mark, sizeof mark, "%s/znbd.formatting", fresh);
  snprintf(meta, sizeof meta, "%s/znbd.meta", fresh);
  CHECK(access(mark, F_OK) == -1 && errno == ENOENT); /* gone once done */
  CHECK(unlink(meta) == 0);
  int mfd = open(mark, O_CREAT | O_WRONLY, 0600);
  CHECK(mfd >= 0);
  close(mfd);
  a = open_dev(fresh, geo, err, sizeof err);
  CHECKF(a != NULL, "format done again: %s", err);
  CHECK(access(mark, F_OK) == -1 && access(meta, F_OK) == 0);
  uint8_t zero[4096] = {0}, got[4096];
  CHECK(a && znbd_dev_read(a, got, sizeof got, 0, 0) == 0 &&
        memcmp(got, zero, sizeof got) == 0);
  znbd_dev_free(a);
  printf("lock: a second user of the directory is refused, also when "
         "znbd.lock was deleted\n");
}

/* Rule `power-cycle-over-active`: restored CLOSED zones beyond zone_max_active:
 * they stay CLOSED, no new zone may become active until enough of them are
 * finished or reset. */
static void
test_too_many_closed(void)
{
  char dir[4200], err[512];
  static const char *const kv[] = {
      "size", "512K", "zone_size", "64K", "zone_max_active", "2", NULL};
  struct znbd_dev *d = open_dev(new_dir(dir, sizeof dir), kv, err, sizeof err);
  CHECK(d != NULL);
  znbd_dev_free(d);
  set_size(dir, "seq-000001", 4 * K);
  set_size(dir, "seq-000002", 4 * K);
  set_size(dir, "seq-000003", 4 * K);
  d = open_dev(dir, kv, err, sizeof err);
  CHECK(d != NULL);
  if (!d)
    return;
  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.nr_closed, 3);
  uint8_t b[4096] = {1};
  errno = 0;
  CHECK(znbd_dev_write(d, b, sizeof b, 5 * ZS, 0) < 0 && errno == EOVERFLOW);
  CHECK(znbd_dev_write(d, b, sizeof b, 1 * ZS + 4 * K, 0) == 0); /* CLOSED */
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_FINISH, 1) == 0);
  errno = 0;
  CHECK(znbd_dev_write(d, b, sizeof b, 5 * ZS, 0) < 0 && errno == EOVERFLOW);
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 2) == 0);
  CHECK(znbd_dev_write(d, b, sizeof b, 5 * ZS, 0) == 0);
  znbd_dev_free(d);
  printf("max_active: 3 restored CLOSED zones over a limit of 2 drain\n");
}

/* The file system refuses part of a write (RLIMIT_FSIZE stands in for a
 * full disk): the request fails and no byte, wp or file size changes. */
static void
test_refused_write(void)
{
  char dir[4200], err[512];
  struct znbd_dev *d = open_dev(new_dir(dir, sizeof dir), geo, err, sizeof err);
  CHECK(d != NULL);
  if (!d)
    return;
  put(d, 1 * ZS, 8 * K, 1);
  struct rlimit old, rl;
  getrlimit(RLIMIT_FSIZE, &old);
  rl = old;
  rl.rlim_cur = 16 * K;
  signal(SIGXFSZ, SIG_IGN);
  CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
  uint8_t *b = malloc(32 * K);
  test_fill(b, 32 * K, 9);
  /* 8K fit below the limit, the rest does not: undone. */
  CHECK(znbd_dev_write(d, b, 32 * K, 1 * ZS + 8 * K, 0) < 0);
  CHECK_EQ(test_zone(d, 1).wp, 1 * ZS + 8 * K);
  CHECK_EQ(fsize(dir, "seq-000001"), 8 * K);
  CHECK(reads_back(d, 1 * ZS, 8 * K, 1));
  /* Conventional: nothing written either. */
  CHECK(znbd_dev_write(d, b, 32 * K, 24 * K, 0) < 0);
  uint8_t z[32 * K];
  CHECK(znbd_dev_read(d, z, sizeof z, 24 * K, 0) == 0);
  bool zero = true;
  for (size_t i = 0; i < sizeof z; i++)
    zero &= z[i] == 0;
  CHECK(zero);
  CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
  CHECK(znbd_dev_write(d, b, 32 * K, 1 * ZS + 8 * K, 0) == 0);
  CHECK_EQ(test_zone(d, 1).wp, 1 * ZS + 40 * K);
  free(b);
  znbd_dev_free(d);
  printf("refused write: undone, wp and bytes unchanged\n");
}

/* Bytes DIR/NAME holds on disk (st_blocks), or -1. */
static long long
fblocks(const char *dir, const char *name)
{
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 ? (long long)st.st_blocks * 512 : -1;
}

/* zone_prealloc=true: the first write (or an explicit open) allocates the
 * zone's capacity while the file size stays the wp; reset frees it.
 * zone_prealloc=false allocates as written. */
static void
test_prealloc(void)
{
  char dir[4200], err[512];
  static const char *const on[] = {"size",          "512K", "zone_size", "64K",
                                   "zone_capacity", "48K",  NULL};
  struct znbd_dev *d = open_dev(new_dir(dir, sizeof dir), on, err, sizeof err);
  CHECK(d != NULL);
  if (!d)
    return;
  put(d, 0, 4 * K, 1);
  CHECK_EQ(fsize(dir, "seq-000000"), 4 * K);
  if (fblocks(dir, "seq-000000") < (long long)(48 * K)) {
    /* A file system without fallocate: nothing more to see. */
    printf("prealloc: fallocate not supported here, skipped\n");
    znbd_dev_free(d);
    return;
  }
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_OPEN, 1) == 0);
  CHECK_EQ(fsize(dir, "seq-000001"), 0);
  CHECK(fblocks(dir, "seq-000001") >= (long long)(48 * K));
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 0) == 0);
  CHECK_EQ(fblocks(dir, "seq-000000"), 0);
  znbd_dev_free(d);

  static const char *const off[] = {"zone_prealloc", "false", NULL};
  d = open_dev(new_dir(dir, sizeof dir), off + 0, err, sizeof err);
  CHECK(d == NULL); /* no size: a new directory needs one */
  static const char *const off2[] = {
      "size", "512K", "zone_size", "64K", "zone_prealloc", "false", NULL};
  d = open_dev(dir, off2, err, sizeof err);
  CHECK(d != NULL);
  if (!d)
    return;
  put(d, 0, 4 * K, 1);
  CHECK(fblocks(dir, "seq-000000") < (long long)(32 * K));
  znbd_dev_free(d);
  printf("prealloc: capacity allocated on first write and open, freed by "
         "reset\n");
}

/* zoned=false: one sparse file, "data". */
static void
test_plain(void)
{
  char dir[4200], err[512];
  static const char *const kv[] = {"size", "256K", "zoned", "false", NULL};
  struct znbd_dev *d = open_dev(new_dir(dir, sizeof dir), kv, err, sizeof err);
  CHECK(d != NULL);
  if (!d)
    return;
  CHECK_EQ(fsize(dir, "data"), 256 * K);
  put(d, 100 * K, 4 * K, 3);
  znbd_dev_free(d);
  static const char *const none[] = {NULL};
  d = open_dev(dir, none, err, sizeof err);
  CHECK(d != NULL);
  if (d) {
    CHECK_EQ(znbd_dev_nr_zones(d), 0);
    CHECK(reads_back(d, 100 * K, 4 * K, 3));
    znbd_dev_free(d);
  }
  printf("zoned=false: one data file, kept\n");
}

/* The store of params KV on DIR (plus this round's buffered_io), opened
 * directly: what the kick counter needs.  NULL when refused. */
static struct znbd_store *
open_store(const char *dir, const char *const *kv)
{
  struct znbd_params p;
  struct znbd_store *st = NULL;
  char err[512] = "";
  znbd_params_init(&p);
  if (znbd_params_set(&p, "dir", dir, err, sizeof err) == 0 &&
      znbd_params_set(&p, "buffered_io", buffered_io, err, sizeof err) == 0) {
    for (; kv[0]; kv += 2)
      if (znbd_params_set(&p, kv[0], kv[1], err, sizeof err) < 0)
        goto out;
    if (znbd_params_finish(&p, err, sizeof err) == 0)
      st = znbd_store_dir_open(&p, err, sizeof err);
  }
out:
  if (!st)
    fprintf(stderr, "open_store: %s\n", err);
  znbd_params_free(&p);
  return st;
}

/* writeback_mb=1: every MiB written to one file kicks its writeback
 * (buffered I/O only), sequential, conventional and zoned=false alike;
 * zeros written as data count, a sequential zone's zeroing (a truncate)
 * does not; writeback_mb=0 never kicks.  The bytes read back and survive
 * a reopen. */
static void
test_writeback(void)
{
  char dir[4200];
  const uint64_t M = 1024 * K;
  static const char *const kv[] = {
      "size", "8M",           "zone_size", "2M", "zone_nr_conv",
      "1",    "writeback_mb", "1",         NULL};
  bool buffered = strcmp(buffered_io, "true") == 0;
  struct znbd_store *st = open_store(new_dir(dir, sizeof dir), kv);
  CHECK(st != NULL);
  if (!st)
    return;
  uint8_t *b = malloc(3 * M), *r = malloc(3 * M);
  test_fill(b, 3 * M, 7);
  /* Sequential zone 1: 1.5 MiB in 128 KiB writes. */
  for (uint64_t o = 0; o < 3 * M / 2; o += 128 * K)
    CHECK(znbd_store_write(st, b + o, 128 * K, 2 * M + o) == 0);
  CHECK_EQ(znbd_store_dir_kicks(st), buffered ? 1 : 0);
  /* Conventional zone 0, overwritten: 2 MiB in one write, then 1 MiB. */
  CHECK(znbd_store_write(st, b, 2 * M, 0) == 0);
  CHECK_EQ(znbd_store_dir_kicks(st), buffered ? 2 : 0);
  CHECK(znbd_store_zero(st, M, 0, ZNBD_STORE_ZERO_ALLOCATE) == 0);
  CHECK_EQ(znbd_store_dir_kicks(st), buffered ? 3 : 0);
  /* Zeros at a sequential zone's wp grow its file: no pages dirtied. */
  CHECK(znbd_store_zero(st, M, 4 * M, 0) == 0);
  CHECK_EQ(znbd_store_dir_kicks(st), buffered ? 3 : 0);
  CHECK(znbd_store_read(st, r, 3 * M / 2, 2 * M) == 0);
  CHECK(memcmp(r, b, 3 * M / 2) == 0);
  CHECK(znbd_store_flush(st) == 0);
  znbd_store_free(st);
  CHECK_EQ(fsize(dir, "seq-000001"), (long long)(3 * M / 2));

  static const char *const off[] = {"writeback_mb", "0", NULL};
  st = open_store(dir, off);
  CHECK(st != NULL);
  if (st) {
    CHECK(znbd_store_read(st, r, 3 * M / 2, 2 * M) == 0);
    CHECK(memcmp(r, b, 3 * M / 2) == 0);
    CHECK(znbd_store_read(st, r, M, M) == 0);
    CHECK(memcmp(r, b + M, M) == 0);
    CHECK(znbd_store_write(st, b, 2 * M, 0) == 0);
    CHECK_EQ(znbd_store_dir_kicks(st), 0);
    znbd_store_free(st);
  }

  static const char *const plain[] = {"size",         "4M", "zoned", "false",
                                      "writeback_mb", "1",  NULL};
  st = open_store(new_dir(dir, sizeof dir), plain);
  CHECK(st != NULL);
  if (st) {
    CHECK(znbd_store_write(st, b, 3 * M, 512 * K) == 0);
    CHECK_EQ(znbd_store_dir_kicks(st), buffered ? 1 : 0);
    CHECK(znbd_store_read(st, r, 3 * M, 512 * K) == 0);
    CHECK(memcmp(r, b, 3 * M) == 0);
    znbd_store_free(st);
  }
  free(b);
  free(r);
  printf("writeback_mb: a kick per MiB written to a file%s\n",
         buffered ? "" : " (none with direct I/O)");
}

/* Pages of DIR/NAME in the page cache (mincore over a mapping), or -1. */
static long
cached_pages(const char *dir, const char *name)
{
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_RDONLY);
  struct stat st;
  long n = -1;
  if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
    n = fd < 0 ? -1 : 0;
    goto out;
  }
  long pg = sysconf(_SC_PAGESIZE);
  size_t np = ((size_t)st.st_size + (size_t)pg - 1) / (size_t)pg;
  unsigned char *v = malloc(np);
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (v && m != MAP_FAILED && mincore(m, (size_t)st.st_size, v) == 0) {
    n = 0;
    for (size_t i = 0; i < np; i++)
      n += v[i] & 1;
  }
  if (m != MAP_FAILED)
    munmap(m, (size_t)st.st_size);
  free(v);
out:
  if (fd >= 0)
    close(fd);
  return n;
}

/* buffered_io=false: aligned writes bypass the page cache (from an
 * aligned buffer and, through the bounce buffer, from an unaligned one);
 * offsets and lengths direct I/O cannot take go buffered and read back
 * coherently through either path; bytes survive a restart in either
 * mode; the default keeps using the page cache. */
static void
test_direct(void)
{
  char dir[4200], err[512];
  struct znbd_dev *d = open_dev(new_dir(dir, sizeof dir), geo, err, sizeof err);
  if (!d && strstr(err, "O_DIRECT")) {
    printf("direct: no O_DIRECT on this file system, skipped (%s)\n", err);
    return;
  }
  CHECK(d != NULL);
  if (!d)
    return;
  uint8_t *al = NULL;
  CHECK(posix_memalign((void **)&al, 4096, 64 * K + 4096) == 0);
  test_fill(al, 16 * K, 1);
  CHECK(znbd_dev_write(d, al, 16 * K, 1 * ZS, 0) == 0); /* aligned */
  test_fill(al + 1, 16 * K, 2);
  CHECK(znbd_dev_write(d, al + 1, 16 * K, 1 * ZS + 16 * K, 0) == 0);
  put(d, 8 * K, 2 * K + 512, 3); /* conventional, 512-byte tail */
  CHECK_EQ(fsize(dir, "seq-000001"), 32 * K);
  CHECK_EQ(cached_pages(dir, "seq-000001"), 0);
  CHECK(reads_back(d, 1 * ZS, 16 * K, 1));
  CHECK(reads_back(d, 1 * ZS + 16 * K, 16 * K, 2));
  CHECK(reads_back(d, 8 * K, 2 * K + 512, 3));
  /* A read into an unaligned buffer, past the wp: zeros after the data. */
  CHECK(znbd_dev_read(d, al + 3, 48 * K, 1 * ZS, 0) == 0);
  uint8_t *want = calloc(1, 48 * K);
  test_fill(want, 16 * K, 1);
  test_fill(want + 16 * K, 16 * K, 2);
  CHECK(memcmp(al + 3, want, 48 * K) == 0);
  CHECK_EQ(cached_pages(dir, "seq-000001"), 0);
  znbd_dev_free(d);

  /* The store itself at offsets no device request has: the buffered
   * descriptor, coherent with direct reads and writes over it. */
  struct znbd_params p;
  znbd_params_init(&p);
  CHECK(znbd_params_set(&p, "dir", dir, err, sizeof err) == 0);
  CHECK(znbd_params_set(&p, "buffered_io", "false", err, sizeof err) == 0);
  CHECK(znbd_params_finish(&p, err, sizeof err) == 0);
  struct znbd_store *st = znbd_store_dir_open(&p, err, sizeof err);
  CHECK(st != NULL);
  if (st) {
    test_fill(al, 4 * K, 4);
    CHECK(znbd_store_write(st, al, 100, 3) == 0);          /* buffered */
    CHECK(znbd_store_read(st, al + 8 * K, 4 * K, 0) == 0); /* direct */
    CHECK(memcmp(al + 8 * K + 3, al, 100) == 0);
    CHECK(al[8 * K] == 0 && al[8 * K + 103] == 0);
    test_fill(al, 4 * K, 5);
    CHECK(znbd_store_write(st, al, 4 * K, 0) == 0); /* direct over it */
    CHECK(znbd_store_read(st, al + 8 * K + 1, 200, 1) == 0); /* buffered */
    CHECK(memcmp(al + 8 * K + 1, al + 1, 200) == 0);
    znbd_store_free(st);
  }
  znbd_params_free(&p);

  /* Restart, buffered: the bytes written direct are there. */
  const char *was = buffered_io;
  buffered_io = "true";
  static const char *const none[] = {NULL};
  d = open_dev(dir, none, err, sizeof err);
  CHECK(d != NULL);
  if (d) {
    CHECK_EQ(test_zone(d, 1).wp, 1 * ZS + 32 * K);
    CHECK(reads_back(d, 1 * ZS, 16 * K, 1));
    CHECK(reads_back(d, 1 * ZS + 16 * K, 16 * K, 2));
    put(d, 1 * ZS + 32 * K, 4 * K, 6);
    CHECK(cached_pages(dir, "seq-000001") > 0); /* buffered: cached */
    znbd_dev_free(d);
  }
  buffered_io = was;
  d = open_dev(dir, none, err, sizeof err);
  CHECK(d != NULL);
  if (d) {
    CHECK(reads_back(d, 1 * ZS + 32 * K, 4 * K, 6));
    znbd_dev_free(d);
  }
  free(want);
  free(al);
  printf("direct: page cache bypassed, unaligned buffers and offsets, "
         "restart in either mode\n");
}

/* Linux zloop interchange (the NBD side: tests/nbd/zloop.sh).  A new
 * zoned directory takes the file system's block size as zloop does; a
 * directory of zone files without znbd.meta is adopted with the geometry
 * given, a zone the first zloop (6.16) finished (file at the zone size, the
 * capacity smaller) is FULL, no file changes; zoned=false and a file of
 * another geometry are refused by name. */
static void
test_zloop(void)
{
  char dir[4000], err[512], path[4300];
  static const char *const nobs[] = {"size", "512K", "zone_size", "64K", NULL};
  struct statvfs sv;
  struct znbd_dev *d =
      open_dev(new_dir(dir, sizeof dir), nobs, err, sizeof err);
  CHECKF(d != NULL, "%s", err);
  CHECK(statvfs(dir, &sv) == 0);
  uint32_t want = sv.f_bsize <= 512 ? 512 : 4096;
  CHECK(d && znbd_dev_params(d)->blocksize == want);
  znbd_dev_free(d);

  /* zloop's files for size=512K zone_size=64K zone_capacity=48K, one
   * conventional zone. */
  new_dir(dir, sizeof dir);
  CHECK(mkdir(dir, 0700) == 0);
  static const struct {
    const char *name;
    off_t data, size;
  } files[] = {{"cnv-000000", 8 * K, ZS},      {"seq-000001", 4 * K, ZS},
               {"seq-000002", 48 * K, 48 * K}, {"seq-000003", 4 * K, 4 * K},
               {"seq-000004", 0, 0},           {"seq-000005", 0, 0},
               {"seq-000006", 0, 0},           {"seq-000007", 0, 0}};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    uint8_t *b = malloc(48 * K);
    test_fill(b, (size_t)files[i].data, (unsigned)i);
    CHECK(fd >= 0 &&
          pwrite(fd, b, (size_t)files[i].data, 0) == (ssize_t)files[i].data);
    CHECK(ftruncate(fd, files[i].size) == 0);
    close(fd);
    free(b);
  }
  static const char *const flat[] = {"size", "512K", "zoned", "false", NULL};
  d = open_dev(dir, flat, err, sizeof err);
  CHECKF(d == NULL && strstr(err, "zoned"), "%s", err);
  static const char *const geo_zl[] = {
      "size", "512K",         "zone_size", "64K", "zone_capacity",
      "48K",  "zone_nr_conv", "1",         NULL};
  snprintf(path, sizeof path, "%s/seq-000009", dir);
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  close(fd);
  d = open_dev(dir, geo_zl, err, sizeof err);
  CHECKF(d == NULL && strstr(err, "seq-000009"), "%s", err);
  CHECK(unlink(path) == 0);
  d = open_dev(dir, geo_zl, err, sizeof err);
  CHECKF(d != NULL, "%s", err);
  if (d) {
    CHECK(reads_back(d, 0, 8 * K, 0));
    CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_FULL);
    CHECK(reads_back(d, ZS, 4 * K, 1));
    CHECK_EQ(test_zone(d, 2).cond, ZNBD_ZONE_COND_FULL);
    CHECK(reads_back(d, 2 * ZS, 48 * K, 2));
    CHECK_EQ(test_zone(d, 3).cond, ZNBD_ZONE_COND_CLOSED);
    CHECK_EQ(test_zone(d, 3).wp, 3 * ZS + 4 * K);
    CHECK(reads_back(d, 3 * ZS, 4 * K, 3));
    CHECK_EQ(test_zone(d, 4).cond, ZNBD_ZONE_COND_EMPTY);
    znbd_dev_free(d);
  }
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
    CHECK_EQ(fsize(dir, files[i].name), files[i].size);
  CHECK(fsize(dir, "znbd.meta") > 0);
  printf("zloop: a zloop directory is adopted, its files unchanged; "
         "mismatches refused\n");
}

static void
all_tests(void)
{
  test_format_and_restart();
  test_mismatch();
  test_corrupt();
  test_lock();
  test_too_many_closed();
  test_refused_write();
  test_plain();
  test_prealloc();
  test_writeback();
  test_zloop();
}

int
main(void)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(base, sizeof base, "%s/dir_test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  all_tests();
  buffered_io = "false";
  printf("-- buffered_io=false\n");
  test_direct();
  all_tests();
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", base);
  return check_done("dir_test");
}
