/* Unit test of lib/params.c: nbdkit size syntax, booleans, zone lists,
 * per-key validation with messages naming the key, null_blk's clamps
 * (reported as notes through the log sink) and derived nr_zones. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "znbd/log.h"
#include "znbd/params.h"
#include "check.h"

static void
test_size(void)
{
  static const struct {
    const char *s;
    uint64_t v;
  } ok[] = {
      {"0", 0},
      {"512", 512},
      {"1b", 1},
      {"1B", 1},
      {"1s", 512},
      {"8S", 4096},
      {"4k", 4096},
      {"4K", 4096},
      {"64M", 64ull << 20},
      {"64m", 64ull << 20},
      {"1G", 1ull << 30},
      {"3g", 3ull << 30},
      {"2T", 2ull << 40},
      {"1P", 1ull << 50},
      {"15E", 15ull << 60},
      {"18446744073709551615", UINT64_MAX},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    uint64_t v = 1234;
    int r = znbd_parse_size(ok[i].s, &v);
    CHECK_EQ(r, 0);
    CHECK_EQ(v, ok[i].v);
    if (r != 0 || v != ok[i].v)
      fprintf(stderr, "  size '%s'\n", ok[i].s);
  }
  static const char *const bad[] = {"",   "64MiB", "1.5M", "M",  "-1", " 1",
                                    "1 ", "1KB",   "0x10", "1Q", "k1", "+5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 1234;
    errno = 0;
    int r = znbd_parse_size(bad[i], &v);
    CHECK(r == -1 && errno == EINVAL && v == 1234);
    if (!(r == -1 && errno == EINVAL))
      fprintf(stderr, "  size '%s' accepted\n", bad[i]);
  }
  static const char *const range[] = {"16E", "18446744073709551616",
                                      "17179869184G"};
  for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
    uint64_t v;
    errno = 0;
    CHECK(znbd_parse_size(range[i], &v) == -1 && errno == ERANGE);
  }
  printf("size syntax: %zu accepted, %zu malformed, %zu overflow\n",
         sizeof ok / sizeof ok[0], sizeof bad / sizeof bad[0],
         sizeof range / sizeof range[0]);
}

static void
test_bool(void)
{
  static const char *const t[] = {"1", "true", "TRUE", "yes", "On"};
  static const char *const f[] = {"0", "false", "No", "off", "OFF"};
  for (int i = 0; i < 5; i++) {
    bool b = false;
    CHECK(znbd_parse_bool(t[i], &b) == 0 && b);
    b = true;
    CHECK(znbd_parse_bool(f[i], &b) == 0 && !b);
  }
  bool b;
  errno = 0;
  CHECK(znbd_parse_bool("maybe", &b) == -1 && errno == EINVAL);
  CHECK(znbd_parse_bool("", &b) == -1);
  CHECK(znbd_parse_bool("2", &b) == -1);
  printf("booleans: 10 accepted, 3 refused\n");
}

struct zl {
  uint32_t z[32];
  int n;
  int stop_after;
};

static int
zl_add(void *opaque, uint32_t zone)
{
  struct zl *l = opaque;
  if (l->n < 32)
    l->z[l->n] = zone;
  l->n++;
  return l->n == l->stop_after ? 5 : 0;
}

static void
test_zone_list(void)
{
  struct zl l = {.n = 0, .stop_after = -1};
  CHECK_EQ(znbd_parse_zone_list("3,7-9", 10, zl_add, &l), 0);
  CHECK_EQ(l.n, 4);
  CHECK(l.z[0] == 3 && l.z[1] == 7 && l.z[2] == 8 && l.z[3] == 9);

  l = (struct zl){.n = 0, .stop_after = -1};
  CHECK_EQ(znbd_parse_zone_list("9,0,5-5", 10, zl_add, &l), 0);
  CHECK(l.n == 3 && l.z[0] == 9 && l.z[1] == 0 && l.z[2] == 5);

  static const char *const bad[] = {"",     "9-7", "3,",   ",3",   "3-", "a",
                                    "1,,2", "10",  "3 ,4", "0-10", "-1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    l = (struct zl){.n = 0, .stop_after = -1};
    errno = 0;
    int r = znbd_parse_zone_list(bad[i], 10, zl_add, &l);
    CHECK(r == -1 && errno == EINVAL);
    /* A bad list calls nothing. */
    CHECK_EQ(l.n, 0);
    if (r != -1)
      fprintf(stderr, "  list '%s' accepted\n", bad[i]);
  }
  /* FN's first non-zero result stops the walk and is returned. */
  l = (struct zl){.n = 0, .stop_after = 2};
  CHECK_EQ(znbd_parse_zone_list("1-6", 10, zl_add, &l), 5);
  CHECK_EQ(l.n, 2);
  printf("zone lists: ranges, order, %zu malformed, early stop\n",
         sizeof bad / sizeof bad[0]);
}

