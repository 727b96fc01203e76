/* znbd: device parameters (include/znbd/params.h), parsed once for the
 * nbdkit plugin and the znbd server.
 *
 * Names follow Linux null_blk's configfs attributes
 * (Documentation/block/null_blk.rst); sizes use nbdkit's size syntax
 * (nbdkit_parse_size: decimal with one optional suffix).  Clamps follow
 * null_blk (drivers/block/null_blk/zoned.c, null_init_zoned_dev()); see
 * doc/zone-rules.md, rule clamp-limits.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "znbd/params.h"
#include "err.h"

const char znbd_params_help[] =
    "size=SIZE                 Device size in bytes (required; nbdkit size "
    "syntax, e.g. 4G).\n"
    "zoned=BOOL                Host-managed zoned device (default true).\n"
    "blocksize=512|4096        Logical block size in bytes (default 512).\n"
    "memory_backed=BOOL        Keep written data (default true).\n"
    "zone_size=SIZE            Zone size in bytes (default 256M).\n"
    "zone_capacity=SIZE        Zone capacity in bytes, <= zone_size "
    "(default 0 = zone_size).\n"
    "zone_nr_conv=N            Conventional zones at the start (default 0).\n"
    "zone_max_open=N           Max open zones (default 0 = no limit).\n"
    "zone_max_active=N         Max active zones (default 0 = no limit).\n"
    "zone_full=BOOL            Sequential zones start FULL (default false).\n"
    "zone_readonly=LIST        Zones made READONLY at start, e.g. 3,7-9.\n"
    "zone_offline=LIST         Zones made OFFLINE at start, e.g. 3,7-9.\n"
    "zone_read_past_wp=zero|ones|error  Reads at or above the wp (default "
    "zero).\n"
    "completion_nsec=NS        Delay before each request completes, in ns "
    "(default 0).\n"
    "pipeline_zoned_writes=BOOL  Writes ahead of the wp wait for it (default "
    "true).\n"
    "zone_write_timeout=MS     Longest such wait, in ms (default 500).\n"
    "zone_control=PATH         Unix socket for zone management "
    "(report/open/close/finish/reset...).\n"
    "sched_batch=BOOL          Serve from SCHED_BATCH threads (default "
    "true).\n"
    "hw_queue_depth=N          Tags per tag set (znbd mq mode only; default "
    "64).\n"
    "submit_queues=N           Hardware queues (znbd mq mode only; default "
    "1).\n"
    "no_zone_write_lock=BOOL   mq scheduler without zone write locking (znbd "
    "mq mode only).";

void
znbd_params_init(struct znbd_params *p)
{
  memset(p, 0, sizeof *p);
  p->zoned = true;
  p->blocksize = 512;
  p->memory_backed = true;
  p->zone_size = UINT64_C(256) << 20;
  p->zone_read_past_wp = ZNBD_READ_PAST_WP_ZERO;
  p->pipeline_zoned_writes = true;
  p->zone_write_timeout = 500;
  p->sched_batch = true;
  p->hw_queue_depth = 64;
  p->submit_queues = 1;
}

void
znbd_params_free(struct znbd_params *p)
{
  free(p->zone_readonly);
  free(p->zone_offline);
  free(p->zone_control);
  p->zone_readonly = p->zone_offline = p->zone_control = NULL;
}

int
znbd_parse_size(const char *s, uint64_t *out)
{
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
    switch (*q) {
    case 'b':
    case 'B':
      shift = 0;
      break;
    case 's':
    case 'S':
      shift = 9;
      break;
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    case 't':
    case 'T':
      shift = 40;
      break;
    case 'p':
    case 'P':
      shift = 50;
      break;
    case 'e':
    case 'E':
      shift = 60;
      break;
    default:
      errno = EINVAL;
      return -1;
    }
    if (q[1] != '\0') { /* one suffix only: "64MiB", "1.5M" are refused */
      errno = EINVAL;
      return -1;
    }
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
set_str(const char *value, char **dst)
{
  char *c = strdup(value);
  if (!c)
    return -1;
  free(*dst);
  *dst = c;
  return 0;
}

