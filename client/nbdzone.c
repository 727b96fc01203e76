/* nbdzone: a blkzone(8)-like tool that reports and manages the zones of a
 * zoned NBD export (nbdkit-zoned-plugin, znbd).  See man/nbdzone.pod.
 *
 * NBD goes through libnbd only.  Zone state comes, best first, from the
 * x-znbd:zone metadata context (include/znbd/zonectx.h), from the zone
 * control socket (--control, man/znbd-zone-control.pod), or from
 * base:allocation (the first hole in a sequential zone is its wp).  The
 * geometry always comes from the export description (znbd_dev_describe()).
 * Internally everything is bytes; output is 512-byte sectors as blkzone's.
 */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <libnbd.h>

#include "znbd/dev.h"
#include "znbd/params.h"
#include "znbd/zonectx.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define SECTOR 512
/* Largest request length NBD carries (32 bits), kept 4 KiB aligned. */
#define MAX_REQUEST 0xfffff000u

static const char *progname = "nbdzone";
static const char *uri;

/* ---- geometry from the export description --------------------------- */

struct geom {
  bool zoned;
  uint64_t size, zone_size, zone_cap;
  uint32_t nr_zones, nr_conv, max_open, max_active, blocksize;
};

struct zone {
  uint64_t start, len, cap, wp; /* bytes; wp ZNBD_WP_INVALID: none */
  unsigned type, cond;          /* Linux numbering (dev.h) */
};

static void __attribute__((format(printf, 2, 3), noreturn))
die(int status, const char *fmt, ...)
{
  va_list ap;

  fprintf(stderr, "%s: ", progname);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(status);
}

static bool
parse_kv_u64(const char *word, const char *key, uint64_t *out)
{
  size_t n = strlen(key);
  char *end;

  if (strncmp(word, key, n) != 0 || word[n] != '=')
    return false;
  errno = 0;
  *out = strtoull(word + n + 1, &end, 10);
  if (errno || *end || end == word + n + 1)
    die(EXIT_USAGE, "%s: bad '%s' in the export description", uri, word);
  return true;
}

/* Parse "znbd model=... size=... zone_size=..." (dev.h).  No description,
 * or one from another server, means a plain (not zoned) export. */
static void
parse_description(const char *desc, int64_t nbd_size, struct geom *g)
{
  char *copy, *w, *save = NULL;
  uint64_t v, nr_zones = 0, nr_conv = 0, max_open = 0, max_active = 0;
  uint64_t blocksize = 512;
  bool have_model = false, have_zs = false, have_nr = false;

  memset(g, 0, sizeof *g);
  g->size = (uint64_t)nbd_size;
  if (desc == NULL || strncmp(desc, "znbd ", 5) != 0)
    return;
  copy = strdup(desc);
  if (copy == NULL)
    die(EXIT_USAGE, "out of memory");
  for (w = strtok_r(copy + 5, " \t\n", &save); w;
       w = strtok_r(NULL, " \t\n", &save)) {
    if (strncmp(w, "model=", 6) == 0) {
      have_model = true;
      g->zoned = strcmp(w + 6, "none") != 0;
    } else if (parse_kv_u64(w, "zone_size", &v)) {
      g->zone_size = v;
      have_zs = true;
    } else if (parse_kv_u64(w, "zone_capacity", &v))
      g->zone_cap = v;
    else if (parse_kv_u64(w, "nr_zones", &v)) {
      nr_zones = v;
      have_nr = true;
    } else if (parse_kv_u64(w, "nr_conv", &v))
      nr_conv = v;
    else if (parse_kv_u64(w, "max_open", &v))
      max_open = v;
    else if (parse_kv_u64(w, "max_active", &v))
      max_active = v;
    else if (parse_kv_u64(w, "blocksize", &v))
      blocksize = v;
    else if (parse_kv_u64(w, "size", &v)) {
      if (v != (uint64_t)nbd_size)
        die(EXIT_USAGE,
            "%s: the description says size=%" PRIu64
            " but the export has %" PRId64 " bytes",
            uri, v, nbd_size);
    } /* other keys: newer servers; ignored */
  }
  free(copy);
  if (!have_model || !g->zoned)
    return;
  if (!have_zs || !have_nr || g->zone_size == 0 || g->zone_size % SECTOR ||
      nr_zones == 0 || nr_zones > UINT32_MAX ||
      nr_zones != (g->size + g->zone_size - 1) / g->zone_size ||
      nr_conv > nr_zones || g->zone_cap > g->zone_size ||
      g->zone_cap % SECTOR || blocksize == 0)
    die(EXIT_USAGE, "%s: inconsistent zone geometry in the description: %s",
        uri, desc);
  if (g->zone_cap == 0)
    g->zone_cap = g->zone_size;
  g->nr_zones = (uint32_t)nr_zones;
  g->nr_conv = (uint32_t)nr_conv;
  g->max_open = (uint32_t)max_open;
  g->max_active = (uint32_t)max_active;
  g->blocksize = (uint32_t)blocksize;
}

