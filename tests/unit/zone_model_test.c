/* Randomized model-based test of lib/zone.c.
 *
 * A reference model, written plainly from doc/zone-rules.md
 * (one array of zones, a request applied piece by piece on a copy that is
 * kept only if every piece passes), runs the same random operations as the
 * engine: writes (mostly at the wp, some spanning zones, some anywhere),
 * appends, open/close/finish/reset, reset-all, readonly/offline/online.
 * After every operation the errno, every zone's condition and wp and the
 * EO/IO/CL counters must agree.  Several fixed seeds on several small
 * geometries (limits, npo2 zone sizes, smaller last zone, capacity <
 * size); the seed and step are printed on a mismatch.
 *
 * Then the same model drives lib/dev.c (zoned device from params, 512-byte
 * blocks) with data: random bytes and zeros written, appends, NBD trims,
 * zone ops and fault zones; after each request the zones it touched are
 * read back and compared byte for byte with the model's image (and every
 * zone every 512 requests), per zone_read_past_wp (zero, ones, error);
 * stats, report and base:allocation extents must agree too.
 *
 * Usage: zone_model_test [OPS-PER-RUN [SEED]]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/dev.h"
#include "znbd/params.h"
#include "zone.h"
#include "testdev.h"
#include "dev_unfenced.h"

#define BLK 512ULL
#define MAXZ 32

enum { M_NOT_WP, M_EMPTY, M_IOPEN, M_EOPEN, M_CLOSED, M_FULL, M_RO, M_OFF };

struct mzone {
  int conv, cond;
  uint64_t start, len, cap, wp; /* wp meaningless when invalid */
};

struct model {
  struct mzone z[MAXZ];
  unsigned n, nconv, max_open, max_active;
  unsigned io, eo, cl, cursor;
  uint64_t size, zsize;
};

/* ---- reference model ---------------------------------------------- */

static void
m_init(struct model *m, const struct znbd_zone_geometry *g)
{
  uint64_t cap = g->zone_capacity ? g->zone_capacity : g->zone_size;
  unsigned seq;

  memset(m, 0, sizeof *m);
  m->size = g->size;
  m->zsize = g->zone_size;
  m->n = (unsigned)((g->size + g->zone_size - 1) / g->zone_size);
  m->nconv = g->nr_conv < m->n ? g->nr_conv : m->n - 1;
  seq = m->n - m->nconv;
  m->max_active = g->max_active < seq ? g->max_active : 0;
  m->max_open = g->max_open;
  if (m->max_active != 0 && m->max_open > m->max_active)
    m->max_open = m->max_active;
  if (m->max_open >= seq)
    m->max_open = 0;
  m->cursor = m->nconv;
  for (unsigned i = 0; i < m->n; i++) {
    struct mzone *z = &m->z[i];
    z->start = i * g->zone_size;
    z->len = g->size - z->start;
    if (z->len > g->zone_size)
      z->len = g->zone_size;
    z->conv = i < m->nconv;
    z->cap = z->conv ? z->len : (cap < z->len ? cap : z->len);
    z->cond = z->conv ? M_NOT_WP : g->zone_full ? M_FULL : M_EMPTY;
    z->wp = g->zone_full ? z->start + z->len : z->start;
  }
}

static unsigned *
m_counter(struct model *m, int cond)
{
  if (cond == M_IOPEN)
    return &m->io;
  if (cond == M_EOPEN)
    return &m->eo;
  if (cond == M_CLOSED)
    return &m->cl;
  return NULL;
}

/* Change a zone's condition and keep the counters right. */
static void
m_set(struct model *m, unsigned i, int cond)
{
  unsigned *a = m_counter(m, m->z[i].cond), *b = m_counter(m, cond);
  if (a)
    (*a)--;
  if (b)
    (*b)++;
  m->z[i].cond = cond;
}

/* Make room for one more open zone; may close the round-robin victim. */
static int
m_open_room(struct model *m)
{
  if (m->max_open == 0 || m->io + m->eo < m->max_open)
    return 0;
  if (m->io == 0)
    return ETOOMANYREFS;
  unsigned i = m->cursor;
  for (unsigned k = 0; k < m->n - m->nconv; k++) {
    if (i >= m->n)
      i = m->nconv;
    if (m->z[i].cond == M_IOPEN) {
      m_set(m, i, m->z[i].wp == m->z[i].start ? M_EMPTY : M_CLOSED);
      m->cursor = i + 1 >= m->n ? m->nconv : i + 1;
      return 0;
    }
    i++;
  }
  return ETOOMANYREFS; /* not reached: io > 0 */
}

