/* Unit test of the zone control protocol: the language (lib/control_lang.c)
 * -- parsing and errors on a plain RAM disk (and a front-end's stats hook),
 * every request on a zoned device (exact reply lines and the state
 * afterwards) -- and the Unix socket server (lib/control_server.c: mode 0600,
 * stale socket replaced, live socket and non-socket refused, requests
 * answered, unlinked on stop).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "znbd/control.h"
#include "znbd/dev.h"
#include "znbd/params.h"
#include "dev_unfenced.h"

/* Run LINE with stats hook FN(OPAQUE) (NULL: none), or when DATA is not
 * NULL as an append with that data; return the reply (malloc'd) and the
 * result in *RC, errno in *ERR. */
static char *
run_data(struct znbd_dev *d, const char *line, const void *data, int *rc,
         int *err, znbd_control_stats_fn *fn, void *opaque)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);

  if (m == NULL) {
    perror("open_memstream");
    exit(1);
  }
  errno = 0;
  *rc = data ? znbd_control_append(d, line, data, m)
             : znbd_control_exec_stats(d, line, m, fn, opaque);
  *err = errno;
  fclose(m);
  return buf;
}

static char *
run_hook(struct znbd_dev *d, const char *line, int *rc, int *err,
         znbd_control_stats_fn *fn, void *opaque)
{
  return run_data(d, line, NULL, rc, err, fn, opaque);
}

/* Run LINE without a hook. */
static char *
run(struct znbd_dev *d, const char *line, int *rc, int *err)
{
  return run_hook(d, line, rc, err, NULL, NULL);
}

/* LINE must give exactly REPLY (all lines) with result 0. */
static void
expect_ok(struct znbd_dev *d, const char *line, const char *reply)
{
  int rc, err;
  char *got = run(d, line, &rc, &err);

  CHECKF(rc == 0, "'%s': rc %d (errno %d), reply:\n%s", line, rc, err, got);
  CHECKF(strcmp(got, reply) == 0, "'%s': reply\n%s\nexpected\n%s", line, got,
         reply);
  free(got);
}

/* LINE must be refused with errno E and a single line starting PREFIX. */
static void
expect_err(struct znbd_dev *d, const char *line, int e, const char *prefix)
{
  int rc, err;
  char *got = run(d, line, &rc, &err);

  CHECKF(rc == -1 && err == e, "'%s': rc %d errno %d, expected -1 errno %d",
         line, rc, err, e);
  CHECKF(strncmp(got, prefix, strlen(prefix)) == 0,
         "'%s': reply '%s' does not start '%s'", line, got, prefix);
  CHECKF(strchr(got, '\n') == got + strlen(got) - 1,
         "'%s': reply is not exactly one line: '%s'", line, got);
  free(got);
}

static char *
full_report(struct znbd_dev *d)
{
  int rc, err;
  return run(d, "report", &rc, &err);
}

static char dev_new_err[256];

/* A device from key/value pairs; NULL (message in dev_new_err) if
 * znbd_dev_new refuses it. */
static struct znbd_dev *
make_dev(const char *const *kv)
{
  struct znbd_params p;
  struct znbd_dev *d;
  char err[256];

  znbd_params_init(&p);
  for (; kv[0]; kv += 2)
    if (znbd_params_set(&p, kv[0], kv[1], err, sizeof err) == -1) {
      fprintf(stderr, "params_set %s=%s: %s\n", kv[0], kv[1], err);
      exit(1);
    }
  if (znbd_params_finish(&p, err, sizeof err) == -1) {
    fprintf(stderr, "params_finish: %s\n", err);
    exit(1);
  }
  d = znbd_dev_new(&p, dev_new_err, sizeof dev_new_err);
  znbd_params_free(&p);
  return d;
}

/* A front-end's stats fields (znbd_control_stats_fn): " hook=N", N the
 * calls so far. */
static void
stats_hook(void *opaque, FILE *out)
{
  int *calls = opaque;
  fprintf(out, " hook=%d", ++*calls);
}

/* The hook's fields end the stats line, and only the stats line. */
static void
test_stats_hook(struct znbd_dev *d)
{
  int calls = 0;
  const char *lines[] = {"stats", "open 0", "stats"};
  const char *want[] = {
      "ok zones=0 conv=0 empty=0 imp_open=0 exp_open=0 closed=0 full=0 "
      "readonly=0 offline=0 active=0 max_open=0 max_active=0 allocated=0 "
      "badblock_errors=0 dropped_replies=0 delayed_requests=0 delay_nsec=0 "
      "hook=1\n",
      NULL, /* not zoned: an error, no hook */
      "ok zones=0 conv=0 empty=0 imp_open=0 exp_open=0 closed=0 full=0 "
      "readonly=0 offline=0 active=0 max_open=0 max_active=0 allocated=0 "
      "badblock_errors=0 dropped_replies=0 delayed_requests=0 delay_nsec=0 "
      "hook=2\n"};
  for (int i = 0; i < 3; i++) {
    int rc, err;
    char *buf = run_hook(d, lines[i], &rc, &err, stats_hook, &calls);
    if (want[i])
      CHECKF(rc == 0 && strcmp(buf, want[i]) == 0, "%s with a hook: %s",
             lines[i], buf);
    else
      CHECKF(rc == -1 && strstr(buf, "hook") == NULL, "%s with a hook: %s",
             lines[i], buf);
    free(buf);
  }
  CHECKF(calls == 2, "hook called %d times, want 2", calls);
}

