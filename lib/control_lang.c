/* znbd: the zone control language on buffers -- one request line parsed
 * and executed against a device, its reply written to a FILE
 * (include/znbd/control.h).  The Unix socket that carries it is
 * lib/control_server.c, which calls in here; nothing here knows of
 * sockets or threads.
 *
 * Grammar and replies: man/znbd-zone-control.pod.  Everything here goes
 * through include/znbd/dev.h; no NBD or nbdkit code.  Offsets and lengths
 * in replies are bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "znbd/control.h"
#include "znbd/request.h"
#include "znbd/dev.h"
#include "znbd/params.h"
#include "znbd/request.h"
#include "dev_unfenced.h"

#define MAX_WORDS 4
#define REPORT_BATCH 256 /* zones copied per znbd_dev_report() call */

/* ---- names ---------------------------------------------------------- */

static const char *
errno_name(int e)
{
  const char *n = znbd_errno_name(e);
  return n ? n : "EIO";
}

static const char *
op_word(enum znbd_zone_op op)
{
  switch (op) {
  case ZNBD_ZONE_OP_OPEN:
    return "open";
  case ZNBD_ZONE_OP_CLOSE:
    return "close";
  case ZNBD_ZONE_OP_FINISH:
    return "finish";
  case ZNBD_ZONE_OP_RESET:
    return "reset";
  case ZNBD_ZONE_OP_SET_READONLY:
    return "readonly";
  case ZNBD_ZONE_OP_SET_OFFLINE:
    return "offline";
  case ZNBD_ZONE_OP_ONLINE:
    return "online";
  }
  return "?";
}

/* ---- replies -------------------------------------------------------- */

/* "error ENAME message\n"; sets errno to E and returns -1. */
static int __attribute__((format(printf, 3, 4)))
reply_error(FILE *out, int e, const char *fmt, ...)
{
  va_list ap;

  fprintf(out, "error %s ", errno_name(e));
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
  fputc('\n', out);
  errno = e;
  return -1;
}

/* The fields of one zone, no newline: the report line format. */
static void
print_zone(FILE *out, uint32_t idx, const struct znbd_zone_info *z)
{
  fprintf(out,
          "zone=%" PRIu32 " start=%" PRIu64 " len=%" PRIu64 " cap=%" PRIu64,
          idx, z->start, z->len, z->capacity);
  if (z->wp == ZNBD_WP_INVALID)
    fputs(" wp=-", out);
  else
    fprintf(out, " wp=%" PRIu64, z->wp);
  fprintf(out, " type=%s cond=%s", znbd_zone_type_name(z->type),
          znbd_zone_cond_name(z->cond));
}

/* ---- parsing -------------------------------------------------------- */

/* Split LINE into at most MAX_WORDS words (copied into BUF).  Returns the
 * number of words, or -1 if there are more. */
static int
split(const char *line, char *buf, size_t buflen, char *words[MAX_WORDS])
{
  size_t n = strlen(line);
  int nw = 0;
  char *p, *save = NULL, *w;

  if (n >= buflen)
    n = buflen - 1;
  memcpy(buf, line, n);
  buf[n] = '\0';
  for (p = buf; (w = strtok_r(p, " \t\r\n", &save)) != NULL; p = NULL) {
    if (nw == MAX_WORDS)
      return -1;
    words[nw++] = w;
  }
  return nw;
}

/* A zone index or count: decimal digits only, no sign, < UINT32_MAX. */
static int
parse_u32(const char *s, uint32_t *out)
{
  uint64_t v = 0;

  if (*s == '\0' || strlen(s) > 10)
    return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return -1;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  if (v >= UINT32_MAX)
    return -1;
  *out = (uint32_t)v;
  return 0;
}

static int
get_zone(struct znbd_dev *d, uint32_t idx, struct znbd_zone_info *z)
{
  return znbd_dev_report(d, idx, 1, z) == 1 ? 0 : -1;
}

/* Parse WORD as a zone index of D, or reply with the error. */
static int
parse_zone(struct znbd_dev *d, const char *word, uint32_t *zone, FILE *out)
{
  uint32_t nr = znbd_dev_nr_zones(d);

  if (nr == 0)
    return reply_error(out, EINVAL, "not a zoned device");
  if (parse_u32(word, zone) == -1)
    return reply_error(out, EINVAL,
                       "bad zone '%s': expected a zone index 0..%" PRIu32, word,
                       nr - 1);
  if (*zone >= nr)
    return reply_error(out, EINVAL,
                       "zone %" PRIu32 " out of range: the device has %" PRIu32
                       " zones",
                       *zone, nr);
  return 0;
}

