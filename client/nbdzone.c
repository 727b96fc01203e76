/* nbdzone: a blkzone(8)-like tool that reports and manages the zones of a
 * zoned NBD export (nbdkit-zoned-plugin, znbd).  See man/nbdzone.pod.
 *
 * Everything NBD and zone-related goes through libznbdclient
 * (client/znbdclient.h): zone state from x-znbd:zone, the zone control
 * socket (--control) or base:allocation; operations and append through
 * the control socket, reset and finish over plain NBD (TRIM,
 * WRITE_ZEROES) without it.  Internally everything is bytes; output is
 * 512-byte sectors as blkzone's, except append's offset (bytes).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "znbd/control.h"
#include "znbd/dev.h"
#include "znbd/params.h"
#include "znbdclient.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define SECTOR 512

static const char *progname = "nbdzone";
static const char *uri;

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
wptr_sectors(const struct znbd_zone_info *z)
{
  return z->wp == ZNBD_WP_INVALID ? 0 : (z->wp - z->start) / SECTOR;
}

static void
print_text(const struct znbd_zone_info *zones, uint32_t count)
{
  for (uint32_t i = 0; i < count; i++) {
    const struct znbd_zone_info *z = &zones[i];
    printf("  start: 0x%09" PRIx64 ", len 0x%06" PRIx64 ", cap 0x%06" PRIx64
           ", wptr 0x%06" PRIx64 " reset:%u non-seq:%u, zcond:%2u(%s) "
           "[type: %u(%s)]\n",
           z->start / SECTOR, z->len / SECTOR, z->capacity / SECTOR,
           wptr_sectors(z), 0u, 0u, z->cond, cond_short(z->cond), z->type,
           type_text(z->type));
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
print_json(const struct znbdc_geom *g, enum znbdc_source src,
           const struct znbd_zone_info *zones, uint32_t first, uint32_t count)
{
  print_json_uri();
  printf("  \"zoned\": true,\n  \"source\": \"%s\",\n"
         "  \"exact\": %s,\n  \"units\": \"512-byte sectors\",\n"
         "  \"size\": %" PRIu64 ",\n  \"zone_size\": %" PRIu64 ",\n"
         "  \"zone_capacity\": %" PRIu64 ",\n  \"nr_zones\": %" PRIu32 ",\n"
         "  \"nr_conv\": %" PRIu32 ",\n  \"max_open\": %" PRIu32 ",\n"
         "  \"max_active\": %" PRIu32 ",\n  \"zones\": [",
         znbdc_source_name(src), src == ZNBDC_SRC_ALLOCATION ? "false" : "true",
         g->size / SECTOR, g->zone_size / SECTOR, g->zone_capacity / SECTOR,
         g->nr_zones, g->nr_conv, g->max_open, g->max_active);
  for (uint32_t i = 0; i < count; i++) {
    const struct znbd_zone_info *z = &zones[i];
    printf("%s\n    {\"zone\": %" PRIu32 ", \"start\": %" PRIu64
           ", \"len\": %" PRIu64 ", \"cap\": %" PRIu64 ", \"wptr\": ",
           i ? "," : "", first + i, z->start / SECTOR, z->len / SECTOR,
           z->capacity / SECTOR);
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
  const char *control, *file, *svg;
  bool have_offset, have_count, all, json, verbose, watch;
  double interval; /* --watch SECONDS between redraws */
  uint64_t offset;
  uint32_t count;
};

struct ctx {
  struct znbdc *h;
  const struct znbdc_geom *g;
  const struct command *cmd;
  const struct opts *o;
  char **words; /* the request words between COMMAND and URI */
  int nwords;
};

/* Command properties (struct command's flags). */
#define CMD_ZONES 0x1   /* acts on zones: --offset/--count or --all needed */
#define CMD_ALL 0x2     /* takes --all */
#define CMD_JSON 0x4    /* takes --json */
#define CMD_CONTROL 0x8 /* needs --control */
#define CMD_START 0x10  /* --offset must be a zone start */
#define CMD_FILE 0x20   /* takes --file */
#define CMD_WORDS 0x40  /* takes request words, sent as they are */

struct command {
  const char *name;
  int (*handler)(struct ctx *c);
  unsigned flags;
  const char *help;
};

/* Read the state of zones FIRST..FIRST+COUNT-1 from the best source. */
static struct znbd_zone_info *
read_zones(struct ctx *c, uint32_t first, uint32_t count)
{
  struct znbd_zone_info *zones = calloc(count, sizeof *zones);

  if (zones == NULL)
    die(EXIT_USAGE, "out of memory");
  if (znbdc_report(c->h, first, count, zones) == -1)
    die(EXIT_USAGE, "%s", znbdc_error(c->h));
  return zones;
}