/* Set KEY=VALUE and expect failure with errno E and KEY in the message. */
static void
expect_set_fail(const char *key, const char *value, int e)
{
  struct znbd_params p;
  char err[256];
  znbd_params_init(&p);
  errno = 0;
  int r = znbd_params_set(&p, key, value, err, sizeof err);
  CHECK(r == -1 && errno == e);
  CHECK(strstr(err, key) != NULL);
  if (r != -1 || !strstr(err, key))
    fprintf(stderr, "  %s=%s: r=%d err='%s'\n", key, value, r, err);
  znbd_params_free(&p);
}

static char notes[1024];
static void
note(void *opaque, enum znbd_log_level level, const char *msg)
{
  (void)opaque;
  if (level != ZNBD_LOG_NOTE)
    return;
  strncat(notes, msg, sizeof notes - strlen(notes) - 2);
  strcat(notes, "\n");
}

/* Build params from "k=v" words; returns finish()'s result. */
static int
build(struct znbd_params *p, char *err, size_t errlen, const char *words[])
{
  znbd_params_init(p);
  notes[0] = '\0';
  for (int i = 0; words[i]; i++) {
    char key[64];
    const char *eq = strchr(words[i], '=');
    snprintf(key, sizeof key, "%.*s", (int)(eq - words[i]), words[i]);
    if (znbd_params_set(p, key, eq + 1, err, errlen) < 0)
      return -2;
  }
  return znbd_params_finish(p, err, errlen);
}

static void
expect_finish_fail(const char *name, const char *words[])
{
  struct znbd_params p;
  char err[256] = "";
  errno = 0;
  int r = build(&p, err, sizeof err, words);
  CHECK(r == -1 && errno == EINVAL && strstr(err, name) != NULL);
  if (r != -1 || !strstr(err, name))
    fprintf(stderr, "  expected failure naming %s: r=%d err='%s'\n", name, r,
            err);
  znbd_params_free(&p);
}

