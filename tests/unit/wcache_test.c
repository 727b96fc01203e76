/* The volatile write cache (write_cache=true, lib/wcache.c) through
 * lib/dev.c: a power cut keeps exactly what FLUSH, FUA and zone
 * management made durable (bytes, wp, conditions, counters, allocated
 * bytes), on the RAM store and on dir=; "power cut after N" cuts before
 * the write after the N-th; on dir= a crash (a child process that ends
 * without closing the device, as kill -9) is rolled back the same way at
 * the next open, and a clean close flushes; the same with writeback_mb
 * kicking writeback early.  write_cache=false refuses a power cut.  A
 * request fenced at a generation older than the last cut (znbd_req_ctx)
 * fails with ESHUTDOWN and changes nothing, also when it races the cut,
 * and a FUA write racing a cut and a flush is durable or changed nothing.
 * A damaged undo journal stops the next open and changes no file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testdev.h"
#include "znbd/dev.h"
#include "znbd/params.h"
#include "znbd/request.h"
#include "dev_unfenced.h"

#define K 1024ULL
#define ZS (64 * K)

static char base[4096];
static int ndirs;

/* A device from KV (key, value, ..., NULL) and DIR (NULL: RAM), or NULL
 * with the message in ERR (ERRLEN bytes). */
static struct znbd_dev *
try_open(const char *dir, const char *const *kv, char *err, size_t errlen)
{
  struct znbd_params p;
  struct znbd_dev *d = NULL;
  znbd_params_init(&p);
  if (dir && znbd_params_set(&p, "dir", dir, err, errlen) < 0)
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

/* try_open, or exit. */
static struct znbd_dev *
open_dev(const char *dir, const char *const *kv)
{
  char err[512] = "";
  struct znbd_dev *d = try_open(dir, kv, err, sizeof err);
  if (!d) {
    fprintf(stderr, "open_dev: %s\n", err);
    exit(1);
  }
  return d;
}

static const char *const geo_wc[] = {
    "size", "512K",          "zone_size", "64K",         "zone_nr_conv",
    "1",    "zone_capacity", "48K",       "write_cache", "true",
    NULL};
static const char *const geo_nowc[] = {
    "size", "512K",          "zone_size", "64K",         "zone_nr_conv",
    "1",    "zone_capacity", "48K",       "write_cache", "false",
    NULL};

static int
put(struct znbd_dev *d, uint64_t off, size_t n, unsigned seed)
{
  uint8_t *b = malloc(n);
  test_fill(b, n, seed);
  int r = znbd_dev_write(d, b, n, off, 0);
  free(b);
  return r;
}

/* put() by a connection's request context C (znbd/request.h). */
static int
put_rq(struct znbd_req_ctx *c, uint64_t off, size_t n, unsigned seed)
{
  uint8_t *b = malloc(n);
  test_fill(b, n, seed);
  int r = znbd_req_write(c, b, n, off, 0, NULL, NULL);
  free(b);
  return r;
}

/* [OFF, OFF+N) reads as test_fill(SEED), or zeros with SEED 0. */
static bool
reads(struct znbd_dev *d, uint64_t off, size_t n, unsigned seed)
{
  uint8_t *want = calloc(1, n), *got = malloc(n);
  if (seed)
    test_fill(want, n, seed);
  bool ok = znbd_dev_read(d, got, n, off, 0) == 0 && memcmp(want, got, n) == 0;
  free(want);
  free(got);
  return ok;
}

#define WP(d, i) (test_zone(d, i).wp - test_zone(d, i).start)

/* The durable state: written and flushed. */
static void
before_flush(struct znbd_dev *d)
{
  CHECK(put(d, 0, 8 * K, 1) == 0);       /* conv pages 0, 1 */
  CHECK(put(d, ZS, 8 * K, 2) == 0);      /* zone 1 */
  CHECK(put(d, 2 * ZS, 48 * K, 3) == 0); /* zone 2 FULL */
  CHECK(put(d, 6 * ZS, 4 * K, 11) == 0); /* zone 6 */
  CHECK(znbd_dev_flush(d) == 0);
}

/* What a power cut must undo, and what it must keep (rule `power-cut`). */
static void
after_flush(struct znbd_dev *d)
{
  CHECK(put(d, 4 * K, 8 * K, 4) == 0);      /* conv page 1 over, page 2 new */
  CHECK(put(d, ZS + 8 * K, 8 * K, 5) == 0); /* zone 1 on */
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_OPEN, 3) == 0);
  CHECK(put(d, 3 * ZS, 4 * K, 6) == 0); /* zone 3: opened, written */
  CHECK(put(d, 4 * ZS, 4 * K, 7) == 0); /* zone 4: FUA */
  CHECK(znbd_dev_sync(d, 4 * K, 4 * ZS) == 0);
  CHECK(put(d, 5 * ZS, 4 * K, 8) == 0); /* zone 5: then reset */
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 5) == 0);
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_FINISH, 6) == 0); /* durable */
  CHECK(put(d, 16 * K, 4 * K, 9) == 0); /* conv page 4: FUA */
  CHECK(znbd_dev_sync(d, 4 * K, 16 * K) == 0);
}

