/* libznbdclient: zones of a znbd export from a client (client/znbdclient.h).
 *
 * NBD through libnbd only; zone operations and append through the zone
 * control socket's text protocol (man/znbd-zone-control.pod).  Bytes
 * everywhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "znbd/control.h"
#include "znbd/zonectx.h"
#include "err.h"
#include "znbdclient.h"

struct znbdc {
  struct nbd_handle *nbd;
  char *uri;
  struct znbdc_geom g;
  enum znbdc_source src;
  pid_t pid; /* the process that connected */
  /* control socket */
  char *ctl_path;
  int ctl_fd; /* -1: none */
  FILE *ctl_in;
  char *line; /* last reply line */
  size_t line_cap;
  char err[512];
};

static const char *const source_names[] = {"x-znbd:zone", "control",
                                           "base:allocation", "none"};

/* Set H's message and errno E; returns -1. */
static int __attribute__((format(printf, 3, 4)))
fail(struct znbdc *h, int e, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(h->err, sizeof h->err, fmt, ap);
  va_end(ap);
  errno = e;
  return -1;
}

/* errno of a libnbd failure, EIO when libnbd gives none. */
static int
nbd_errno(void)
{
  int e = nbd_get_errno();
  return e ? e : EIO;
}

/* ---- geometry ------------------------------------------------------- */

/* "KEY=decimal" in WORD: 1 and *OUT, 0 another key, -1 a bad number. */
static int
kv_u64(const char *word, const char *key, uint64_t *out)
{
  size_t n = strlen(key);
  char *end;

  if (strncmp(word, key, n) != 0 || word[n] != '=')
    return 0;
  errno = 0;
  *out = strtoull(word + n + 1, &end, 10);
  if (errno || *end || end == word + n + 1 || word[n + 1] == '-')
    return -1;
  return 1;
}

/* Parse "znbd model=... size=... zone_size=..." (dev.h) into H->g. */
static int
parse_description(struct znbdc *h, const char *desc, uint64_t nbd_size)
{
  static const char *const keys[] = {"size",       "zone_size", "zone_capacity",
                                     "nr_zones",   "nr_conv",   "max_open",
                                     "max_active", "blocksize", NULL};
  uint64_t v[8] = {0, 0, 0, 0, 0, 0, 0, 512};
  bool have[8] = {false};
  struct znbdc_geom *g = &h->g;
  char *copy, *w, *save = NULL;
  bool have_model = false;

  memset(g, 0, sizeof *g);
  g->size = nbd_size;
  g->blocksize = 512;
  if (desc == NULL || strncmp(desc, "znbd ", 5) != 0)
    return 0;
  copy = strdup(desc);
  if (copy == NULL)
    return fail(h, ENOMEM, "out of memory");
  for (w = strtok_r(copy + 5, " \t\n", &save); w;
       w = strtok_r(NULL, " \t\n", &save)) {
    if (strncmp(w, "model=", 6) == 0) {
      have_model = true;
      g->zoned = strcmp(w + 6, "none") != 0;
      continue;
    }
    for (int k = 0; keys[k]; k++) {
      int r = kv_u64(w, keys[k], &v[k]);
      if (r == -1) {
        fail(h, EPROTO, "%s: bad '%s' in the export description", h->uri, w);
        free(copy);
        return -1;
      }
      if (r == 1) {
        have[k] = true;
        break;
      }
    } /* other keys: newer servers; ignored */
  }
  free(copy);
  if (have[0] && v[0] != nbd_size)
    return fail(h, EPROTO,
                "%s: the description says size=%" PRIu64
                " but the export has %" PRIu64 " bytes",
                h->uri, v[0], nbd_size);
  if (v[7] == 0 || v[7] > UINT32_MAX)
    return fail(h, EPROTO, "%s: bad blocksize in the description: %s", h->uri,
                desc);
  g->blocksize = (uint32_t)v[7];
  if (!have_model || !g->zoned) {
    g->zoned = false;
    return 0;
  }
  g->zone_size = v[1];
  g->zone_capacity = v[2] ? v[2] : v[1];
  if (!have[1] || !have[3] || v[1] == 0 || v[1] % 512 || v[3] == 0 ||
      v[3] > UINT32_MAX || v[3] != (g->size + v[1] - 1) / v[1] || v[4] > v[3] ||
      g->zone_capacity > v[1] || g->zone_capacity % 512 || v[5] > UINT32_MAX ||
      v[6] > UINT32_MAX)
    return fail(h, EPROTO,
                "%s: inconsistent zone geometry in the description: %s", h->uri,
                desc);
  g->nr_zones = (uint32_t)v[3];
  g->nr_conv = (uint32_t)v[4];
  g->max_open = (uint32_t)v[5];
  g->max_active = (uint32_t)v[6];
  return 0;
}

