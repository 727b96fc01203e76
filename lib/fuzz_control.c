/* znbd core: libFuzzer harness over the zone control language
 * (control_lang.c) on buffers, as the socket server (control_server.c)
 * drives it, with the device's invariants checked after every request.
 * Input layout:
 *   byte 0   device: bits 0-1 the geometry (0: 16 zones of 64 KiB,
 *            capacity 48 KiB, 2 conventional, max_open 3, max_active 5;
 *            1: 11 zones of 96 KiB (not a power of 2, the last one
 *            64 KiB), capacity 80 KiB, 1 conventional, max_open =
 *            max_active = 2; 2: 8 zones of 64 KiB starting FULL, no
 *            limits, badblocks_partial_io; 3: a plain RAM disk),
 *            bit 2: write_cache=true (power-cut works), bit 3:
 *            blocksize 4096 (else 512); only bits 0-3 count, so '0' to
 *            '?' (0x30 to 0x3f) are the 16 devices in readable form.
 *   rest     request lines, LF separated, each run with
 *            znbd_control_exec() into a memory FILE.  An "append ZONE LEN"
 *            line is handled as the socket server does
 *            (znbd_control_append_len, then znbd_control_append; a
 *            malformed one ends the input, as it closes the connection)
 *            with LEN bytes of generated data (a pattern, checked by
 *            reading it back), so short inputs reach appends of any size.
 *            Three lines are the harness's own, to reach states the
 *            language alone cannot: "#flush" (znbd_dev_flush) and "#sync
 *            BLOCK COUNT" (znbd_dev_sync of COUNT blocks from block
 *            BLOCK), so a power cut keeps something, and "#write BLOCK
 *            COUNT" (znbd_dev_write, at most 64 blocks), to open zones
 *            implicitly.
 * After each request: the reply is one or more LF-ended lines, the first
 * "ok" or "error ENAME " with ENAME the errno returned; every zone of the
 * report is consistent (write pointer inside the zone capacity, EMPTY at
 * the zone start, FULL at the capacity or the zone end, conventional
 * zones NOT_WP without a wp, READONLY and OFFLINE without one); the
 * open and active counters match the zones and stay within zone_max_open
 * and zone_max_active (the active count may pass the limit only at a
 * power cut, and then never grows until it is below again).  A violation
 * abort()s.  Build and run: make -C lib fuzz-control (clang,
 * -fsanitize=fuzzer); FUZZ_CONTROL_TRACE=1 ./fuzz_control INPUT shows each
 * request and its reply.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/control.h"
#include "znbd/dev.h"
#include "znbd/params.h"
#include "dev_unfenced.h"

#define NR_DEVS 16 /* values of byte 0 that matter (bits 0-3) */

/* Say what broke and abort(): libFuzzer keeps the input. */
#define FAIL(...)                                                              \
  do {                                                                         \
    fprintf(stderr, "fuzz-control: ");                                         \
    fprintf(stderr, __VA_ARGS__);                                              \
    fputc('\n', stderr);                                                       \
    abort();                                                                   \
  } while (0)

static struct znbd_dev *
make_dev(unsigned kind, struct znbd_params *p)
{
  static const char *const geometry[4][16] = {
      {"zone_size", "64k", "zone_capacity", "48k", "zone_nr_conv", "2",
       "zone_max_open", "3", "zone_max_active", "5", NULL},
      {"zone_size", "96k", "zone_capacity", "80k", "zone_nr_conv", "1",
       "zone_max_open", "2", "zone_max_active", "2", NULL},
      {"size", "512k", "zone_size", "64k", "zone_full", "true",
       "badblocks_partial_io", "true", NULL},
      {"zoned", "false", NULL},
  };
  char err[256];

  znbd_params_init(p);
  znbd_params_set(p, "size", "1M", err, sizeof err);
  znbd_params_set(p, "zoned", "true", err, sizeof err);
  /* No thread may wait for a write pointer; no latency injected. */
  znbd_params_set(p, "pipeline_zoned_writes", "false", err, sizeof err);
  znbd_params_set(p, "write_cache", kind & 4 ? "true" : "false", err,
                  sizeof err);
  znbd_params_set(p, "blocksize", kind & 8 ? "4096" : "512", err, sizeof err);
  for (const char *const *kv = geometry[kind & 3]; kv[0]; kv += 2)
    if (znbd_params_set(p, kv[0], kv[1], err, sizeof err) == -1)
      FAIL("%s=%s: %s", kv[0], kv[1], err);
  if (znbd_params_finish(p, err, sizeof err) == -1)
    FAIL("device %u: %s", kind, err);
  struct znbd_dev *d = znbd_dev_new(p, err, sizeof err);
  if (!d)
    FAIL("device %u: %s", kind, err);
  return d;
}