/* Zone I as the geometry says; conventional zones have capacity = len. */
static void
zone_geom(const struct geom *g, uint32_t i, struct zone *z)
{
  z->start = (uint64_t)i * g->zone_size;
  z->len =
      g->size - z->start < g->zone_size ? g->size - z->start : g->zone_size;
  if (i < g->nr_conv) {
    z->type = ZNBD_ZONE_TYPE_CONVENTIONAL;
    z->cond = ZNBD_ZONE_COND_NOT_WP;
    z->cap = z->len;
  } else {
    z->type = ZNBD_ZONE_TYPE_SEQWRITE_REQ;
    z->cond = ZNBD_ZONE_COND_EMPTY;
    z->cap = z->len < g->zone_cap ? z->len : g->zone_cap;
  }
  z->wp = ZNBD_WP_INVALID;
}

/* ---- zone state over NBD: BLOCK_STATUS ----------------------------- */

enum source { SRC_ZONECTX, SRC_CONTROL, SRC_ALLOCATION };
static const char *const source_name[] = {"x-znbd:zone", "control",
                                          "base:allocation"};

struct bs_state {
  const struct geom *g;
  const char *context;
  struct zone *zones; /* zones [first, first + count) */
  bool *seen, *wp_set;
  uint32_t first, count;
  uint64_t next; /* end of the extents received so far */
};

static int
extent_cb(void *opaque, const char *metacontext, uint64_t offset,
          uint32_t *entries, size_t nr, int *error)
{
  struct bs_state *s = opaque;
  bool zonectx = strcmp(s->context, ZNBD_ZONECTX_NAME) == 0;
  uint64_t off = offset;
  size_t k;

  if (strcmp(metacontext, s->context) != 0)
    return 0;
  for (k = 0; k + 1 < nr; k += 2) {
    uint64_t len = entries[k], end = off + len;
    uint32_t flags = entries[k + 1];
    uint64_t zi = off / s->g->zone_size;

    if (len == 0)
      break;
    for (; zi < s->g->nr_zones && zi * s->g->zone_size < end; zi++) {
      struct zone *z;
      uint32_t idx;
      uint64_t at;

      if (zi < s->first || zi >= (uint64_t)s->first + s->count)
        continue;
      idx = (uint32_t)(zi - s->first);
      z = &s->zones[idx];
      at = off > z->start ? off : z->start;
      if (zonectx) {
        if (!s->seen[idx]) {
          s->seen[idx] = true;
          z->cond = flags & ZNBD_ZONECTX_COND_MASK;
          z->type = (flags & ZNBD_ZONECTX_TYPE_MASK) >> ZNBD_ZONECTX_TYPE_SHIFT;
        }
        if ((flags & ZNBD_ZONECTX_PAST_WP) && !s->wp_set[idx]) {
          s->wp_set[idx] = true;
          z->wp = at;
        }
      } else {
        s->seen[idx] = true;
        if ((flags & LIBNBD_STATE_HOLE) && !s->wp_set[idx]) {
          s->wp_set[idx] = true;
          z->wp = at; /* first hole; turned into a condition below */
        }
      }
    }
    off = end;
  }
  if (off > s->next)
    s->next = off;
  return 0;
}