/* Requests refused on a RAM disk, and the grammar errors. */
static void
test_plain(void)
{
  static const char *const kv[] = {"size", "1M", "zoned", "false", NULL};
  struct znbd_dev *d = make_dev(kv);

  if (d == NULL) {
    fprintf(stderr, "dev_new: %s\n", dev_new_err);
    exit(1);
  }

  expect_err(d, "report", EINVAL, "error EINVAL not a zoned device");
  expect_err(d, "report 0 1", EINVAL, "error EINVAL not a zoned device");
  expect_err(d, "open 0", EINVAL, "error EINVAL not a zoned device");
  expect_err(d, "reset all", EINVAL, "error EINVAL not a zoned device");
  expect_err(d, "readonly 0", EINVAL, "error EINVAL not a zoned device");
  expect_err(d, "", EINVAL, "error EINVAL empty request");
  expect_err(d, "   \t ", EINVAL, "error EINVAL empty request");
  expect_err(d, "bogus", EINVAL, "error EINVAL unknown request 'bogus'");
  expect_err(d, "append 1 512", EINVAL, "error EINVAL append carries data");
  expect_err(d, "REPORT", EINVAL, "error EINVAL unknown request");
  expect_err(d, "open", EINVAL, "error EINVAL usage: open ZONE|all");
  expect_err(d, "online", EINVAL, "error EINVAL usage: online ZONE");
  expect_err(d, "stats now", EINVAL, "error EINVAL usage: stats");
  expect_err(d, "a b c d e", EINVAL, "error EINVAL too many words");
  {
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    expect_err(d, big, EINVAL, "error EINVAL request longer than");
  }
  expect_ok(d, "stats",
            "ok zones=0 conv=0 empty=0 imp_open=0 exp_open=0 closed=0 "
            "full=0 readonly=0 offline=0 active=0 max_open=0 max_active=0 "
            "allocated=0 badblock_errors=0 dropped_replies=0 "
            "delayed_requests=0 delay_nsec=0\n");
  expect_ok(d, "  stats\r\n",
            "ok zones=0 conv=0 empty=0 imp_open=0 exp_open=0 closed=0 "
            "full=0 readonly=0 offline=0 active=0 max_open=0 max_active=0 "
            "allocated=0 badblock_errors=0 dropped_replies=0 "
            "delayed_requests=0 delay_nsec=0\n");
  test_stats_hook(d);
  znbd_dev_free(d);
}

/* Write LEN bytes of 0xAB at OFF. */
static void
write_at(struct znbd_dev *d, uint64_t off, uint64_t len)
{
  char *buf = malloc(len);

  memset(buf, 0xab, len);
  CHECKF(znbd_dev_write(d, buf, len, off, 0) == 0,
         "write %" PRIu64 "@%" PRIu64 ": %s", len, off, strerror(errno));
  free(buf);
}

#define MB (1024 * 1024)