static void
test_set(void)
{
  struct znbd_params p;
  char err[256];
  znbd_params_init(&p);
  CHECK(p.zoned && p.memory_backed && p.pipeline_zoned_writes);
  CHECK_EQ(p.blocksize, 512);
  CHECK_EQ(p.zone_size, 256ull << 20);
  CHECK_EQ(p.zone_write_timeout, 500);
  CHECK_EQ(p.hw_queue_depth, 64);
  CHECK_EQ(p.submit_queues, 1);
  CHECK(p.zone_read_past_wp == ZNBD_READ_PAST_WP_ZERO);

  CHECK_EQ(znbd_params_set(&p, "size", "4G", err, sizeof err), 0);
  CHECK_EQ(p.size, 4ull << 30);
  CHECK_EQ(znbd_params_set(&p, "blocksize", "4096", err, sizeof err), 0);
  CHECK_EQ(p.blocksize, 4096);
  CHECK_EQ(znbd_params_set(&p, "zone_read_past_wp", "ones", err, 256), 0);
  CHECK(p.zone_read_past_wp == ZNBD_READ_PAST_WP_ONES);
  CHECK_EQ(znbd_params_set(&p, "zone_read_past_wp", "error", err, 256), 0);
  CHECK(p.zone_read_past_wp == ZNBD_READ_PAST_WP_ERROR);
  CHECK_EQ(znbd_params_set(&p, "completion_nsec", "250000", err, 256), 0);
  CHECK_EQ(p.completion_nsec, 250000);
  CHECK_EQ(znbd_params_set(&p, "zone_control", "/tmp/x.sock", err, 256), 0);
  CHECK(p.zone_control && strcmp(p.zone_control, "/tmp/x.sock") == 0);
  /* A relative path is joined to the current directory: a server in the
   * background runs in "/". */
  {
    char *cwd = getcwd(NULL, 0), want[4096];
    snprintf(want, sizeof want, "%s/rel/x.ctl", cwd);
    CHECK_EQ(znbd_params_set(&p, "zone_control", "rel/x.ctl", err, 256), 0);
    CHECK(p.zone_control && strcmp(p.zone_control, want) == 0);
    free(cwd);
  }
  CHECK_EQ(znbd_params_set(&p, "zone_readonly", "3,7-9", err, 256), 0);
  CHECK(p.zone_readonly && strcmp(p.zone_readonly, "3,7-9") == 0);
  CHECK_EQ(znbd_params_set(&p, "no_zone_write_lock", "yes", err, 256), 0);
  CHECK(p.no_zone_write_lock);
  CHECK(p.sched_batch); /* default */
  CHECK_EQ(znbd_params_set(&p, "sched_batch", "off", err, 256), 0);
  CHECK(!p.sched_batch);
  CHECK_EQ(znbd_params_set(&p, "zone_max_open", "14", err, 256), 0);
  CHECK_EQ(p.zone_max_open, 14);
  znbd_params_free(&p);
  CHECK(p.zone_readonly == NULL && p.zone_control == NULL);

  expect_set_fail("sched_batch", "maybe", EINVAL);
  expect_set_fail("size", "64MiB", EINVAL);
  expect_set_fail("size", "1.5M", EINVAL);
  expect_set_fail("zone_size", "12x", EINVAL);
  expect_set_fail("zone_capacity", "-1", EINVAL);
  expect_set_fail("blocksize", "1024", EINVAL);
  expect_set_fail("blocksize", "4k", EINVAL);
  expect_set_fail("zoned", "maybe", EINVAL);
  expect_set_fail("memory_backed", "2", EINVAL);
  expect_set_fail("zone_nr_conv", "-3", EINVAL);
  expect_set_fail("zone_max_open", "4294967296", EINVAL);
  expect_set_fail("zone_read_past_wp", "ff", EINVAL);
  expect_set_fail("zone_readonly", "3,,4", EINVAL);
  expect_set_fail("zone_offline", "x", EINVAL);
  expect_set_fail("completion_nsec", "1ms", EINVAL);
  expect_set_fail("zone_control", "", EINVAL);
  expect_set_fail("no_such_key", "1", ENOENT);
  printf("set: defaults, every kind of value, 17 refusals naming the key\n");
}

