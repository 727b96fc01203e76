/* znbd: device parameters (include/znbd/params.h), parsed once for the
 * nbdkit plugin and the znbd server.
 *
 * Names follow Linux null_blk's configfs attributes
 * (Documentation/block/null_blk.rst); sizes use nbdkit's size syntax
 * (nbdkit_parse_size: decimal with one optional suffix).  Clamps follow
 * null_blk (drivers/block/null_blk/zoned.c, null_init_zoned_dev()); see
 * doc/zone-rules.md, rule clamp-limits.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "znbd/params.h"
#include "znbd/log.h"
#include "err.h"
#include "store_dir_meta.h"

/* The parameter table: one entry per key=value word, in the order --help
 * lists them.  Each entry gives
 *   name      the key, and the field of struct znbd_params it sets
 *   type      how the value is parsed (enum znbd_param_type)
 *   meta      the value as --help and the man pages show it; for CHOICE
 *             and ENUM the accepted values, '|'-separated
 *   default   as text, parsed by znbd_params_init() like a user's value
 *             (NULL: none; the field stays 0 / NULL)
 *   min       UINT only: smallest value znbd_params_finish() accepts
 *   unit      of the value, or NULL
 *   users     front-ends and modes it has an effect in (ZNBD_PARAM_FOR_*)
 *   null_blk  the null_blk attribute it mirrors, or NULL (sizes: null_blk
 *             takes MB, znbd bytes)
 *   help      one line for --help; the default and the users are added
 *
 * To add a parameter: add its field to struct znbd_params
 * (include/znbd/params.h), add one entry here with P(), and document it
 * under PARAMETERS in man/nbdkit-zoned-plugin.pod and in man/znbd.pod
 * (tests/unit/params_test checks that both pages name every entry).
 * Checks that involve several parameters go in znbd_params_finish(). */
struct param {
  struct znbd_param_info i;
  size_t off, size; /* the field in struct znbd_params */
};

#define ALL ZNBD_PARAM_FOR_ALL
#define MQ ZNBD_PARAM_FOR_MQ
/* The NBD front-ends: their requests may wait (parked writes) and their
 * threads are znbd's own; znbd-tcmu and znbd-ublk take the kernel's
 * requests with NOWAIT writes from queue threads of their own. */