/* 8 zones of 1 MiB, capacity 768 KiB, zone 0 conventional, max_open 2. */
static bool
test_zoned(void)
{
  static const char *const kv[] = {"size",
                                   "8M",
                                   "zoned",
                                   "true",
                                   "zone_size",
                                   "1M",
                                   "zone_capacity",
                                   "768K",
                                   "zone_nr_conv",
                                   "1",
                                   "zone_max_open",
                                   "2",
                                   NULL};
  struct znbd_dev *d = make_dev(kv);
  char *before, *after, exp[4096];
  int n;

  if (d == NULL) {
    printf("control_test: zoned checks NOT run: znbd_dev_new refused a "
           "zoned device: %s\n",
           dev_new_err);
    return false;
  }
  if (znbd_dev_nr_zones(d) != 8) {
    CHECKF(0, "expected 8 zones, got %" PRIu32, znbd_dev_nr_zones(d));
    znbd_dev_free(d);
    return true;
  }

  /* report: every field, whole device and a window. */
  n = snprintf(exp, sizeof exp, "ok 8\n");
  n += snprintf(exp + n, sizeof exp - n,
                "zone=0 start=0 len=1048576 cap=1048576 wp=- "
                "type=CONVENTIONAL cond=NOT_WP\n");
  for (int i = 1; i < 8; i++)
    n += snprintf(exp + n, sizeof exp - n,
                  "zone=%d start=%d len=1048576 cap=786432 wp=%d "
                  "type=SEQ_WRITE_REQUIRED cond=EMPTY\n",
                  i, i * MB, i * MB);
  expect_ok(d, "report", exp);
  expect_ok(d, "report 6",
            "ok 2\n"
            "zone=6 start=6291456 len=1048576 cap=786432 wp=6291456 "
            "type=SEQ_WRITE_REQUIRED cond=EMPTY\n"
            "zone=7 start=7340032 len=1048576 cap=786432 wp=7340032 "
            "type=SEQ_WRITE_REQUIRED cond=EMPTY\n");
  expect_ok(d, "report 7 100",
            "ok 1\n"
            "zone=7 start=7340032 len=1048576 cap=786432 wp=7340032 "
            "type=SEQ_WRITE_REQUIRED cond=EMPTY\n");

  /* Grammar errors change nothing. */
  before = full_report(d);
  expect_err(d, "report 8", EINVAL, "error EINVAL zone 8 out of range");
  expect_err(d, "report 0 0", EINVAL, "error EINVAL bad count '0'");
  expect_err(d, "report 0 x", EINVAL, "error EINVAL bad count 'x'");
  expect_err(d, "report 1 2 3", EINVAL, "error EINVAL usage: report");
  expect_err(d, "open x", EINVAL, "error EINVAL bad zone 'x'");
  expect_err(d, "open -1", EINVAL, "error EINVAL bad zone '-1'");
  expect_err(d, "open +1", EINVAL, "error EINVAL bad zone '+1'");
  expect_err(d, "open 1x", EINVAL, "error EINVAL bad zone '1x'");
  expect_err(d, "open 99999999999", EINVAL, "error EINVAL bad zone");
  expect_err(d, "open 8", EINVAL, "error EINVAL zone 8 out of range");
  expect_err(d, "open 1 2", EINVAL, "error EINVAL usage: open ZONE|all");
  expect_err(d, "readonly all", EINVAL,
             "error EINVAL readonly takes a zone index");
  expect_err(d, "offline all", EINVAL, "error EINVAL offline takes a zone");
  /* Refused operations change nothing either. */
  expect_err(d, "reset 0", EIO,
             "error EIO zone 0: reset refused: conventional zone");
  expect_err(d, "open 0", EIO, "error EIO zone 0: open refused");
  expect_err(d, "close 3", EIO,
             "error EIO zone 3: close refused in condition EMPTY");
  expect_err(d, "readonly 0", EIO, "error EIO zone 0: readonly refused");
  after = full_report(d);
  CHECKF(strcmp(before, after) == 0, "refused requests changed state:\n%s",
         after);
  free(before);
  free(after);

  /* open / close / finish / reset on one zone. */
  expect_ok(d, "open 1",
            "ok zone=1 start=1048576 len=1048576 cap=786432 wp=1048576 "
            "type=SEQ_WRITE_REQUIRED cond=EXP_OPEN\n");
  expect_ok(d, "open 1",
            "ok zone=1 start=1048576 len=1048576 cap=786432 wp=1048576 "
            "type=SEQ_WRITE_REQUIRED cond=EXP_OPEN\n");
  expect_ok(d, "close 1",
            "ok zone=1 start=1048576 len=1048576 cap=786432 wp=1048576 "
            "type=SEQ_WRITE_REQUIRED cond=EMPTY\n");
  write_at(d, 2 * MB, 4096);
  expect_ok(d, "report 2 1",
            "ok 1\nzone=2 start=2097152 len=1048576 cap=786432 wp=2101248 "
            "type=SEQ_WRITE_REQUIRED cond=IMP_OPEN\n");
  expect_ok(d, "close 2",
            "ok zone=2 start=2097152 len=1048576 cap=786432 wp=2101248 "
            "type=SEQ_WRITE_REQUIRED cond=CLOSED\n");
  expect_ok(d, "stats",
            "ok zones=8 conv=1 empty=6 imp_open=0 exp_open=0 closed=1 "
            "full=0 readonly=0 offline=0 active=1 max_open=2 max_active=0 "
            "allocated=4096 badblock_errors=0 dropped_replies=0 "
            "delayed_requests=0 delay_nsec=0\n");
  expect_ok(d, "finish 2",
            "ok zone=2 start=2097152 len=1048576 cap=786432 wp=3145728 "
            "type=SEQ_WRITE_REQUIRED cond=FULL\n");
  expect_err(d, "open 2", EIO,
             "error EIO zone 2: open refused in condition "
             "FULL");
  expect_ok(d, "reset 2",
            "ok zone=2 start=2097152 len=1048576 cap=786432 wp=2097152 "
            "type=SEQ_WRITE_REQUIRED cond=EMPTY\n");

  /* Open limit: the third explicit open is refused with ETOOMANYREFS. */
  expect_ok(d, "open 3",
            "ok zone=3 start=3145728 len=1048576 cap=786432 wp=3145728 "
            "type=SEQ_WRITE_REQUIRED cond=EXP_OPEN\n");
  expect_ok(d, "open 4",
            "ok zone=4 start=4194304 len=1048576 cap=786432 wp=4194304 "
            "type=SEQ_WRITE_REQUIRED cond=EXP_OPEN\n");
  before = full_report(d);
  expect_err(d, "open 5", ETOOMANYREFS,
             "error ETOOMANYREFS zone 5: open refused: open zone limit "
             "reached (max_open=2, imp_open=0, exp_open=2)");
  after = full_report(d);
  CHECKF(strcmp(before, after) == 0, "refused open changed state");
  free(before);
  free(after);

  /* close all / finish all / open all / reset all. */
  write_at(d, 3 * MB, 8192);
  expect_ok(d, "close all", "ok all count=2\n");
  expect_ok(d, "report 3 2",
            "ok 2\n"
            "zone=3 start=3145728 len=1048576 cap=786432 wp=3153920 "
            "type=SEQ_WRITE_REQUIRED cond=CLOSED\n"
            "zone=4 start=4194304 len=1048576 cap=786432 wp=4194304 "
            "type=SEQ_WRITE_REQUIRED cond=EMPTY\n");
  expect_ok(d, "open all", "ok all count=1\n");
  expect_ok(d, "report 3 1",
            "ok 1\nzone=3 start=3145728 len=1048576 cap=786432 wp=3153920 "
            "type=SEQ_WRITE_REQUIRED cond=EXP_OPEN\n");
  write_at(d, 5 * MB, 512);
  expect_ok(d, "finish all", "ok all count=2\n");
  /* A finished zone keeps the data below its old wp (null_finish_zone()
   * moves the wp only): 8192 + 512 bytes in 3 pages. */
  expect_ok(d, "stats",
            "ok zones=8 conv=1 empty=5 imp_open=0 exp_open=0 closed=0 "
            "full=2 readonly=0 offline=0 active=0 max_open=2 max_active=0 "
            "allocated=12288 badblock_errors=0 dropped_replies=0 "
            "delayed_requests=0 delay_nsec=0\n");
  expect_ok(d, "reset all", "ok all count=2\n");
  expect_ok(d, "reset all", "ok all count=0\n");

  /* Fault injection: readonly, offline, online. */
  write_at(d, 6 * MB, 4096);
  expect_ok(d, "readonly 6",
            "ok zone=6 start=6291456 len=1048576 cap=786432 wp=- "
            "type=SEQ_WRITE_REQUIRED cond=READONLY\n");
  expect_err(d, "reset 6", EIO,
             "error EIO zone 6: reset refused in condition READONLY");
  expect_ok(d, "offline 7",
            "ok zone=7 start=7340032 len=1048576 cap=786432 wp=- "
            "type=SEQ_WRITE_REQUIRED cond=OFFLINE\n");
  /* A READONLY zone stays readable, so its data stays. */
  expect_ok(d, "stats",
            "ok zones=8 conv=1 empty=5 imp_open=0 exp_open=0 closed=0 "
            "full=0 readonly=1 offline=1 active=0 max_open=2 max_active=0 "
            "allocated=4096 badblock_errors=0 dropped_replies=0 "
            "delayed_requests=0 delay_nsec=0\n");
  expect_ok(d, "reset all", "ok all count=0\n");
  expect_ok(d, "online 6",
            "ok zone=6 start=6291456 len=1048576 cap=786432 wp=6291456 "
            "type=SEQ_WRITE_REQUIRED cond=EMPTY\n");
  expect_ok(d, "online 7",
            "ok zone=7 start=7340032 len=1048576 cap=786432 wp=7340032 "
            "type=SEQ_WRITE_REQUIRED cond=EMPTY\n");
  znbd_dev_free(d);
  return true;
}