/* Fill ZONES[0..COUNT) for zones FIRST.. from CONTEXT. */
static void
report_nbd(struct nbd_handle *h, const struct geom *g, const char *context,
           uint32_t first, uint32_t count, struct zone *zones)
{
  struct bs_state s = {.g = g,
                       .context = context,
                       .zones = zones,
                       .first = first,
                       .count = count};
  uint64_t off, end;
  uint32_t i;

  s.seen = calloc(count, sizeof *s.seen);
  s.wp_set = calloc(count, sizeof *s.wp_set);
  if (!s.seen || !s.wp_set)
    die(EXIT_USAGE, "out of memory");
  off = zones[0].start;
  end = zones[count - 1].start + zones[count - 1].len;
  while (off < end) {
    uint64_t len = end - off < MAX_REQUEST ? end - off : MAX_REQUEST;

    s.next = off;
    if (nbd_block_status(
            h, len, off,
            (nbd_extent_callback){.callback = extent_cb, .user_data = &s},
            0) == -1)
      die(EXIT_USAGE, "%s: BLOCK_STATUS %s at %" PRIu64 ": %s", uri, context,
          off, nbd_get_error());
    if (s.next <= off)
      die(EXIT_USAGE, "%s: the server sent no %s extents at offset %" PRIu64,
          uri, context, off);
    off = s.next;
  }

  for (i = 0; i < count; i++) {
    struct zone *z = &zones[i];

    if (!s.seen[i])
      die(EXIT_USAGE, "%s: no %s extent for zone %" PRIu32, uri, context,
          first + i);
    if (strcmp(context, ZNBD_ZONECTX_NAME) == 0) {
      if (z->type != ZNBD_ZONE_TYPE_SEQWRITE_REQ ||
          z->cond == ZNBD_ZONE_COND_FULL ||
          z->cond == ZNBD_ZONE_COND_READONLY ||
          z->cond == ZNBD_ZONE_COND_OFFLINE)
        z->wp = ZNBD_WP_INVALID;
      else if (!s.wp_set[i]) /* no extent at or above the wp */
        z->wp = z->start + z->len;
      if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
        z->cap = z->len;
      continue;
    }
    /* base:allocation: rebuild the condition from the wp alone, as after
     * a power cycle (doc/zone-rules.md, rule power-cycle): EMPTY, FULL,
     * else CLOSED. */
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL) {
      z->wp = ZNBD_WP_INVALID;
      continue;
    }
    if (!s.wp_set[i] || z->wp >= z->start + z->cap) {
      z->cond = ZNBD_ZONE_COND_FULL;
      z->wp = ZNBD_WP_INVALID;
    } else if (z->wp == z->start)
      z->cond = ZNBD_ZONE_COND_EMPTY;
    else
      z->cond = ZNBD_ZONE_COND_CLOSED;
  }
  free(s.seen);
  free(s.wp_set);
}

/* ---- the zone control socket ---------------------------------------- */

struct control {
  const char *path;
  int fd;
  FILE *in;
};

static void
control_open(struct control *c, const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};

  c->path = path;
  if (strlen(path) >= sizeof a.sun_path)
    die(EXIT_USAGE, "--control %s: path too long", path);
  memcpy(a.sun_path, path, strlen(path) + 1);
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd == -1 || connect(c->fd, (struct sockaddr *)&a, sizeof a) == -1)
    die(EXIT_USAGE, "--control %s: %s", path, strerror(errno));
  c->in = fdopen(dup(c->fd), "r");
  if (c->in == NULL)
    die(EXIT_USAGE, "--control %s: %s", path, strerror(errno));
}

/* Send REQ; return the status line (static buffer, no newline). */
static char *
control_request(struct control *c, const char *req)
{
  static char *line;
  static size_t cap;
  size_t n = strlen(req);
  ssize_t r;

  if (send(c->fd, req, n, MSG_NOSIGNAL) != (ssize_t)n ||
      send(c->fd, "\n", 1, MSG_NOSIGNAL) != 1)
    die(EXIT_USAGE, "--control %s: send: %s", c->path, strerror(errno));
  r = getline(&line, &cap, c->in);
  if (r <= 0)
    die(EXIT_USAGE, "--control %s: the server closed the connection", c->path);
  if (line[r - 1] == '\n')
    line[r - 1] = '\0';
  return line;
}

static unsigned
cond_from_name(const char *s)
{
  static const struct {
    const char *n;
    unsigned v;
  } t[] = {{"NOT_WP", ZNBD_ZONE_COND_NOT_WP},
           {"EMPTY", ZNBD_ZONE_COND_EMPTY},
           {"IMP_OPEN", ZNBD_ZONE_COND_IMP_OPEN},
           {"EXP_OPEN", ZNBD_ZONE_COND_EXP_OPEN},
           {"CLOSED", ZNBD_ZONE_COND_CLOSED},
           {"READONLY", ZNBD_ZONE_COND_READONLY},
           {"FULL", ZNBD_ZONE_COND_FULL},
           {"OFFLINE", ZNBD_ZONE_COND_OFFLINE}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(s, t[i].n) == 0)
      return t[i].v;
  return 0xff;
}

static void
report_control(struct control *c, uint32_t first, uint32_t count,
               struct zone *zones)
{
  char req[64], *line = NULL, wp[32], type[32], cond[32];
  size_t cap = 0;
  unsigned long n;
  uint32_t i, idx;