int
znbd_params_set(struct znbd_params *p, const char *key, const char *value,
                char *err, size_t errlen)
{
  if (err && errlen)
    err[0] = '\0';
  if (!key || !value) {
    set_err(err, errlen, "parameter without key or value");
    errno = EINVAL;
    return -1;
  }
  if (strcmp(key, "size") == 0)
    return set_size(key, value, &p->size, err, errlen);
  if (strcmp(key, "zoned") == 0)
    return set_bool(key, value, &p->zoned, err, errlen);
  if (strcmp(key, "blocksize") == 0) {
    uint32_t v;
    if (set_u32(key, value, &v, err, errlen) < 0)
      return -1;
    if (v != 512 && v != 4096) {
      set_err(err, errlen, "blocksize: must be 512 or 4096, not %s", value);
      errno = EINVAL;
      return -1;
    }
    p->blocksize = v;
    return 0;
  }
  if (strcmp(key, "memory_backed") == 0)
    return set_bool(key, value, &p->memory_backed, err, errlen);
  if (strcmp(key, "zone_size") == 0)
    return set_size(key, value, &p->zone_size, err, errlen);
  if (strcmp(key, "zone_capacity") == 0)
    return set_size(key, value, &p->zone_capacity, err, errlen);
  if (strcmp(key, "zone_nr_conv") == 0)
    return set_u32(key, value, &p->zone_nr_conv, err, errlen);
  if (strcmp(key, "zone_max_open") == 0)
    return set_u32(key, value, &p->zone_max_open, err, errlen);
  if (strcmp(key, "zone_max_active") == 0)
    return set_u32(key, value, &p->zone_max_active, err, errlen);
  if (strcmp(key, "zone_full") == 0)
    return set_bool(key, value, &p->zone_full, err, errlen);
  if (strcmp(key, "zone_readonly") == 0 || strcmp(key, "zone_offline") == 0) {
    /* Syntax now; zone numbers are checked by znbd_params_finish(). */
    if (znbd_parse_zone_list(value, UINT32_MAX, NULL, NULL) < 0) {
      set_err(err, errlen,
              "%s: '%s' is not a zone list (zone numbers and ranges, e.g. "
              "3,7-9)",
              key, value);
      errno = EINVAL;
      return -1;
    }
    char **dst = key[5] == 'r' ? &p->zone_readonly : &p->zone_offline;
    if (set_str(value, dst) < 0) {
      set_err(err, errlen, "%s: out of memory", key);
      return -1;
    }
    return 0;
  }
  if (strcmp(key, "zone_read_past_wp") == 0) {
    if (strcmp(value, "zero") == 0)
      p->zone_read_past_wp = ZNBD_READ_PAST_WP_ZERO;
    else if (strcmp(value, "ones") == 0)
      p->zone_read_past_wp = ZNBD_READ_PAST_WP_ONES;
    else if (strcmp(value, "error") == 0)
      p->zone_read_past_wp = ZNBD_READ_PAST_WP_ERROR;
    else {
      set_err(err, errlen,
              "zone_read_past_wp: must be zero, ones or error, not '%s'",
              value);
      errno = EINVAL;
      return -1;
    }
    return 0;
  }
  if (strcmp(key, "completion_nsec") == 0) {
    uint64_t v;
    if (parse_uint(value, UINT64_MAX, &v) < 0) {
      set_err(err, errlen,
              "completion_nsec: '%s' is not a number of nanoseconds", value);
      errno = EINVAL;
      return -1;
    }
    p->completion_nsec = v;
    return 0;
  }
  if (strcmp(key, "pipeline_zoned_writes") == 0)
    return set_bool(key, value, &p->pipeline_zoned_writes, err, errlen);
  if (strcmp(key, "zone_write_timeout") == 0)
    return set_u32(key, value, &p->zone_write_timeout, err, errlen);
  if (strcmp(key, "zone_control") == 0) {
    if (!*value) {
      set_err(err, errlen, "zone_control: empty path");
      errno = EINVAL;
      return -1;
    }
    if (set_str(value, &p->zone_control) < 0) {
      set_err(err, errlen, "zone_control: out of memory");
      return -1;
    }
    return 0;
  }
  if (strcmp(key, "sched_batch") == 0)
    return set_bool(key, value, &p->sched_batch, err, errlen);
  if (strcmp(key, "hw_queue_depth") == 0)
    return set_u32(key, value, &p->hw_queue_depth, err, errlen);
  if (strcmp(key, "submit_queues") == 0)
    return set_u32(key, value, &p->submit_queues, err, errlen);
  if (strcmp(key, "no_zone_write_lock") == 0)
    return set_bool(key, value, &p->no_zone_write_lock, err, errlen);

  set_err(err, errlen, "unknown parameter '%s' (see --help for the list)", key);
  errno = ENOENT;
  return -1;
}