static void
check_rolled_back(struct znbd_dev *d, bool ram)
{
  CHECK(reads(d, 0, 8 * K, 1));
  CHECK(reads(d, 8 * K, 8 * K, 0));
  CHECK(reads(d, 16 * K, 4 * K, 9));
  CHECK_EQ(WP(d, 1), 8 * K);
  CHECK_EQ(test_zone(d, 1).cond, ZNBD_ZONE_COND_CLOSED);
  CHECK(reads(d, ZS, 8 * K, 2));
  CHECK(reads(d, ZS + 8 * K, 8 * K, 0));
  CHECK_EQ(test_zone(d, 2).cond, ZNBD_ZONE_COND_FULL);
  CHECK(reads(d, 2 * ZS, 48 * K, 3));
  CHECK_EQ(test_zone(d, 3).cond, ZNBD_ZONE_COND_EMPTY);
  CHECK_EQ(WP(d, 3), 0);
  CHECK_EQ(test_zone(d, 4).cond, ZNBD_ZONE_COND_CLOSED);
  CHECK_EQ(WP(d, 4), 4 * K);
  CHECK(reads(d, 4 * ZS, 4 * K, 7));
  CHECK_EQ(test_zone(d, 5).cond, ZNBD_ZONE_COND_EMPTY);
  CHECK_EQ(test_zone(d, 6).cond, ZNBD_ZONE_COND_FULL);
  CHECK(reads(d, 6 * ZS, 4 * K, 11));
  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.nr_imp_open + st.nr_exp_open, 0);
  CHECK_EQ(st.nr_closed, 2);
  if (ram) /* conv 0-8K and 16-20K, zones 1 8K, 2 48K, 4 4K, 6 4K */
    CHECK_EQ(st.allocated, (8 + 4 + 8 + 48 + 4 + 4) * K);
}

/* power-cut after 2: two writes run, the third is refused (ESHUTDOWN)
 * after the cut, which keeps the FUA write and what it covers. */
static void
cut_after(struct znbd_dev *d)
{
  uint64_t gen = znbd_dev_generation(d);
  CHECK(znbd_dev_power_cut(d, 2) == 0);
  CHECK(put(d, ZS + 8 * K, 4 * K, 20) == 0);
  CHECK(put(d, 0, 4 * K, 21) == 0); /* conv, not flushed */
  CHECK_EQ(znbd_dev_generation(d), gen);
  errno = 0;
  CHECK(put(d, ZS + 12 * K, 4 * K, 22) == -1 && errno == ESHUTDOWN);
  CHECK_EQ(znbd_dev_generation(d), gen + 1);
  CHECK_EQ(WP(d, 1), 8 * K);
  CHECK(reads(d, 0, 8 * K, 1));
  /* Again, with FUA on the second write. */
  CHECK(znbd_dev_power_cut(d, 2) == 0);
  CHECK(put(d, ZS + 8 * K, 4 * K, 23) == 0);
  CHECK(put(d, ZS + 12 * K, 4 * K, 24) == 0);
  CHECK(znbd_dev_sync(d, 4 * K, ZS + 12 * K) == 0);
  errno = 0;
  CHECK(znbd_dev_flush(d) == -1 && errno == ESHUTDOWN);
  CHECK_EQ(WP(d, 1), 16 * K);
  CHECK(reads(d, ZS + 8 * K, 4 * K, 23));
  CHECK(reads(d, ZS + 12 * K, 4 * K, 24));
  CHECK_EQ(znbd_dev_generation(d), gen + 2);
  /* After the cut, the device works again. */
  CHECK(put(d, ZS + 16 * K, 4 * K, 25) == 0);
  CHECK(reads(d, ZS + 16 * K, 4 * K, 25));
}

/* A connection's context fenced at the generation before a cut: every
 * change it asks for fails with ESHUTDOWN and changes nothing; fenced at
 * the new generation (or not fenced) it works; a refused write does not
 * count towards an armed "power-cut after N". */