static void
test_finish(void)
{
  struct znbd_params p;
  char err[256];

  /* Geometry. */
  const char *w1[] = {"size=4G", "zone_size=64M", "zone_nr_conv=4", NULL};
  CHECK_EQ(build(&p, err, sizeof err, w1), 0);
  CHECK_EQ(p.geo.nr_zones, 64);
  CHECK_EQ(p.zone_nr_conv, 4);
  CHECK_EQ(p.zone_capacity, 64ull << 20); /* 0 = zone_size */
  CHECK(notes[0] == '\0');
  znbd_params_free(&p);

  /* npo2 zone size, smaller last zone: ceil(1000M / 96M) = 11. */
  const char *w2[] = {"size=1000M", "zone_size=96M", "zone_capacity=80M", NULL};
  CHECK_EQ(build(&p, err, sizeof err, w2), 0);
  CHECK_EQ(p.geo.nr_zones, 11);
  CHECK_EQ(p.zone_capacity, 80ull << 20);
  znbd_params_free(&p);

  /* zoned=false: no zones, zone keys irrelevant. */
  const char *w3[] = {"size=1G", "zoned=false", "zone_size=3", NULL};
  CHECK_EQ(build(&p, err, sizeof err, w3), 0);
  CHECK_EQ(p.geo.nr_zones, 0);
  znbd_params_free(&p);

  /* Clamps, as null_blk, each reported. */
  const char *c1[] = {"size=16M", "zone_size=1M", "zone_nr_conv=100", NULL};
  CHECK_EQ(build(&p, err, sizeof err, c1), 0);
  CHECK_EQ(p.zone_nr_conv, 15);
  CHECK(strstr(notes, "zone_nr_conv") != NULL);
  znbd_params_free(&p);

  const char *c2[] = {"size=16M", "zone_size=1M", "zone_max_active=16",
                      "zone_max_open=20", NULL};
  CHECK_EQ(build(&p, err, sizeof err, c2), 0);
  CHECK_EQ(p.zone_max_active, 0);
  CHECK_EQ(p.zone_max_open, 0);
  CHECK(strstr(notes, "zone_max_active") && strstr(notes, "zone_max_open"));
  znbd_params_free(&p);

  const char *c3[] = {"size=16M", "zone_size=1M", "zone_max_active=4",
                      "zone_max_open=8", NULL};
  CHECK_EQ(build(&p, err, sizeof err, c3), 0);
  CHECK_EQ(p.zone_max_active, 4);
  CHECK_EQ(p.zone_max_open, 4);
  CHECK(strstr(notes, "zone_max_open") != NULL);
  znbd_params_free(&p);

  /* 2 conventional zones leave 14 sequential: max_open 14 -> 0. */
  const char *c4[] = {"size=16M", "zone_size=1M", "zone_nr_conv=2",
                      "zone_max_open=14", NULL};
  CHECK_EQ(build(&p, err, sizeof err, c4), 0);
  CHECK_EQ(p.zone_max_open, 0);
  znbd_params_free(&p);

  const char *c5[] = {"size=16M", "zone_size=1M", "zone_max_open=5",
                      "zone_max_active=6", NULL};
  CHECK_EQ(build(&p, err, sizeof err, c5), 0);
  CHECK(p.zone_max_open == 5 && p.zone_max_active == 6);
  CHECK(notes[0] == '\0');
  znbd_params_free(&p);

  /* Zone lists within range and not conventional. */
  const char *l1[] = {"size=16M",        "zone_size=1M",
                      "zone_nr_conv=2",  "zone_readonly=2,5-6",
                      "zone_offline=15", NULL};
  CHECK_EQ(build(&p, err, sizeof err, l1), 0);
  znbd_params_free(&p);

  /* Refusals naming the parameter. */
  const char *f1[] = {"zoned=false", NULL};
  expect_finish_fail("size", f1);
  const char *f2[] = {"size=1000", "zoned=false", NULL};
  expect_finish_fail("size", f2);
  const char *f3[] = {"size=16M", "blocksize=4096", "zone_size=6k", NULL};
  expect_finish_fail("zone_size", f3);
  const char *f4[] = {"size=16M", "zone_size=1M", "zone_capacity=2M", NULL};
  expect_finish_fail("zone_capacity", f4);
  const char *f5[] = {"size=16M", "zone_size=1M", "zone_capacity=1000", NULL};
  expect_finish_fail("zone_capacity", f5);
  const char *f6[] = {"size=16M", "zone_size=32M", NULL};
  expect_finish_fail("zone_size", f6);
  const char *f7[] = {"size=16M", "zone_size=0", NULL};
  expect_finish_fail("zone_size", f7);
  const char *f8[] = {"size=16M", "zone_size=1M", "zone_readonly=16", NULL};
  expect_finish_fail("zone_readonly", f8);
  const char *f9[] = {"size=16M", "zone_size=1M", "zone_nr_conv=2",
                      "zone_offline=1", NULL};
  expect_finish_fail("zone_offline", f9);
  const char *f10[] = {"size=1G", "zoned=false", "zone_readonly=1", NULL};
  expect_finish_fail("zone_readonly", f10);
  const char *f11[] = {"size=1G", "hw_queue_depth=0", NULL};
  expect_finish_fail("hw_queue_depth", f11);
  const char *f12[] = {"size=1G", "submit_queues=0", NULL};
  expect_finish_fail("submit_queues", f12);
  printf("finish: geometry, npo2, clamps with notes, lists, 12 refusals\n");
}