static int
m_resources(struct model *m, int cond)
{
  if (cond == M_EMPTY && m->max_active != 0 &&
      m->io + m->eo + m->cl >= m->max_active)
    return EOVERFLOW;
  return m_open_room(m);
}

static int
m_write(struct model *m, uint64_t off, uint64_t len)
{
  struct model save = *m;

  if (len == 0 || off >= m->size || len > m->size - off)
    return EINVAL;
  while (len > 0) {
    unsigned i = (unsigned)(off / m->zsize);
    struct mzone *z = &m->z[i];
    uint64_t n = z->start + z->len - off;
    int e;
    if (n > len)
      n = len;
    if (!z->conv) {
      if (z->cond == M_FULL || z->cond == M_RO || z->cond == M_OFF ||
          off != z->wp || off + n > z->start + z->cap) {
        *m = save;
        return EIO;
      }
      if (z->cond == M_EMPTY || z->cond == M_CLOSED) {
        e = m_resources(m, z->cond);
        if (e) {
          *m = save;
          return e;
        }
        m_set(m, i, M_IOPEN);
      }
      z->wp += n;
      if (z->wp == z->start + z->cap)
        m_set(m, i, M_FULL);
    }
    off += n;
    len -= n;
  }
  return 0;
}

static int
m_append(struct model *m, unsigned i, uint64_t len, uint64_t *off)
{
  struct mzone *z = &m->z[i];
  if (z->conv || z->cond == M_FULL || z->cond == M_RO || z->cond == M_OFF ||
      len > z->start + z->cap - z->wp)
    return EIO;
  *off = z->wp;
  return m_write(m, z->wp, len);
}

static int
m_mgmt(struct model *m, enum znbd_zone_op op, unsigned i)
{
  struct mzone *z = &m->z[i];
  int e, fault;

  if (z->conv)
    return EIO;
  if (op == ZNBD_ZONE_OP_SET_READONLY || op == ZNBD_ZONE_OP_SET_OFFLINE) {
    fault = op == ZNBD_ZONE_OP_SET_READONLY ? M_RO : M_OFF;
    if (z->cond == fault) {
      m_set(m, i, M_EMPTY);
      z->wp = z->start;
    } else {
      /* null_set_zone_cond(): finish first, result ignored; a CLOSED
       * zone whose finish failed stays counted as closed. */
      if (z->cond != M_RO && z->cond != M_OFF)
        m_mgmt(m, ZNBD_ZONE_OP_FINISH, i);
      z->cond = fault;
    }
    return 0;
  }
  if (op == ZNBD_ZONE_OP_ONLINE) {
    if (z->cond != M_RO && z->cond != M_OFF)
      return EIO;
    m_set(m, i, M_EMPTY);
    z->wp = z->start;
    return 0;
  }
  if (z->cond == M_RO || z->cond == M_OFF)
    return EIO;
  switch (op) {
  case ZNBD_ZONE_OP_OPEN:
    if (z->cond == M_EOPEN)
      return 0;
    if (z->cond == M_FULL)
      return EIO;
    if (z->cond == M_EMPTY || z->cond == M_CLOSED) {
      e = m_resources(m, z->cond);
      if (e)
        return e;
    }
    m_set(m, i, M_EOPEN);
    return 0;
  case ZNBD_ZONE_OP_CLOSE:
    if (z->cond == M_CLOSED)
      return 0;
    if (z->cond != M_IOPEN && z->cond != M_EOPEN)
      return EIO;
    m_set(m, i, z->wp == z->start ? M_EMPTY : M_CLOSED);
    return 0;
  case ZNBD_ZONE_OP_FINISH:
    if (z->cond == M_FULL)
      return 0;
    if (z->cond == M_EMPTY || z->cond == M_CLOSED) {
      e = m_resources(m, z->cond);
      if (e)
        return e;
    }
    m_set(m, i, M_FULL);
    z->wp = z->start + z->len;
    return 0;
  case ZNBD_ZONE_OP_RESET:
    m_set(m, i, M_EMPTY);
    z->wp = z->start;
    return 0;
  default:
    return EINVAL;
  }
}

static void
m_reset_all(struct model *m)
{
  for (unsigned i = m->nconv; i < m->n; i++)
    if (m->z[i].cond != M_EMPTY && m->z[i].cond != M_RO &&
        m->z[i].cond != M_OFF) {
      m_set(m, i, M_EMPTY);
      m->z[i].wp = m->z[i].start;
    }
}