/* The zone range of the options: [*FIRST, *FIRST + *COUNT). */
static void
zone_range(const struct ctx *c, uint32_t *first, uint32_t *count)
{
  const struct znbdc_geom *g = c->g;
  const struct opts *o = c->o;
  uint64_t f = 0;

  if (o->have_offset) {
    if (o->offset >= g->size)
      die(EXIT_USAGE,
          "--offset %" PRIu64 " is beyond the end of the export (%" PRIu64
          " bytes)",
          o->offset, g->size);
    f = o->offset / g->zone_size;
    if ((c->cmd->flags & CMD_START) && f * g->zone_size != o->offset)
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

static void
allocation_note(const struct ctx *c)
{
  if (znbdc_source(c->h) == ZNBDC_SRC_ALLOCATION)
    fprintf(stderr,
            "%s: note: conditions inferred from base:allocation write "
            "pointers: partly written zones are shown CLOSED; IMP/EXP_OPEN, "
            "READONLY and OFFLINE cannot be seen (use --control PATH)\n",
            progname);
}

static int
cmd_report(struct ctx *c)
{
  uint32_t first, count;
  struct znbd_zone_info *zones;

  zone_range(c, &first, &count);
  zones = read_zones(c, first, count);
  if (c->o->json)
    print_json(c->g, znbdc_source(c->h), zones, first, count);
  else
    print_text(zones, count);
  allocation_note(c);
  free(zones);
  return 0;
}

static int
cmd_capacity(struct ctx *c)
{
  uint32_t first, count;
  struct znbd_zone_info *zones;
  uint64_t sum = 0;

  zone_range(c, &first, &count);
  zones = read_zones(c, first, count);
  for (uint32_t i = 0; i < count; i++)
    sum += zones[i].capacity;
  printf("0x%09" PRIx64 "\n", sum / SECTOR);
  free(zones);
  return 0;
}

static const char *
zone_desc(const struct znbd_zone_info *z, uint32_t idx)
{
  static char buf[96];
  snprintf(buf, sizeof buf, "zone %" PRIu32 " (start 0x%09" PRIx64 ")", idx,
           z->start / SECTOR);
  return buf;
}

/* OP through the control socket: one request per zone, or "OP all". */
static int
op_control(struct ctx *c, enum znbd_zone_op op)
{
  uint32_t first, count;

  if (c->o->all) {
    if (znbdc_zone_op(c->h, op, ZNBD_ALL_ZONES) == -1)
      die(EXIT_REFUSED, "%s --all refused: %s", c->cmd->name,
          znbdc_error(c->h));
    if (c->o->verbose)
      fprintf(stderr, "%s: %s\n", progname, znbdc_reply(c->h));
    return 0;
  }
  zone_range(c, &first, &count);
  for (uint32_t i = 0; i < count; i++) {
    struct znbd_zone_info z;

    znbdc_zone_geom(c->g, first + i, &z);
    if (znbdc_zone_op(c->h, op, first + i) == -1)
      die(errno == ENOTSUP || errno == EPROTO || errno == ECONNRESET
              ? EXIT_USAGE
              : EXIT_REFUSED,
          "%s: %s refused: %s", zone_desc(&z, first + i), c->cmd->name,
          znbdc_error(c->h));
  }
  return 0;
}

/* Zone indexes the NBD-only reset/finish will act on.  Refuses (exit 1)
 * before changing anything if a zone in an explicit range cannot take
 * the operation. */
static bool
nbd_op_wanted(const struct ctx *c, bool reset, bool exact,
              const struct znbd_zone_info *z, uint32_t idx)
{
  bool all = c->o->all;

  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL) {
    if (all)
      return false;
    die(EXIT_REFUSED, "%s: %s refused: conventional zone", zone_desc(z, idx),
        c->cmd->name);
  }
  if (z->cond == ZNBD_ZONE_COND_READONLY || z->cond == ZNBD_ZONE_COND_OFFLINE) {
    if (all)
      return false;
    die(EXIT_REFUSED, "%s: %s refused in condition %s", zone_desc(z, idx),
        c->cmd->name, znbd_zone_cond_name(z->cond));
  }
  if (reset) /* base:allocation shows an EXP_OPEN zone at its start as
              * EMPTY: reset it anyway (resetting EMPTY is harmless) */
    return !exact || z->cond != ZNBD_ZONE_COND_EMPTY;
  if (all && z->cond == ZNBD_ZONE_COND_EMPTY)
    return false; /* finish all: open and closed zones (ZBC ALL bit) */
  return z->cond != ZNBD_ZONE_COND_FULL;
}

/* finish over NBD: WRITE_ZEROES from the wp to the capacity. */
static void
finish_by_zero(struct ctx *c, const struct znbd_zone_info *z, uint32_t idx)
{
  uint64_t from = z->wp == ZNBD_WP_INVALID ? z->start : z->wp;
  uint64_t end = z->start + z->capacity;

  while (from < end) {
    uint64_t len =
        end - from < ZNBDC_MAX_REQUEST ? end - from : ZNBDC_MAX_REQUEST;
    if (nbd_zero(znbdc_nbd(c->h), len, from, 0) == -1)
      die(EXIT_REFUSED,
          "%s: finish by WRITE_ZEROES of [0x%" PRIx64 ", 0x%" PRIx64
          ") sectors failed: %s",
          zone_desc(z, idx), from / SECTOR, end / SECTOR, nbd_get_error());
    from += len;
  }
}

/* reset: TRIM of whole zones; finish: WRITE_ZEROES from wp to capacity.
 * Then read the zones back: TRIM is advisory, so check it worked. */
static int
op_nbd(struct ctx *c, bool reset)
{
  uint32_t first = 0, count = c->g->nr_zones, i;
  struct znbd_zone_info *zones, *after;
  bool exact = znbdc_source(c->h) != ZNBDC_SRC_ALLOCATION;
  bool *want;

  if (!c->o->all)
    zone_range(c, &first, &count);
  zones = read_zones(c, first, count);
  want = calloc(count, sizeof *want);
  if (want == NULL)
    die(EXIT_USAGE, "out of memory");
  for (i = 0; i < count; i++)
    want[i] = nbd_op_wanted(c, reset, exact, &zones[i], first + i);
  if (reset && nbd_can_trim(znbdc_nbd(c->h)) != 1)
    die(EXIT_REFUSED,
        "%s: the export does not support TRIM, which reset "
        "needs (give --control PATH)",
        uri);
  if (!reset && nbd_can_zero(znbdc_nbd(c->h)) != 1)
    die(EXIT_REFUSED,
        "%s: the export does not support WRITE_ZEROES, which "
        "finish needs (give --control PATH)",
        uri);

  for (i = 0; i < count;) {
    uint32_t j = i;

    if (!want[i]) {
      i++;
      continue;
    }
    if (!reset) {
      finish_by_zero(c, &zones[i], first + i);
      i++;
      continue;
    }
    /* One reset (TRIM) per run of wanted zones. */
    while (j < count && want[j])
      j++;
    if (znbdc_reset_zones(c->h, first + i, j - i) == -1)
      die(EXIT_REFUSED, "%s: %s", zone_desc(&zones[i], first + i),
          znbdc_error(c->h));
    i = j;
  }

  after = read_zones(c, first, count);
  for (i = 0; i < count; i++) {
    unsigned expect = reset ? ZNBD_ZONE_COND_EMPTY : ZNBD_ZONE_COND_FULL;
    if (!want[i] || after[i].cond == expect)
      continue;
    /* base:allocation shows a READONLY zone as FULL, and reset-all skips
     * READONLY zones (null_blk): not an error for --all there. */
    if (!exact && c->o->all && after[i].cond == ZNBD_ZONE_COND_FULL) {
      fprintf(stderr,
              "%s: note: %s still looks FULL: READONLY zones are not reset, "
              "and base:allocation cannot tell them from FULL ones\n",
              progname, zone_desc(&after[i], first + i));
      continue;
    }
    die(EXIT_REFUSED, "%s: still %s after %s (%s)",
        zone_desc(&after[i], first + i), znbd_zone_cond_name(after[i].cond),
        c->cmd->name,
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

static int
cmd_reset(struct ctx *c)
{
  return znbdc_has_control(c->h) ? op_control(c, ZNBD_ZONE_OP_RESET)
                                 : op_nbd(c, true);
}

static int
cmd_finish(struct ctx *c)
{
  return znbdc_has_control(c->h) ? op_control(c, ZNBD_ZONE_OP_FINISH)
                                 : op_nbd(c, false);
}

static int
cmd_open(struct ctx *c)
{
  return op_control(c, ZNBD_ZONE_OP_OPEN);
}

static int
cmd_close(struct ctx *c)
{
  return op_control(c, ZNBD_ZONE_OP_CLOSE);
}

/* All of --file (or stdin), at most ZNBD_CONTROL_APPEND_MAX bytes. */
static char *
read_data(const char *file, uint64_t *len)
{
  FILE *f = file && strcmp(file, "-") != 0 ? fopen(file, "rb") : stdin;
  char *buf = malloc(ZNBD_CONTROL_APPEND_MAX + 1);
  size_t n = 0, r;

  if (f == NULL)
    die(EXIT_USAGE, "--file %s: %s", file, strerror(errno));
  if (buf == NULL)
    die(EXIT_USAGE, "out of memory");
  while (n <= ZNBD_CONTROL_APPEND_MAX &&
         (r = fread(buf + n, 1, ZNBD_CONTROL_APPEND_MAX + 1 - n, f)) > 0)
    n += r;
  if (ferror(f))
    die(EXIT_USAGE, "reading %s: %s", file ? file : "standard input",
        strerror(errno));
  if (n > ZNBD_CONTROL_APPEND_MAX)
    die(EXIT_USAGE, "%s: more than %u bytes: one append carries at most that",
        file ? file : "standard input", ZNBD_CONTROL_APPEND_MAX);
  if (n == 0)
    die(EXIT_USAGE, "%s: no data to append", file ? file : "standard input");
  if (f != stdin)
    fclose(f);
  *len = n;
  return buf;
}

static int
cmd_append(struct ctx *c)
{
  uint32_t first, count;
  uint64_t len, off;
  char *data;

  if (c->o->have_count && c->o->count != 1)
    die(EXIT_USAGE, "append: --count must be 1 (one zone)");
  zone_range(c, &first, &count);
  data = read_data(c->o->file, &len);
  if (znbdc_append(c->h, first, data, len, &off) == -1) {
    struct znbd_zone_info z;
    znbdc_zone_geom(c->g, first, &z);
    die(errno == EPROTO || errno == ECONNRESET ? EXIT_USAGE : EXIT_REFUSED,
        "%s: append of %" PRIu64 " bytes refused: %s", zone_desc(&z, first),
        len, znbdc_error(c->h));
  }
  free(data);
  printf("%" PRIu64 "\n", off);
  return 0;
}

/* Print the text after "ok " of the reply REST: KEY=VALUE words one per
 * line ("key: value") or as a JSON object; other text as it is, or as
 * {"reply": ...}.  badblocks list's ranges come one per line / as an
 * array of "START-END" strings (512-byte sectors). */
static void
print_json_string(const char *s, size_t n)
{
  putchar('"');
  for (size_t i = 0; i < n && s[i]; i++) {
    if (s[i] == '"' || s[i] == '\\')
      putchar('\\');
    if ((unsigned char)s[i] < 0x20)
      printf("\\u%04x", s[i]);
    else
      putchar(s[i]);
  }
  putchar('"');
}

static bool
all_digits(const char *s, size_t n)
{
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

static void
print_reply(const struct ctx *c, const char *rest)
{
  bool json = c->o->json, list = strcmp(c->cmd->name, "badblocks") == 0;
  bool first = true;
  const char *p = rest;

  if (!list && strchr(rest, '=') == NULL) {
    if (json) {
      printf("{\"reply\": ");
      print_json_string(rest, strlen(rest));
      printf("}\n");
    } else if (*rest)
      printf("%s\n", rest);
    return;
  }
  if (json)
    printf(list ? "{\"units\": \"512-byte sectors\", \"badblocks\": [" : "{");
  while (*p) {
    size_t n = strcspn(p, list ? "," : " ");
    const char *eq = memchr(p, '=', n);
    if (n == 0) {
      p++;
      continue;
    }
    if (list && json) {
      printf("%s", first ? "" : ", ");
      print_json_string(p, n);
    } else if (list) {
      printf("%.*s\n", (int)n, p);
    } else if (eq && json) {
      size_t k = (size_t)(eq - p), vn = n - k - 1;
      printf("%s\n  ", first ? "" : ",");
      print_json_string(p, k);
      printf(": ");
      if (all_digits(eq + 1, vn))
        printf("%.*s", (int)vn, eq + 1);
      else
        print_json_string(eq + 1, vn);
    } else if (eq)
      printf("%-16.*s %.*s\n", (int)(eq - p) + 1, p, (int)(n - (eq - p) - 1),
             eq + 1);
    else
      printf("%.*s\n", (int)n, p);
    first = false;
    p += n;
  }
  if (json)
    printf(list ? "]}\n" : "\n}\n");
}

/* A control request with no data: COMMAND and its words as they are
 * (man/znbd-zone-control.pod checks them); the answer is printed, a
 * refusal exits 1 with the server's reason. */
static int
cmd_request(struct ctx *c)
{
  size_t len = strlen(c->cmd->name) + 1;
  char *req, *p;
  const char *reply;

  for (int i = 0; i < c->nwords; i++)
    len += strlen(c->words[i]) + 1;
  req = p = malloc(len);
  if (req == NULL)
    die(EXIT_USAGE, "out of memory");
  p = stpcpy(p, c->cmd->name);
  for (int i = 0; i < c->nwords; i++) {
    *p++ = ' ';
    p = stpcpy(p, c->words[i]);
  }
  if (znbdc_control(c->h, req) == -1)
    die(errno == EPROTO || errno == ECONNRESET || errno == ENOTSUP
            ? EXIT_USAGE
            : EXIT_REFUSED,
        "%s refused: %s", req, znbdc_error(c->h));
  free(req);
  reply = znbdc_reply(c->h) + 2;
  while (*reply == ' ')
    reply++;
  print_reply(c, reply);
  return 0;
}

static int
cmd_readonly(struct ctx *c)
{
  return op_control(c, ZNBD_ZONE_OP_SET_READONLY);
}

static int
cmd_offline(struct ctx *c)
{
  return op_control(c, ZNBD_ZONE_OP_SET_OFFLINE);
}

static int
cmd_online(struct ctx *c)
{
  return op_control(c, ZNBD_ZONE_OP_ONLINE);
}

/* ---- map ------------------------------------------------------------ */

#define MAP_WIDTH 64       /* cells per row */
#define MAP_MAX_CELLS 4096 /* beyond: one cell per group of zones */

/* The condition a group of zones shows: the rarest, most telling one. */
static int
map_rank(const struct znbd_zone_info *z)
{
  if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
    return 0;
  switch (z->cond) {
  case ZNBD_ZONE_COND_EMPTY:
    return 1;
  case ZNBD_ZONE_COND_FULL:
    return 2;
  case ZNBD_ZONE_COND_CLOSED:
    return 3;
  case ZNBD_ZONE_COND_IMP_OPEN:
    return 4;
  case ZNBD_ZONE_COND_EXP_OPEN:
    return 5;
  case ZNBD_ZONE_COND_READONLY:
    return 6;
  default: /* OFFLINE */
    return 7;
  }
}

/* Per rank: plain letter, ANSI colour, legend name, SVG colour. */
static const struct {
  char letter;
  const char *colour, *name, *rgb;
} map_style[8] = {
    {'#', "\033[37;100m", "conventional", "#808080"},
    {'.', "\033[37;40m", "EMPTY", "#202020"},
    {'F', "\033[30;42m", "FULL", "#2e9e44"},
    {'C', "\033[30;46m", "CLOSED", "#2aa1b3"},
    {'i', "\033[30;43m", "IMP_OPEN", "#d9a400"},
    {'e', "\033[30;45m", "EXP_OPEN", "#b34db3"},
    {'R', "\033[30;47m", "READONLY", "#d0d0d0"},
    {'X', "\033[37;41m", "OFFLINE", "#c82828"},
};

/* The fill glyphs, by eighths of the written part of the capacity. */
static const char *const map_fill[9] = {" ",      "\u2581", "\u2582",
                                        "\u2583", "\u2584", "\u2585",
                                        "\u2586", "\u2587", "\u2588"};

/* Cell CELL of GROUP zones from ZONES[0..N): its rank, and its fill in
 * eighths of the capacity (8 for conventional zones). */
static int
map_cell(const struct znbd_zone_info *zones, uint32_t n, uint32_t group,
         uint32_t cell, unsigned *eighths)
{
  uint32_t a = cell * group, b = a + group < n ? a + group : n;
  uint64_t cap = 0, written = 0;
  int rank = 0;

  for (uint32_t i = a; i < b; i++) {
    const struct znbd_zone_info *z = &zones[i];
    int r = map_rank(z);
    if (r > rank || i == a)
      rank = r;
    cap += z->capacity;
    if (z->cond == ZNBD_ZONE_COND_FULL || z->cond == ZNBD_ZONE_COND_READONLY)
      written += z->capacity;
    else if (z->wp != ZNBD_WP_INVALID)
      written += z->wp - z->start;
  }
  *eighths =
      rank == 0 || cap == 0 ? 8 : (unsigned)((written * 8 + cap - 1) / cap);
  if (*eighths > 8)
    *eighths = 8;
  return rank;
}

/* The map as an SVG picture in FILE: 12x12 cells, the fill as the part
 * of the cell coloured from the bottom, a title with the header. */
static void
write_svg(const struct ctx *c, const struct znbd_zone_info *zones,
          const char *file)
{
  const struct znbdc_geom *g = c->g;
  uint32_t n = g->nr_zones, group = (n + MAP_MAX_CELLS - 1) / MAP_MAX_CELLS;
  uint32_t cells = (n + group - 1) / group;
  uint32_t rows = (cells + MAP_WIDTH - 1) / MAP_WIDTH;
  FILE *f = fopen(file, "w");

  if (f == NULL)
    die(EXIT_USAGE, "--svg %s: %s", file, strerror(errno));
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
          "height=\"%u\">\n<title>%" PRIu32 " zones, one cell per %" PRIu32
          " zone(s)</title>\n",
          MAP_WIDTH * 12 + 8, rows * 12 + 8 + 8 * 14 + 8, n, group);
  for (uint32_t cell = 0; cell < cells; cell++) {
    unsigned e;
    int rank = map_cell(zones, n, group, cell, &e);
    unsigned x = 4 + (cell % MAP_WIDTH) * 12, y = 4 + (cell / MAP_WIDTH) * 12;
    fprintf(f,
            "<rect x=\"%u\" y=\"%u\" width=\"11\" height=\"11\" "
            "fill=\"#101010\" stroke=\"%s\"><title>zone %" PRIu32
            " %s</title></rect>\n",
            x, y, map_style[rank].rgb, cell * group, map_style[rank].name);
    if (e)
      fprintf(f,
              "<rect x=\"%u\" y=\"%.3f\" width=\"11\" height=\"%.3f\" "
              "fill=\"%s\"/>\n",
              x, y + 11 - 11.0 * e / 8, 11.0 * e / 8, map_style[rank].rgb);
  }
  for (int r = 0; r < 8; r++) {
    unsigned y = 8 + rows * 12 + r * 14;
    fprintf(f,
            "<rect x=\"4\" y=\"%u\" width=\"11\" height=\"11\" "
            "fill=\"%s\"/><text x=\"20\" y=\"%u\" font-size=\"11\" "
            "font-family=\"monospace\">%s</text>\n",
            y, map_style[r].rgb, y + 10, map_style[r].name);
  }
  fprintf(f, "</svg>\n");
  if (fclose(f) == EOF)
    die(EXIT_USAGE, "--svg %s: %s", file, strerror(errno));
}

static void
draw_map(const struct ctx *c, const struct znbd_zone_info *zones, bool colour)
{
  const struct znbdc_geom *g = c->g;
  uint32_t n = g->nr_zones, group = (n + MAP_MAX_CELLS - 1) / MAP_MAX_CELLS;
  uint32_t cells = (n + group - 1) / group, open = 0, active = 0;

  for (uint32_t i = 0; i < n; i++) {
    unsigned cd = zones[i].cond;
    open += cd == ZNBD_ZONE_COND_IMP_OPEN || cd == ZNBD_ZONE_COND_EXP_OPEN;
    active += cd == ZNBD_ZONE_COND_IMP_OPEN || cd == ZNBD_ZONE_COND_EXP_OPEN ||
              cd == ZNBD_ZONE_COND_CLOSED;
  }
  printf("%" PRIu32 " zones, one cell per %" PRIu32 " zone%s; open %" PRIu32
         "/max_open %" PRIu32 ", active %" PRIu32 "/max_active %" PRIu32
         " (0: no limit)\n",
         n, group, group == 1 ? "" : "s", open, g->max_open, active,
         g->max_active);
  for (uint32_t cell = 0; cell < cells; cell++) {
    unsigned eighths;
    int rank = map_cell(zones, n, group, cell, &eighths);

    if (cell % MAP_WIDTH == 0)
      printf("%s%8" PRIu32 " ", cell ? "\n" : "", cell * group);
    if (colour)
      printf("%s%s", map_style[rank].colour, map_fill[eighths]);
    else
      putchar(map_style[rank].letter);
  }
  printf("%s\n", colour ? "\033[0m" : "");
  for (int r = 0; r < 8; r++) {
    if (colour)
      printf("%s%s\033[0m %s%s", map_style[r].colour, map_fill[8],
             map_style[r].name, r == 7 ? "\n" : "  ");
    else
      printf("%c %s%s", map_style[r].letter, map_style[r].name,
             r == 7 ? "\n" : "  ");
  }
  if (colour)
    printf("fill: the written part of each cell's zone capacity\n");
}

static int
cmd_map(struct ctx *c)
{
  bool colour = isatty(STDOUT_FILENO) && getenv("NO_COLOR") == NULL;

  for (;;) {
    struct znbd_zone_info *zones = read_zones(c, 0, c->g->nr_zones);
    if (c->o->svg) {
      write_svg(c, zones, c->o->svg);
      free(zones);
      return 0;
    }
    if (c->o->watch)
      printf("\033[H\033[2J");
    draw_map(c, zones, colour);
    free(zones);
    if (!c->o->watch)
      return 0;
    if (fflush(stdout) == EOF)
      die(EXIT_USAGE, "writing the output: %s", strerror(errno));
    if (c->o->interval > 0) {
      struct timespec ts = {
          (time_t)c->o->interval,
          (long)((c->o->interval - (double)(time_t)c->o->interval) * 1e9)};
      nanosleep(&ts, NULL);
    }
  }
}

/* The subcommands: usage and dispatch both come from this table. */
static const struct command commands[] = {
    {"report", cmd_report, CMD_JSON,
     "report zones (blkzone format, 512-byte sectors)"},
    {"map", cmd_map, 0,
     "one cell per zone (or group), by condition and fill; --watch [S]"},
    {"capacity", cmd_capacity, 0, "sum of zone capacities in sectors"},
    {"reset", cmd_reset, CMD_ZONES | CMD_ALL | CMD_START,
     "reset zones (write pointer to zone start)"},
    {"finish", cmd_finish, CMD_ZONES | CMD_ALL | CMD_START,
     "finish zones (make them FULL)"},
    {"open", cmd_open, CMD_ZONES | CMD_ALL | CMD_START | CMD_CONTROL,
     "open zones explicitly (needs --control)"},
    {"close", cmd_close, CMD_ZONES | CMD_ALL | CMD_START | CMD_CONTROL,
     "close zones (needs --control)"},
    {"append", cmd_append, CMD_ZONES | CMD_START | CMD_CONTROL | CMD_FILE,
     "append --file (default stdin) to the zone at --offset; prints the "
     "byte offset written (needs --control)"},
    {"readonly", cmd_readonly, CMD_ZONES | CMD_START | CMD_CONTROL,
     "make zones READONLY (fault injection; again: EMPTY; needs --control)"},
    {"offline", cmd_offline, CMD_ZONES | CMD_START | CMD_CONTROL,
     "make zones OFFLINE (fault injection; again: EMPTY; needs --control)"},
    {"online", cmd_online, CMD_ZONES | CMD_START | CMD_CONTROL,
     "bring READONLY/OFFLINE zones back to EMPTY (needs --control)"},
    {"stats", cmd_request, CMD_JSON | CMD_CONTROL,
     "zone counts, counters and faults that fired (needs --control)"},
    {"badblocks", cmd_request, CMD_JSON | CMD_CONTROL | CMD_WORDS,
     "add LIST | del LIST | list: bad 512-byte sectors, e.g. 100-107,2048 "
     "(needs --control)"},
    {"drop-reply", cmd_request, CMD_JSON | CMD_CONTROL | CMD_WORDS,
     "[every N [KINDS] | off]: lose every N-th reply (needs --control)"},
    {"power-cut", cmd_request, CMD_JSON | CMD_CONTROL | CMD_WORDS,
     "[after N]: lose unflushed writes now or after N writes "
     "(write_cache=true; needs --control)"},
};
#define NR_COMMANDS (sizeof commands / sizeof commands[0])

static void __attribute__((noreturn)) usage(int status)
{
  FILE *f = status ? stderr : stdout;

  fprintf(f,
          "Usage: %s COMMAND [WORDS...] [options] URI\n"
          "Report and manage the zones of a zoned NBD export.\n\n"
          "Commands:\n",
          progname);
  for (size_t i = 0; i < NR_COMMANDS; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\nOptions:\n"
             "  -o, --offset BYTES   zone holding BYTES (report) or starting "
             "there (others)\n"
             "  -c, --count N        at most N zones\n"
             "  -a, --all            every zone (reset/finish/open/close)\n"
             "  -j, --json           report as JSON\n"
             "  -C, --control PATH   use the zone control socket at PATH\n"
             "  -f, --file FILE      data to append ('-': standard input)\n"
             "  -v, --verbose        say where the zone state comes from\n"
             "  -w, --watch[=S]      map: redraw every S seconds (default 1)\n"
             "  -S, --svg FILE       map: write the map to FILE as SVG\n"
             "  -V, --version        print the version and exit\n"
             "  -h, --help           this help\n\n"
             "Exit status: 0 done, 1 refused, 2 usage or connection error.\n"
             "See nbdzone(1).\n");
  exit(status);
}

static const struct command *
find_command(const char *name)
{
  for (size_t i = 0; i < NR_COMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
  return NULL;
}

/* Refuse options the command does not take, before connecting. */
static void
check_options(const struct command *cmd, const struct opts *o)
{
  if (o->json && !(cmd->flags & CMD_JSON))
    die(EXIT_USAGE, "--json is for report, stats, badblocks, drop-reply and "
                    "power-cut");
  if ((o->watch || o->svg) && strcmp(cmd->name, "map") != 0)
    die(EXIT_USAGE, "--watch and --svg are for map only");
  if (o->watch && o->svg)
    die(EXIT_USAGE, "--svg writes one picture: not with --watch");
  if (o->file && !(cmd->flags & CMD_FILE))
    die(EXIT_USAGE, "--file is for append only");
  if (o->all && !(cmd->flags & CMD_ALL))
    die(EXIT_USAGE, "--all is for reset, finish, open and close");
  if (o->all && (o->have_offset || o->have_count))
    die(EXIT_USAGE, "--all and --offset/--count exclude each other");
  if ((cmd->flags & CMD_ZONES) && !o->all && !o->have_offset && !o->have_count)
    die(EXIT_USAGE, "%s: give the zones (--offset BYTES [--count N])%s",
        cmd->name, cmd->flags & CMD_ALL ? " or --all" : "");
  if ((cmd->flags & CMD_CONTROL) && o->control == NULL)
    die(EXIT_USAGE,
        "%s: NBD has no command to %s a zone; give the zone control socket "
        "with --control PATH (zone_control= on the server)",
        cmd->name, cmd->name);
}

/* Parse the options into *O (exiting on --help, --version and bad
 * options); returns the index of COMMAND in ARGV. */
static int
parse_options(int argc, char **argv, struct opts *o)
{
  static const struct option longopts[] = {
      {"offset", required_argument, NULL, 'o'},
      {"count", required_argument, NULL, 'c'},
      {"all", no_argument, NULL, 'a'},
      {"json", no_argument, NULL, 'j'},
      {"control", required_argument, NULL, 'C'},
      {"file", required_argument, NULL, 'f'},
      {"verbose", no_argument, NULL, 'v'},
      {"watch", optional_argument, NULL, 'w'},
      {"svg", required_argument, NULL, 'S'},
      {"version", no_argument, NULL, 'V'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int opt;

  while ((opt = getopt_long(argc, argv, "o:c:ajC:f:vw::S:Vh", longopts,
                            NULL)) != -1) {
    switch (opt) {
    case 'o':
      if (znbd_parse_size(optarg, &o->offset) == -1)
        die(EXIT_USAGE, "--offset '%s': expected bytes (suffixes k m g t...)",
            optarg);
      o->have_offset = true;
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
      o->count = (uint32_t)v;
      o->have_count = true;
      break;
    }
    case 'a':
      o->all = true;
      break;
    case 'j':
      o->json = true;
      break;
    case 'C':
      o->control = optarg;
      break;
    case 'f':
      o->file = optarg;
      break;
    case 'v':
      o->verbose = true;
      break;
    case 'S':
      o->svg = optarg;
      break;
    case 'w': {
      char *end;
      o->watch = true;
      o->interval = 1;
      if (optarg) {
        o->interval = strtod(optarg, &end);
        if (*end || end == optarg || !(o->interval >= 0 && o->interval < 1e6))
          die(EXIT_USAGE, "--watch '%s': expected seconds >= 0", optarg);
      }
      break;
    }
    case 'V':
      printf("%s %s\n", progname, PACKAGE_VERSION);
      exit(0);
    case 'h':
      usage(0);
    default:
      usage(EXIT_USAGE);
    }
  }
  return optind;
}

/* Say that the export at URI is not zoned (and, with --json, give
 * scripts an empty report on stdout). */
static void
report_not_zoned(const struct ctx *c)
{
  fprintf(stderr, "%s: %s: not a zoned export\n", progname, uri);
  if (c->o->json) {
    print_json_uri();
    printf("  \"zoned\": false,\n  \"units\": \"512-byte sectors\",\n"
           "  \"size\": %" PRIu64 ",\n  \"zones\": []\n}\n",
           c->g->size / SECTOR);
  }
}

int
main(int argc, char **argv)
{
  struct opts o = {0};
  struct ctx c = {0};
  char err[512];
  int r;

  optind = parse_options(argc, argv, &o);
  /* getopt_long moved COMMAND and URI behind the options. */
  if (argc - optind < 2) {
    fprintf(stderr, "%s: expected COMMAND and URI\n", progname);
    usage(EXIT_USAGE);
  }
  c.cmd = find_command(argv[optind]);
  if (c.cmd == NULL) {
    fprintf(stderr, "%s: unknown command '%s' (", progname, argv[optind]);
    for (size_t i = 0; i < NR_COMMANDS; i++)
      fprintf(stderr, "%s%s", i ? ", " : "", commands[i].name);
    fprintf(stderr, ")\n");
    return EXIT_USAGE;
  }
  uri = argv[argc - 1];
  c.words = argv + optind + 1;
  c.nwords = argc - optind - 2;
  if (c.nwords && !(c.cmd->flags & CMD_WORDS))
    die(EXIT_USAGE, "%s takes no words besides the URI (got '%s')", c.cmd->name,
        c.words[0]);
  c.o = &o;
  check_options(c.cmd, &o);

  c.h = znbdc_open(uri, o.control, err, sizeof err);
  if (c.h == NULL)
    die(EXIT_USAGE, "%s", err);
  c.g = znbdc_geom(c.h);
  /* Plain control requests (badblocks, stats) serve any device. */
  if (c.cmd->handler != cmd_request && !c.g->zoned) {
    report_not_zoned(&c);
    znbdc_close(c.h);
    return EXIT_REFUSED;
  }
  if (c.cmd->handler != cmd_request && znbdc_source(c.h) == ZNBDC_SRC_NONE)
    die(EXIT_USAGE,
        "%s: the server offers neither x-znbd:zone nor base:allocation; give "
        "--control PATH",
        uri);
  if (o.verbose)
    fprintf(stderr, "%s: zone state from %s%s\n", progname,
            znbdc_source_name(znbdc_source(c.h)),
            znbdc_has_control(c.h) && (c.cmd->flags & CMD_ZONES)
                ? ", operations through the control socket"
                : "");

  r = c.cmd->handler(&c);
  znbdc_close(c.h);
  if (fflush(stdout) == EOF || ferror(stdout))
    die(EXIT_USAGE, "writing the output: %s", strerror(errno));
  return r;
}