/* Resource limits: EOVERFLOW for the active limit, open all refused as a
 * whole when the CLOSED zones would not fit under max_open (ZBC), finish
 * all. */
static void
test_limits(void)
{
  static const char *const kv[] = {
      "size", "8M", "zone_size", "1M", "zone_max_open", "2", "zone_max_active",
      "3",    NULL};
  struct znbd_dev *d = make_dev(kv);
  char *before, *after;

  if (d == NULL)
    return;
  write_at(d, 0, 4096);
  write_at(d, 1 * MB, 4096);
  write_at(d, 2 * MB, 4096); /* implicitly closes zone 0 (round-robin) */
  expect_ok(d, "stats",
            "ok zones=8 conv=0 empty=5 imp_open=2 exp_open=0 closed=1 "
            "full=0 readonly=0 offline=0 active=3 max_open=2 max_active=3 "
            "allocated=12288 badblock_errors=0 dropped_replies=0 "
            "delayed_requests=0 delay_nsec=0\n");
  before = full_report(d);
  expect_err(d, "open 3", EOVERFLOW,
             "error EOVERFLOW zone 3: open refused: active zone limit "
             "reached (max_active=3, active=3)");
  expect_ok(d, "close all", "ok all count=2\n");
  free(before);
  before = full_report(d);
  expect_err(d, "open all", ETOOMANYREFS,
             "error ETOOMANYREFS open all refused: 3 closed + 0 explicitly "
             "open zones exceed max_open=2");
  after = full_report(d);
  CHECKF(strcmp(before, after) == 0, "refused open all changed state:\n%s",
         after);
  free(before);
  free(after);
  expect_ok(d, "finish all", "ok all count=3\n");
  expect_ok(d, "stats",
            "ok zones=8 conv=0 empty=5 imp_open=0 exp_open=0 closed=0 "
            "full=3 readonly=0 offline=0 active=0 max_open=2 max_active=3 "
            "allocated=12288 badblock_errors=0 dropped_replies=0 "
            "delayed_requests=0 delay_nsec=0\n"); /* finish keeps
                     the data
                     below the wp
                   */
  znbd_dev_free(d);
}