/* ---- commands ------------------------------------------------------- */

static int
cmd_report(struct znbd_dev *d, int nw, char **w, FILE *out)
{
  uint32_t nr = znbd_dev_nr_zones(d), first = 0, count, i, got;
  struct znbd_zone_info zones[REPORT_BATCH];

  if (nw > 3)
    return reply_error(out, EINVAL, "usage: report [ZONE [COUNT]]");
  if (nr == 0)
    return reply_error(out, EINVAL, "not a zoned device");
  if (nw >= 2 && parse_zone(d, w[1], &first, out) == -1)
    return -1;
  count = nr - first;
  if (nw == 3) {
    uint32_t c;
    if (parse_u32(w[2], &c) == -1 || c == 0)
      return reply_error(
          out, EINVAL, "bad count '%s': expected a number of zones >= 1", w[2]);
    if (c < count)
      count = c;
  }
  fprintf(out, "ok %" PRIu32 "\n", count);
  for (i = 0; i < count; i += got) {
    uint32_t want = count - i < REPORT_BATCH ? count - i : REPORT_BATCH;
    uint32_t j;

    got = znbd_dev_report(d, first + i, want, zones);
    if (got == 0) /* cannot happen: FIRST + COUNT <= nr_zones */
      break;
    for (j = 0; j < got; j++) {
      print_zone(out, first + i + j, &zones[j]);
      fputc('\n', out);
    }
  }
  return 0;
}

/* Explain a refused zone operation WHAT ("open", "append", ...) on zone
 * IDX (state Z before it) into MSG (no errno name, no newline). */
static void
op_error_msg(struct znbd_dev *d, const char *what, uint32_t idx,
             const struct znbd_zone_info *z, int e, char *msg, size_t len)
{
  const struct znbd_params *p = znbd_dev_params(d);
  struct znbd_dev_stats st;

  switch (e) {
  case ETOOMANYREFS:
    znbd_dev_stats(d, &st);
    snprintf(msg, len,
             "zone %" PRIu32 ": %s refused: open zone limit reached "
             "(max_open=%" PRIu32 ", imp_open=%" PRIu32 ", exp_open=%" PRIu32
             ")",
             idx, what, p->zone_max_open, st.nr_imp_open, st.nr_exp_open);
    break;
  case EOVERFLOW:
    znbd_dev_stats(d, &st);
    snprintf(msg, len,
             "zone %" PRIu32 ": %s refused: active zone limit reached "
             "(max_active=%" PRIu32 ", active=%" PRIu32 ")",
             idx, what, p->zone_max_active,
             st.nr_imp_open + st.nr_exp_open + st.nr_closed);
    break;
  case EIO:
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
      snprintf(msg, len, "zone %" PRIu32 ": %s refused: conventional zone", idx,
               what);
    else
      snprintf(msg, len, "zone %" PRIu32 ": %s refused in condition %s", idx,
               what, znbd_zone_cond_name(z->cond));
    break;
  default:
    snprintf(msg, len, "zone %" PRIu32 " (%s): %s failed: %s", idx,
             znbd_zone_cond_name(z->cond), what, strerror(e));
    break;
  }
}

/* zone_open_nsec...: the operation takes that much longer (this
 * client's thread sleeps; others go on). */
static void
op_latency(struct znbd_dev *d, enum znbd_zone_op op)
{
  znbd_sleep_ns(znbd_dev_zone_op_nsec(d, op));
}

/* One operation on one zone; on success "ok " + the zone's new state. */
static int
op_one(struct znbd_dev *d, enum znbd_zone_op op, uint32_t idx, FILE *out)
{
  struct znbd_zone_info before, after;

  op_latency(d, op);
  if (get_zone(d, idx, &before) == -1)
    return reply_error(out, EINVAL, "zone %" PRIu32 " out of range", idx);
  if (znbd_dev_zone_op(d, op, idx) == -1) {
    int e = errno;
    char msg[256];
    op_error_msg(d, op_word(op), idx, &before, e, msg, sizeof msg);
    return reply_error(out, e, "%s", msg);
  }
  if (get_zone(d, idx, &after) == -1)
    return reply_error(out, EIO, "zone %" PRIu32 " vanished", idx);
  fputs("ok ", out);
  print_zone(out, idx, &after);
  fputc('\n', out);
  return 0;
}