static void __attribute__((format(printf, 2, 3)))
note_f(void (*note)(const char *msg), const char *fmt, ...)
{
  if (!note)
    return;
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  note(buf);
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

int
znbd_params_finish(struct znbd_params *p, void (*note)(const char *msg),
                   char *err, size_t errlen)
{
  if (err && errlen)
    err[0] = '\0';
  errno = EINVAL;
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
  if (p->hw_queue_depth == 0) {
    set_err(err, errlen, "hw_queue_depth: must be at least 1");
    return -1;
  }
  if (p->submit_queues == 0) {
    set_err(err, errlen, "submit_queues: must be at least 1");
    return -1;
  }

  if (!p->zoned) {
    p->nr_zones = 0;
    if (p->zone_readonly || p->zone_offline || p->zone_full) {
      set_err(err, errlen, "%s: needs zoned=true",
              p->zone_readonly  ? "zone_readonly"
              : p->zone_offline ? "zone_offline"
                                : "zone_full");
      return -1;
    }
    errno = 0;
    return 0;
  }

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
  if (p->zone_capacity == 0)
    p->zone_capacity = p->zone_size;

  uint64_t nz = p->size / p->zone_size + (p->size % p->zone_size != 0);
  if (nz > UINT32_MAX) {
    set_err(err, errlen,
            "zone_size: %" PRIu64 " gives %" PRIu64 " zones for size %" PRIu64
            " (at most %" PRIu32 ")",
            p->zone_size, nz, p->size, UINT32_MAX);
    return -1;
  }
  p->nr_zones = (uint32_t)nz;

  /* null_blk's clamps (doc/zone-rules.md, rule clamp-limits). */
  if (p->zone_nr_conv >= p->nr_zones) {
    uint32_t v = p->nr_zones - 1;
    note_f(note,
           "zone_nr_conv: %" PRIu32 " leaves no sequential zone of %" PRIu32
           "; clamped to %" PRIu32 " (as null_blk)",
           p->zone_nr_conv, p->nr_zones, v);
    p->zone_nr_conv = v;
  }
  uint32_t nr_seq = p->nr_zones - p->zone_nr_conv;
  if (p->zone_max_active && p->zone_max_active >= nr_seq) {
    note_f(note,
           "zone_max_active: %" PRIu32 " >= %" PRIu32
           " sequential zones; set to 0 (no limit, as null_blk)",
           p->zone_max_active, nr_seq);
    p->zone_max_active = 0;
  }
  if (p->zone_max_active && p->zone_max_open > p->zone_max_active) {
    note_f(note,
           "zone_max_open: %" PRIu32 " > zone_max_active %" PRIu32
           "; clamped to %" PRIu32 " (as null_blk)",
           p->zone_max_open, p->zone_max_active, p->zone_max_active);
    p->zone_max_open = p->zone_max_active;
  } else if (p->zone_max_open && p->zone_max_open >= nr_seq) {
    note_f(note,
           "zone_max_open: %" PRIu32 " >= %" PRIu32
           " sequential zones; set to 0 (no limit, as null_blk)",
           p->zone_max_open, nr_seq);
    p->zone_max_open = 0;
  }

  if (p->zone_readonly &&
      check_list("zone_readonly", p->zone_readonly, p->nr_zones,
                 p->zone_nr_conv, err, errlen) < 0) {
    errno = EINVAL;
    return -1;
  }
  if (p->zone_offline &&
      check_list("zone_offline", p->zone_offline, p->nr_zones, p->zone_nr_conv,
                 err, errlen) < 0) {
    errno = EINVAL;
    return -1;
  }
  errno = 0;
  return 0;
}