void
znbdc_zone_geom(const struct znbdc_geom *g, uint32_t i,
                struct znbd_zone_info *z)
{
  z->start = (uint64_t)i * g->zone_size;
  z->len =
      g->size - z->start < g->zone_size ? g->size - z->start : g->zone_size;
  if (i < g->nr_conv) {
    z->type = ZNBD_ZONE_TYPE_CONVENTIONAL;
    z->cond = ZNBD_ZONE_COND_NOT_WP;
    z->capacity = z->len;
  } else {
    z->type = ZNBD_ZONE_TYPE_SEQWRITE_REQ;
    z->cond = ZNBD_ZONE_COND_EMPTY;
    z->capacity = z->len < g->zone_capacity ? z->len : g->zone_capacity;
  }
  z->wp = ZNBD_WP_INVALID;
}

uint32_t
znbdc_zone_of(const struct znbdc_geom *g, uint64_t off)
{
  if (!g->zoned || off >= g->size)
    return UINT32_MAX;
  return (uint32_t)(off / g->zone_size);
}

/* ---- the control socket --------------------------------------------- */

static int
control_connect(struct znbdc *h, const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  int fd2;

  if (strlen(path) >= sizeof a.sun_path)
    return fail(h, ENAMETOOLONG, "control socket %s: path too long", path);
  memcpy(a.sun_path, path, strlen(path) + 1);
  h->ctl_path = strdup(path);
  if (h->ctl_path == NULL)
    return fail(h, ENOMEM, "out of memory");
  h->ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (h->ctl_fd == -1 ||
      connect(h->ctl_fd, (struct sockaddr *)&a, sizeof a) == -1)
    return fail(h, errno, "control socket %s: %s", path, strerror(errno));
  fd2 = fcntl(h->ctl_fd, F_DUPFD_CLOEXEC, 0);
  if (fd2 == -1 || (h->ctl_in = fdopen(fd2, "r")) == NULL) {
    if (fd2 != -1)
      keep_errno_close(fd2);
    return fail(h, errno, "control socket %s: %s", path, strerror(errno));
  }
  return 0;
}

static int
send_all(int fd, const void *buf, size_t len)
{
  const char *p = buf;

  while (len > 0) {
    ssize_t r = send(fd, p, len, MSG_NOSIGNAL);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    len -= (size_t)r;
  }
  return 0;
}

/* The errno a reply's "error ENAME" stands for (EIO if unknown). */
static int
errno_of(const char *name)
{
  static const int known[] = {EINVAL, EIO,      ETOOMANYREFS, EOVERFLOW,
                              ENOMEM, ENOSPC,   EPERM,        EAGAIN,
                              ENOENT, ETIMEDOUT};
  size_t n = strcspn(name, " ");

  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    const char *k = znbd_errno_name(known[i]);
    if (k && strlen(k) == n && strncmp(k, name, n) == 0)
      return known[i];
  }
  return EIO;
}

/* Read one reply line into h->line (no newline). */
static int
read_line(struct znbdc *h)
{
  ssize_t r = getline(&h->line, &h->line_cap, h->ctl_in);

  if (r <= 0)
    return fail(h, ECONNRESET, "control socket %s: the server closed it",
                h->ctl_path);
  if (h->line[r - 1] == '\n')
    h->line[r - 1] = '\0';
  return 0;
}