/* reset all: null_blk's reset-all; close/finish/open all: the ZBC "ALL"
 * bit (ZBC-2 CLOSE/FINISH/OPEN ZONE with ALL=1), by the rule every
 * front-end shares (znbd_req_zone_op_all()), tied to no connection. */
static int
op_all(struct znbd_dev *d, enum znbd_zone_op op, FILE *out)
{
  op_latency(d, op);
  struct znbd_req_ctx c;
  struct znbd_zone_all res;
  struct znbd_dev_stats st;
  const struct znbd_params *p = znbd_dev_params(d);

  if (znbd_dev_nr_zones(d) == 0)
    return reply_error(out, EINVAL, "not a zoned device");
  if (op != ZNBD_ZONE_OP_RESET && op != ZNBD_ZONE_OP_CLOSE &&
      op != ZNBD_ZONE_OP_FINISH && op != ZNBD_ZONE_OP_OPEN)
    return reply_error(out, EINVAL, "%s takes a zone index, not 'all'",
                       op_word(op));
  znbd_req_ctx_init_unfenced(&c, d);
  if (znbd_req_zone_op_all(&c, op, &res) == -1) {
    int e = errno;
    char msg[256];
    if (op == ZNBD_ZONE_OP_RESET)
      return reply_error(out, e, "reset all failed: %s", strerror(e));
    if (res.zone == ZNBD_ALL_ZONES) { /* open all: the limit, up front */
      znbd_dev_stats(d, &st);
      return reply_error(out, e,
                         "open all refused: %" PRIu32 " closed + %" PRIu32
                         " explicitly open zones exceed max_open=%" PRIu32,
                         res.closed, st.nr_exp_open, p->zone_max_open);
    }
    op_error_msg(d, op_word(op), res.zone, &res.before, e, msg, sizeof msg);
    return reply_error(out, e, "%s all stopped after %" PRIu32 " zones: %s",
                       op_word(op), res.done, msg);
  }
  fprintf(out, "ok all count=%" PRIu32 "\n", res.done);
  return 0;
}

static int
cmd_stats(struct znbd_dev *d, FILE *out, znbd_control_stats_fn *fn,
          void *opaque)
{
  uint32_t nr = znbd_dev_nr_zones(d), i, j, got;
  uint32_t conv = 0, empty = 0, full = 0, ro = 0, off = 0;
  struct znbd_zone_info zones[REPORT_BATCH];
  struct znbd_dev_stats st;
  const struct znbd_params *p = znbd_dev_params(d);

  znbd_dev_stats(d, &st);
  for (i = 0; i < nr; i += got) {
    got = znbd_dev_report(d, i, REPORT_BATCH, zones);
    if (got == 0)
      break;
    for (j = 0; j < got; j++) {
      switch (zones[j].cond) {
      case ZNBD_ZONE_COND_NOT_WP:
        conv++;
        break;
      case ZNBD_ZONE_COND_EMPTY:
        empty++;
        break;
      case ZNBD_ZONE_COND_FULL:
        full++;
        break;
      case ZNBD_ZONE_COND_READONLY:
        ro++;
        break;
      case ZNBD_ZONE_COND_OFFLINE:
        off++;
        break;
      default:
        break;
      }
    }
  }
  fprintf(out,
          "ok zones=%" PRIu32 " conv=%" PRIu32 " empty=%" PRIu32
          " imp_open=%" PRIu32 " exp_open=%" PRIu32 " closed=%" PRIu32
          " full=%" PRIu32 " readonly=%" PRIu32 " offline=%" PRIu32
          " active=%" PRIu32 " max_open=%" PRIu32 " max_active=%" PRIu32
          " allocated=%" PRIu64 " badblock_errors=%" PRIu64
          " dropped_replies=%" PRIu64 " delayed_requests=%" PRIu64
          " delay_nsec=%" PRIu64,
          nr, conv, empty, st.nr_imp_open, st.nr_exp_open, st.nr_closed, full,
          ro, off, st.nr_imp_open + st.nr_exp_open + st.nr_closed,
          nr ? p->zone_max_open : 0, nr ? p->zone_max_active : 0, st.allocated,
          st.badblock_errors, st.dropped_replies, st.delayed_requests,
          st.delay_nsec);
  if (fn)
    fn(opaque, out);
  fputc('\n', out);
  return 0;
}

/* ---- append ---------------------------------------------------------- */