static void
fence_after_cut(void)
{
  struct znbd_dev *d = open_dev(NULL, geo_wc);
  uint64_t gen = znbd_dev_generation(d);
  struct znbd_req_ctx c;
  znbd_req_ctx_init(&c, d);
  CHECK_EQ(c.gen, gen);
  CHECK(put_rq(&c, ZS, 4 * K, 1) == 0);
  CHECK(!znbd_req_cut(&c));
  CHECK(znbd_dev_power_cut(d, 0) == 0);
  CHECK(znbd_req_cut(&c));
  CHECK_EQ(WP(d, 1), 0);
  errno = 0;
  CHECK(put_rq(&c, 0, 4 * K, 2) == -1 && errno == ESHUTDOWN);
  errno = 0;
  CHECK(put_rq(&c, 2 * ZS, 4 * K, 3) == -1 && errno == ESHUTDOWN);
  errno = 0;
  CHECK(znbd_req_zone_op(&c, ZNBD_ZONE_OP_OPEN, 3) == -1 && errno == ESHUTDOWN);
  errno = 0;
  CHECK(znbd_req_trim(&c, ZS, 4 * ZS, 0) == -1 && errno == ESHUTDOWN);
  errno = 0;
  CHECK(znbd_req_flush(&c) == -1 && errno == ESHUTDOWN);
  errno = 0;
  CHECK(znbd_req_sync(&c, 4 * K, 0) == -1 && errno == ESHUTDOWN);
  uint64_t at;
  errno = 0;
  CHECK(znbd_req_append(&c, NULL, 4 * K, 3 * ZS, &at) == -1 &&
        errno == ESHUTDOWN);
  CHECK(reads(d, 0, 8 * K, 0));
  CHECK_EQ(test_zone(d, 2).cond, ZNBD_ZONE_COND_EMPTY);
  CHECK_EQ(test_zone(d, 3).cond, ZNBD_ZONE_COND_EMPTY);
  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.nr_imp_open + st.nr_exp_open + st.nr_closed, 0);
  CHECK_EQ(st.allocated, 0);

  /* Armed for after 1: the old connection's write is refused and does
   * not take the ticket; the new one's runs; the next one cuts. */
  CHECK(znbd_dev_power_cut(d, 1) == 0);
  errno = 0;
  CHECK(put_rq(&c, ZS, 4 * K, 4) == -1 && errno == ESHUTDOWN);
  CHECK_EQ(znbd_dev_generation(d), gen + 1);
  znbd_req_ctx_init(&c, d); /* a connection made now */
  CHECK_EQ(c.gen, gen + 1);
  CHECK(put_rq(&c, ZS, 4 * K, 5) == 0);
  CHECK(reads(d, ZS, 4 * K, 5));
  errno = 0;
  CHECK(put_rq(&c, ZS + 4 * K, 4 * K, 6) == -1 && errno == ESHUTDOWN);
  CHECK_EQ(znbd_dev_generation(d), gen + 2);
  CHECK_EQ(WP(d, 1), 0);
  CHECK(put(d, ZS, 4 * K, 7) == 0); /* unfenced */
  CHECK(reads(d, ZS, 4 * K, 7));
  znbd_dev_free(d);
}

/* Writers racing a cut. */
struct racer {
  struct znbd_req_ctx rq; /* fenced before the cut */
  uint32_t zone;          /* the sequential zone it fills, or 0: conventional */
  _Atomic bool *go;
  int refused; /* ESHUTDOWN seen */
  int other;   /* any other failure */
};

static void *
racer_main(void *arg)
{
  struct racer *r = arg;
  uint8_t b[4096];
  memset(b, 0xa5, sizeof b);
  while (!atomic_load(r->go))
    ;
  for (uint64_t i = 0; i < 12; i++) { /* zone capacity 48K */
    uint64_t off = r->zone ? r->zone * ZS + i * 4 * K : (i % 16) * 4 * K;
    if (znbd_req_write(&r->rq, b, sizeof b, off, 0, NULL, NULL) < 0) {
      if (errno == ESHUTDOWN)
        r->refused++;
      else
        r->other++;
      break;
    }
  }
  return NULL;
}

/* Four writers (one conventional, three sequential zones), fenced at the
 * generation before the cut, write while the cut happens; nothing was
 * flushed, so afterwards every byte reads zero and every zone is EMPTY
 * however the race went: a write either ran before the cut (and was
 * rolled back) or was refused. */