/* Data of appends and #write: ZNBD_CONTROL_APPEND_MAX bytes from any of the
 * first 251 offsets, a pattern that differs between offsets. */
static uint8_t *pattern;

/* FUZZ_CONTROL_TRACE set: each request and its reply on stderr. */
static bool trace;

/* What the checks remember between requests. */
struct state {
  struct znbd_dev *dev;
  const struct znbd_params *p;
  uint64_t generation;       /* power cuts so far */
  uint32_t active_limit;     /* max_active, or more after a power cut */
  uint32_t closed, exp_open; /* zones in those conditions, last check */
};

/* Every zone consistent on its own and with the counters. */
static void
check_zones(struct state *s, const char *line)
{
  uint32_t nr = znbd_dev_nr_zones(s->dev), nopen = 0, nclosed = 0;
  uint32_t imp = 0, exp = 0;
  uint64_t end = 0;
  struct znbd_dev_stats st;

  for (uint32_t i = 0; i < nr; i++) {
    struct znbd_zone_info z;
    if (znbd_dev_report(s->dev, i, 1, &z) != 1)
      FAIL("'%s': zone %" PRIu32 " of %" PRIu32 " not reported", line, i, nr);
    if (z.start != end || z.len == 0 || z.capacity == 0 || z.capacity > z.len)
      FAIL("'%s': zone %" PRIu32 ": start %" PRIu64 " len %" PRIu64
           " cap %" PRIu64 " after end %" PRIu64,
           line, i, z.start, z.len, z.capacity, end);
    end = z.start + z.len;
    uint64_t cap_end = z.start + z.capacity;
    bool conv = i < s->p->zone_nr_conv;
    if (conv != (z.type == ZNBD_ZONE_TYPE_CONVENTIONAL) ||
        conv != (z.cond == ZNBD_ZONE_COND_NOT_WP))
      FAIL("'%s': zone %" PRIu32 ": type %s cond %s (nr_conv %" PRIu32 ")",
           line, i, znbd_zone_type_name(z.type), znbd_zone_cond_name(z.cond),
           s->p->zone_nr_conv);
    bool ok;
    switch (z.cond) {
    case ZNBD_ZONE_COND_NOT_WP:
    case ZNBD_ZONE_COND_READONLY:
    case ZNBD_ZONE_COND_OFFLINE:
      ok = z.wp == ZNBD_WP_INVALID;
      break;
    case ZNBD_ZONE_COND_EMPTY:
      ok = z.wp == z.start;
      break;
    case ZNBD_ZONE_COND_IMP_OPEN:
      imp++;
      ok = z.wp >= z.start && z.wp < cap_end;
      break;
    case ZNBD_ZONE_COND_EXP_OPEN:
      exp++;
      ok = z.wp >= z.start && z.wp < cap_end;
      break;
    case ZNBD_ZONE_COND_CLOSED:
      nclosed++;
      ok = z.wp > z.start && z.wp < cap_end;
      break;
    case ZNBD_ZONE_COND_FULL: /* after a finish the wp is at the zone end */
      ok = z.wp == cap_end || z.wp == end;
      break;
    default:
      ok = false;
      break;
    }
    if (!ok)
      FAIL("'%s': zone %" PRIu32 " start %" PRIu64 " cap %" PRIu64
           " len %" PRIu64 ": wp %" PRIu64 " in condition %s",
           line, i, z.start, z.capacity, z.len, z.wp,
           znbd_zone_cond_name(z.cond));
  }
  if (nr && end != znbd_dev_size(s->dev))
    FAIL("'%s': zones end at %" PRIu64 ", the device at %" PRIu64, line, end,
         znbd_dev_size(s->dev));
  if (!nr)
    return;
  nopen = imp + exp;
  s->closed = nclosed;
  s->exp_open = exp;
  znbd_dev_stats(s->dev, &st);
  /* nr_closed may also count CLOSED zones made READONLY or OFFLINE whose
   * finish failed (null_blk keeps them counted). */
  if (st.nr_imp_open != imp || st.nr_exp_open != exp || st.nr_closed < nclosed)
    FAIL("'%s': counters imp_open=%" PRIu32 " exp_open=%" PRIu32
         " closed=%" PRIu32 ", zones %" PRIu32 " %" PRIu32 " %" PRIu32,
         line, st.nr_imp_open, st.nr_exp_open, st.nr_closed, imp, exp, nclosed);
  if (s->p->zone_max_open && nopen > s->p->zone_max_open)
    FAIL("'%s': %" PRIu32 " open zones, max_open %" PRIu32, line, nopen,
         s->p->zone_max_open);
  uint32_t active = nopen + st.nr_closed;
  uint64_t gen = znbd_dev_generation(s->dev);
  if (s->p->zone_max_active) {
    /* A power cut may bring FULL zones back CLOSED past the limit (as a
     * restart may); from then on the count may only go down. */
    if (gen != s->generation && active > s->active_limit)
      s->active_limit = active;
    if (active > s->active_limit)
      FAIL("'%s': %" PRIu32 " active zones, max_active %" PRIu32
           " (limit now %" PRIu32 ")",
           line, active, s->p->zone_max_active, s->active_limit);
    s->active_limit =
        active > s->p->zone_max_active ? active : s->p->zone_max_active;
  }
  s->generation = gen;
}