/* "append ZONE LEN": split LINE, check the word and parse LEN (bytes,
 * 1..ZNBD_CONTROL_APPEND_MAX).  Returns 1 (append, *LEN set, W[1] the
 * zone word), 0 (not an append request) or -1 (malformed length). */
static int
split_append(const char *line, char *buf, size_t buflen, char *w[MAX_WORDS],
             uint64_t *len)
{
  int nw = split(line, buf, buflen, w);
  uint32_t v;

  if (nw < 1 || strcmp(w[0], "append") != 0)
    return 0;
  if (nw != 3 || parse_u32(w[2], &v) == -1 || v == 0 ||
      v > ZNBD_CONTROL_APPEND_MAX)
    return -1;
  *len = v;
  return 1;
}

int
znbd_control_append_len(const char *line, uint64_t *len, FILE *out)
{
  char buf[ZNBD_CONTROL_LINE_MAX + 1];
  char *w[MAX_WORDS];
  int r;

  if (strlen(line) > ZNBD_CONTROL_LINE_MAX)
    return 0; /* refused as over-long by znbd_control_exec() */
  r = split_append(line, buf, sizeof buf, w, len);
  if (r == -1)
    reply_error(out, EINVAL,
                "usage: append ZONE LEN, LEN 1..%u bytes followed by LEN "
                "bytes of data; closing the connection",
                ZNBD_CONTROL_APPEND_MAX);
  return r;
}

int
znbd_control_append(struct znbd_dev *d, const char *line, const void *data,
                    FILE *out)
{
  char buf[ZNBD_CONTROL_LINE_MAX + 1];
  char *w[MAX_WORDS];
  uint64_t len, off;
  uint32_t zone, bs = znbd_dev_params(d)->blocksize;
  struct znbd_zone_info z;
  struct znbd_dev_stats st;
  uint64_t bad; /* badblock_errors before the append */

  if (strlen(line) > ZNBD_CONTROL_LINE_MAX ||
      split_append(line, buf, sizeof buf, w, &len) != 1)
    return reply_error(out, EINVAL, "not an append request");
  if (parse_zone(d, w[1], &zone, out) == -1)
    return -1;
  if (len % bs != 0)
    return reply_error(out, EINVAL,
                       "append of %" PRIu64
                       " bytes: not a multiple of the block size %" PRIu32,
                       len, bs);
  if (get_zone(d, zone, &z) == -1)
    return reply_error(out, EINVAL, "zone %" PRIu32 " out of range", zone);
  znbd_dev_stats(d, &st);
  bad = st.badblock_errors;
  if (znbd_dev_append(d, data, len, z.start, &off) == -1) {
    int e = errno;
    char msg[256];

    if (e != EIO) {
      op_error_msg(d, "append", zone, &z, e, msg, sizeof msg);
      return reply_error(out, e, "%s", msg);
    }
    /* Fresh state for the message: another client may have raced us. */
    get_zone(d, zone, &z);
    if (z.type == ZNBD_ZONE_TYPE_CONVENTIONAL)
      return reply_error(out, EIO,
                         "zone %" PRIu32 ": append refused: conventional zone",
                         zone);
    if (z.wp == ZNBD_WP_INVALID || z.cond == ZNBD_ZONE_COND_FULL)
      return reply_error(out, EIO,
                         "zone %" PRIu32 ": append refused in condition %s",
                         zone, znbd_zone_cond_name(z.cond));
    /* It fits: a bad sector (counted) or the store failed. */
    znbd_dev_stats(d, &st);
    if (len <= z.start + z.capacity - z.wp)
      return reply_error(out, EIO,
                         "zone %" PRIu32 ": append of %" PRIu64
                         " bytes at wp=%" PRIu64 " failed: %s",
                         zone, len, z.wp,
                         st.badblock_errors != bad ? "a bad sector"
                                                   : "I/O error");
    return reply_error(out, EIO,
                       "zone %" PRIu32 ": append of %" PRIu64
                       " bytes does not fit: wp=%" PRIu64 ", %" PRIu64
                       " bytes left below the capacity",
                       zone, len, z.wp, z.start + z.capacity - z.wp);
  }
  fprintf(out, "ok %" PRIu64 "\n", off);
  return 0;
}

/* ---- fault injection ------------------------------------------------ */