static void
fence_race(void)
{
  for (int round = 0; round < 200; round++) {
    struct znbd_dev *d = open_dev(NULL, geo_wc);
    _Atomic bool go = false;
    struct racer r[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
      r[i] = (struct racer){.zone = (uint32_t)(i ? i + 1 : 0), .go = &go};
      znbd_req_ctx_init(&r[i].rq, d);
      pthread_create(&t[i], NULL, racer_main, &r[i]);
    }
    atomic_store(&go, true);
    for (volatile int spin = 0; spin < round * 50; spin++)
      ;
    CHECK(znbd_dev_power_cut(d, 0) == 0);
    int other = 0;
    for (int i = 0; i < 4; i++) {
      pthread_join(t[i], NULL);
      other += r[i].other;
    }
    CHECK_EQ(other, 0);
    CHECK(reads(d, 0, 512 * K, 0));
    struct znbd_dev_stats st;
    znbd_dev_stats(d, &st);
    CHECK_EQ(st.nr_imp_open + st.nr_exp_open + st.nr_closed, 0);
    CHECK_EQ(st.allocated, 0);
    for (uint32_t z = 1; z < 8; z++)
      CHECK_EQ(test_zone(d, z).cond, ZNBD_ZONE_COND_EMPTY);
    znbd_dev_free(d);
  }
}

/* A FUA writer and a flusher, both fenced at the generation before the
 * cut, race it: each FUA write is ZNBD_WRITE_FUA (as the plugin sends
 * them), so the cut comes before or after the write and its FUA, never
 * between.  Afterwards zone 1's wp is exactly the end of the last write
 * that succeeded: every success was durable, every ESHUTDOWN changed
 * nothing, also when the flusher made the write durable before the cut
 * (with the FUA done as a second step, such a write failed with
 * ESHUTDOWN yet its bytes stayed). */
struct fua_racer {
  struct znbd_req_ctx rq; /* fenced before the cut */
  _Atomic bool *go, *stop;
  uint64_t ok_end; /* zone 1: end of the last write that succeeded */
  int other;       /* a failure other than ESHUTDOWN */
};

static void *
fua_writer(void *arg)
{
  struct fua_racer *r = arg;
  uint8_t b[4096];
  memset(b, 0x5a, sizeof b);
  while (!atomic_load(r->go))
    ;
  for (uint64_t i = 0; i < 12; i++) { /* zone capacity 48K */
    if (znbd_req_write(&r->rq, b, sizeof b, ZS + i * 4 * K, ZNBD_WRITE_FUA,
                       NULL, NULL) < 0) {
      r->other += errno != ESHUTDOWN;
      break;
    }
    r->ok_end = (i + 1) * 4 * K;
  }
  atomic_store(r->stop, true);
  return NULL;
}

static void *
flusher(void *arg)
{
  struct fua_racer *r = arg;
  while (!atomic_load(r->go))
    ;
  while (!atomic_load(r->stop))
    if (znbd_req_flush(&r->rq) < 0) {
      r->other += errno != ESHUTDOWN;
      break;
    }
  return NULL;
}

static void
fua_race(void)
{
  /* ZNBD_WRITE_FUA alone (no znbd_dev_sync after it) makes the write
   * durable: a sequential zone's and a conventional page's. */
  struct znbd_dev *d0 = open_dev(NULL, geo_wc);
  uint8_t b[4096];
  test_fill(b, sizeof b, 3);
  CHECK(znbd_dev_write(d0, b, sizeof b, 2 * ZS, 0) == 0);
  CHECK(znbd_dev_write(d0, b, sizeof b, 2 * ZS + 4 * K, ZNBD_WRITE_FUA) == 0);
  CHECK(znbd_dev_write(d0, b, sizeof b, 8 * K, ZNBD_WRITE_FUA) == 0);
  CHECK(znbd_dev_write(d0, b, sizeof b, 2 * ZS + 8 * K, 0) == 0);
  CHECK(znbd_dev_write(d0, b, sizeof b, 12 * K, 0) == 0);
  CHECK(znbd_dev_power_cut(d0, 0) == 0);
  CHECK_EQ(WP(d0, 2), 8 * K);
  CHECK(reads(d0, 2 * ZS, 4 * K, 3) && reads(d0, 2 * ZS + 4 * K, 4 * K, 3));
  CHECK(reads(d0, 2 * ZS + 8 * K, 4 * K, 0));
  CHECK(reads(d0, 8 * K, 4 * K, 3) && reads(d0, 12 * K, 4 * K, 0));
  /* A TRIM with FUA (znbd_req_trim) is durable in the same way:
   * the flushed page it freed stays free; one without FUA comes back. */
  CHECK(znbd_dev_write(d0, b, sizeof b, 16 * K, 0) == 0);
  CHECK(znbd_dev_write(d0, b, sizeof b, 20 * K, 0) == 0);
  CHECK(znbd_dev_flush(d0) == 0);
  struct znbd_req_ctx c0;
  znbd_req_ctx_init_unfenced(&c0, d0);
  CHECK(znbd_req_trim(&c0, 4 * K, 16 * K, ZNBD_WRITE_FUA) == 0);
  CHECK(znbd_req_trim(&c0, 4 * K, 20 * K, 0) == 0);
  CHECK(znbd_dev_power_cut(d0, 0) == 0);
  CHECK(reads(d0, 16 * K, 4 * K, 0) && reads(d0, 20 * K, 4 * K, 3));
  znbd_dev_free(d0);

  for (int round = 0; round < 300; round++) {
    struct znbd_dev *d = open_dev(NULL, geo_wc);
    _Atomic bool go = false, stop = false;
    struct fua_racer w = {.go = &go, .stop = &stop};
    struct fua_racer f = {.go = &go, .stop = &stop};
    znbd_req_ctx_init(&w.rq, d);
    znbd_req_ctx_init(&f.rq, d);
    pthread_t tw, tf;
    pthread_create(&tw, NULL, fua_writer, &w);
    pthread_create(&tf, NULL, flusher, &f);
    atomic_store(&go, true);
    for (volatile int spin = 0; spin < (round % 100) * 100; spin++)
      ;
    CHECK(znbd_dev_power_cut(d, 0) == 0);
    pthread_join(tw, NULL);
    pthread_join(tf, NULL);
    CHECK_EQ(w.other + f.other, 0);
    CHECKF(WP(d, 1) == w.ok_end,
           "round %d: wp %llu after the cut, the last acknowledged FUA write "
           "ended at %llu",
           round, (unsigned long long)WP(d, 1), (unsigned long long)w.ok_end);
    CHECK(reads(d, ZS + w.ok_end, 4 * K, 0));
    znbd_dev_free(d);
  }
}