/* ---- engine side ---------------------------------------------------- */

static int
e_write(struct znbd_zones *zs, uint64_t off, uint64_t len)
{
  struct znbd_zone_txn t;
  uint32_t first, last;
  int e = 0;

  if (len == 0 || off >= zs->size || len > zs->size - off)
    return znbd_zones_write_prepare(zs, &t, off, len) ? errno : -1;
  first = znbd_zones_zone_no(zs, off);
  last = znbd_zones_zone_no(zs, off + len - 1);
  znbd_zones_lock_range(zs, first, last);
  if (znbd_zones_write_prepare(zs, &t, off, len) == 0)
    znbd_zones_write_commit(&t);
  else
    e = errno;
  znbd_zones_unlock_range(zs, first, last);
  return e;
}

static int
e_append(struct znbd_zones *zs, unsigned i, uint64_t len, uint64_t *off)
{
  struct znbd_zone_txn t;
  int e = 0;

  pthread_mutex_lock(&zs->zone[i].lock);
  if (znbd_zones_append_prepare(zs, &t, i, len, off) == 0)
    znbd_zones_write_commit(&t);
  else
    e = errno;
  pthread_mutex_unlock(&zs->zone[i].lock);
  return e;
}

static int
m_cond_of(enum znbd_zone_cond c)
{
  switch (c) {
  case ZNBD_ZONE_COND_NOT_WP:
    return M_NOT_WP;
  case ZNBD_ZONE_COND_EMPTY:
    return M_EMPTY;
  case ZNBD_ZONE_COND_IMP_OPEN:
    return M_IOPEN;
  case ZNBD_ZONE_COND_EXP_OPEN:
    return M_EOPEN;
  case ZNBD_ZONE_COND_CLOSED:
    return M_CLOSED;
  case ZNBD_ZONE_COND_FULL:
    return M_FULL;
  case ZNBD_ZONE_COND_READONLY:
    return M_RO;
  case ZNBD_ZONE_COND_OFFLINE:
    return M_OFF;
  }
  return -1;
}

/* ---- the run ---------------------------------------------------------- */

static uint64_t rng;