/* "badblocks add LIST" | "badblocks del LIST" | "badblocks list". */
static int
cmd_badblocks(struct znbd_dev *d, int nw, char **w, FILE *out)
{
  char err[256];
  if (nw == 2 && strcmp(w[1], "list") == 0) {
    size_t n = znbd_dev_badblocks_list(d, NULL, 0);
    char *buf = malloc(n + 1);
    if (!buf)
      return reply_error(out, ENOMEM, "out of memory");
    znbd_dev_badblocks_list(d, buf, n + 1);
    fprintf(out, "ok%s%s\n", n ? " " : "", buf);
    free(buf);
    return 0;
  }
  bool add = nw == 3 && strcmp(w[1], "add") == 0;
  if (nw != 3 || (!add && strcmp(w[1], "del") != 0))
    return reply_error(out, EINVAL,
                       "usage: badblocks add|del LIST | "
                       "badblocks list");
  if (znbd_dev_badblocks_edit(d, w[2], add, err, sizeof err) < 0)
    return reply_error(out, errno, "%s", err);
  fputs("ok\n", out);
  return 0;
}

static const struct {
  const char *word;
  unsigned kind;
} io_kinds[] = {
    {"read", ZNBD_IO_READ}, {"write", ZNBD_IO_WRITE}, {"flush", ZNBD_IO_FLUSH},
    {"trim", ZNBD_IO_TRIM}, {"other", ZNBD_IO_OTHER}, {"all", ZNBD_IO_ALL},
};

/* KINDS "read,write" into ZNBD_IO_* bits; 0 if a word is unknown. */
static unsigned
parse_kinds(const char *s)
{
  unsigned bits = 0;
  while (*s) {
    size_t n = strcspn(s, ","), i;
    for (i = 0; i < sizeof io_kinds / sizeof io_kinds[0]; i++)
      if (strlen(io_kinds[i].word) == n && strncmp(s, io_kinds[i].word, n) == 0)
        break;
    if (n == 0 || i == sizeof io_kinds / sizeof io_kinds[0])
      return 0;
    bits |= io_kinds[i].kind;
    s += n + (s[n] == ',');
  }
  return bits;
}

/* "drop-reply every N [KINDS]" | "drop-reply off" | "drop-reply". */
static int
cmd_drop_reply(struct znbd_dev *d, int nw, char **w, FILE *out)
{
  uint32_t every;
  unsigned kinds = ZNBD_IO_ALL;
  struct znbd_dev_stats st;
  if (nw == 2 && strcmp(w[1], "off") == 0) {
    znbd_dev_drop_reply_set(d, 0, 0);
  } else if (nw >= 3 && nw <= 4 && strcmp(w[1], "every") == 0 &&
             parse_u32(w[2], &every) == 0 && every > 0 &&
             (nw == 3 || (kinds = parse_kinds(w[3])) != 0)) {
    znbd_dev_drop_reply_set(d, every, kinds);
  } else if (nw != 1) {
    return reply_error(out, EINVAL,
                       "usage: drop-reply every N [read,write,flush,trim,"
                       "other|all] | drop-reply off | drop-reply");
  }
  znbd_dev_drop_reply_get(d, &every, &kinds);
  znbd_dev_stats(d, &st);
  fprintf(out, "ok every=%" PRIu32 " kinds=", every);
  bool first = true;
  for (size_t i = 0; i + 1 < sizeof io_kinds / sizeof io_kinds[0]; i++)
    if (kinds & io_kinds[i].kind) {
      fprintf(out, "%s%s", first ? "" : ",", io_kinds[i].word);
      first = false;
    }
  fprintf(out, "%s dropped_replies=%" PRIu64 "\n", first ? "none" : "",
          st.dropped_replies);
  return 0;
}

static const struct {
  const char *word;
  enum znbd_zone_op op;
  bool all; /* takes "all" */
} ops[] = {
    {"open", ZNBD_ZONE_OP_OPEN, true},
    {"close", ZNBD_ZONE_OP_CLOSE, true},
    {"finish", ZNBD_ZONE_OP_FINISH, true},
    {"reset", ZNBD_ZONE_OP_RESET, true},
    {"readonly", ZNBD_ZONE_OP_SET_READONLY, false},
    {"offline", ZNBD_ZONE_OP_SET_OFFLINE, false},
    {"online", ZNBD_ZONE_OP_ONLINE, false},
};