/* The whole of FILE (under the source tree) as a string, or NULL. */
static char *
slurp(const char *rel)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", ZNBD_TOP_SRCDIR, rel);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "  cannot open %s\n", path);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0, r;
  char *buf = malloc(cap + 1);
  while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      char *b = realloc(buf, 2 * cap + 1);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf)
    buf[n] = '\0';
  return buf;
}

/* NAME in TEXT as a whole word (not inside a longer key name). */
static bool
has_word(const char *text, const char *name)
{
  size_t n = strlen(name);
  for (const char *q = text; (q = strstr(q, name)) != NULL; q++) {
    bool before = q > text && (q[-1] == '_' || (q[-1] >= 'a' && q[-1] <= 'z'));
    bool after = q[n] == '_' || (q[n] >= 'a' && q[n] <= 'z');
    if (!before && !after)
      return true;
  }
  return false;
}

/* The table (lib/params.c): names unique, lookups, who uses what, every
 * entry in the help text and documented in both man pages. */
static void
test_table(void)
{
  const struct znbd_param_info *i;
  size_t n = 0;
  char *plugin_pod = slurp("man/nbdkit-zoned-plugin.pod");
  char *znbd_pod = slurp("man/znbd.pod");
  const char *help = znbd_params_help_text();

  CHECK(plugin_pod != NULL && znbd_pod != NULL);
  for (; (i = znbd_param_info(n)) != NULL; n++) {
    char want[128];
    CHECK(znbd_param_find(i->name) == i);
    for (size_t k = 0; k < n; k++)
      CHECK(strcmp(znbd_param_info(k)->name, i->name) != 0);
    CHECK(i->help && i->meta && *i->help && *i->meta);
    CHECK(i->users != 0 && (i->users & ~ZNBD_PARAM_FOR_ALL) == 0);
    /* --help: "name=META" at the start of a line. */
    snprintf(want, sizeof want, "%s=%s", i->name, i->meta);
    const char *at = strstr(help, want);
    CHECK(at && (at == help || at[-1] == '\n'));
    /* Plugin man page: an =item B<name=> under PARAMETERS. */
    snprintf(want, sizeof want, "B<%s=>", i->name);
    bool in_plugin = plugin_pod && strstr(plugin_pod, want);
    bool in_znbd = znbd_pod && has_word(znbd_pod, i->name);
    CHECK(in_plugin);
    CHECK(in_znbd);
    if (!in_plugin || !in_znbd)
      fprintf(stderr, "  %s: not documented in %s\n", i->name,
              !in_plugin ? "man/nbdkit-zoned-plugin.pod" : "man/znbd.pod");
  }
  CHECK(n >= 21);
  CHECK(znbd_param_info(n) == NULL);

  /* Lookups take a key or a key=value word; no prefix matches. */
  CHECK(znbd_param_find("zone_size=64M") == znbd_param_find("zone_size"));
  CHECK(znbd_param_find("zone") == NULL);
  CHECK(znbd_param_find("zone_size_x") == NULL);
  CHECK(znbd_param_find("") == NULL);
  CHECK(znbd_param_find(NULL) == NULL);

  /* Who uses what: the mq knobs only znbd's mq mode. */
  CHECK(znbd_param_used_by("hw_queue_depth=2", ZNBD_PARAM_FOR_MQ));
  CHECK(!znbd_param_used_by("hw_queue_depth=2", ZNBD_PARAM_FOR_BIO));
  CHECK(!znbd_param_used_by("submit_queues", ZNBD_PARAM_FOR_PLUGIN));
  CHECK(!znbd_param_used_by("no_zone_write_lock", ZNBD_PARAM_FOR_BIO));
  CHECK(znbd_param_used_by("size=1G", ZNBD_PARAM_FOR_BIO));
  CHECK(znbd_param_used_by("zone_nr_conv", ZNBD_PARAM_FOR_PLUGIN));
  CHECK(!znbd_param_used_by("no_such_key", ZNBD_PARAM_FOR_ALL));
  /* znbd-tcmu and znbd-ublk: NOWAIT writes, kernel queues. */
  CHECK(!znbd_param_used_by("pipeline_zoned_writes", ZNBD_PARAM_FOR_UBLK));
  CHECK(!znbd_param_used_by("hw_queue_depth", ZNBD_PARAM_FOR_TCMU));
  CHECK(znbd_param_used_by("completion_nsec", ZNBD_PARAM_FOR_UBLK));
  CHECK(znbd_param_used_by("zone_control", ZNBD_PARAM_FOR_TCMU));

  /* A key=value word is not a key. */
  struct znbd_params p;
  char err[256];
  znbd_params_init(&p);
  errno = 0;
  CHECK(znbd_params_set(&p, "size=1G", "1G", err, sizeof err) == -1 &&
        errno == ENOENT);
  /* The default of every entry is what a user giving it would get. */
  for (size_t k = 0; (i = znbd_param_info(k)) != NULL; k++) {
    struct znbd_params q;
    if (!i->def)
      continue;
    znbd_params_init(&q);
    CHECK(znbd_params_set(&q, i->name, i->def, err, sizeof err) == 0);
    /* ... except that it counts as given. */
    CHECK(znbd_params_given(&q, i->name) && !znbd_params_given(&p, i->name));
    q.given = 0;
    CHECK(memcmp(&p, &q, sizeof p) == 0);
    znbd_params_free(&q);
  }
  znbd_params_free(&p);
  free(plugin_pod);
  free(znbd_pod);
  printf("table: %zu parameters, unique, in --help and both man pages\n", n);
}