/* A CLOSED zone made READONLY while the open limit is reached stays
 * counted as closed (null_blk's counters), but it is no CLOSED zone:
 * "open all" must not count it against max_open (caught by the open-all
 * check of lib/fuzz_control.c). */
static void
test_open_all_fault(void)
{
  static const char *const kv[] = {
      "size", "8M", "zone_size", "1M", "zone_max_open", "3", "zone_max_active",
      "5",    NULL};
  struct znbd_dev *d = make_dev(kv);
  int rc, err;
  char *r;

  if (d == NULL)
    return;
  write_at(d, 1 * MB, 4096);
  free(run(d, "close 1", &rc, &err));
  for (int z = 2; z <= 4; z++) {
    char line[32];
    snprintf(line, sizeof line, "open %d", z);
    free(run(d, line, &rc, &err));
    write_at(d, (uint64_t)z * MB, 4096);
  }
  /* The finish before READONLY needs an open slot: refused, so zone 1
   * stays counted as closed. */
  free(run(d, "readonly 1", &rc, &err));
  expect_ok(d, "close all", "ok all count=3\n");
  r = run(d, "open all", &rc, &err);
  CHECKF(rc == 0 && strcmp(r, "ok all count=3\n") == 0,
         "open all with 3 CLOSED zones, max_open 3, one READONLY zone "
         "counted as closed: rc %d '%s'",
         rc, r);
  free(r);
  znbd_dev_free(d);
}

/* Run "append ZONE LEN" (LINE) with LEN bytes of 0x5a through the
 * language; return the reply (malloc'd), the result in *RC. */
static char *
run_append(struct znbd_dev *d, const char *line, size_t len, int *rc)
{
  char *data = malloc(len), *r;
  int err;

  if (data == NULL) {
    perror("run_append");
    exit(1);
  }
  memset(data, 0x5a, len);
  r = run_data(d, line, data, rc, &err, NULL, NULL);
  free(data);
  return r;
}

/* An append that fits but meets a bad sector is refused with EIO saying
 * so, not claiming that it does not fit (found by lib/fuzz_control.c). */
static void
test_append_badblock(void)
{
  static const char *const kv[] = {"size", "4M", "zone_size", "1M", NULL};
  struct znbd_dev *d = make_dev(kv);
  char *r;
  int rc;

  if (d == NULL)
    return;
  expect_ok(d, "badblocks add 2056", "ok\n"); /* zone 1, its 9th sector */
  r = run_append(d, "append 1 8192", 8192, &rc);
  CHECKF(rc == -1 && strcmp(r, "error EIO zone 1: append of 8192 bytes at "
                               "wp=1048576 failed: a bad sector\n") == 0,
         "append over a bad sector: rc %d '%s'", rc, r);
  free(r);
  r = run_append(d, "append 1 4096", 4096, &rc);
  CHECKF(rc == 0 && strcmp(r, "ok 1048576\n") == 0,
         "append before the bad sector: rc %d '%s'", rc, r);
  free(r);
  r = run_append(d, "append 1 1048576", 1048576, &rc);
  CHECKF(rc == -1 && strcmp(r, "error EIO zone 1: append of 1048576 bytes "
                               "does not fit: wp=1052672, 1044480 bytes left "
                               "below the capacity\n") == 0,
         "append beyond the capacity: rc %d '%s'", rc, r);
  free(r);
  znbd_dev_free(d);
}

/* ---- socket ---- */

static int
connect_to(const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);

  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == -1) {
    close(fd);
    return -1;
  }
  return fd;
}

/* A client that waits for the socket file to appear is never refused:
 * the file appears only once the socket listens (bound to a temporary
 * name, renamed into place), and no temporary name is left behind.  A
 * thread polls for the file while the control socket starts, 20 times. */
struct waiter {
  const char *path;
  int errnum; /* connect's errno, 0 when it worked */
};

static void *
wait_and_connect(void *arg)
{
  struct waiter *w = arg;
  struct stat st;
  while (lstat(w->path, &st) == -1)
    sched_yield();
  int fd = connect_to(w->path);
  w->errnum = fd < 0 ? errno : 0;
  if (fd >= 0)
    close(fd);
  return NULL;
}