static void
ram(void)
{
  struct znbd_dev *d = open_dev(NULL, geo_wc);
  before_flush(d);
  after_flush(d);
  CHECK(znbd_dev_power_cut(d, 0) == 0);
  CHECK_EQ(znbd_dev_generation(d), 1);
  check_rolled_back(d, true);
  cut_after(d);
  znbd_dev_free(d);

  /* Non-zoned: every block is rolled back. */
  static const char *const plain[] = {"size",        "64K",  "zoned", "false",
                                      "write_cache", "true", NULL};
  d = open_dev(NULL, plain);
  CHECK(put(d, 0, 8 * K, 1) == 0);
  CHECK(znbd_dev_flush(d) == 0);
  CHECK(put(d, 4 * K, 8 * K, 2) == 0);
  CHECK(znbd_dev_write(d, NULL, 4 * K, 0, 0) == 0);
  CHECK(znbd_dev_power_cut(d, 0) == 0);
  CHECK(reads(d, 0, 8 * K, 1));
  CHECK(reads(d, 8 * K, 8 * K, 0));
  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.allocated, 8 * K);
  znbd_dev_free(d);

  /* write_cache=false: refused, nothing lost. */
  d = open_dev(NULL, geo_nowc);
  CHECK(put(d, ZS, 4 * K, 1) == 0);
  errno = 0;
  CHECK(znbd_dev_power_cut(d, 0) == -1 && errno == EINVAL);
  CHECK_EQ(WP(d, 1), 4 * K);
  CHECK(reads(d, ZS, 4 * K, 1));
  znbd_dev_free(d);
}

static void
both_writes(struct znbd_dev *d)
{
  before_flush(d);
  after_flush(d);
}

/* A power cut while running: a new directory (its path in PATH, of LEN
 * bytes) opened with KV, FN's writes, the cut.  Returns the device. */
static struct znbd_dev *
cut(char *path, size_t len, const char *const *kv,
    void (*fn)(struct znbd_dev *))
{
  snprintf(path, len, "%s/d%d", base, ndirs++);
  struct znbd_dev *d = open_dev(path, kv);
  fn(d);
  CHECK(znbd_dev_power_cut(d, 0) == 0);
  return d;
}

/* A crash: a child process opens a new directory (its path in PATH, of
 * LEN bytes) with KV, runs FN and ends without closing the device, as
 * kill -9 would end a server. */
static void
crash(char *path, size_t len, const char *const *kv,
      void (*fn)(struct znbd_dev *))
{
  snprintf(path, len, "%s/d%d", base, ndirs++);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    fn(open_dev(path, kv));
    _exit(check_failures ? 2 : 0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x",
         (unsigned)status);
}

