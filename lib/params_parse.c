/* znbd: parsing one key=value word into struct znbd_params
 * (znbd_params_set), the defaults (znbd_params_init) and the value
 * syntaxes the front-ends share: nbdkit's sizes, booleans, zone lists.
 * The table that says each key's type is lib/params.c.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "znbd/params.h"
#include "err.h"
#include "params_impl.h"

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
  if (znbd_parse_size(value, &v) < 0)
    return fail_err(err, errlen, EINVAL,
                    "%s: cannot parse size '%s' (%s; expected digits with at "
                    "most one suffix b, s, k, m, g, t, p or e, e.g. 64M)",
                    key, value, errno == ERANGE ? "too large" : "malformed");
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
    return set_size(i->name, value, znbd_param_field(p, e, sizeof(uint64_t)),
                    err, errlen);
  case ZNBD_PARAM_T_BOOL:
    return set_bool(i->name, value, znbd_param_field(p, e, sizeof(bool)), err,
                    errlen);
  case ZNBD_PARAM_T_UINT:
    return set_u32(i->name, value, znbd_param_field(p, e, sizeof(uint32_t)),
                   err, errlen);
  case ZNBD_PARAM_T_UINT64:
    return set_u64(i, value, znbd_param_field(p, e, sizeof(uint64_t)), err,
                   errlen);
  case ZNBD_PARAM_T_CHOICE:
    return set_choice(i, value, znbd_param_field(p, e, sizeof(uint32_t)), err,
                      errlen);
  case ZNBD_PARAM_T_ENUM:
    return set_enum(i, value, znbd_param_field(p, e, sizeof(int)), err, errlen);
  case ZNBD_PARAM_T_ZONE_LIST:
  case ZNBD_PARAM_T_PATH:
  case ZNBD_PARAM_T_SECTOR_LIST:
    return set_str(i, value, znbd_param_field(p, e, sizeof(char *)), err,
                   errlen);
  }
  set_err(err, errlen, "%s: no parser for its type", i->name);
  errno = EINVAL;
  return -1;
}

void
znbd_params_init(struct znbd_params *p)
{
  memset(p, 0, sizeof *p);
  for (size_t k = 0; k < znbd_param_nr; k++) {
    if (znbd_param_table[k].i.def) {
      int r = set_value(p, &znbd_param_table[k], znbd_param_table[k].i.def,
                        NULL, 0);
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
  e = strchr(key, '=') ? NULL : znbd_param_entry(key);
  if (!e) {
    set_err(err, errlen, "unknown parameter '%s' (see --help for the list)",
            key);
    errno = ENOENT;
    return -1;
  }
  if (set_value(p, e, value, err, errlen) < 0)
    return -1;
  p->given |= UINT64_C(1) << (e - znbd_param_table);
  return 0;
}