static uint64_t
rnd(void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static uint64_t
below(uint64_t n)
{
  return n ? rnd() % n : 0;
}

static const char *op_names[] = {"write",   "append", "open",      "close",
                                 "finish",  "reset",  "reset-all", "readonly",
                                 "offline", "online"};

static int
compare(const struct model *m, struct znbd_zones *zs, char *why, size_t n)
{
  uint32_t io, eo, cl;

  znbd_zones_counters(zs, &io, &eo, &cl);
  if (io != m->io || eo != m->eo || cl != m->cl) {
    snprintf(why, n, "counters IO/EO/CL %u/%u/%u, model %u/%u/%u", io, eo, cl,
             m->io, m->eo, m->cl);
    return -1;
  }
  for (unsigned i = 0; i < m->n; i++) {
    const struct mzone *a = &m->z[i];
    const struct znbd_zone *b = &zs->zone[i];
    int valid = !a->conv && a->cond != M_RO && a->cond != M_OFF;
    if (m_cond_of(b->cond) != a->cond) {
      snprintf(why, n, "zone %u cond 0x%x, model %d", i, b->cond, a->cond);
      return -1;
    }
    if (valid ? b->wp != a->wp : b->wp != ZNBD_WP_INVALID) {
      snprintf(why, n, "zone %u wp %" PRIu64 ", model %" PRIu64 "%s", i, b->wp,
               a->wp, valid ? "" : " (invalid)");
      return -1;
    }
    if (b->start != a->start || b->len != a->len || b->capacity != a->cap) {
      snprintf(why, n, "zone %u geometry differs", i);
      return -1;
    }
  }
  return 0;
}

static int
run(const char *name, const struct znbd_zone_geometry *g, uint64_t seed,
    unsigned long ops)
{
  struct model m;
  struct znbd_zones zs;
  char why[200];
  unsigned long step;
  unsigned long errs[8] = {0};

  rng = seed * 0x9E3779B97F4A7C15ULL + 1;
  m_init(&m, g);
  if (znbd_zones_init(&zs, g) < 0) {
    perror("znbd_zones_init");
    return -1;
  }
  if (compare(&m, &zs, why, sizeof why) < 0) {
    fprintf(stderr, "FAIL %s seed %" PRIu64 " at start: %s\n", name, seed, why);
    return -1;
  }
  for (step = 0; step < ops; step++) {
    unsigned kind, i = m.nconv + (unsigned)below(m.n - m.nconv);
    uint64_t off = 0, len = 0, moff = 0, eoff = 0;
    int me, ee;
    uint64_t r = below(100);

    if (r < 55) { /* write */
      kind = 0;
      uint64_t w = below(10);
      struct mzone *z = &m.z[i];
      uint64_t room = z->start + z->cap - z->wp;
      if (w < 6 && z->cond != M_RO && z->cond != M_OFF) {
        off = z->wp; /* at the wp, sometimes past the capacity */
        len = (1 + below(room / BLK + 2)) * BLK;
        if (off >= m.size) /* FULL after finish at the device end */
          off = z->start;
      } else if (w < 7 && z->cond != M_RO && z->cond != M_OFF) {
        off = z->wp < m.size ? z->wp : z->start; /* spanning */
        len = room + (1 + below(m.zsize / BLK)) * BLK;
      } else if (w < 8 && m.nconv) { /* conventional, may run on */
        off = below(m.z[m.nconv].start / BLK) * BLK;
        len = (1 + below(m.zsize * 2 / BLK)) * BLK;
      } else { /* anywhere */
        off = below(m.size / BLK) * BLK;
        len = (1 + below(m.zsize / BLK)) * BLK;
      }
      if (below(500) == 0)
        len = 0; /* EINVAL */
      me = m_write(&m, off, len);
      ee = e_write(&zs, off, len);
    } else if (r < 65) {
      kind = 1;
      if (below(20) == 0)
        i = (unsigned)below(m.n); /* conventional too */
      len = (1 + below(m.z[i].cap / BLK / 2 + 1)) * BLK;
      me = m_append(&m, i, len, &moff);
      ee = e_append(&zs, i, len, &eoff);
      if (!me && !ee && moff != eoff) {
        fprintf(stderr,
                "FAIL %s seed %" PRIu64 " step %lu: append at %" PRIu64
                ", model %" PRIu64 "\n",
                name, seed, step, eoff, moff);
        return -1;
      }
    } else if (r < 96) {
      static const enum znbd_zone_op ops4[] = {
          ZNBD_ZONE_OP_OPEN, ZNBD_ZONE_OP_CLOSE, ZNBD_ZONE_OP_FINISH,
          ZNBD_ZONE_OP_RESET};
      unsigned k = (unsigned)below(4);
      kind = 2 + k;
      if (below(20) == 0)
        i = (unsigned)below(m.n);
      me = m_mgmt(&m, ops4[k], i);
      ee = znbd_zones_mgmt(&zs, ops4[k], i, NULL, NULL) ? errno : 0;
    } else if (r < 97) {
      kind = 6;
      m_reset_all(&m);
      me = 0;
      ee = znbd_zones_mgmt(&zs, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES, NULL, NULL)
               ? errno
               : 0;
    } else {
      static const enum znbd_zone_op ops3[] = {ZNBD_ZONE_OP_SET_READONLY,
                                               ZNBD_ZONE_OP_SET_OFFLINE,
                                               ZNBD_ZONE_OP_ONLINE};
      unsigned k = (unsigned)below(3);
      kind = 7 + k;
      if (below(10) == 0)
        i = (unsigned)below(m.n);
      me = m_mgmt(&m, ops3[k], i);
      ee = znbd_zones_mgmt(&zs, ops3[k], i, NULL, NULL) ? errno : 0;
    }
    if (me != ee) {
      for (unsigned q = 0; q < m.n; q++)
        fprintf(stderr,
                "  zone %u: model cond %d wp %" PRIu64
                ", engine cond 0x%x wp %" PRIu64 "\n",
                q, m.z[q].cond, m.z[q].wp, zs.zone[q].cond, zs.zone[q].wp);
      fprintf(stderr,
              "FAIL %s seed %" PRIu64 " step %lu: %s zone %u off %" PRIu64
              " len %" PRIu64 ": errno %d (%s), model %d (%s)\n",
              name, seed, step, op_names[kind], i, off, len, ee, strerror(ee),
              me, strerror(me));
      return -1;
    }
    if (compare(&m, &zs, why, sizeof why) < 0) {
      fprintf(stderr,
              "FAIL %s seed %" PRIu64 " step %lu after %s zone %u off %" PRIu64
              " len %" PRIu64 ": %s\n",
              name, seed, step, op_names[kind], i, off, len, why);
      return -1;
    }
    switch (me) {
    case 0:
      errs[0]++;
      break;
    case EIO:
      errs[1]++;
      break;
    case ETOOMANYREFS:
      errs[2]++;
      break;
    case EOVERFLOW:
      errs[3]++;
      break;
    default:
      errs[4]++;
    }
  }
  printf("ok   %-34s seed %-3" PRIu64 " %lu ops: %lu ok, %lu EIO, "
         "%lu ETOOMANYREFS, %lu EOVERFLOW, %lu other\n",
         name, seed, ops, errs[0], errs[1], errs[2], errs[3], errs[4]);
  znbd_zones_destroy(&zs);
  return 0;
}

/* ---- through lib/dev.c: the same model plus the data ------------------ */

/* Bytes a read of zone I returns from the data (the rest is past the wp). */
static uint64_t
m_data_end(const struct model *m, unsigned i)
{
  const struct mzone *z = &m->z[i];
  if (z->conv)
    return z->start + z->len;
  if (z->cond == M_RO)
    return z->start + z->cap;
  return z->wp < z->start + z->cap ? z->wp : z->start + z->cap;
}

/* Zero the image of zone I (reset, back to EMPTY). */
static void
img_zero_zone(const struct model *m, uint8_t *img, unsigned i)
{
  memset(img + m->z[i].start, 0, m->z[i].len);
}

static int
dev_check_zone(const struct model *m, struct znbd_dev *d, const uint8_t *img,
               unsigned i, int past, uint8_t *buf, char *why, size_t n)
{
  const struct mzone *z = &m->z[i];
  int r = znbd_dev_read(d, buf, z->len, z->start, 0);
  int e = r ? errno : 0;

  if (z->cond == M_OFF || (past < 0 && m_data_end(m, i) < z->start + z->len)) {
    if (e != EIO) {
      snprintf(why, n, "zone %u read: errno %d, want EIO", i, e);
      return -1;
    }
    return 0;
  }
  if (e) {
    snprintf(why, n, "zone %u read failed: %s", i, strerror(e));
    return -1;
  }
  uint64_t dend = m_data_end(m, i) - z->start;
  if (memcmp(buf, img + z->start, dend) != 0) {
    snprintf(why, n, "zone %u data below the wp differs", i);
    return -1;
  }
  for (uint64_t k = dend; k < z->len; k++)
    if (buf[k] != (past ? 0xff : 0)) {
      snprintf(why, n, "zone %u byte %" PRIu64 " past the wp is 0x%02x", i, k,
               buf[k]);
      return -1;
    }
  return 0;
}

struct ext_chk {
  const struct model *m;
  const uint8_t *img;
  uint64_t next;
  int past_flags, bad;
};

static int
ext_cb(void *opaque, uint64_t off, uint64_t len, uint32_t flags)
{
  struct ext_chk *c = opaque;
  const struct model *m = c->m;
  unsigned i = (unsigned)(off / m->zsize);
  const struct mzone *z = &m->z[i];

  if (off != c->next || len == 0 || off + len > z->start + z->len)
    c->bad = 1; /* not contiguous, or crossing a zone */
  c->next = off + len;
  if (z->conv) {
    if (flags == 3) {
      for (uint64_t k = 0; k < len; k++)
        if (c->img[off + k])
          c->bad = 1; /* a "zero" extent with data */
    } else if (flags != 0)
      c->bad = 1;
    return 0;
  }
  uint64_t dend = m_data_end(m, i);
  if (z->cond == M_OFF)
    c->bad |= flags != 1;
  else if (off + len <= dend)
    c->bad |= flags != 0;
  else if (off >= dend)
    c->bad |= flags != (uint32_t)c->past_flags;
  else
    c->bad = 1;
  return 0;
}

static struct znbd_dev *
dev_make(const char *const *kv, struct znbd_zone_geometry *g, int *past)
{
  struct znbd_params p;

  test_params(&p, kv);
  *g = (struct znbd_zone_geometry){.size = p.size,
                                   .zone_size = p.zone_size,
                                   .zone_capacity = p.zone_capacity,
                                   .nr_conv = p.zone_nr_conv,
                                   .max_open = p.zone_max_open,
                                   .max_active = p.zone_max_active,
                                   .zone_full = p.zone_full};
  *past = p.zone_read_past_wp == ZNBD_READ_PAST_WP_ONES    ? 1
          : p.zone_read_past_wp == ZNBD_READ_PAST_WP_ERROR ? -1
                                                           : 0;
  return test_dev(&p);
}

static int
run_dev(const char *name, const char *const *kv, uint64_t seed,
        unsigned long ops)
{
  struct znbd_zone_geometry g;
  struct model m;
  int past;
  struct znbd_dev *d = dev_make(kv, &g, &past);
  uint8_t *img, *buf, *rbuf;
  char why[200];
  unsigned long step, nops[5] = {0};
  int fail = 0;

  rng = seed * 0x9E3779B97F4A7C15ULL + 7;
  m_init(&m, &g);
  img = calloc(1, m.size);
  buf = malloc(m.size);
  rbuf = malloc(m.size);
  if (!img || !buf || !rbuf)
    abort();

  for (step = 0; step < ops && !fail; step++) {
    unsigned i = m.nconv + (unsigned)below(m.n - m.nconv), k, lo, hi;
    uint64_t off = 0, len = 0, r = below(100), moff = 0, doff = 0;
    int me = 0, de = 0;
    const char *what;
    struct model before = m;

    if (r < 55) {
      struct mzone *z = &m.z[i];
      uint64_t room = z->start + z->cap - z->wp;
      what = "write";
      if (below(10) < 7 && z->cond != M_RO && z->cond != M_OFF &&
          z->wp < m.size) {
        off = z->wp;
        len = (1 + below(room / BLK + 1)) * BLK;
        if (below(4) == 0)
          len += room; /* spanning */
      } else {
        off = below(m.size / BLK) * BLK;
        len = (1 + below(m.zsize / BLK)) * BLK;
      }
      if (len > m.size - off)
        len = m.size - off;
      bool zeros = below(5) == 0;
      for (uint64_t b = 0; b < len; b++)
        buf[b] = zeros ? 0 : (uint8_t)rnd();
      me = m_write(&m, off, len);
      de = znbd_dev_write(d, zeros ? NULL : buf, len, off, 0) ? errno : 0;
      if (me == 0)
        memcpy(img + off, buf, len);
      nops[0]++;
    } else if (r < 62) {
      what = "append";
      off = m.z[i].start;
      len = (1 + below(m.z[i].cap / BLK / 2 + 1)) * BLK;
      for (uint64_t b = 0; b < len; b++)
        buf[b] = (uint8_t)rnd();
      me = m_append(&m, i, len, &moff);
      de = znbd_dev_append(d, buf, len, m.z[i].start, &doff) ? errno : 0;
      if (me == 0) {
        memcpy(img + moff, buf, len);
        if (doff != moff) {
          snprintf(why, sizeof why,
                   "append wrote at %" PRIu64 ", want %" PRIu64, doff, moff);
          fail = 1;
        }
      }
      nops[1]++;
    } else if (r < 72) {
      /* NBD TRIM: whole sequential zones reset, partial ones left alone,
       * conventional ranges zeroed, the whole device a reset-all. */
      what = "trim";
      if (below(20) == 0)
        off = 0, len = m.size;
      else {
        off = below(m.size / BLK) * BLK;
        len = (1 + below(2 * m.zsize / BLK)) * BLK;
        if (below(2))
          off = m.z[i].start, len = m.zsize * (1 + below(2));
        if (len > m.size - off)
          len = m.size - off;
      }
      de = znbd_dev_trim(d, len, off) ? errno : 0;
      for (uint64_t p = off; p < off + len;) {
        unsigned zi = (unsigned)(p / m.zsize);
        struct mzone *z = &m.z[zi];
        uint64_t e =
            z->start + z->len < off + len ? z->start + z->len : off + len;
        if (z->conv)
          memset(img + p, 0, e - p);
        else if (p == z->start && e == z->start + z->len && z->cond != M_RO &&
                 z->cond != M_OFF) {
          m_set(&m, zi, M_EMPTY);
          z->wp = z->start;
          img_zero_zone(&m, img, zi);
        }
        p = e;
      }
      nops[2]++;
    } else {
      static const enum znbd_zone_op all[] = {
          ZNBD_ZONE_OP_OPEN,         ZNBD_ZONE_OP_CLOSE,
          ZNBD_ZONE_OP_FINISH,       ZNBD_ZONE_OP_RESET,
          ZNBD_ZONE_OP_SET_READONLY, ZNBD_ZONE_OP_SET_OFFLINE,
          ZNBD_ZONE_OP_ONLINE};
      enum znbd_zone_op op = all[below(r < 97 ? 4 : 7)];
      what = op_names[op == ZNBD_ZONE_OP_SET_READONLY  ? 7
                      : op == ZNBD_ZONE_OP_SET_OFFLINE ? 8
                      : op == ZNBD_ZONE_OP_ONLINE      ? 9
                                                       : 2 + (unsigned)op];
      if (below(30) == 0) {
        what = "reset-all";
        m_reset_all(&m);
        for (k = m.nconv; k < m.n; k++)
          if (before.z[k].cond != m.z[k].cond && m.z[k].cond == M_EMPTY)
            img_zero_zone(&m, img, k);
        de =
            znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES) ? errno : 0;
      } else {
        me = m_mgmt(&m, op, i);
        de = znbd_dev_zone_op(d, op, i) ? errno : 0;
        /* Data goes when a zone is reset or comes back EMPTY. */
        if (me == 0 && m.z[i].cond == M_EMPTY &&
            (op == ZNBD_ZONE_OP_RESET || before.z[i].cond == M_RO ||
             before.z[i].cond == M_OFF))
          img_zero_zone(&m, img, i);
      }
      nops[3]++;
    }
    if (!fail && me != de) {
      snprintf(why, sizeof why, "errno %d (%s), model %d (%s)", de,
               strerror(de), me, strerror(me));
      fail = 1;
    }
    /* Check the zones the request touched, everything now and then. */
    lo = (unsigned)((len ? off : m.z[i].start) / m.zsize);
    hi = (unsigned)(((len ? off + len : m.z[i].start + 1) - 1) / m.zsize);
    if (step % 512 == 0 || strcmp(what, "reset-all") == 0 ||
        (strcmp(what, "trim") == 0 && len == m.size))
      lo = 0, hi = m.n - 1;
    for (k = lo; k <= hi && !fail; k++)
      fail = dev_check_zone(&m, d, img, k, past, rbuf, why, sizeof why) < 0;
    if (!fail) {
      struct znbd_dev_stats st;
      znbd_dev_stats(d, &st);
      if (st.nr_imp_open != m.io || st.nr_exp_open != m.eo ||
          st.nr_closed != m.cl) {
        snprintf(why, sizeof why, "stats IO/EO/CL %u/%u/%u, model %u/%u/%u",
                 st.nr_imp_open, st.nr_exp_open, st.nr_closed, m.io, m.eo,
                 m.cl);
        fail = 1;
      }
    }
    if (!fail) {
      struct znbd_zone_info zi[MAXZ];
      uint32_t nz = znbd_dev_report(d, 0, MAXZ, zi);
      for (k = 0; k < nz && !fail; k++) {
        const struct mzone *z = &m.z[k];
        int valid = !z->conv && z->cond != M_RO && z->cond != M_OFF;
        if (m_cond_of(zi[k].cond) != z->cond ||
            (valid ? zi[k].wp != z->wp : zi[k].wp != ZNBD_WP_INVALID)) {
          snprintf(why, sizeof why, "report zone %u cond 0x%x wp %" PRIu64, k,
                   zi[k].cond, zi[k].wp);
          fail = 1;
        }
      }
      if (!fail && nz != m.n) {
        snprintf(why, sizeof why, "report gave %u zones", nz);
        fail = 1;
      }
    }
    if (!fail && step % 64 == 0) {
      struct ext_chk c = {&m, img, 0, past == 0 ? 3 : 1, 0};
      if (znbd_dev_extents(d, 0, m.size, ext_cb, &c) != 0 || c.bad ||
          c.next != m.size) {
        snprintf(why, sizeof why, "extents disagree with the model");
        fail = 1;
      }
    }
    if (fail)
      fprintf(stderr,
              "FAIL dev %s seed %" PRIu64 " step %lu: %s zone %u off %" PRIu64
              " len %" PRIu64 ": %s\n",
              name, seed, step, what, i, off, len, why);
  }
  if (!fail)
    printf("ok   dev %-30s seed %-3" PRIu64 " %lu ops (%lu writes, %lu "
           "appends, %lu trims, %lu zone ops), data checked\n",
           name, seed, ops, nops[0], nops[1], nops[2], nops[3]);
  znbd_dev_free(d);
  free(img);
  free(buf);
  free(rbuf);
  return fail ? -1 : 0;
}