static void
plain_writes(struct znbd_dev *d)
{
  CHECK(put(d, 0, 8 * K, 1) == 0);
  CHECK(znbd_dev_flush(d) == 0);
  CHECK(put(d, 4 * K, 8 * K, 2) == 0);
}

static void
dir(void)
{
  char path[4200];

  /* Power cut while running. */
  struct znbd_dev *d = cut(path, sizeof path, geo_wc, both_writes);
  check_rolled_back(d, false);
  znbd_dev_free(d);
  d = open_dev(path, geo_wc); /* and the files say the same */
  check_rolled_back(d, false);
  znbd_dev_free(d);

  /* A crash: the child ends without closing the device. */
  crash(path, sizeof path, geo_wc, both_writes);
  d = open_dev(path, geo_nowc); /* the rollback does not need write_cache */
  check_rolled_back(d, false);
  CHECK(put(d, ZS + 8 * K, 4 * K, 30) == 0);
  znbd_dev_free(d);
  d = open_dev(path, geo_wc); /* nothing is rolled back twice */
  CHECK_EQ(WP(d, 1), 12 * K);
  CHECK(reads(d, ZS + 8 * K, 4 * K, 30));
  /* A clean close flushes. */
  CHECK(put(d, ZS + 12 * K, 4 * K, 31) == 0);
  CHECK(put(d, 8 * K, 4 * K, 32) == 0);
  znbd_dev_free(d);
  d = open_dev(path, geo_wc);
  CHECK_EQ(WP(d, 1), 16 * K);
  CHECK(reads(d, ZS + 12 * K, 4 * K, 31));
  CHECK(reads(d, 8 * K, 4 * K, 32));
  znbd_dev_free(d);

  /* zoned=false: a crash rolls every block back. */
  static const char *const plain[] = {"size",        "64K",  "zoned", "false",
                                      "write_cache", "true", NULL};
  crash(path, sizeof path, plain, plain_writes);
  d = open_dev(path, plain);
  CHECK(reads(d, 0, 8 * K, 1));
  CHECK(reads(d, 8 * K, 8 * K, 0));
  znbd_dev_free(d);
}

/* writeback_mb=1 on dir=: the writes after the flush (1.5 MiB into
 * sequential zone 1, 1.5 MiB over conventional zone 0) start their
 * writeback early (tests/unit/dir_test checks the kicks), which is no
 * flush: a power cut and a crash still roll both back to the flushed
 * 4 KiB each. */
#define M (1024 * K)
static const char *const geo_wb[] = {
    "size",         "8M", "zone_size",   "2M",
    "zone_nr_conv", "1",  "write_cache", "true",
    "writeback_mb", "1",  NULL};

static void
wb_writes(struct znbd_dev *d)
{
  CHECK(put(d, 0, 4 * K, 1) == 0);
  CHECK(put(d, 2 * M, 4 * K, 2) == 0);
  CHECK(znbd_dev_flush(d) == 0);
  for (uint64_t o = 0; o < 3 * M / 2; o += 128 * K) {
    CHECK(put(d, 2 * M + 4 * K + o, 128 * K, 3) == 0);
    CHECK(put(d, o, 128 * K, 4) == 0);
  }
  CHECK_EQ(WP(d, 1), 4 * K + 3 * M / 2);
}

static void
wb_check(struct znbd_dev *d)
{
  CHECK_EQ(WP(d, 1), 4 * K);
  CHECK(reads(d, 2 * M, 4 * K, 2));
  CHECK(reads(d, 2 * M + 4 * K, 4 * K, 0));
  CHECK(reads(d, 0, 4 * K, 1));
  CHECK(reads(d, 4 * K, 3 * M / 2 - 4 * K, 0));
}

static void
dir_writeback(void)
{
  char path[4200];
  struct znbd_dev *d = cut(path, sizeof path, geo_wb, wb_writes);
  wb_check(d);
  znbd_dev_free(d);

  crash(path, sizeof path, geo_wb, wb_writes);
  d = open_dev(path, geo_wb);
  wb_check(d);
  znbd_dev_free(d);
}

/* ------------------------------------------------ a damaged journal */

/* Every file of directory PATH but the lock, as "name size hash\n" lines
 * sorted by name (FNV-1a of the contents), into BUF. */