/* znbd_params_refuse_unused: a parameter given to a front-end that
 * ignores it stops start-up with front-end, name and reason; one it uses,
 * or one left at its default, passes. */
static void
test_refuse_unused(void)
{
  static const struct {
    const char *key, *value;
    unsigned frontend;
    const char *msg; /* NULL: accepted */
  } cases[] = {
      {"hw_queue_depth", "8", ZNBD_PARAM_FOR_UBLK,
       "znbd-ublk: hw_queue_depth has no effect here: the queues are the "
       "kernel's; use --queues/--depth"},
      {"submit_queues", "2", ZNBD_PARAM_FOR_TCMU,
       "znbd-tcmu: submit_queues has no effect here: the queues are the "
       "kernel's (tcm_loop's and the SCSI disk's)"},
      {"pipeline_zoned_writes", "false", ZNBD_PARAM_FOR_UBLK,
       "znbd-ublk: pipeline_zoned_writes has no effect here: writes never "
       "wait for the wp: one ahead of it fails at once"},
      {"zone_write_timeout", "100", ZNBD_PARAM_FOR_TCMU,
       "znbd-tcmu: zone_write_timeout has no effect here: writes never "
       "wait for the wp: one ahead of it fails at once"},
      {"zone_write_plugging", "true", ZNBD_PARAM_FOR_UBLK,
       "znbd-ublk: zone_write_plugging has no effect here: the kernel's "
       "block layer orders each zone's writes"},
      {"sched_batch", "false", ZNBD_PARAM_FOR_UBLK,
       "znbd-ublk: sched_batch has no effect here: its threads keep their "
       "scheduling class"},
      {"no_zone_write_lock", "true", ZNBD_PARAM_FOR_BIO,
       "znbd --queue-mode=bio: no_zone_write_lock has no effect here: bio "
       "mode has no queues or scheduler (--queue-mode=mq has them)"},
      {"hw_queue_depth", "8", ZNBD_PARAM_FOR_PLUGIN,
       "nbdkit-zoned-plugin: hw_queue_depth has no effect here: nbdkit's "
       "threads serve the requests, with no queues or scheduler"},
      {"hw_queue_depth", "8", ZNBD_PARAM_FOR_MQ, NULL},
      {"pipeline_zoned_writes", "false", ZNBD_PARAM_FOR_BIO, NULL},
      {"sched_batch", "false", ZNBD_PARAM_FOR_PLUGIN, NULL},
      {"completion_nsec", "1000", ZNBD_PARAM_FOR_UBLK, NULL},
      {"mbps", "10", ZNBD_PARAM_FOR_TCMU, NULL},
      {"rotational", "true", ZNBD_PARAM_FOR_UBLK, NULL},
      {"badblocks", "8-15", ZNBD_PARAM_FOR_UBLK, NULL},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    struct znbd_params p;
    char err[256] = "x";
    znbd_params_init(&p);
    CHECK(znbd_params_set(&p, "size", "64M", err, sizeof err) == 0);
    CHECK(znbd_params_set(&p, cases[k].key, cases[k].value, err, sizeof err) ==
          0);
    errno = 0;
    int r = znbd_params_refuse_unused(&p, cases[k].frontend, err, sizeof err);
    if (cases[k].msg) {
      CHECK(r == -1 && errno == EINVAL);
      CHECK(strcmp(err, cases[k].msg) == 0);
      if (strcmp(err, cases[k].msg) != 0)
        fprintf(stderr, "  got  '%s'\n  want '%s'\n", err, cases[k].msg);
    } else {
      CHECK(r == 0 && err[0] == '\0');
    }
    znbd_params_free(&p);
  }
  /* The defaults of parameters a front-end ignores are not refused: every
   * front-end starts with every entry at its default. */
  struct znbd_params p;
  char err[256];
  znbd_params_init(&p);
  for (unsigned f = ZNBD_PARAM_FOR_PLUGIN; f & ZNBD_PARAM_FOR_ALL; f <<= 1)
    CHECK(znbd_params_refuse_unused(&p, f, err, sizeof err) == 0);
  /* The first such parameter in table order is named. */
  CHECK(znbd_params_set(&p, "submit_queues", "2", err, sizeof err) == 0);
  CHECK(znbd_params_set(&p, "sched_batch", "false", err, sizeof err) == 0);
  CHECK(znbd_params_refuse_unused(&p, ZNBD_PARAM_FOR_UBLK, err, sizeof err) ==
            -1 &&
        strstr(err, "znbd-ublk: sched_batch has no effect here") == err);
  znbd_params_free(&p);
  /* Help lines say who uses a parameter that not everyone does. */
  const char *help = znbd_params_help_text();
  CHECK(strstr(help, "(default true; nbdkit plugin and znbd only).") != NULL);
  CHECK(strstr(help, "(default 64; znbd mq mode only).") != NULL);
  CHECK(strcmp(znbd_param_frontend_name(ZNBD_PARAM_FOR_UBLK), "znbd-ublk") ==
        0);
  printf("refuse_unused: %zu cases, first in table order named\n",
         sizeof cases / sizeof cases[0]);
}

int
main(void)
{
  znbd_log_set_sink(note, NULL);
  test_size();
  test_bool();
  test_zone_list();
  test_set();
  test_finish();
  test_table();
  test_refuse_unused();
  CHECK(strstr(znbd_params_help, "zone_max_active=") != NULL);
  return check_done("params_test");
}