static void
test_socket_ready(void)
{
  static const char *const kv[] = {"size", "1M", "zoned", "false", NULL};
  struct znbd_dev *d = make_dev(kv);
  char dir[] = "/tmp/control_test.XXXXXX", path[64], err[256];
  int refused = 0, left = 0;

  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  snprintf(path, sizeof path, "%s/ctl", dir);
  for (int i = 0; i < 20; i++) {
    struct waiter w = {path, -1};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, wait_and_connect, &w) == 0);
    struct znbd_control *c = znbd_control_start(d, path, err, sizeof err);
    CHECKF(c != NULL, "start: %s", err);
    pthread_join(th, NULL);
    refused += w.errnum != 0;
    DIR *dp = opendir(dir);
    struct dirent *de;
    while (dp && (de = readdir(dp)))
      left += de->d_name[0] != '.' && strcmp(de->d_name, "ctl") != 0;
    if (dp)
      closedir(dp);
    znbd_control_stop(c);
  }
  CHECK_EQ(refused, 0);
  CHECK_EQ(left, 0);
  rmdir(dir);
  znbd_dev_free(d);
  printf("control socket: connectable as soon as it exists (20 starts)\n");
}

/* Send REQ, read until the peer has sent WANT newlines; return it. */
static char *
converse(int fd, const char *req, int want)
{
  static char buf[65536];
  size_t have = 0;
  int lines = 0;

  if (*req && write(fd, req, strlen(req)) != (ssize_t)strlen(req))
    return NULL;
  while (lines < want && have < sizeof buf - 1) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r <= 0)
      break;
    for (ssize_t i = 0; i < r; i++)
      lines += buf[have + i] == '\n';
    have += (size_t)r;
  }
  buf[have] = '\0';
  return buf;
}