/* Send the request line REQ (and LEN bytes of DATA after it), read the
 * status line.  0 for "ok ...", -1 with errno (the server's refusal, its
 * reply in the message) otherwise. */
static int
control_request(struct znbdc *h, const char *req, const void *data,
                uint64_t len)
{
  char *msg;

  if (h->ctl_fd == -1)
    return fail(h, ENOTSUP,
                "%s: no zone control socket (give its path; zone_control= "
                "on the server)",
                h->uri);
  if (asprintf(&msg, "%s\n", req) == -1)
    return fail(h, ENOMEM, "out of memory");
  if (send_all(h->ctl_fd, msg, strlen(msg)) == -1 ||
      (len && send_all(h->ctl_fd, data, len) == -1)) {
    free(msg); /* keeps errno */
    return fail(h, errno, "control socket %s: send: %s", h->ctl_path,
                strerror(errno));
  }
  free(msg);
  if (read_line(h) == -1)
    return -1;
  if (strncmp(h->line, "ok", 2) == 0 && (h->line[2] == ' ' || !h->line[2]))
    return 0;
  if (strncmp(h->line, "error ", 6) == 0)
    return fail(h, errno_of(h->line + 6), "%s", h->line);
  return fail(h, EPROTO, "control socket %s: unexpected reply '%s'",
              h->ctl_path, h->line);
}

static unsigned
cond_from_name(const char *s)
{
  for (unsigned c = 0; c < 16; c++)
    if (strcmp(znbd_zone_cond_name(c), s) == 0)
      return c;
  return 0xff;
}

static int
report_control(struct znbdc *h, uint32_t first, uint32_t count,
               struct znbd_zone_info *zones)
{
  char req[64], wp[32], type[32], cond[32];
  unsigned long n;
  uint32_t i, idx;

  snprintf(req, sizeof req, "report %" PRIu32 " %" PRIu32, first, count);
  if (control_request(h, req, NULL, 0) == -1)
    return -1;
  if (sscanf(h->line, "ok %lu", &n) != 1 || n != count)
    return fail(h, EPROTO,
                "control socket %s: asked for %" PRIu32 " zones, got '%s'",
                h->ctl_path, count, h->line);
  for (i = 0; i < count; i++) {
    struct znbd_zone_info *z = &zones[i];

    if (read_line(h) == -1)
      return -1;
    if (sscanf(h->line,
               "zone=%" SCNu32 " start=%" SCNu64 " len=%" SCNu64 " cap=%" SCNu64
               " wp=%31s type=%31s cond=%31s",
               &idx, &z->start, &z->len, &z->capacity, wp, type, cond) != 7 ||
        idx != first + i ||
        (strcmp(wp, "-") != 0 && sscanf(wp, "%" SCNu64, &z->wp) != 1))
      return fail(h, EPROTO, "control socket %s: bad report line: %s",
                  h->ctl_path, h->line);
    if (strcmp(wp, "-") == 0)
      z->wp = ZNBD_WP_INVALID;
    z->type = strcmp(type, "CONVENTIONAL") == 0 ? ZNBD_ZONE_TYPE_CONVENTIONAL
                                                : ZNBD_ZONE_TYPE_SEQWRITE_REQ;
    z->cond = cond_from_name(cond);
  }
  return 0;
}

/* ---- zone state over NBD: BLOCK_STATUS ----------------------------- */

struct bs_state {
  const struct znbdc_geom *g;
  const char *context;
  struct znbd_zone_info *zones; /* zones [first, first + count) */
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