  snprintf(req, sizeof req, "report %" PRIu32 " %" PRIu32, first, count);
  line = control_request(c, req);
  if (sscanf(line, "ok %lu", &n) != 1)
    die(EXIT_USAGE, "--control %s: report refused: %s", c->path, line);
  if (n != count)
    die(EXIT_USAGE, "--control %s: asked for %" PRIu32 " zones, got %lu",
        c->path, count, n);
  line = NULL;
  for (i = 0; i < count; i++) {
    struct zone *z = &zones[i];

    if (getline(&line, &cap, c->in) <= 0 ||
        sscanf(line,
               "zone=%" SCNu32 " start=%" SCNu64 " len=%" SCNu64 " cap=%" SCNu64
               " wp=%31s type=%31s cond=%31s",
               &idx, &z->start, &z->len, &z->cap, wp, type, cond) != 7 ||
        idx != first + i)
      die(EXIT_USAGE, "--control %s: bad report line: %s", c->path,
          line ? line : "(none)");
    if (strcmp(wp, "-") == 0)
      z->wp = ZNBD_WP_INVALID;
    else if (sscanf(wp, "%" SCNu64, &z->wp) != 1)
      die(EXIT_USAGE, "--control %s: bad wp in: %s", c->path, line);
    z->type = strcmp(type, "CONVENTIONAL") == 0 ? ZNBD_ZONE_TYPE_CONVENTIONAL
                                                : ZNBD_ZONE_TYPE_SEQWRITE_REQ;
    z->cond = cond_from_name(cond);
  }
  free(line);
}

/* ---- output --------------------------------------------------------- */

static const char *
cond_short(unsigned c)
{
  /* blkzone's condition_str[] */
  static const char *const s[16] = {"nw", "em", "oi", "oe", "cl", "x5",
                                    "x6", "x7", "x8", "x9", "xA", "xB",
                                    "xC", "ro", "fu", "of"};
  return s[c & 15];
}

static const char *
type_text(unsigned t)
{
  /* blkzone's type_text[] */
  static const char *const s[4] = {"RESERVED", "CONVENTIONAL",
                                   "SEQ_WRITE_REQUIRED", "SEQ_WRITE_PREFERRED"};
  return s[t & 3];
}

/* The write pointer relative to the zone start in sectors, as blkzone
 * prints it; 0 where there is none (conventional, FULL, READONLY,
 * OFFLINE). */
static uint64_t
wptr_sectors(const struct zone *z)
{
  return z->wp == ZNBD_WP_INVALID ? 0 : (z->wp - z->start) / SECTOR;
}

static void
print_text(const struct zone *zones, uint32_t count)
{
  for (uint32_t i = 0; i < count; i++) {
    const struct zone *z = &zones[i];
    printf("  start: 0x%09" PRIx64 ", len 0x%06" PRIx64 ", cap 0x%06" PRIx64
           ", wptr 0x%06" PRIx64 " reset:%u non-seq:%u, zcond:%2u(%s) "
           "[type: %u(%s)]\n",
           z->start / SECTOR, z->len / SECTOR, z->cap / SECTOR, wptr_sectors(z),
           0u, 0u, z->cond, cond_short(z->cond), z->type, type_text(z->type));
  }
}

/* '{' and the "uri" member, JSON-escaped. */
static void
print_json_uri(void)
{
  printf("{\n  \"uri\": \"");
  for (const char *p = uri; *p; p++) {
    if (*p == '"' || *p == '\\')
      putchar('\\');
    if ((unsigned char)*p < 0x20)
      printf("\\u%04x", *p);
    else
      putchar(*p);
  }
  printf("\",\n");
}

static void
print_json(const struct geom *g, enum source src, const struct zone *zones,
           uint32_t first, uint32_t count)
{
  print_json_uri();
  printf("  \"zoned\": true,\n  \"source\": \"%s\",\n"
         "  \"exact\": %s,\n  \"units\": \"512-byte sectors\",\n"
         "  \"size\": %" PRIu64 ",\n  \"zone_size\": %" PRIu64 ",\n"
         "  \"zone_capacity\": %" PRIu64 ",\n  \"nr_zones\": %" PRIu32 ",\n"
         "  \"nr_conv\": %" PRIu32 ",\n  \"max_open\": %" PRIu32 ",\n"
         "  \"max_active\": %" PRIu32 ",\n  \"zones\": [",
         source_name[src], src == SRC_ALLOCATION ? "false" : "true",
         g->size / SECTOR, g->zone_size / SECTOR, g->zone_cap / SECTOR,
         g->nr_zones, g->nr_conv, g->max_open, g->max_active);
  for (uint32_t i = 0; i < count; i++) {
    const struct zone *z = &zones[i];
    printf("%s\n    {\"zone\": %" PRIu32 ", \"start\": %" PRIu64
           ", \"len\": %" PRIu64 ", \"cap\": %" PRIu64 ", \"wptr\": ",
           i ? "," : "", first + i, z->start / SECTOR, z->len / SECTOR,
           z->cap / SECTOR);
    if (z->wp == ZNBD_WP_INVALID)
      printf("null");
    else
      printf("%" PRIu64, (z->wp - z->start) / SECTOR);
    printf(", \"cond\": %u, \"cond_name\": \"%s\", \"type\": %u"
           ", \"type_name\": \"%s\"}",
           z->cond, znbd_zone_cond_name(z->cond), z->type, type_text(z->type));
  }
  printf("\n  ]\n}\n");
}