static int
cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
snapshot(const char *path, char *buf, size_t len)
{
  DIR *dp = opendir(path);
  char *names[64];
  size_t n = 0;
  struct dirent *de;
  buf[0] = 0;
  CHECK(dp != NULL);
  while (dp && (de = readdir(dp)) && n < 64)
    if (de->d_name[0] != '.' && strcmp(de->d_name, "znbd.lock"))
      names[n++] = strdup(de->d_name);
  if (dp)
    closedir(dp);
  qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    char f[4400];
    uint8_t b[4096];
    uint64_t h = 0xcbf29ce484222325ULL, size = 0;
    ssize_t r;
    snprintf(f, sizeof f, "%s/%s", path, names[i]);
    int fd = open(f, O_RDONLY);
    CHECK(fd >= 0);
    while (fd >= 0 && (r = read(fd, b, sizeof b)) > 0)
      for (ssize_t j = 0; j < r; j++, size++)
        h = (h ^ b[j]) * 0x100000001b3ULL;
    if (fd >= 0)
      close(fd);
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s %" PRIu64 " %016" PRIx64 "\n",
             names[i], size, h);
    free(names[i]);
  }
}

/* Flushed data in conventional zone 0 and sequential zones, then writes
 * over both that the journal must undo. */
static void
journal_writes(struct znbd_dev *d)
{
  before_flush(d);
  CHECK(put(d, 4 * K, 8 * K, 4) == 0);      /* conv pages 1, 2 */
  CHECK(put(d, ZS + 8 * K, 8 * K, 5) == 0); /* zone 1 on */
}

/* The journal of geo_wc: 8 zones, so the header is 16 + 8 + 8 * 8 + 8
 * bytes (magic, zone count, FLUSHED of each zone, the lease),
 * then records of 24 + 4096 bytes (page, kind, length; data). */
#define JHDR (16 + 8 + 8 * 8 + 8)

static void
jwrite(const char *path, const void *p, size_t n, off_t off)
{
  char f[4400];
  snprintf(f, sizeof f, "%s/znbd.wcache", path);
  int fd = open(f, O_WRONLY);
  CHECK(fd >= 0 && pwrite(fd, p, n, off) == (ssize_t)n);
  close(fd);
}

static void
jtruncate(const char *path, off_t len)
{
  char f[4400];
  snprintf(f, sizeof f, "%s/znbd.wcache", path);
  CHECK(truncate(f, len) == 0);
}

/* Damage the journal (or a file) after a crash; both write_cache
 * settings refuse to start with errno E, naming znbd.wcache and REASON,
 * and no file changes. */
static void
refused_e(const char *path, const char *reason, int e)
{
  static char before[8192], after[8192];
  char err[1024] = "";
  snapshot(path, before, sizeof before);
  for (int wc = 0; wc < 2; wc++) {
    err[0] = 0;
    errno = 0;
    struct znbd_dev *d =
        try_open(path, wc ? geo_wc : geo_nowc, err, sizeof err);
    CHECK(d == NULL && errno == e);
    CHECKF(strstr(err, "/znbd.wcache") && strstr(err, reason) &&
               strstr(err, "no file was changed"),
           "message: %s", err);
    if (d)
      znbd_dev_free(d);
    snapshot(path, after, sizeof after);
    CHECKF(!strcmp(before, after), "files changed:\n%s---\n%s", before, after);
  }
}

static void
refused(const char *path, const char *reason)
{
  refused_e(path, reason, EINVAL);
}

static int64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Move the journal away: the files start as they are, unflushed writes
 * kept, the flushed ones intact. */
static void
journal_moved(const char *path)
{
  char f[4400], g[4400];
  snprintf(f, sizeof f, "%s/znbd.wcache", path);
  snprintf(g, sizeof g, "%s.saved", path);
  CHECK(rename(f, g) == 0);
  struct znbd_dev *d = open_dev(path, geo_wc);
  CHECK(reads(d, 0, 4 * K, 1));
  CHECK(reads(d, 4 * K, 8 * K, 4));
  CHECK_EQ(WP(d, 1), 16 * K);
  CHECK_EQ(WP(d, 2), 48 * K);
  znbd_dev_free(d);
}