  if (strcmp(metacontext, s->context) != 0)
    return 0;
  for (size_t k = 0; k + 1 < nr; k += 2) {
    uint64_t len = entries[k], end = off + len;
    uint32_t flags = entries[k + 1];

    if (len == 0)
      break;
    for (uint64_t zi = off / s->g->zone_size;
         zi < s->g->nr_zones && zi * s->g->zone_size < end; zi++) {
      struct znbd_zone_info *z;
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

/* Fill ZONES (geometry already in) from CONTEXT. */
static int
report_nbd(struct znbdc *h, const char *context, uint32_t first, uint32_t count,
           struct znbd_zone_info *zones)
{
  struct bs_state s = {.g = &h->g,
                       .context = context,
                       .zones = zones,
                       .first = first,
                       .count = count};
  uint64_t off = zones[0].start,
           end = zones[count - 1].start + zones[count - 1].len;
  bool zonectx = strcmp(context, ZNBD_ZONECTX_NAME) == 0;
  int r = -1;

  s.seen = calloc(count, sizeof *s.seen);
  s.wp_set = calloc(count, sizeof *s.wp_set);
  if (!s.seen || !s.wp_set) {
    fail(h, ENOMEM, "out of memory");
    goto out;
  }
  while (off < end) {
    uint64_t len =
        end - off < ZNBDC_MAX_REQUEST ? end - off : ZNBDC_MAX_REQUEST;

    s.next = off;
    if (nbd_block_status(
            h->nbd, len, off,
            (nbd_extent_callback){.callback = extent_cb, .user_data = &s},
            0) == -1) {
      fail(h, nbd_errno(), "%s: BLOCK_STATUS %s at %" PRIu64 ": %s", h->uri,
           context, off, nbd_get_error());
      goto out;
    }
    if (s.next <= off) {
      fail(h, EPROTO, "%s: the server sent no %s extents at offset %" PRIu64,
           h->uri, context, off);
      goto out;
    }
    off = s.next;
  }

  for (uint32_t i = 0; i < count; i++) {
    struct znbd_zone_info *z = &zones[i];

    if (!s.seen[i]) {
      fail(h, EPROTO, "%s: no %s extent for zone %" PRIu32, h->uri, context,
           first + i);
      goto out;
    }
    if (zonectx) {
      if (!s.wp_set[i]) /* no extent at or above the wp */
        z->wp = z->start + z->len;
      if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
        z->capacity = z->len;
      continue;
    }
    /* base:allocation: the condition from the wp alone, as after a power
     * cycle (doc/zone-rules.md, power-cycle): EMPTY, FULL, else CLOSED. */
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
      continue;
    if (!s.wp_set[i] || z->wp >= z->start + z->capacity)
      z->cond = ZNBD_ZONE_COND_FULL;
    else if (z->wp == z->start)
      z->cond = ZNBD_ZONE_COND_EMPTY;
    else
      z->cond = ZNBD_ZONE_COND_CLOSED;
  }
  r = 0;
out:
  free(s.seen);
  free(s.wp_set);
  return r;
}

/* ---- public --------------------------------------------------------- */

struct znbdc *
znbdc_open(const char *uri, const char *control, char *err, size_t errlen)
{
  struct znbdc *h = calloc(1, sizeof *h);
  char *desc = NULL;
  int64_t size;

  if (h == NULL || (h->uri = strdup(uri)) == NULL) {
    free(h);
    snprintf(err, errlen, "out of memory");
    errno = ENOMEM;
    return NULL;
  }
  h->ctl_fd = -1;
  h->src = ZNBDC_SRC_NONE;
  h->pid = getpid();
  h->nbd = nbd_create();
  /* URI parameters naming local files (tls-psk-file=, tls-certificates=
   * of an nbds:// URI) are the user's own, as in nbdinfo and nbdcopy. */
  if (h->nbd == NULL || nbd_set_uri_allow_local_file(h->nbd, true) == -1 ||
      nbd_set_full_info(h->nbd, true) == -1 ||
      nbd_add_meta_context(h->nbd, ZNBD_ZONECTX_NAME) == -1 ||
      nbd_add_meta_context(h->nbd, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1) {
    fail(h, nbd_errno(), "%s", nbd_get_error());
    goto fail;
  }
  if (nbd_connect_uri(h->nbd, uri) == -1) {
    fail(h, nbd_errno(), "%s: cannot connect: %s", uri, nbd_get_error());
    goto fail;
  }
  size = nbd_get_size(h->nbd);
  if (size < 0) {
    fail(h, nbd_errno(), "%s: %s", uri, nbd_get_error());
    goto fail;
  }
  desc = nbd_get_export_description(h->nbd); /* NULL if none was sent */
  if (parse_description(h, desc, (uint64_t)size) == -1)
    goto fail;
  if (control && control_connect(h, control) == -1)
    goto fail;
  if (!h->g.zoned)
    h->src = ZNBDC_SRC_NONE;
  else if (nbd_can_meta_context(h->nbd, ZNBD_ZONECTX_NAME) == 1)
    h->src = ZNBDC_SRC_ZONECTX;
  else if (h->ctl_fd != -1)
    h->src = ZNBDC_SRC_CONTROL;
  else if (nbd_can_meta_context(h->nbd, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1)
    h->src = ZNBDC_SRC_ALLOCATION;
  free(desc);
  h->err[0] = '\0';
  return h;

fail:
  set_err(err, errlen, "%s", h->err);
  free(desc);
  znbdc_close(h);
  return NULL;
}

void
znbdc_close(struct znbdc *h)
{
  if (h == NULL)
    return;
  int e = errno;
  if (h->nbd) {
    if (h->pid == getpid() && nbd_aio_is_ready(h->nbd) == 1)
      nbd_shutdown(h->nbd, 0);
    nbd_close(h->nbd);
  }
  if (h->ctl_in)
    fclose(h->ctl_in);
  if (h->ctl_fd != -1)
    close(h->ctl_fd);
  free(h->ctl_path);
  free(h->line);
  free(h->uri);
  free(h);
  errno = e;
}

const char *
znbdc_error(const struct znbdc *h)
{
  return h->err;
}

const char *
znbdc_reply(const struct znbdc *h)
{
  return h->line ? h->line : "";
}

const struct znbdc_geom *
znbdc_geom(const struct znbdc *h)
{
  return &h->g;
}

enum znbdc_source
znbdc_source(const struct znbdc *h)
{
  return h->src;
}

const char *
znbdc_source_name(enum znbdc_source src)
{
  return src <= ZNBDC_SRC_NONE ? source_names[src] : "?";
}

bool
znbdc_has_control(const struct znbdc *h)
{
  return h->ctl_fd != -1;
}

const char *
znbdc_uri(const struct znbdc *h)
{
  return h->uri;
}

struct nbd_handle *
znbdc_nbd(struct znbdc *h)
{
  return h->nbd;
}

/* FIRST..FIRST+COUNT-1 must be zones of a zoned export. */
static int
check_zones(struct znbdc *h, uint32_t first, uint32_t count)
{
  if (!h->g.zoned)
    return fail(h, EINVAL, "%s: not a zoned export", h->uri);
  if (count == 0 || first >= h->g.nr_zones || count > h->g.nr_zones - first)
    return fail(h, EINVAL,
                "%s: zones %" PRIu32 "+%" PRIu32 " beyond the %" PRIu32
                " zones of the export",
                h->uri, first, count, h->g.nr_zones);
  return 0;
}

int
znbdc_report(struct znbdc *h, uint32_t first, uint32_t count,
             struct znbd_zone_info *zones)
{
  int r;

  if (check_zones(h, first, count) == -1)
    return -1;
  for (uint32_t i = 0; i < count; i++)
    znbdc_zone_geom(&h->g, first + i, &zones[i]);
  switch (h->src) {
  case ZNBDC_SRC_ZONECTX:
    r = report_nbd(h, ZNBD_ZONECTX_NAME, first, count, zones);
    break;
  case ZNBDC_SRC_CONTROL:
    r = report_control(h, first, count, zones);
    break;
  case ZNBDC_SRC_ALLOCATION:
    r = report_nbd(h, LIBNBD_CONTEXT_BASE_ALLOCATION, first, count, zones);
    break;
  default:
    return fail(h, ENOTSUP,
                "%s: the server offers neither %s nor base:allocation; give "
                "the zone control socket",
                h->uri, ZNBD_ZONECTX_NAME);
  }
  if (r == -1)
    return -1;
  /* The same from every source: no write pointer where blkzone shows
   * none (the control socket gives FULL zones one). */
  for (uint32_t i = 0; i < count; i++)
    if (zones[i].type != ZNBD_ZONE_TYPE_SEQWRITE_REQ ||
        zones[i].cond == ZNBD_ZONE_COND_FULL ||
        zones[i].cond == ZNBD_ZONE_COND_READONLY ||
        zones[i].cond == ZNBD_ZONE_COND_OFFLINE)
      zones[i].wp = ZNBD_WP_INVALID;
  return (int)count;
}

static const char *
op_word(enum znbd_zone_op op)
{
  static const char *const w[] = {"open",     "close",   "finish", "reset",
                                  "readonly", "offline", "online"};
  return (unsigned)op < sizeof w / sizeof w[0] ? w[op] : "?";
}

int
znbdc_zone_op(struct znbdc *h, enum znbd_zone_op op, uint32_t zone)
{
  char req[64];

  if (zone == ZNBD_ALL_ZONES)
    snprintf(req, sizeof req, "%s all", op_word(op));
  else
    snprintf(req, sizeof req, "%s %" PRIu32, op_word(op), zone);
  return control_request(h, req, NULL, 0);
}

int
znbdc_control(struct znbdc *h, const char *req)
{
  if (strchr(req, '\n') != NULL)
    return fail(h, EINVAL, "control request contains a newline");
  return control_request(h, req, NULL, 0);
}

int
znbdc_reset_zones(struct znbdc *h, uint32_t first, uint32_t count)
{
  uint32_t i, end;

  if (check_zones(h, first, count) == -1)
    return -1;
  end = first + count;
  if (h->ctl_fd != -1) {
    for (i = first; i < end; i++)
      if (znbdc_zone_op(h, ZNBD_ZONE_OP_RESET, i) == -1)
        return -1;
    return 0;
  }
  if (nbd_can_trim(h->nbd) != 1)
    return fail(h, ENOTSUP,
                "%s: the export does not support TRIM, which reset needs "
                "without the zone control socket",
                h->uri);
  /* One TRIM per run of zones, cut at ZNBDC_MAX_REQUEST on zone
   * boundaries; conventional zones are left out (TRIM would free their
   * data). */
  for (i = first < h->g.nr_conv ? h->g.nr_conv : first; i < end;) {
    struct znbd_zone_info z;
    uint64_t start, len = 0;

    znbdc_zone_geom(&h->g, i, &z);
    start = z.start;
    while (i < end && len + z.len <= ZNBDC_MAX_REQUEST) {
      len += z.len;
      if (++i < end)
        znbdc_zone_geom(&h->g, i, &z);
    }
    if (len == 0)
      return fail(h, EINVAL, "%s: zone %" PRIu32 " larger than an NBD request",
                  h->uri, i);
    if (nbd_trim(h->nbd, len, start, 0) == -1)
      return fail(h, nbd_errno(),
                  "%s: reset by TRIM of %" PRIu64 " bytes at %" PRIu64
                  " failed: %s",
                  h->uri, len, start, nbd_get_error());
  }
  return 0;
}

int
znbdc_append(struct znbdc *h, uint32_t zone, const void *buf, uint64_t len,
             uint64_t *off)
{
  char req[64];

  if (len == 0 || len > ZNBD_CONTROL_APPEND_MAX)
    return fail(h, EINVAL,
                "append of %" PRIu64 " bytes: the length must be 1 to %u", len,
                ZNBD_CONTROL_APPEND_MAX);
  snprintf(req, sizeof req, "append %" PRIu32 " %" PRIu64, zone, len);
  if (control_request(h, req, buf, len) == -1)
    return -1;
  if (sscanf(h->line, "ok %" SCNu64, off) != 1)
    return fail(h, EPROTO, "control socket %s: bad append reply '%s'",
                h->ctl_path, h->line);
  return 0;
}