/* ---- commands ------------------------------------------------------- */

struct opts {
  const char *command, *control;
  bool have_offset, have_count, all, json, verbose;
  uint64_t offset;
  uint32_t count;
};

struct ctx {
  struct nbd_handle *h;
  struct geom g;
  struct control ctl;
  bool have_ctl;
  enum source src;
};

/* Read the state of zones FIRST..FIRST+COUNT-1 from the best source. */
static struct zone *
read_zones(struct ctx *c, uint32_t first, uint32_t count)
{
  struct zone *zones = calloc(count, sizeof *zones);

  if (zones == NULL)
    die(EXIT_USAGE, "out of memory");
  for (uint32_t i = 0; i < count; i++)
    zone_geom(&c->g, first + i, &zones[i]);
  switch (c->src) {
  case SRC_ZONECTX:
    report_nbd(c->h, &c->g, ZNBD_ZONECTX_NAME, first, count, zones);
    break;
  case SRC_CONTROL:
    report_control(&c->ctl, first, count, zones);
    break;
  case SRC_ALLOCATION:
    report_nbd(c->h, &c->g, "base:allocation", first, count, zones);
    break;
  }
  /* Same output from every source: no write pointer where blkzone shows
   * none (the control socket gives FULL zones one). */
  for (uint32_t i = 0; i < count; i++)
    if (zones[i].type != ZNBD_ZONE_TYPE_SEQWRITE_REQ ||
        zones[i].cond == ZNBD_ZONE_COND_FULL ||
        zones[i].cond == ZNBD_ZONE_COND_READONLY ||
        zones[i].cond == ZNBD_ZONE_COND_OFFLINE)
      zones[i].wp = ZNBD_WP_INVALID;
  return zones;
}

/* The zone range of the options: [*FIRST, *FIRST + *COUNT). */
static void
zone_range(const struct ctx *c, const struct opts *o, bool must_be_start,
           uint32_t *first, uint32_t *count)
{
  const struct geom *g = &c->g;
  uint64_t f = 0;

  if (o->have_offset) {
    if (o->offset >= g->size)
      die(EXIT_USAGE,
          "--offset %" PRIu64 " is beyond the end of the export (%" PRIu64
          " bytes)",
          o->offset, g->size);
    f = o->offset / g->zone_size;
    if (must_be_start && f * g->zone_size != o->offset)
      die(EXIT_USAGE,
          "--offset %" PRIu64 " is not the start of a zone (zone size %" PRIu64
          " bytes; zone %" PRIu64 " starts at %" PRIu64 ")",
          o->offset, g->zone_size, f, f * g->zone_size);
  }
  *first = (uint32_t)f;
  *count = g->nr_zones - *first;
  if (o->have_count && o->count < *count)
    *count = o->count;
}

static int
cmd_report(struct ctx *c, const struct opts *o, bool capacity)
{
  uint32_t first, count;
  struct zone *zones;

  zone_range(c, o, false, &first, &count);
  zones = read_zones(c, first, count);
  if (capacity) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < count; i++)
      sum += zones[i].cap;
    printf("0x%09" PRIx64 "\n", sum / SECTOR);
  } else if (o->json)
    print_json(&c->g, c->src, zones, first, count);
  else
    print_text(zones, count);
  if (c->src == SRC_ALLOCATION && !capacity)
    fprintf(stderr,
            "%s: note: conditions inferred from base:allocation write "
            "pointers: partly written zones are shown CLOSED; IMP/EXP_OPEN, "
            "READONLY and OFFLINE cannot be seen (use --control PATH)\n",
            progname);
  free(zones);
  return 0;
}

static const char *
zone_desc(const struct zone *z, uint32_t idx)
{
  static char buf[96];
  snprintf(buf, sizeof buf, "zone %" PRIu32 " (start 0x%09" PRIx64 ")", idx,
           z->start / SECTOR);
  return buf;
}