/* The reply REPLY (LEN bytes) of LINE, which returned RC with errno E:
 * LF-ended lines, the first "ok" (RC 0) or "error ENAME " (RC -1, ENAME
 * E's name). */
static void
check_reply(const char *line, const char *reply, size_t len, int rc, int e)
{
  if (len == 0 || reply[len - 1] != '\n' || strlen(reply) != len)
    FAIL("'%s': reply not LF-ended text: '%.*s'", line, (int)len, reply);
  if (rc == 0) {
    if (strncmp(reply, "ok", 2) != 0 || (reply[2] != ' ' && reply[2] != '\n'))
      FAIL("'%s': returned 0, reply '%s'", line, reply);
    return;
  }
  const char *name = znbd_errno_name(e);
  char want[64];
  snprintf(want, sizeof want, "error %s ", name ? name : "EIO");
  if (rc != -1 || strncmp(reply, want, strlen(want)) != 0 ||
      strchr(reply, '\n') != reply + len - 1)
    FAIL("'%s': returned %d errno %d, reply '%s' (not one line '%s...')", line,
         rc, e, reply, want);
}

/* A report's "ok N" is followed by exactly N zone lines. */
static void
check_report(const char *line, const char *reply)
{
  unsigned long n;
  if (strncmp(reply, "ok ", 3) != 0 || sscanf(reply + 3, "%lu", &n) != 1)
    return;
  const char *q = strchr(reply, '\n') + 1;
  for (; n > 0; n--, q = strchr(q, '\n') + 1)
    if (strncmp(q, "zone=", 5) != 0)
      FAIL("'%s': report line '%.40s'", line, q);
  if (*q)
    FAIL("'%s': report has more lines: '%.40s'", line, q);
}

/* An append of DATA (LEN bytes) to zone ZONE: one that returned 0
 * replied "ok OFF" with OFF inside the zone's capacity, holding DATA; one
 * refused as not fitting names a room smaller than LEN. */
static void
check_append(struct state *s, const char *line, const char *reply, int rc,
             const void *data, uint64_t len)
{
  uint64_t off;
  uint32_t zone;
  struct znbd_zone_info z;

  const char *fit = strstr(reply, " does not fit: wp=");
  if (rc != 0) {
    uint64_t wp, room;
    if (fit && (sscanf(fit, " does not fit: wp=%" SCNu64 ", %" SCNu64, &wp,
                       &room) != 2 ||
                room >= len))
      FAIL("'%s': refused as not fitting: '%s'", line, reply);
    return;
  }
  if (sscanf(reply, "ok %" SCNu64, &off) != 1 ||
      sscanf(line, " append %" SCNu32, &zone) != 1 ||
      znbd_dev_report(s->dev, zone, 1, &z) != 1)
    FAIL("'%s': append replied '%s'", line, reply);
  if (off < z.start || off + len > z.start + z.capacity)
    FAIL("'%s': appended at %" PRIu64 ", zone %" PRIu32 " at %" PRIu64
         " cap %" PRIu64,
         line, off, zone, z.start, z.capacity);
  void *back = malloc(len);
  if (!back)
    abort();
  /* A bad block added since cannot be: the append would have failed. */
  if (znbd_dev_read(s->dev, back, len, off, 0) == 0 &&
      memcmp(back, data, len) != 0)
    FAIL("'%s': data at %" PRIu64 " differs from the append's", line, off);
  free(back);
}

/* "ok zone=..." after a single-zone operation: the zone's report line. */
static void
check_zone_reply(struct state *s, const char *line, const char *reply)
{
  char req[64], *got = NULL;
  size_t len = 0;
  unsigned long zone;

  if (sscanf(reply, "ok zone=%lu", &zone) != 1)
    FAIL("'%s': reply '%s'", line, reply);
  snprintf(req, sizeof req, "report %lu 1", zone);
  FILE *m = open_memstream(&got, &len);
  if (!m)
    abort();
  int rc = znbd_control_exec(s->dev, req, m);
  fclose(m);
  const char *zl = rc == 0 ? strchr(got, '\n') : NULL;
  if (!zl || strcmp(zl + 1, reply + 3) != 0)
    FAIL("'%s': reply '%s', then '%s' reports '%s'", line, reply, req, got);
  free(got);
}