static void
damaged_journal(void)
{
  char path[4200];
  uint8_t zeros[JHDR] = {0};

  /* The header cut short: magic and zone count, then zeros (zone 0, a
   * conventional zone, would have been truncated to 0 bytes). */
  crash(path, sizeof path, geo_wc, journal_writes);
  jwrite(path, zeros, JHDR - 24, 24);
  jtruncate(path, JHDR);
  refused(path, "conventional zone 0");
  journal_moved(path);

  /* The file ends inside the header. */
  crash(path, sizeof path, geo_wc, journal_writes);
  jtruncate(path, 24 + 8 * 3);
  refused(path, "header is cut short");
  journal_moved(path);

  /* A record that names a page of sequential zone 1. */
  crash(path, sizeof path, geo_wc, journal_writes);
  uint64_t page = ZS / 4096 + 1;
  jwrite(path, &page, 8, JHDR);
  refused(path, "not a whole record");
  journal_moved(path);

  /* Sequential zone 1 with more durable bytes than its capacity. */
  crash(path, sizeof path, geo_wc, journal_writes);
  uint64_t f = 60 * K;
  jwrite(path, &f, 8, 24 + 8);
  refused(path, "sequential zone 1");
  journal_moved(path);

  /* Not a journal at all. */
  crash(path, sizeof path, geo_wc, journal_writes);
  jwrite(path, "garbage!", 8, 0);
  refused(path, "magic");
  journal_moved(path);

  /* A replay cut short after it changed the files (the journal is still
   * there, with the lease the replay renewed before its first change):
   * done again, the result is the same. */
  crash(path, sizeof path, geo_wc, journal_writes);
  char f1[4400], f2[4400], cmd[9000];
  snprintf(f1, sizeof f1, "%s/znbd.wcache", path);
  snprintf(f2, sizeof f2, "%s.copy", path);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", f1, f2);
  CHECK(system(cmd) == 0);
  struct znbd_dev *d = open_dev(path, geo_nowc);
  znbd_dev_free(d);
  CHECK(rename(f2, f1) == 0);
  int64_t lease = now_ns() + 2000000000;
  jwrite(path, &lease, 8, JHDR - 8);
  d = open_dev(path, geo_wc);
  CHECK(reads(d, 0, 8 * K, 1));
  CHECK(reads(d, 8 * K, 4 * K, 0));
  CHECK_EQ(WP(d, 1), 8 * K);
  CHECK_EQ(WP(d, 2), 48 * K);
  znbd_dev_free(d);
}

/* A zone file changed after the crash (zloop appended to it) is not
 * rolled back: the start is refused naming the file, nothing changes.
 * The journal's lease is set to end right after the server's last change,
 * as when the server died longer ago than the lease (10 s) before the
 * change; then moving the journal away starts with the change kept. */
static void
changed_after_crash(void)
{
  char path[4200], f[4400];
  crash(path, sizeof path, geo_wc, journal_writes);
  int64_t newest = 0;
  for (int i = 0; i < 8; i++) {
    struct stat st;
    snprintf(f, sizeof f, "%s/%s-%06d", path, i ? "seq" : "cnv", i);
    CHECK(stat(f, &st) == 0);
    int64_t ct = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
    if (ct > newest)
      newest = ct;
  }
  int64_t lease = newest + 1;
  jwrite(path, &lease, 8, JHDR - 8);
  struct timespec ms20 = {0, 20 * 1000 * 1000};
  nanosleep(&ms20, NULL); /* past the kernel's coarse clock tick */
  snprintf(f, sizeof f, "%s/seq-000003", path);
  int fd = open(f, O_WRONLY | O_APPEND);
  uint8_t b[4096];
  memset(b, 0x5a, sizeof b);
  CHECK(fd >= 0 && write(fd, b, sizeof b) == (ssize_t)sizeof b);
  close(fd);
  refused_e(path, "seq-000003 was changed", ESTALE);
  journal_moved(path);
  struct znbd_dev *d = open_dev(path, geo_wc);
  CHECK_EQ(WP(d, 3), 4 * K);
  znbd_dev_free(d);

  /* Files untouched since the crash: the rollback happens. */
  crash(path, sizeof path, geo_wc, journal_writes);
  d = open_dev(path, geo_wc);
  CHECK(reads(d, 8 * K, 4 * K, 0));
  CHECK_EQ(WP(d, 1), 8 * K);
  znbd_dev_free(d);

  /* A clean stop empties the journal: changes made afterwards stay. */
  d = open_dev(path, geo_wc);
  CHECK(put(d, 3 * ZS, 4 * K, 9) == 0);
  znbd_dev_free(d);
  char j[4400];
  snprintf(j, sizeof j, "%s/znbd.wcache", path);
  struct stat st;
  CHECK(stat(j, &st) == 0 && st.st_size == 0);
  snprintf(f, sizeof f, "%s/seq-000003", path);
  fd = open(f, O_WRONLY | O_APPEND);
  CHECK(fd >= 0 && write(fd, b, sizeof b) == (ssize_t)sizeof b);
  close(fd);
  d = open_dev(path, geo_wc);
  CHECK_EQ(WP(d, 3), 8 * K);
  znbd_dev_free(d);
}

int
main(void)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(base, sizeof base, "%s/wcache_test.XXXXXX", tmp ? tmp : "/tmp");
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  ram();
  fence_after_cut();
  fence_race();
  fua_race();
  dir();
  dir_writeback();
  damaged_journal();
  changed_after_crash();
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", base);
  return check_done("wcache_test");
}