/* OP through the control socket: one request per zone, or "OP all". */
static int
op_control(struct ctx *c, const struct opts *o)
{
  char req[64], *reply;

  if (o->all) {
    snprintf(req, sizeof req, "%s all", o->command);
    reply = control_request(&c->ctl, req);
    if (strncmp(reply, "ok", 2) != 0)
      die(EXIT_REFUSED, "%s --all refused: %s", o->command, reply);
    if (o->verbose)
      fprintf(stderr, "%s: %s\n", progname, reply);
    return 0;
  }
  uint32_t first, count;
  zone_range(c, o, true, &first, &count);
  for (uint32_t i = 0; i < count; i++) {
    struct zone z;
    zone_geom(&c->g, first + i, &z);
    snprintf(req, sizeof req, "%s %" PRIu32, o->command, first + i);
    reply = control_request(&c->ctl, req);
    if (strncmp(reply, "ok", 2) != 0)
      die(EXIT_REFUSED, "%s: %s refused: %s", zone_desc(&z, first + i),
          o->command, reply);
  }
  return 0;
}

/* Zone indexes the NBD-only reset/finish will act on.  Refuses (exit 1)
 * before changing anything if a zone in an explicit range cannot take
 * the operation. */
static bool
nbd_op_wanted(const struct opts *o, bool reset, bool exact,
              const struct zone *z, uint32_t idx)
{
  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL) {
    if (o->all)
      return false;
    die(EXIT_REFUSED, "%s: %s refused: conventional zone", zone_desc(z, idx),
        o->command);
  }
  if (z->cond == ZNBD_ZONE_COND_READONLY || z->cond == ZNBD_ZONE_COND_OFFLINE) {
    if (o->all)
      return false;
    die(EXIT_REFUSED, "%s: %s refused in condition %s", zone_desc(z, idx),
        o->command, znbd_zone_cond_name(z->cond));
  }
  if (reset) /* base:allocation shows an EXP_OPEN zone at its start as
              * EMPTY: reset it anyway (resetting EMPTY is harmless) */
    return !exact || z->cond != ZNBD_ZONE_COND_EMPTY;
  if (o->all && z->cond == ZNBD_ZONE_COND_EMPTY)
    return false; /* finish all: open and closed zones (ZBC ALL bit) */
  return z->cond != ZNBD_ZONE_COND_FULL;
}

/* reset: TRIM of whole zones; finish: WRITE_ZEROES from wp to capacity.
 * Then read the zones back: TRIM is advisory, so check it worked. */
static int
op_nbd(struct ctx *c, const struct opts *o, bool reset)
{
  uint32_t first = 0, count = c->g.nr_zones, i;
  struct zone *zones, *after;
  bool exact = c->src != SRC_ALLOCATION;
  bool *want;

  if (!o->all)
    zone_range(c, o, true, &first, &count);
  zones = read_zones(c, first, count);
  want = calloc(count, sizeof *want);
  if (want == NULL)
    die(EXIT_USAGE, "out of memory");
  for (i = 0; i < count; i++)
    want[i] = nbd_op_wanted(o, reset, exact, &zones[i], first + i);
  if (reset && nbd_can_trim(c->h) != 1)
    die(EXIT_REFUSED,
        "%s: the export does not support TRIM, which reset "
        "needs (give --control PATH)",
        uri);
  if (!reset && nbd_can_zero(c->h) != 1)
    die(EXIT_REFUSED,
        "%s: the export does not support WRITE_ZEROES, which "
        "finish needs (give --control PATH)",
        uri);

  for (i = 0; i < count;) {
    if (!want[i]) {
      i++;
      continue;
    }
    if (reset) {
      /* One TRIM per run of consecutive zones, cut at MAX_REQUEST on
       * zone boundaries. */
      uint32_t j = i;
      uint64_t start = zones[i].start, len = 0;
      while (j < count && want[j] && len + zones[j].len <= MAX_REQUEST)
        len += zones[j++].len;
      if (j == i)
        die(EXIT_REFUSED, "%s: zone larger than an NBD request",
            zone_desc(&zones[i], first + i));
      if (nbd_trim(c->h, len, start, 0) == -1)
        die(EXIT_REFUSED, "%s: reset by TRIM of %" PRIu64 " bytes failed: %s",
            zone_desc(&zones[i], first + i), len, nbd_get_error());
      i = j;
    } else {
      struct zone *z = &zones[i];
      uint64_t from = z->wp == ZNBD_WP_INVALID ? z->start : z->wp;
      uint64_t end = z->start + z->cap;
      while (from < end) {
        uint64_t len = end - from < MAX_REQUEST ? end - from : MAX_REQUEST;
        if (nbd_zero(c->h, len, from, 0) == -1)
          die(EXIT_REFUSED,
              "%s: finish by WRITE_ZEROES of [0x%" PRIx64 ", 0x%" PRIx64
              ") sectors failed: %s",
              zone_desc(z, first + i), from / SECTOR, end / SECTOR,
              nbd_get_error());
        from += len;
      }
      i++;
    }
  }

  after = read_zones(c, first, count);
  for (i = 0; i < count; i++) {
    unsigned expect = reset ? ZNBD_ZONE_COND_EMPTY : ZNBD_ZONE_COND_FULL;
    if (!want[i] || after[i].cond == expect)
      continue;
    /* base:allocation shows a READONLY zone as FULL, and reset-all skips
     * READONLY zones (null_blk): not an error for --all there. */
    if (!exact && o->all && after[i].cond == ZNBD_ZONE_COND_FULL) {
      fprintf(stderr,
              "%s: note: %s still looks FULL: READONLY zones are not reset, "
              "and base:allocation cannot tell them from FULL ones\n",
              progname, zone_desc(&after[i], first + i));
      continue;
    }
    die(EXIT_REFUSED, "%s: still %s after %s (%s)",
        zone_desc(&after[i], first + i), znbd_zone_cond_name(after[i].cond),
        o->command,
        exact ? (reset ? "the server ignored the TRIM"
                       : "the server ignored the WRITE_ZEROES")
              : "READONLY or OFFLINE, or the server ignored the request; "
                "--control PATH tells");
  }
  free(want);
  free(zones);
  free(after);
  return 0;
}