int
main(int argc, char **argv)
{
  unsigned long ops = argc > 1 ? strtoul(argv[1], NULL, 0) : 100000;
  const struct {
    const char *name;
    struct znbd_zone_geometry g;
  } cfg[] = {
      {"po2, 2 conv, no limits",
       {.size = 10 * 8 * BLK, .zone_size = 8 * BLK, .nr_conv = 2}},
      {"po2, open 3 active 5",
       {.size = 12 * 8 * BLK,
        .zone_size = 8 * BLK,
        .nr_conv = 1,
        .max_open = 3,
        .max_active = 5}},
      {"po2, open 2 (no active limit)",
       {.size = 8 * 8 * BLK, .zone_size = 8 * BLK, .max_open = 2}},
      {"npo2 6 blk, last 4 blk, open 2 act 3",
       {.size = (9 * 6 + 4) * BLK,
        .zone_size = 6 * BLK,
        .nr_conv = 1,
        .max_open = 2,
        .max_active = 3}},
      {"npo2 10 blk, capacity 7, open 3",
       {.size = 8 * 10 * BLK,
        .zone_size = 10 * BLK,
        .zone_capacity = 7 * BLK,
        .nr_conv = 1,
        .max_open = 3}},
      {"po2, capacity 5 of 8, zone_full, act 4",
       {.size = 9 * 8 * BLK,
        .zone_size = 8 * BLK,
        .zone_capacity = 5 * BLK,
        .max_active = 4,
        .max_open = 4,
        .zone_full = true}},
  };
  static const uint64_t seeds[] = {1, 2, 3, 42};
  int fail = 0;

  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    if (argc > 2) {
      fail |= run(cfg[c].name, &cfg[c].g, strtoull(argv[2], NULL, 0), ops);
      continue;
    }
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
      fail |= run(cfg[c].name, &cfg[c].g, seeds[s], ops);
  }

  /* Through lib/dev.c, with data: 512-byte blocks, pipelining off (a
   * write ahead of the wp fails at once, as the model expects). */
  static const char *const dev_a[] = {"size",
                                      "40K",
                                      "zone_size",
                                      "4K",
                                      "zone_nr_conv",
                                      "2",
                                      "pipeline_zoned_writes",
                                      "false",
                                      NULL};
  static const char *const dev_b[] = {"size",
                                      "29K",
                                      "zone_size",
                                      "3K",
                                      "zone_nr_conv",
                                      "1",
                                      "zone_max_open",
                                      "2",
                                      "zone_max_active",
                                      "3",
                                      "pipeline_zoned_writes",
                                      "false",
                                      "zone_read_past_wp",
                                      "ones",
                                      NULL};
  static const char *const dev_c[] = {"size",
                                      "40K",
                                      "zone_size",
                                      "5K",
                                      "zone_capacity",
                                      "3584",
                                      "zone_nr_conv",
                                      "1",
                                      "zone_max_open",
                                      "3",
                                      "pipeline_zoned_writes",
                                      "false",
                                      "zone_read_past_wp",
                                      "error",
                                      NULL};
  const struct {
    const char *name;
    const char *const *kv;
  } devs[] = {{"po2 4K, 2 conv", dev_a},
              {"npo2 3K, last 2K, open 2 act 3, ones", dev_b},
              {"npo2 5K cap 3.5K, open 3, error", dev_c}};
  unsigned long dev_ops = ops;
  for (size_t c = 0; c < sizeof devs / sizeof devs[0]; c++) {
    if (argc > 2) {
      fail |= run_dev(devs[c].name, devs[c].kv, strtoull(argv[2], NULL, 0),
                      dev_ops);
      continue;
    }
    for (size_t s = 0; s < 2; s++)
      fail |= run_dev(devs[c].name, devs[c].kv, seeds[s], dev_ops);
  }

  /* The same on the directory store (dir=, a new directory per run):
   * the zone rules and the bytes must not depend on the store. */
  const char *tmp = getenv("TMPDIR");
  char base[4096];
  snprintf(base, sizeof base, "%s/zone_model_test.XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  for (size_t c = 0; c < sizeof devs / sizeof devs[0]; c++) {
    const char *kv[32];
    char path[4200], name[200];
    size_t n = 0;
    for (; devs[c].kv[n]; n++)
      kv[n] = devs[c].kv[n];
    snprintf(path, sizeof path, "%s/%zu", base, c);
    kv[n++] = "dir";
    kv[n++] = path;
    /* The RAM run's block size (dir= defaults to the file system's). */
    bool bs = false;
    for (size_t k = 0; k + 1 < n; k += 2)
      bs |= !strcmp(kv[k], "blocksize");
    if (!bs) {
      kv[n++] = "blocksize";
      kv[n++] = "512";
    }
    kv[n] = NULL;
    snprintf(name, sizeof name, "dir=, %s", devs[c].name);
    fail |= run_dev(name, kv, argc > 2 ? strtoull(argv[2], NULL, 0) : seeds[0],
                    dev_ops / 4);
  }
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", base);
  return fail ? 1 : 0;
}