#define NBD (ZNBD_PARAM_FOR_PLUGIN | ZNBD_PARAM_FOR_BIO | ZNBD_PARAM_FOR_MQ)
#define P(name, type, meta, def, min, unit, users, null_blk, help)             \
  {                                                                            \
    {#name, ZNBD_PARAM_T_##type, meta, def, min, unit, users, null_blk, help}, \
        offsetof(struct znbd_params, name),                                    \
        sizeof(((struct znbd_params *)0)->name)                                \
  }

static const struct param table[] = {
    P(size, SIZE, "SIZE", NULL, 0, "bytes", ALL, "size",
      "Device size in bytes (required; nbdkit size syntax, e.g. 4G)"),
    P(zoned, BOOL, "BOOL", "true", 0, NULL, ALL, "zoned",
      "Host-managed zoned device"),
    P(blocksize, CHOICE, "512|4096", "512", 0, "bytes", ALL, "blocksize",
      "Logical block size in bytes (new zoned dir=: the file system's)"),
    P(memory_backed, BOOL, "BOOL", "true", 0, NULL, ALL, "memory_backed",
      "Keep written data"),
    P(zone_size, SIZE, "SIZE", "256M", 0, "bytes", ALL, "zone_size",
      "Zone size in bytes"),
    P(zone_capacity, SIZE, "SIZE", "0", 0, "bytes", ALL, "zone_capacity",
      "Zone capacity in bytes, <= zone_size; 0 means zone_size"),
    P(zone_nr_conv, UINT, "N", "0", 0, "zones", ALL, "zone_nr_conv",
      "Conventional zones at the start"),
    P(zone_max_open, UINT, "N", "0", 0, "zones", ALL, "zone_max_open",
      "Max open zones; 0 means no limit"),
    P(zone_max_active, UINT, "N", "0", 0, "zones", ALL, "zone_max_active",
      "Max active zones; 0 means no limit"),
    P(zone_full, BOOL, "BOOL", "false", 0, NULL, ALL, "zone_full",
      "Sequential zones start FULL"),
    P(zone_readonly, ZONE_LIST, "LIST", NULL, 0, "zones", ALL, "zone_readonly",
      "Zones made READONLY at start, e.g. 3,7-9"),
    P(zone_offline, ZONE_LIST, "LIST", NULL, 0, "zones", ALL, "zone_offline",
      "Zones made OFFLINE at start, e.g. 3,7-9"),
    P(zone_read_past_wp, ENUM, "zero|ones|error", "zero", 0, NULL, ALL, NULL,
      "Reads at or above the wp"),
    P(completion_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL,
      "completion_nsec", "Delay before each request completes, in ns"),
    /* pipeline_zoned_writes and no_zone_write_lock: names from the
     * null_blk patches that proposed them (not in mainline Linux). */
    P(pipeline_zoned_writes, BOOL, "BOOL", "true", 0, NULL, NBD,
      "pipeline_zoned_writes", "Writes ahead of the wp wait for it"),
    P(zone_write_timeout, UINT, "MS", "500", 0, "milliseconds", NBD, NULL,
      "Longest such wait, in ms"),
    P(zone_control, PATH, "PATH", NULL, 0, NULL, ALL, NULL,
      "Unix socket for zone management (report/open/close/finish/reset...)"),
    P(sched_batch, BOOL, "BOOL", "true", 0, NULL, NBD, NULL,
      "Serve from SCHED_BATCH threads"),
    P(dir, PATH, "PATH", NULL, 0, NULL, ALL, NULL,
      "Keep the device in this directory (zloop's file per zone layout)"),
    P(zone_prealloc, BOOL, "BOOL", "true", 0, NULL, ALL, NULL,
      "dir=: preallocate a zone's capacity when it opens"),
    P(buffered_io, BOOL, "BOOL", "true", 0, NULL, ALL, NULL,
      "dir=: page cache I/O (false: O_DIRECT, zloop's default)"),
    P(writeback_mb, UINT, "N", "8", 0, "MiB", ALL, NULL,
      "dir=: start writeback of a zone file every N MiB written; 0 means "
      "only at FLUSH"),
    P(badblocks, SECTOR_LIST, "LIST", NULL, 0, "512-byte sectors", ALL,
      "badblocks",
      "Bad sectors at start, e.g. 100-107,2048 (reads and writes "
      "touching one fail)"),
    P(badblocks_once, BOOL, "BOOL", "false", 0, NULL, ALL, "badblocks_once",
      "A bad range clears after its first failure"),
    P(badblocks_partial_io, BOOL, "BOOL", "false", 0, NULL, ALL,
      "badblocks_partial_io", "Writes are done up to the first bad block"),
    P(mbps, UINT, "N", "0", 0, "MiB/s", ALL, "mbps",
      "Bandwidth limit over all connections, MiB/s; 0 means none"),
    P(rotational, BOOL, "BOOL", "false", 0, NULL, ALL, "rotational",
      "Advertise a rotational device (NBD_FLAG_ROTATIONAL)"),
    P(zone_open_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL, NULL,
      "Extra latency of a zone open, in ns"),
    P(zone_close_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL, NULL,
      "Extra latency of a zone close, in ns"),
    P(zone_finish_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL, NULL,
      "Extra latency of a zone finish, in ns"),
    P(zone_reset_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL, NULL,
      "Extra latency of a zone reset (and a TRIM resetting zones), in ns"),
    P(max_memory, SIZE, "SIZE", "0", 0, "bytes", ALL, NULL,
      "RAM store: most bytes of data held; 0 means 80% of physical memory"),
    P(write_cache, BOOL, "BOOL", "false", 0, NULL, ALL, NULL,
      "Volatile write cache: unflushed writes are lost on power-cut"),
    P(hw_queue_depth, UINT, "N", "64", 1, "tags", MQ, "hw_queue_depth",
      "Tags per tag set"),
    P(submit_queues, UINT, "N", "1", 1, "queues", MQ, "submit_queues",
      "Hardware queues"),
    P(no_zone_write_lock, BOOL, "BOOL", "false", 0, NULL, MQ,
      "no_zone_write_lock", "mq scheduler without zone write locking"),
    P(zone_write_plugging, BOOL, "BOOL", "false", 0, NULL, MQ, NULL,
      "mq: order zoned writes by zone write plugging (Linux 6.10+)"),
};

#undef P
#undef NBD
#undef MQ
#undef ALL

#define NR_PARAMS (sizeof table / sizeof table[0])
_Static_assert(NR_PARAMS <= 64, "struct znbd_params.given has 64 bits");

const struct znbd_param_info *
znbd_param_info(size_t i)
{
  return i < NR_PARAMS ? &table[i].i : NULL;
}

static const struct param *
find(const char *key)
{
  size_t n = strcspn(key, "=");
  for (size_t k = 0; k < NR_PARAMS; k++)
    if (strncmp(table[k].i.name, key, n) == 0 && table[k].i.name[n] == '\0')
      return &table[k];
  return NULL;
}

const struct znbd_param_info *
znbd_param_find(const char *key)
{
  const struct param *e = key ? find(key) : NULL;
  return e ? &e->i : NULL;
}

bool
znbd_param_used_by(const char *key, unsigned users)
{
  const struct znbd_param_info *i = znbd_param_find(key);
  return i && (i->users & users);
}

/* Where entry E's value lives in P; checks the table's size for TYPE. */
static void *
field(struct znbd_params *p, const struct param *e, size_t size)
{
  assert(e->size == size);
  return (char *)p + e->off;
}

/* The '|'-separated word number N of LIST into BUF ("" past the end). */
static const char *
list_word(const char *list, unsigned n, char *buf, size_t len)
{
  for (; n > 0 && list; n--) {
    list = strchr(list, '|');
    list = list ? list + 1 : NULL;
  }
  if (!list)
    list = "";
  snprintf(buf, len, "%.*s", (int)strcspn(list, "|"), list);
  return buf;
}

/* LIST ("a|b|c") as prose ("a, b or c") into BUF. */
static const char *
list_prose(const char *list, char *buf, size_t len)
{
  size_t n = 1, used = 0;
  char w[64];
  for (const char *q = list; *q; q++)
    n += *q == '|';
  buf[0] = '\0';
  for (unsigned k = 0; k < n && used < len; k++) {
    const char *sep = k == 0 ? "" : k + 1 == n ? " or " : ", ";
    int r = snprintf(buf + used, len - used, "%s%s", sep,
                     list_word(list, k, w, sizeof w));
    used += r > 0 ? (size_t)r : 0;
  }
  return buf;
}

void
znbd_params_free(struct znbd_params *p)
{
  free(p->zone_readonly);
  free(p->zone_offline);
  free(p->zone_control);
  free(p->dir);
  free(p->badblocks);
  p->zone_readonly = p->zone_offline = p->zone_control = p->dir = NULL;
  p->badblocks = NULL;
}

int
znbd_parse_size(const char *s, uint64_t *out)
{
  /* nbdkit_parse_size's suffixes, either case, and their shifts. */
  static const char suffix[] = "bskmgtpe";
  static const unsigned shift_of[] = {0, 9, 10, 20, 30, 40, 50, 60};

  if (!s || *s < '0' || *s > '9') {
    errno = EINVAL;
    return -1;
  }
  uint64_t v = 0;
  const char *q = s;
  for (; *q >= '0' && *q <= '9'; q++) {
    unsigned d = (unsigned)(*q - '0');
    if (v > (UINT64_MAX - d) / 10) {
      errno = ERANGE;
      return -1;
    }
    v = v * 10 + d;
  }
  unsigned shift = 0;
  if (*q) {
    const char *k = strchr(suffix, tolower((unsigned char)*q));
    /* One suffix only: "64MiB", "1.5M" are refused. */
    if (!k || q[1] != '\0') {
      errno = EINVAL;
      return -1;
    }
    shift = shift_of[k - suffix];
  }
  if (shift && v > (UINT64_MAX >> shift)) {
    errno = ERANGE;
    return -1;
  }
  *out = v << shift;
  return 0;
}

int
znbd_parse_bool(const char *s, bool *out)
{
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  if (s) {
    for (size_t i = 0; i < 4; i++) {
      if (strcasecmp(s, yes[i]) == 0) {
        *out = true;
        return 0;
      }
      if (strcasecmp(s, no[i]) == 0) {
        *out = false;
        return 0;
      }
    }
  }
  errno = EINVAL;
  return -1;
}

/* Decimal unsigned number that fits in MAX; no sign, no suffix. */
static int
parse_uint(const char *s, uint64_t max, uint64_t *out)
{
  if (!s || *s < '0' || *s > '9') {
    errno = EINVAL;
    return -1;
  }
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') {
      errno = EINVAL;
      return -1;
    }
    unsigned d = (unsigned)(*s - '0');
    if (v > (max - d) / 10) {
      errno = ERANGE;
      return -1;
    }
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* One zone number of a list: digits, < nr_zones.  Advances *S. */
static int
list_number(const char **s, uint32_t nr_zones, uint32_t *out)
{
  const char *q = *s;
  if (*q < '0' || *q > '9')
    return -1;
  uint64_t v = 0;
  for (; *q >= '0' && *q <= '9'; q++) {
    v = v * 10 + (unsigned)(*q - '0');
    if (v >= nr_zones)
      return -1;
  }
  *s = q;
  *out = (uint32_t)v;
  return 0;
}

int
znbd_parse_zone_list(const char *s, uint32_t nr_zones,
                     int (*fn)(void *opaque, uint32_t zone), void *opaque)
{
  if (!s || !*s)
    goto bad;
  /* Check the whole list before calling FN once: a bad list does
   * nothing. */
  for (int pass = 0; pass < 2; pass++) {
    const char *q = s;
    for (;;) {
      uint32_t a, b;
      if (list_number(&q, nr_zones, &a) < 0)
        goto bad;
      b = a;
      if (*q == '-') {
        q++;
        if (list_number(&q, nr_zones, &b) < 0 || b < a)
          goto bad;
      }
      if (pass == 1 && fn) {
        for (uint64_t z = a; z <= b; z++) {
          int r = fn(opaque, (uint32_t)z);
          if (r)
            return r;
        }
      }
      if (*q == '\0')
        break;
      if (*q != ',')
        goto bad;
      q++;
    }
  }
  return 0;
bad:
  errno = EINVAL;
  return -1;
}

static int
set_size(const char *key, const char *value, uint64_t *dst, char *err,
         size_t errlen)
{
  uint64_t v;
  if (znbd_parse_size(value, &v) < 0) {
    int e = errno;
    set_err(err, errlen,
            "%s: cannot parse size '%s' (%s; expected digits with at most "
            "one suffix b, s, k, m, g, t, p or e, e.g. 64M)",
            key, value, e == ERANGE ? "too large" : "malformed");
    errno = EINVAL;
    return -1;
  }
  *dst = v;
  return 0;
}

static int
set_bool(const char *key, const char *value, bool *dst, char *err,
         size_t errlen)
{
  if (znbd_parse_bool(value, dst) < 0) {
    set_err(err, errlen,
            "%s: '%s' is not a boolean (use true/false, yes/no, on/off, "
            "1/0)",
            key, value);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

static int
set_u32(const char *key, const char *value, uint32_t *dst, char *err,
        size_t errlen)
{
  uint64_t v;
  if (parse_uint(value, UINT32_MAX, &v) < 0) {
    set_err(err, errlen, "%s: '%s' is not a number from 0 to %" PRIu32, key,
            value, UINT32_MAX);
    errno = EINVAL;
    return -1;
  }
  *dst = (uint32_t)v;
  return 0;
}

static int
set_u64(const struct znbd_param_info *i, const char *value, uint64_t *dst,
        char *err, size_t errlen)
{
  if (parse_uint(value, UINT64_MAX, dst) < 0) {
    set_err(err, errlen, "%s: '%s' is not a number of %s", i->name, value,
            i->unit ? i->unit : "units");
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* Index of WORD among LIST's '|'-separated words, or -1. */
static int
word_index(const char *list, const char *word)
{
  char w[64];
  for (int k = 0; *list_word(list, (unsigned)k, w, sizeof w); k++)
    if (strcmp(w, word) == 0)
      return k;
  return -1;
}

/* VALUE is none of the words of I's META. */
static int
not_in_list(const struct znbd_param_info *i, const char *value, char *err,
            size_t errlen)
{
  char prose[256];
  set_err(err, errlen, "%s: must be %s, not '%s'", i->name,
          list_prose(i->meta, prose, sizeof prose), value);
  errno = EINVAL;
  return -1;
}

/* CHOICE: a number that is one of META's ("512|4096"). */
static int
set_choice(const struct znbd_param_info *i, const char *value, uint32_t *dst,
           char *err, size_t errlen)
{
  char num[16];
  uint32_t v;
  if (set_u32(i->name, value, &v, err, errlen) < 0)
    return -1;
  snprintf(num, sizeof num, "%" PRIu32, v);
  if (word_index(i->meta, num) < 0)
    return not_in_list(i, value, err, errlen);
  *dst = v;
  return 0;
}

/* ENUM: one of META's words; the field gets the word's index. */
static int
set_enum(const struct znbd_param_info *i, const char *value, int *dst,
         char *err, size_t errlen)
{
  int k = word_index(i->meta, value);
  if (k < 0)
    return not_in_list(i, value, err, errlen);
  *dst = k;
  return 0;
}

/* ZONE_LIST, SECTOR_LIST and PATH: a copy of VALUE replaces *DST. */
static int
set_str(const struct znbd_param_info *i, const char *value, char **dst,
        char *err, size_t errlen)
{
  /* Lists: syntax now; zone numbers are checked by znbd_params_finish(),
   * sectors against the size too. */
  const char *what = NULL;
  if (i->type == ZNBD_PARAM_T_ZONE_LIST &&
      znbd_parse_zone_list(value, UINT32_MAX, NULL, NULL) < 0)
    what = "zone list (zone numbers and ranges, e.g. 3,7-9)";
  if (i->type == ZNBD_PARAM_T_SECTOR_LIST &&
      znbd_parse_sector_list(value, UINT64_MAX, NULL, NULL) < 0)
    what = "sector list (512-byte sectors and inclusive ranges, e.g. "
           "100-107,2048)";
  if (what) {
    set_err(err, errlen, "%s: '%s' is not a %s", i->name, value, what);
    errno = EINVAL;
    return -1;
  }
  if (i->type == ZNBD_PARAM_T_PATH && !*value) {
    set_err(err, errlen, "%s: empty path", i->name);
    errno = EINVAL;
    return -1;
  }
  /* A relative PATH is made absolute now, against the directory the
   * front-end was started in: a server that goes into the background
   * changes to "/" (as nbdkit does), and its control socket and store
   * must still be where the user named them. */
  char *c = NULL;
  if (i->type == ZNBD_PARAM_T_PATH && value[0] != '/') {
    char *cwd = getcwd(NULL, 0);
    if (!cwd) {
      set_err(err, errlen, "%s: %s: cannot make the path absolute: %s", i->name,
              value, strerror(errno));
      return -1;
    }
    if (asprintf(&c, "%s/%s", cwd, value) == -1)
      c = NULL;
    free(cwd);
  } else
    c = strdup(value);
  if (!c) {
    set_err(err, errlen, "%s: out of memory", i->name);
    errno = ENOMEM;
    return -1;
  }
  free(*dst);
  *dst = c;
  return 0;
}

/* Parse VALUE for entry E into P; on failure P is unchanged. */
static int
set_value(struct znbd_params *p, const struct param *e, const char *value,
          char *err, size_t errlen)
{
  const struct znbd_param_info *i = &e->i;

  switch (i->type) {
  case ZNBD_PARAM_T_SIZE:
    return set_size(i->name, value, field(p, e, sizeof(uint64_t)), err, errlen);
  case ZNBD_PARAM_T_BOOL:
    return set_bool(i->name, value, field(p, e, sizeof(bool)), err, errlen);
  case ZNBD_PARAM_T_UINT:
    return set_u32(i->name, value, field(p, e, sizeof(uint32_t)), err, errlen);
  case ZNBD_PARAM_T_UINT64:
    return set_u64(i, value, field(p, e, sizeof(uint64_t)), err, errlen);
  case ZNBD_PARAM_T_CHOICE:
    return set_choice(i, value, field(p, e, sizeof(uint32_t)), err, errlen);
  case ZNBD_PARAM_T_ENUM:
    return set_enum(i, value, field(p, e, sizeof(int)), err, errlen);
  case ZNBD_PARAM_T_ZONE_LIST:
  case ZNBD_PARAM_T_PATH:
  case ZNBD_PARAM_T_SECTOR_LIST:
    return set_str(i, value, field(p, e, sizeof(char *)), err, errlen);
  }
  set_err(err, errlen, "%s: no parser for its type", i->name);
  errno = EINVAL;
  return -1;
}

void
znbd_params_init(struct znbd_params *p)
{
  memset(p, 0, sizeof *p);
  for (size_t k = 0; k < NR_PARAMS; k++) {
    if (table[k].i.def) {
      int r = set_value(p, &table[k], table[k].i.def, NULL, 0);
      assert(r == 0); /* the table's defaults parse (params_test) */
      (void)r;
    }
  }
}

int
znbd_params_set(struct znbd_params *p, const char *key, const char *value,
                char *err, size_t errlen)
{
  const struct param *e;

  if (err && errlen)
    err[0] = '\0';
  if (!key || !value) {
    set_err(err, errlen, "parameter without key or value");
    errno = EINVAL;
    return -1;
  }
  e = strchr(key, '=') ? NULL : find(key);
  if (!e) {
    set_err(err, errlen, "unknown parameter '%s' (see --help for the list)",
            key);
    errno = ENOENT;
    return -1;
  }
  if (set_value(p, e, value, err, errlen) < 0)
    return -1;
  p->given |= UINT64_C(1) << (e - table);
  return 0;
}

bool
znbd_params_given(const struct znbd_params *p, const char *name)
{
  const struct param *e = name && !strchr(name, '=') ? find(name) : NULL;
  return e && (p->given >> (e - table) & 1);
}

/* The front-ends as the help lines name them, in ZNBD_PARAM_FOR_* bit
 * order; bio and mq together are "znbd". */
static const char *const user_words[] = {
    "nbdkit plugin", "znbd bio mode", "znbd mq mode", "znbd-tcmu", "znbd-ublk"};

/* Who uses a parameter, for its help line, into BUF: "" for every
 * front-end, else "znbd mq mode only", "nbdkit plugin and znbd only"... */
static const char *
users_text(unsigned users, char *buf, size_t len)
{
  const char *w[5];
  size_t n = 0;
  users &= ZNBD_PARAM_FOR_ALL;
  buf[0] = '\0';
  if (users == ZNBD_PARAM_FOR_ALL)
    return buf;
  for (unsigned k = 0; k < 5; k++) {
    unsigned bit = 1u << k;
    if (!(users & bit))
      continue;
    if (bit == ZNBD_PARAM_FOR_BIO && (users & ZNBD_PARAM_FOR_MQ)) {
      w[n++] = "znbd";
      k++; /* mq too */
    } else {
      w[n++] = user_words[k];
    }
  }
  size_t used = 0;
  for (size_t k = 0; k < n && used < len; k++) {
    int r = snprintf(buf + used, len - used, "%s%s",
                     k == 0       ? ""
                     : k + 1 == n ? " and "
                                  : ", ",
                     w[k]);
    used += r > 0 ? (size_t)r : 0;
  }
  if (used < len)
    snprintf(buf + used, len - used, " only");
  return buf;
}

const char *
znbd_param_frontend_name(unsigned frontend)
{
  switch (frontend) {
  case ZNBD_PARAM_FOR_PLUGIN:
    return "nbdkit-zoned-plugin";
  case ZNBD_PARAM_FOR_BIO:
    return "znbd --queue-mode=bio";
  case ZNBD_PARAM_FOR_MQ:
    return "znbd --queue-mode=mq";
  case ZNBD_PARAM_FOR_TCMU:
    return "znbd-tcmu";
  case ZNBD_PARAM_FOR_UBLK:
    return "znbd-ublk";
  default:
    return "znbd";
  }
}

/* Why a parameter has no effect in a front-end, where more can be said
 * than who uses it (the fallback): the first entry naming both. */
static const struct {
  const char *name; /* a parameter, or NULL: every one of the front-ends */
  unsigned frontends;
  const char *why;
} unused_why[] = {
    {"hw_queue_depth", ZNBD_PARAM_FOR_UBLK,
     "the queues are the kernel's; use --queues/--depth"},
    {"submit_queues", ZNBD_PARAM_FOR_UBLK,
     "the queues are the kernel's; use --queues/--depth"},
    {"hw_queue_depth", ZNBD_PARAM_FOR_TCMU,
     "the queues are the kernel's (tcm_loop's and the SCSI disk's)"},
    {"submit_queues", ZNBD_PARAM_FOR_TCMU,
     "the queues are the kernel's (tcm_loop's and the SCSI disk's)"},
    {"no_zone_write_lock", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "the kernel's block layer orders each zone's writes"},
    {"zone_write_plugging", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "the kernel's block layer orders each zone's writes"},
    {"pipeline_zoned_writes", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "writes never wait for the wp: one ahead of it fails at once"},
    {"zone_write_timeout", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "writes never wait for the wp: one ahead of it fails at once"},
    {"sched_batch", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "its threads keep their scheduling class"},
    {NULL, ZNBD_PARAM_FOR_BIO,
     "bio mode has no queues or scheduler (--queue-mode=mq has them)"},
    {NULL, ZNBD_PARAM_FOR_PLUGIN,
     "nbdkit's threads serve the requests, with no queues or scheduler"},
};

int
znbd_params_refuse_unused(const struct znbd_params *p, unsigned frontend,
                          char *err, size_t errlen)
{
  if (errlen)
    err[0] = '\0';
  for (size_t k = 0; k < NR_PARAMS; k++) {
    const struct znbd_param_info *i = &table[k].i;
    if (!(p->given >> k & 1) || (i->users & frontend))
      continue;
    char who[128];
    const char *why = NULL;
    for (size_t r = 0; !why && r < sizeof unused_why / sizeof unused_why[0];
         r++)
      if ((unused_why[r].frontends & frontend) &&
          (!unused_why[r].name || strcmp(unused_why[r].name, i->name) == 0))
        why = unused_why[r].why;
    if (!why) {
      users_text(i->users, who, sizeof who);
      why = who;
    }
    set_err(err, errlen, "%s: %s has no effect here: %s",
            znbd_param_frontend_name(frontend), i->name, why);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* "key=META" padded to this width, then the help line. */
#define HELP_COLUMN 26

/* One help line for E into BUF (LEN may be 0 to measure); returns its
 * length as snprintf does. */
static int
help_line(const struct param *e, char *buf, size_t len)
{
  const struct znbd_param_info *i = &e->i;
  char usage[128], extra[256] = "";
  int n = snprintf(usage, sizeof usage, "%s=%s", i->name, i->meta);
  int pad = n < HELP_COLUMN ? HELP_COLUMN - n : 2;

  char whobuf[128];
  const char *who = users_text(i->users, whobuf, sizeof whobuf);

  if (i->def || *who)
    snprintf(extra, sizeof extra, " (%s%s%s%s)", i->def ? "default " : "",
             i->def ? i->def : "", i->def && *who ? "; " : "", who);
  return snprintf(buf, len, "%s%*s%s%s.", usage, pad, "", i->help, extra);
}

static char *help_text;

static void
build_help(void)
{
  size_t total = 1, used = 0;
  for (size_t k = 0; k < NR_PARAMS; k++)
    total += (size_t)help_line(&table[k], NULL, 0) + 1;
  help_text = malloc(total);
  if (!help_text)
    return;
  for (size_t k = 0; k < NR_PARAMS; k++) {
    used += (size_t)help_line(&table[k], help_text + used, total - used);
    if (k + 1 < NR_PARAMS)
      help_text[used++] = '\n';
  }
  help_text[used] = '\0';
}

const char *
znbd_params_help_text(void)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, build_help);
  return help_text ? help_text
                   : "(the parameter list needs memory that was not there)";
}

struct list_check {
  uint32_t nr_conv;
  uint32_t bad;
};

static int
refuse_conv(void *opaque, uint32_t zone)
{
  struct list_check *c = opaque;
  if (zone < c->nr_conv) {
    c->bad = zone;
    return 1;
  }
  return 0;
}

static int
check_list(const char *key, const char *list, uint32_t nr_zones,
           uint32_t nr_conv, char *err, size_t errlen)
{
  struct list_check c = {nr_conv, 0};
  int r = znbd_parse_zone_list(list, nr_zones, refuse_conv, &c);
  if (r < 0) {
    set_err(err, errlen,
            "%s: '%s' names a zone outside 0-%" PRIu32
            " (the device has %" PRIu32 " zones)",
            key, list, nr_zones - 1, nr_zones);
    return -1;
  }
  if (r > 0) {
    set_err(err, errlen,
            "%s: zone %" PRIu32 " is conventional (zone_nr_conv=%" PRIu32
            "); only sequential zones can be made readonly or offline",
            key, c.bad, nr_conv);
    return -1;
  }
  return 0;
}

/* What every device needs: a size, a block size dividing it, and each
 * UINT entry at least its table minimum. */
static int
check_device(struct znbd_params *p, char *err, size_t errlen)
{
  if (p->size == 0) {
    set_err(err, errlen, "size: required and must not be 0 (e.g. size=4G)");
    return -1;
  }
  if (p->blocksize != 512 && p->blocksize != 4096) {
    set_err(err, errlen, "blocksize: must be 512 or 4096");
    return -1;
  }
  if (p->size % p->blocksize) {
    set_err(err, errlen,
            "size: %" PRIu64 " is not a multiple of blocksize (%" PRIu32 ")",
            p->size, p->blocksize);
    return -1;
  }
  for (size_t k = 0; k < NR_PARAMS; k++) {
    const struct param *e = &table[k];
    if (e->i.type == ZNBD_PARAM_T_UINT &&
        *(uint32_t *)field(p, e, sizeof(uint32_t)) < e->i.min) {
      set_err(err, errlen, "%s: must be at least %" PRIu32, e->i.name,
              e->i.min);
      return -1;
    }
  }
  return 0;
}

/* Zone size and capacity against the block size and the device
 * (doc/zone-rules.md, rules zone-layout, zone-capacity, zone-size-any). */
static int
check_zones(struct znbd_params *p, char *err, size_t errlen)
{
  if (p->zone_size == 0 || p->zone_size % p->blocksize) {
    set_err(err, errlen,
            "zone_size: %" PRIu64
            " must be a non-zero multiple of blocksize (%" PRIu32 ")",
            p->zone_size, p->blocksize);
    return -1;
  }
  if (p->zone_size > p->size) {
    set_err(err, errlen,
            "zone_size: %" PRIu64 " is larger than size (%" PRIu64 ")",
            p->zone_size, p->size);
    return -1;
  }
  if (p->zone_capacity % p->blocksize) {
    set_err(err, errlen,
            "zone_capacity: %" PRIu64
            " is not a multiple of blocksize (%" PRIu32 ")",
            p->zone_capacity, p->blocksize);
    return -1;
  }
  if (p->zone_capacity > p->zone_size) {
    set_err(err, errlen,
            "zone_capacity: %" PRIu64 " is larger than zone_size (%" PRIu64 ")",
            p->zone_capacity, p->zone_size);
    return -1;
  }
  uint64_t nz = p->size / p->zone_size + (p->size % p->zone_size != 0);
  if (nz > UINT32_MAX) {
    set_err(err, errlen,
            "zone_size: %" PRIu64 " gives %" PRIu64 " zones for size %" PRIu64
            " (at most %" PRIu32 ")",
            p->zone_size, nz, p->size, UINT32_MAX);
    return -1;
  }
  return 0;
}

/* Derive P's geometry once (lib/geometry.c: zone count, capacity 0 ->
 * zone_size, null_blk's clamps; doc/zone-rules.md, rule clamp-limits),
 * report each clamp as a note (znbd_log) and write the clamped values
 * back to their keys.  P is checked: derivation cannot fail then (EINVAL
 * otherwise). */
static int
derive_geometry(struct znbd_params *p)
{
  const struct znbd_geometry_request r = {
      .size = p->size,
      .blocksize = p->blocksize,
      .zoned = p->zoned,
      .zone_size = p->zone_size,
      .zone_capacity = p->zone_capacity,
      .nr_conv = p->zone_nr_conv,
      .max_open = p->zone_max_open,
      .max_active = p->zone_max_active,
  };
  struct znbd_geometry *g = &p->geo;
  if (znbd_geometry_derive(g, &r) < 0)
    return -1;
  if (!g->zoned)
    return 0;
  if (g->nr_conv != r.nr_conv)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_nr_conv: %" PRIu32 " leaves no sequential zone of %" PRIu32
             "; clamped to %" PRIu32 " (as null_blk)",
             r.nr_conv, g->nr_zones, g->nr_conv);
  uint32_t nr_seq = g->nr_zones - g->nr_conv;
  if (g->max_active != r.max_active)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_max_active: %" PRIu32 " >= %" PRIu32
             " sequential zones; set to 0 (no limit, as null_blk)",
             r.max_active, nr_seq);
  if (g->max_open != r.max_open && g->max_active && r.max_open > g->max_active)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_max_open: %" PRIu32 " > zone_max_active %" PRIu32
             "; clamped to %" PRIu32 " (as null_blk)",
             r.max_open, g->max_active, g->max_active);
  else if (g->max_open != r.max_open)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_max_open: %" PRIu32 " >= %" PRIu32
             " sequential zones; set to 0 (no limit, as null_blk)",
             r.max_open, nr_seq);
  p->zone_capacity = g->zone_capacity;
  p->zone_nr_conv = g->nr_conv;
  p->zone_max_open = g->max_open;
  p->zone_max_active = g->max_active;
  return 0;
}

/* Entry E's value in P as a number, and setting it: a bool, uint32_t or
 * uint64_t field (the keys PATH/znbd.meta records). */
static uint64_t
get_number(const struct znbd_params *p, const struct param *e)
{
  const char *f = (const char *)p + e->off;
  return e->size == sizeof(bool)       ? *(const bool *)f
         : e->size == sizeof(uint32_t) ? *(const uint32_t *)f
                                       : *(const uint64_t *)f;
}

static void
set_number(struct znbd_params *p, const struct param *e, uint64_t v)
{
  char *f = (char *)p + e->off;
  if (e->size == sizeof(bool))
    *(bool *)f = v != 0;
  else if (e->size == sizeof(uint32_t))
    *(uint32_t *)f = (uint32_t)v;
  else
    *(uint64_t *)f = v;
}

/* The blocksize of a directory formatted now (zoned): zloop's block size
 * of the file system (512 up to 512 bytes, 4096 for 1024 to 4096: the
 * sequential files' sizes are then multiples of it, as zloop requires),
 * 4096 when zloop's is not known.  A given blocksize smaller than zloop's
 * is kept, with a note (znbd_log) that zloop may refuse the files. */
static void
default_blocksize(struct znbd_params *p)
{
  uint32_t zbs = znbd_dir_zloop_block_size(p->dir);
  if (!znbd_params_given(p, "blocksize")) {
    p->blocksize = zbs && zbs <= 512 ? 512 : 4096;
    return;
  }
  if (zbs && p->blocksize < zbs)
    znbd_log(ZNBD_LOG_NOTE,
             "blocksize: %" PRIu32 " is smaller than the file system's "
             "block size %" PRIu32 " under dir=%s: Linux zloop refuses a "
             "sequential zone file whose size is not a multiple of %" PRIu32,
             p->blocksize, zbs, p->dir, zbs);
}

/* dir=, before any check: when P->dir holds a formatted device, its
 * recorded geometry (size, zoned, blocksize, zone_size, zone_capacity,
 * zone_nr_conv, zone_max_open, zone_max_active) fills the parameters that
 * were not given; a given layout key that differs fails with EINVAL and a
 * message naming it and both values.  A zoned directory not formatted yet
 * gets the file system's block size when blocksize is not given (Linux
 * zloop's zloop_get_block_size(): 512 or 4096, see there), and a note
 * (znbd_log) says when a given one is smaller.  zone_full is only used
 * when formatting (a note says so if it is given).  Returns 0 (also
 * when PATH is absent or not formatted yet), or -1 with errno EINVAL or
 * EIO (unreadable or corrupt PATH/znbd.meta, named in ERR).  Reads the
 * directory's record only (lib/store_dir_meta.c); the store opens it later. */
static int
adopt_dir(struct znbd_params *p, char *err, size_t errlen)
{
  struct znbd_dir_meta m;
  int state = znbd_dir_probe(p->dir, &m, err, errlen);
  if (state < 0)
    return -1;
  if (state != ZNBD_DIR_FORMATTED) { /* formatted when the device is made */
    if (p->size == 0 && state == ZNBD_DIR_ZLOOP) {
      set_err(err, errlen,
              "size: required: dir=%s holds zone files but no %s (a Linux "
              "zloop directory?): give the geometry it was made with, "
              "size= (zloop's capacity_mb), zone_size= (zone_size_mb, "
              "zloop's default 256M), zone_capacity= (zone_capacity_mb) and "
              "zone_nr_conv= (conv_zones, zloop's default 8)",
              p->dir, META_NAME);
      errno = EINVAL;
      return -1;
    }
    if (p->zoned)
      default_blocksize(p);
    if (p->size == 0) {
      set_err(err, errlen,
              "size: required: dir=%s has no %s yet (a new directory is "
              "formatted with the geometry given: size=, and zone_size=, "
              "zone_nr_conv=, ... when not the defaults)",
              p->dir, META_NAME);
      errno = EINVAL;
      return -1;
    }
    return 0;
  }
  /* Not given: the recorded value.  Given and different: the layout keys
   * are refused now (before other checks complain about a consequence),
   * the others when the store opens (znbd_store_dir_open compares them
   * after the clamps, which may change a given value). */
  struct znbd_dir_meta cur;
  for (size_t k = 0; k < ZNBD_DIR_META_NKEYS; k++) {
    const struct param *e = find(znbd_dir_meta_key(k));
    assert(e); /* every key recorded is a parameter's name */
    bool given = p->given >> (e - table) & 1;
    znbd_dir_meta_put(&cur, k,
                      given ? get_number(p, e) : znbd_dir_meta_get(&m, k));
    if (given && k < ZNBD_DIR_META_LAYOUT_KEYS && (k < 3 || m.zoned) &&
        znbd_dir_meta_mismatch(&m, &cur, k, p->dir, err, errlen) < 0)
      return -1;
  }
  /* The zone keys only for a zoned device; write_cache is not adopted. */
  for (size_t k = 0; k < ZNBD_DIR_META_NKEYS; k++) {
    const struct param *e = find(znbd_dir_meta_key(k));
    if ((k < 3 || cur.zoned) && strcmp(e->i.name, "write_cache") != 0)
      set_number(p, e, znbd_dir_meta_get(&cur, k));
  }
  if (p->zone_full)
    znbd_log(ZNBD_LOG_NOTE,
             "zone_full: ignored, dir=%s is formatted already (its files "
             "give each zone's write pointer)",
             p->dir);
  return 0;
}

int
znbd_params_finish(struct znbd_params *p, char *err, size_t errlen)
{
  if (err && errlen)
    err[0] = '\0';
  if (p->dir && adopt_dir(p, err, errlen) < 0)
    return -1;
  errno = EINVAL;
  if (p->dir && !p->memory_backed) {
    set_err(err, errlen, "memory_backed: false cannot keep data in dir=%s",
            p->dir);
    return -1;
  }
  if (check_device(p, err, errlen) < 0)
    return -1;
  if (p->badblocks &&
      znbd_parse_sector_list(p->badblocks, p->size / 512, NULL, NULL) < 0) {
    set_err(err, errlen,
            "badblocks: \"%s\" names a sector past the device's last "
            "sector %" PRIu64,
            p->badblocks, p->size / 512 - 1);
    errno = EINVAL;
    return -1;
  }
  if (!p->zoned) {
    if (p->zone_readonly || p->zone_offline || p->zone_full) {
      set_err(err, errlen, "%s: needs zoned=true",
              p->zone_readonly  ? "zone_readonly"
              : p->zone_offline ? "zone_offline"
                                : "zone_full");
      return -1;
    }
    if (derive_geometry(p) < 0) /* size is checked: cannot fail */
      return -1;
    errno = 0;
    return 0;
  }
  if (check_zones(p, err, errlen) < 0)
    return -1;
  if (derive_geometry(p) < 0) {
    set_err(err, errlen, "zone_size: cannot lay out the zones: %s",
            strerror(errno));
    return -1;
  }
  if (p->zone_readonly &&
      check_list("zone_readonly", p->zone_readonly, p->geo.nr_zones,
                 p->geo.nr_conv, err, errlen) < 0) {
    errno = EINVAL;
    return -1;
  }
  if (p->zone_offline &&
      check_list("zone_offline", p->zone_offline, p->geo.nr_zones,
                 p->geo.nr_conv, err, errlen) < 0) {
    errno = EINVAL;
    return -1;
  }
  errno = 0;
  return 0;
}