/* power-cut [after N]: znbd_dev_power_cut(). */
static int
cmd_power_cut(struct znbd_dev *d, int nw, char **w, FILE *out)
{
  uint32_t after = 0;
  if (!(nw == 1 || (nw == 3 && strcmp(w[1], "after") == 0 &&
                    parse_u32(w[2], &after) == 0 && after > 0)))
    return reply_error(out, EINVAL,
                       "usage: power-cut [after N] (N from 1 to %u)",
                       UINT32_MAX - 1);
  if (znbd_dev_power_cut(d, after) < 0) {
    if (errno == EINVAL)
      return reply_error(out, EINVAL,
                         "power-cut needs write_cache=true (without a "
                         "volatile write cache every acknowledged write is "
                         "durable: nothing to lose)");
    return reply_error(out, errno, "power-cut: the rollback failed: %s",
                       strerror(errno));
  }
  if (after)
    fprintf(out, "ok armed after %" PRIu32 " writes\n", after);
  else
    fputs("ok\n", out);
  return 0;
}

/* Requests a front-end cannot honour (znbd_dev_set_frontend): WORD is
 * refused for the FRONTENDS bits, with WHY. */
static const struct {
  const char *word;
  unsigned frontends;
  const char *why;
} not_here[] = {
    {"drop-reply", ZNBD_PARAM_FOR_UBLK,
     "every request is answered: a ublk device has no request timeout, so "
     "an unanswered request would leave its writer waiting forever"},
};

/* Whether WORD is refused for D's front-end: then the reply is written. */
static bool
refused_here(struct znbd_dev *d, const char *word, FILE *out)
{
  unsigned f = znbd_dev_frontend(d);
  for (size_t i = 0; f && i < sizeof not_here / sizeof not_here[0]; i++)
    if ((not_here[i].frontends & f) && strcmp(word, not_here[i].word) == 0) {
      reply_error(out, EINVAL, "%s has no effect in %s: %s", word,
                  znbd_param_frontend_name(f), not_here[i].why);
      return true;
    }
  return false;
}

int
znbd_control_exec(struct znbd_dev *d, const char *line, FILE *out)
{
  return znbd_control_exec_stats(d, line, out, NULL, NULL);
}

int
znbd_control_exec_stats(struct znbd_dev *d, const char *line, FILE *out,
                        znbd_control_stats_fn *fn, void *opaque)
{
  char buf[ZNBD_CONTROL_LINE_MAX + 1];
  char *w[MAX_WORDS];
  int nw;
  size_t i;

  if (strlen(line) > ZNBD_CONTROL_LINE_MAX)
    return reply_error(out, EINVAL, "request longer than %d bytes",
                       ZNBD_CONTROL_LINE_MAX);
  nw = split(line, buf, sizeof buf, w);
  if (nw == 0)
    return reply_error(out, EINVAL, "empty request");
  if (nw == -1)
    return reply_error(out, EINVAL, "too many words in request");

  if (refused_here(d, w[0], out))
    return -1;
  if (strcmp(w[0], "report") == 0)
    return cmd_report(d, nw, w, out);
  if (strcmp(w[0], "stats") == 0) {
    if (nw != 1)
      return reply_error(out, EINVAL, "usage: stats");
    return cmd_stats(d, out, fn, opaque);
  }
  if (strcmp(w[0], "badblocks") == 0)
    return cmd_badblocks(d, nw, w, out);
  if (strcmp(w[0], "drop-reply") == 0)
    return cmd_drop_reply(d, nw, w, out);
  for (i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    uint32_t zone;

    if (strcmp(w[0], ops[i].word) != 0)
      continue;
    if (nw != 2)
      return reply_error(out, EINVAL, "usage: %s ZONE%s", ops[i].word,
                         ops[i].all ? "|all" : "");
    if (strcmp(w[1], "all") == 0) {
      if (!ops[i].all)
        return reply_error(out, EINVAL, "%s takes a zone index, not 'all'",
                           ops[i].word);
      return op_all(d, ops[i].op, out);
    }
    if (parse_zone(d, w[1], &zone, out) == -1)
      return -1;
    return op_one(d, ops[i].op, zone, out);
  }
  if (strcmp(w[0], "power-cut") == 0)
    return cmd_power_cut(d, nw, w, out);
  if (strcmp(w[0], "append") == 0)
    return reply_error(out, EINVAL,
                       "append carries data: only the socket serves it");
  return reply_error(out, EINVAL,
                     "unknown request '%.32s': expected report, open, close, "
                     "finish, reset, readonly, offline, online, append, "
                     "badblocks, drop-reply, power-cut or stats",
                     w[0]);
}