static void __attribute__((noreturn)) usage(int status)
{
  FILE *f = status ? stderr : stdout;
  fprintf(f,
          "Usage: %s COMMAND [options] URI\n"
          "Report and manage the zones of a zoned NBD export.\n\n"
          "Commands:\n"
          "  report     report zones (blkzone format, 512-byte sectors)\n"
          "  capacity   sum of zone capacities in sectors\n"
          "  reset      reset zones (write pointer to zone start)\n"
          "  finish     finish zones (make them FULL)\n"
          "  open       open zones explicitly (needs --control)\n"
          "  close      close zones (needs --control)\n\n"
          "Options:\n"
          "  -o, --offset BYTES   zone holding BYTES (report) or starting "
          "there (others)\n"
          "  -c, --count N        at most N zones\n"
          "  -a, --all            every zone (reset/finish/open/close)\n"
          "  -j, --json           report as JSON\n"
          "  -C, --control PATH   use the zone control socket at PATH\n"
          "  -v, --verbose        say where the zone state comes from\n"
          "  -h, --help           this help\n\n"
          "Exit status: 0 done, 1 refused, 2 usage or connection error.\n"
          "See nbdzone(1).\n",
          progname);
  exit(status);
}

int
main(int argc, char **argv)
{
  static const struct option longopts[] = {
      {"offset", required_argument, NULL, 'o'},
      {"count", required_argument, NULL, 'c'},
      {"all", no_argument, NULL, 'a'},
      {"json", no_argument, NULL, 'j'},
      {"control", required_argument, NULL, 'C'},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  struct opts o = {0};
  struct ctx c = {0};
  int opt, r;
  char *desc;
  int64_t size;
  bool is_report, is_capacity, is_reset, is_finish, is_open, is_close;

  while ((opt = getopt_long(argc, argv, "o:c:ajC:vh", longopts, NULL)) != -1) {
    switch (opt) {
    case 'o':
      if (znbd_parse_size(optarg, &o.offset) == -1)
        die(EXIT_USAGE, "--offset '%s': expected bytes (suffixes k m g t...)",
            optarg);
      o.have_offset = true;
      break;
    case 'c': {
      char *end;
      unsigned long long v;
      errno = 0;
      v = strtoull(optarg, &end, 10);
      if (errno || *end || end == optarg || v == 0 || v > UINT32_MAX ||
          optarg[0] == '-')
        die(EXIT_USAGE, "--count '%s': expected a number of zones >= 1",
            optarg);
      o.count = (uint32_t)v;
      o.have_count = true;
      break;
    }
    case 'a':
      o.all = true;
      break;
    case 'j':
      o.json = true;
      break;
    case 'C':
      o.control = optarg;
      break;
    case 'v':
      o.verbose = true;
      break;
    case 'h':
      usage(0);
    default:
      usage(EXIT_USAGE);
    }
  }
  /* getopt_long moved COMMAND and URI behind the options. */
  if (argc - optind != 2) {
    fprintf(stderr, "%s: expected COMMAND and URI\n", progname);
    usage(EXIT_USAGE);
  }
  o.command = argv[optind];
  uri = argv[optind + 1];
  is_report = strcmp(o.command, "report") == 0;
  is_capacity = strcmp(o.command, "capacity") == 0;
  is_reset = strcmp(o.command, "reset") == 0;
  is_finish = strcmp(o.command, "finish") == 0;
  is_open = strcmp(o.command, "open") == 0;
  is_close = strcmp(o.command, "close") == 0;
  if (!is_report && !is_capacity && !is_reset && !is_finish && !is_open &&
      !is_close)
    die(EXIT_USAGE,
        "unknown command '%s' (report, capacity, reset, finish, open, "
        "close)",
        o.command);
  if (o.json && !is_report)
    die(EXIT_USAGE, "--json is for report only");
  if (o.all && (is_report || is_capacity))
    die(EXIT_USAGE, "--all is for reset, finish, open and close");
  if (o.all && (o.have_offset || o.have_count))
    die(EXIT_USAGE, "--all and --offset/--count exclude each other");
  if (!is_report && !is_capacity && !o.all && !o.have_offset && !o.have_count)
    die(EXIT_USAGE, "%s: give the zones (--offset BYTES [--count N]) or --all",
        o.command);
  if ((is_open || is_close) && o.control == NULL)
    die(EXIT_USAGE,
        "%s: NBD has no command to %s a zone; give the zone control socket "
        "with --control PATH (zone_control= on the server)",
        o.command, o.command);

  c.h = nbd_create();
  if (c.h == NULL)
    die(EXIT_USAGE, "%s", nbd_get_error());
  if (nbd_set_full_info(c.h, true) == -1 ||
      nbd_add_meta_context(c.h, ZNBD_ZONECTX_NAME) == -1 ||
      nbd_add_meta_context(c.h, "base:allocation") == -1)
    die(EXIT_USAGE, "%s", nbd_get_error());
  if (nbd_connect_uri(c.h, uri) == -1)
    die(EXIT_USAGE, "%s: cannot connect: %s", uri, nbd_get_error());
  size = nbd_get_size(c.h);
  if (size < 0)
    die(EXIT_USAGE, "%s: %s", uri, nbd_get_error());
  desc = nbd_get_export_description(c.h); /* NULL if none was sent */
  parse_description(desc, size, &c.g);
  if (!c.g.zoned) {
    fprintf(stderr, "%s: %s: not a zoned export (%s)\n", progname, uri,
            desc ? "its description has no zone geometry"
                 : "the server sent no export description");
    if (o.json) { /* scripts get an answer on stdout too */
      print_json_uri();
      printf("  \"zoned\": false,\n  \"units\": \"512-byte sectors\",\n"
             "  \"size\": %" PRIu64 ",\n  \"zones\": []\n}\n",
             c.g.size / SECTOR);
    }
    free(desc);
    nbd_shutdown(c.h, 0);
    nbd_close(c.h);
    return EXIT_REFUSED;
  }
  free(desc);

  if (o.control) {
    control_open(&c.ctl, o.control);
    c.have_ctl = true;
  }
  if (nbd_can_meta_context(c.h, ZNBD_ZONECTX_NAME) == 1)
    c.src = SRC_ZONECTX;
  else if (c.have_ctl)
    c.src = SRC_CONTROL;
  else if (nbd_can_meta_context(c.h, "base:allocation") == 1)
    c.src = SRC_ALLOCATION;
  else
    die(EXIT_USAGE,
        "%s: the server offers neither %s nor base:allocation; give "
        "--control PATH",
        uri, ZNBD_ZONECTX_NAME);
  if (o.verbose)
    fprintf(stderr, "%s: zone state from %s%s\n", progname, source_name[c.src],
            c.have_ctl && !is_report && !is_capacity
                ? ", operations through the control socket"
                : "");

  if (is_report || is_capacity)
    r = cmd_report(&c, &o, is_capacity);
  else if (c.have_ctl)
    r = op_control(&c, &o);
  else
    r = op_nbd(&c, &o, is_reset);

  if (c.have_ctl) {
    fclose(c.ctl.in);
    close(c.ctl.fd);
  }
  nbd_shutdown(c.h, 0);
  nbd_close(c.h);
  if (fflush(stdout) == EOF || ferror(stdout))
    die(EXIT_USAGE, "writing the output: %s", strerror(errno));
  return r;
}