static void
test_socket(void)
{
  static const char *const kv[] = {"size", "1M", "zoned", "false", NULL};
  struct znbd_dev *d = make_dev(kv);
  char dir[] = "/tmp/control_test.XXXXXX", path[64], err[256];
  struct znbd_control *c, *c2;
  struct stat st;
  int fd;
  char *r;

  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  snprintf(path, sizeof path, "%s/ctl", dir);

  /* A non-socket file at the path is refused and left alone. */
  fd = open(path, O_CREAT | O_WRONLY, 0644);
  close(fd);
  c = znbd_control_start(d, path, err, sizeof err);
  CHECKF(c == NULL && errno == EEXIST, "start over a regular file: %p %d",
         (void *)c, errno);
  CHECKF(stat(path, &st) == 0 && S_ISREG(st.st_mode), "regular file removed");
  unlink(path);

  /* A stale socket (bound, nobody listening) is replaced. */
  {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    CHECKF(bind(s, (struct sockaddr *)&a, sizeof a) == 0, "bind stale");
    close(s);
  }
  c = znbd_control_start(d, path, err, sizeof err);
  CHECKF(c != NULL, "start over a stale socket: %s", err);
  if (c == NULL)
    exit(1);
  CHECKF(stat(path, &st) == 0 && S_ISSOCK(st.st_mode) &&
             (st.st_mode & 07777) == 0600,
         "socket mode %o, expected 0600", st.st_mode & 07777);

  /* A live socket is not taken over. */
  c2 = znbd_control_start(d, path, err, sizeof err);
  CHECKF(c2 == NULL && errno == EADDRINUSE, "second start: %p errno %d",
         (void *)c2, errno);

  /* Requests: two in one packet, an error, one without newline at EOF. */
  fd = connect_to(path);
  CHECKF(fd >= 0, "connect");
  r = converse(fd, "stats\nbogus\n", 2);
  CHECKF(r && strncmp(r, "ok zones=0 ", 11) == 0 &&
             strstr(r, "\nerror EINVAL unknown request 'bogus'"),
         "socket replies: '%s'", r ? r : "(null)");
  {
    /* An over-long line gets one error and is skipped up to its newline;
     * the next request is served normally. */
    static char big[6000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECKF(write(fd, big, strlen(big)) == (ssize_t)strlen(big), "write big");
    r = converse(fd, "\nstats\n", 2);
    CHECKF(r && strncmp(r, "error EINVAL request longer than 4096", 37) == 0 &&
               strstr(r, "\nok zones=0 ") != NULL,
           "over-long line: '%s'", r ? r : "(null)");
  }
  r = converse(fd, "report\n", 1);
  CHECKF(r && strcmp(r, "error EINVAL not a zoned device\n") == 0,
         "report reply: '%s'", r ? r : "(null)");
  close(fd);
  /* Next client after the first hung up; last line without a newline. */
  fd = connect_to(path);
  CHECKF(fd >= 0, "second client connect");
  if (fd >= 0) {
    CHECKF(write(fd, "stats", 5) == 5, "write");
    shutdown(fd, SHUT_WR);
    r = converse(fd, "", 1);
    CHECKF(r && strncmp(r, "ok zones=0 ", 11) == 0, "unterminated: '%s'",
           r ? r : "(null)");
    close(fd);
  }

  znbd_control_stop(c);
  CHECKF(lstat(path, &st) == -1 && errno == ENOENT, "socket left after stop");
  znbd_control_stop(NULL);

  /* Path too long. */
  {
    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    c = znbd_control_start(d, longp, err, sizeof err);
    CHECKF(c == NULL && errno == ENAMETOOLONG, "long path: errno %d", errno);
  }
  rmdir(dir);
  znbd_dev_free(d);
}

/* Put "append ZONE LEN" and LEN bytes of FILL at REQ + N; returns the
 * new length of REQ. */
static size_t
put_append(char *req, size_t n, unsigned zone, size_t len, int fill)
{
  n += (size_t)sprintf(req + n, "append %u %zu\n", zone, len);
  memset(req + n, fill, len);
  return n + len;
}

/* Zone append over the socket: several appends in one packet, refusals
 * that keep the stream in step, a malformed length that closes it, and
 * two clients served at once. */
static void
test_append_socket(void)
{
  static const char *const kv[] = {
      "size",          "4M",   "zoned",        "true", "zone_size", "1M",
      "zone_capacity", "768K", "zone_nr_conv", "1",    NULL};
  struct znbd_dev *d = make_dev(kv);
  char dir[] = "/tmp/control_test.XXXXXX", path[64], err[256];
  struct znbd_control *c;
  struct znbd_zone_info z;
  char *req, *r, *back;
  size_t n;
  int a, b;

  if (d == NULL) {
    printf("control_test: append checks NOT run: %s\n", dev_new_err);
    return;
  }
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  snprintf(path, sizeof path, "%s/ctl", dir);
  c = znbd_control_start(d, path, err, sizeof err);
  CHECKF(c != NULL, "start: %s", err);
  if (c == NULL)
    exit(1);

  /* Two clients at once: B is served while A is connected and idle. */
  a = connect_to(path);
  b = connect_to(path);
  CHECKF(a >= 0 && b >= 0, "two connects");
  r = converse(b, "report 1 1\n", 2);
  CHECKF(r && strstr(r, "cond=EMPTY"), "second client served: '%s'",
         r ? r : "(null)");
  close(b);

  /* Two appends in one write, then the data is where the offsets say. */
  req = malloc(2 * 64 + 4096 + 8192);
  n = put_append(req, 0, 1, 4096, 0x11);
  n = put_append(req, n, 1, 8192, 0x22);
  CHECKF(write(a, req, n) == (ssize_t)n, "write appends");
  r = converse(a, "", 2);
  CHECKF(r && strcmp(r, "ok 1048576\nok 1052672\n") == 0, "two appends: '%s'",
         r ? r : "(null)");
  back = malloc(8192);
  CHECKF(znbd_dev_read(d, back, 4096, MB, 0) == 0 && back[0] == 0x11 &&
             back[4095] == 0x11,
         "first append's data");
  CHECKF(znbd_dev_read(d, back, 8192, MB + 4096, 0) == 0 && back[0] == 0x22 &&
             back[8191] == 0x22,
         "second append's data");
  CHECKF(znbd_dev_report(d, 1, 1, &z) == 1 && z.wp == MB + 12288 &&
             z.cond == ZNBD_ZONE_COND_IMP_OPEN,
         "zone 1 after appends: wp %" PRIu64 " cond %d", z.wp, z.cond);

  /* Refusals whose data is consumed: the next request is answered. */
  n = put_append(req, 0, 0, 4096, 0);
  n = put_append(req, n, 2, 100, 0);
  n = put_append(req, n, 9, 512, 0);
  n = put_append(req, n, 3, 512, 0x33);
  CHECKF(write(a, req, n) == (ssize_t)n, "write refused appends");
  r = converse(a, "report 2 1\n", 6);
  CHECKF(r &&
             strncmp(r, "error EIO zone 0: append refused: conventional zone\n",
                     51) == 0 &&
             strstr(r, "\nerror EINVAL append of 100 bytes: not a multiple") &&
             strstr(r, "\nerror EINVAL zone 9 out of range") &&
             strstr(r, "\nok 3145728\nok 1\nzone=2 start=2097152 len=1048576 "
                       "cap=786432 wp=2097152 type=SEQ_WRITE_REQUIRED "
                       "cond=EMPTY\n"),
         "conventional, unaligned and out-of-range appends, then one to zone "
         "3: '%s'",
         r ? r : "(null)");
  free(req);

  /* Beyond the room below the capacity: EIO, nothing written. */
  req = malloc(64 + 786432 + 4096);
  n = put_append(req, 0, 2, 786432 + 4096, 0x44);
  CHECKF(write(a, req, n) == (ssize_t)n, "write big append");
  r = converse(a, "", 1);
  CHECKF(r && strcmp(r, "error EIO zone 2: append of 790528 bytes does not "
                        "fit: wp=2097152, 786432 bytes left below the "
                        "capacity\n") == 0,
         "append beyond capacity: '%s'", r ? r : "(null)");
  CHECKF(znbd_dev_report(d, 2, 1, &z) == 1 && z.wp == 2 * MB &&
             z.cond == ZNBD_ZONE_COND_EMPTY,
         "zone 2 after the refused append: wp %" PRIu64 " cond %d", z.wp,
         z.cond);
  /* Exactly the capacity fits and makes the zone FULL. */
  n = put_append(req, 0, 2, 786432, 0x44);
  CHECKF(write(a, req, n) == (ssize_t)n, "write capacity append");
  r = converse(a, "append 2 512\n", 1);
  CHECKF(r && strcmp(r, "ok 2097152\n") == 0, "capacity append: '%s'",
         r ? r : "(null)");
  memset(req, 0, 512);
  CHECKF(write(a, req, 512) == 512, "write data of append to FULL");
  r = converse(a, "", 1);
  CHECKF(r && strcmp(r, "error EIO zone 2: append refused in condition "
                        "FULL\n") == 0,
         "append to FULL zone: '%s'", r ? r : "(null)");
  free(req);

  /* A malformed length: one error, then the connection is closed. */
  r = converse(a, "append 1 4k\n", 2);
  CHECKF(r && strncmp(r, "error EINVAL usage: append ZONE LEN", 35) == 0 &&
             strchr(r, '\n') == r + strlen(r) - 1,
         "malformed length: '%s'", r ? r : "(null)");
  close(a);
  a = connect_to(path);
  r = converse(a, "append 1 33554433\n", 2);
  CHECKF(r && strncmp(r, "error EINVAL usage: append ZONE LEN", 35) == 0,
         "length over the bound: '%s'", r ? r : "(null)");
  close(a);
  CHECKF(znbd_dev_report(d, 1, 1, &z) == 1 && z.wp == MB + 12288,
         "zone 1 unchanged by refused appends: wp %" PRIu64, z.wp);

  /* Stopping with a client connected and idle ends its thread: the
   * client then sees the connection closed. */
  a = connect_to(path);
  r = converse(a, "stats\n", 1);
  CHECKF(r && strncmp(r, "ok zones=4 ", 11) == 0, "stats before stop: '%s'",
         r ? r : "(null)");
  znbd_control_stop(c);
  {
    char b;
    CHECKF(read(a, &b, 1) == 0, "client not disconnected by stop");
  }
  close(a);
  rmdir(dir);
  free(back);
  znbd_dev_free(d);
}

/* A device whose front-end is znbd-ublk refuses drop-reply (it answers
 * every request) and changes nothing; the other front-ends, and a device
 * that names none, take it. */
static void
test_frontend_words(void)
{
  static const char *const kv[] = {"size", "1M", "zoned", "false", NULL};
  struct znbd_dev *d = make_dev(kv);
  uint32_t every;
  unsigned kinds;

  if (d == NULL) {
    fprintf(stderr, "dev_new: %s\n", dev_new_err);
    exit(1);
  }
  CHECK(znbd_dev_frontend(d) == 0);
  znbd_dev_set_frontend(d, ZNBD_PARAM_FOR_UBLK);
  CHECK(znbd_dev_frontend(d) == ZNBD_PARAM_FOR_UBLK);
  expect_err(d, "drop-reply every 2", EINVAL,
             "error EINVAL drop-reply has no effect in znbd-ublk: every "
             "request is answered: a ublk device has no request timeout");
  expect_err(d, "drop-reply", EINVAL,
             "error EINVAL drop-reply has no effect in znbd-ublk");
  znbd_dev_drop_reply_get(d, &every, &kinds);
  CHECK(every == 0);
  CHECK(!znbd_dev_drop_reply(d, ZNBD_IO_READ));
  /* Requests it honours still run. */
  expect_ok(d, "badblocks list", "ok\n");
  static const unsigned others[] = {0, ZNBD_PARAM_FOR_TCMU,
                                    ZNBD_PARAM_FOR_PLUGIN, ZNBD_PARAM_FOR_BIO,
                                    ZNBD_PARAM_FOR_MQ};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    znbd_dev_set_frontend(d, others[i]);
    expect_ok(d, "drop-reply every 2 write",
              "ok every=2 kinds=write dropped_replies=0\n");
    expect_ok(d, "drop-reply off", "ok every=0 kinds=none dropped_replies=0\n");
  }
  znbd_dev_free(d);
}

int
main(void)
{
  signal(SIGPIPE, SIG_IGN); /* a failing check must not kill the run */
  bool zoned_ran;

  test_plain();
  test_frontend_words();
  zoned_ran = test_zoned();
  if (zoned_ran) {
    test_limits();
    test_append_badblock();
    test_open_all_fault();
  }
  test_socket();
  test_socket_ready();
  test_append_socket();
  if (check_done("control_test"))
    return 1;
  return zoned_ran ? 0 : 77; /* SKIP until the zone engine is built */
}