/* An "open all" refused for the open limit: the CLOSED and EXP_OPEN zones
 * before it (the last check) do exceed it (ZBC, the man page). */
static void
check_refusal(struct state *s, const char *line, const char *reply)
{
  if (strncmp(reply, "error ETOOMANYREFS open all refused", 35) == 0 &&
      (!s->p->zone_max_open ||
       (uint64_t)s->closed + s->exp_open <= s->p->zone_max_open))
    FAIL("'%s': '%s' with %" PRIu32 " CLOSED and %" PRIu32
         " EXP_OPEN zones, max_open %" PRIu32,
         line, reply, s->closed, s->exp_open, s->p->zone_max_open);
}

/* The harness's own lines; true if LINE was one. */
static bool
harness_line(struct state *s, const char *line)
{
  uint64_t block, count;
  uint32_t bs = s->p->blocksize;

  if (strcmp(line, "#flush") == 0) {
    znbd_dev_flush(s->dev);
    return true;
  }
  bool w = sscanf(line, "#write %" SCNu64 " %" SCNu64, &block, &count) == 2;
  if (w || sscanf(line, "#sync %" SCNu64 " %" SCNu64, &block, &count) == 2) {
    uint64_t blocks = znbd_dev_size(s->dev) / bs;
    if (count == 0 || block >= blocks || count > blocks - block)
      return true;
    if (!w)
      znbd_dev_sync(s->dev, count * bs, block * bs);
    else if (count <= 64)
      znbd_dev_write(s->dev, pattern + block % 251, count * bs, block * bs,
                     ZNBD_WRITE_NOWAIT);
    return true;
  }
  return false;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  trace = getenv("FUZZ_CONTROL_TRACE") != NULL;
  pattern = malloc(ZNBD_CONTROL_APPEND_MAX + 256);
  if (!pattern)
    abort();
  for (size_t i = 0; i < ZNBD_CONTROL_APPEND_MAX + 256; i++)
    pattern[i] = (uint8_t)(i * 7 + (i >> 8));
  /* Every device can be made. */
  for (unsigned kind = 0; kind < NR_DEVS; kind++) {
    struct znbd_params p;
    znbd_dev_free(make_dev(kind, &p));
    znbd_params_free(&p);
  }
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  struct znbd_params p;
  struct state s = {.dev = make_dev(data[0] % NR_DEVS, &p)};
  s.p = znbd_dev_params(s.dev);
  s.active_limit = s.p->zone_max_active;
  check_zones(&s, "(new device)");

  size_t pos = 1;
  while (pos < size) {
    const uint8_t *nl = memchr(data + pos, '\n', size - pos);
    size_t n = nl ? (size_t)(nl - (data + pos)) : size - pos;
    char *line = malloc(n + 1);
    if (!line)
      abort();
    memcpy(line, data + pos, n);
    line[n] = '\0';
    pos += n + (nl != NULL);
    if (harness_line(&s, line)) {
      check_zones(&s, line);
      free(line);
      continue;
    }

    char *reply = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&reply, &len);
    if (!out)
      abort();
    uint64_t alen;
    int rc, e, a = znbd_control_append_len(line, &alen, out);
    const uint8_t *adata = NULL;
    if (a == 1) {
      adata = pattern + pos % 251;
      errno = 0;
      rc = znbd_control_append(s.dev, line, adata, out);
    } else if (a == -1) {
      rc = -1; /* a malformed append: the connection closes */
      errno = EINVAL;
    } else {
      errno = 0;
      rc = znbd_control_exec(s.dev, line, out);
    }
    e = errno;
    if (fclose(out) != 0)
      abort();
    if (trace)
      fprintf(stderr, "> %s\n%s", line, reply);
    check_reply(line, reply, len, rc, e);
    if (rc == 0 && strncmp(line, "report", 6) == 0)
      check_report(line, reply);
    if (rc == 0 && strncmp(reply, "ok zone=", 8) == 0)
      check_zone_reply(&s, line, reply);
    if (a == 1)
      check_append(&s, line, reply, rc, adata, alen);
    check_refusal(&s, line, reply);
    check_zones(&s, line);
    free(reply);
    free(line);
    if (a == -1)
      break;
  }
  znbd_dev_free(s.dev);
  znbd_params_free(&p);
  return 0;
}
