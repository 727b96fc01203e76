/* znbd: the device (include/znbd/dev.h): a RAM store, optionally with
 * zones on top.
 *
 * Structure: every entry point checks the range and alignment first
 * (check_range: EINVAL), then either serves a plain RAM disk straight from
 * the store, or — for a zoned device — hands the request to the zone
 * engine (lib/zone.c).  The zoned branches are marked "ZONED:".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/dev.h"
#include "znbd/store.h"

struct znbd_dev {
  struct znbd_params p; /* a private copy (own strings) */
  struct znbd_store *store;
};

static void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t errlen, const char *fmt, ...)
{
  if (!err || errlen == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static char *
dup_or_null(const char *s, bool *fail)
{
  if (!s)
    return NULL;
  char *c = strdup(s);
  if (!c)
    *fail = true;
  return c;
}

struct znbd_dev *
znbd_dev_new(const struct znbd_params *p, char *err, size_t errlen)
{
  if (p->size == 0 || (p->blocksize != 512 && p->blocksize != 4096) ||
      p->size % p->blocksize) {
    set_err(err, errlen,
            "device: parameters not finished (size %" PRIu64
            ", blocksize %" PRIu32 ")",
            p->size, p->blocksize);
    errno = EINVAL;
    return NULL;
  }
  if (p->zoned) {
    /* ZONED: replaced by the zone engine's set-up. */
    set_err(err, errlen, "zoned mode: not built yet (use zoned=false)");
    errno = EINVAL;
    return NULL;
  }

  struct znbd_dev *d = calloc(1, sizeof *d);
  if (!d)
    goto nomem;
  d->p = *p;
  bool fail = false;
  d->p.zone_readonly = dup_or_null(p->zone_readonly, &fail);
  d->p.zone_offline = dup_or_null(p->zone_offline, &fail);
  d->p.zone_control = dup_or_null(p->zone_control, &fail);
  if (fail)
    goto nomem;

  d->store = znbd_store_new(p->size, p->memory_backed);
  if (!d->store) {
    int e = errno;
    set_err(err, errlen, "size: cannot map a store of %" PRIu64 " bytes: %s",
            p->size, strerror(e));
    znbd_dev_free(d);
    errno = e;
    return NULL;
  }
  return d;

nomem:
  znbd_dev_free(d);
  set_err(err, errlen, "device: out of memory");
  errno = ENOMEM;
  return NULL;
}

void
znbd_dev_free(struct znbd_dev *d)
{
  if (!d)
    return;
  znbd_store_free(d->store);
  znbd_params_free(&d->p);
  free(d);
}

const struct znbd_params *
znbd_dev_params(const struct znbd_dev *d)
{
  return &d->p;
}

uint64_t
znbd_dev_size(const struct znbd_dev *d)
{
  return d->p.size;
}

uint32_t
znbd_dev_nr_zones(const struct znbd_dev *d)
{
  return d->p.zoned ? d->p.nr_zones : 0;
}

static bool
is_zoned(const struct znbd_dev *d)
{
  return d->p.zoned;
}

/* [off, off+len) inside the device and both ends on a block boundary.
 * A zero length is allowed (and does nothing). */
static int
check_range(const struct znbd_dev *d, uint64_t len, uint64_t off)
{
  if (off > d->p.size || len > d->p.size - off ||
      (off | len) % d->p.blocksize) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

int
znbd_dev_describe(const struct znbd_dev *d, char *buf, size_t len)
{
  const struct znbd_params *p = &d->p;
  if (!is_zoned(d))
    return snprintf(buf, len,
                    "znbd model=none size=%" PRIu64 " blocksize=%" PRIu32,
                    p->size, p->blocksize);
  return snprintf(
      buf, len,
      "znbd model=host-managed size=%" PRIu64 " zone_size=%" PRIu64
      " zone_capacity=%" PRIu64 " nr_zones=%" PRIu32 " nr_conv=%" PRIu32
      " max_open=%" PRIu32 " max_active=%" PRIu32 " blocksize=%" PRIu32,
      p->size, p->zone_size, p->zone_capacity, p->nr_zones, p->zone_nr_conv,
      p->zone_max_open, p->zone_max_active, p->blocksize);
}

int
znbd_dev_read(struct znbd_dev *d, void *buf, uint64_t len, uint64_t off)
{
  if (check_range(d, len, off) < 0)
    return -1;
  if (is_zoned(d)) {
    /* ZONED: zone engine read (OFFLINE, past-wp handling). */
    errno = EINVAL;
    return -1;
  }
  znbd_store_read(d->store, buf, len, off);
  return 0;
}

int
znbd_dev_write(struct znbd_dev *d, const void *buf, uint64_t len, uint64_t off,
               unsigned flags)
{
  if (check_range(d, len, off) < 0)
    return -1;
  if (is_zoned(d)) {
    /* ZONED: zone engine write (wp rules, resources, pipelining). */
    errno = EINVAL;
    return -1;
  }
  if (!buf) { /* WRITE_ZEROES: nothing allocated, whole pages freed */
    znbd_store_zero(d->store, len, off);
    return 0;
  }
  return znbd_store_write(d->store, buf, len, off);
}

int
znbd_dev_append(struct znbd_dev *d, const void *buf, uint64_t len,
                uint64_t zone_start, uint64_t *written)
{
  if (check_range(d, len, zone_start) < 0)
    return -1;
  /* ZONED: zone engine append.  Not zoned: there is no zone to append to. */
  errno = EINVAL;
  return -1;
}

int
znbd_dev_trim(struct znbd_dev *d, uint64_t len, uint64_t off)
{
  if (check_range(d, len, off) < 0)
    return -1;
  if (is_zoned(d)) {
    /* ZONED: whole sequential zones reset, conventional ranges freed. */
    errno = EINVAL;
    return -1;
  }
  znbd_store_zero(d->store, len, off);
  return 0;
}

struct extents_ctx {
  int (*fn)(void *opaque, uint64_t off, uint64_t len, uint32_t flags);
  void *opaque;
};

/* NBD_STATE_HOLE = 1, NBD_STATE_ZERO = 2 (doc/proto.md base:allocation). */
static int
store_extent(void *opaque, uint64_t off, uint64_t len, bool allocated)
{
  struct extents_ctx *c = opaque;
  return c->fn(c->opaque, off, len, allocated ? 0 : 3);
}

int
znbd_dev_extents(struct znbd_dev *d, uint64_t off, uint64_t len,
                 int (*fn)(void *opaque, uint64_t off, uint64_t len,
                           uint32_t flags),
                 void *opaque)
{
  if (check_range(d, len, off) < 0)
    return -1;
  if (is_zoned(d)) {
    /* ZONED: [start, wp) data, [wp, end) HOLE|ZERO per sequential zone. */
    errno = EINVAL;
    return -1;
  }
  struct extents_ctx c = {fn, opaque};
  return znbd_store_extents(d->store, off, len, store_extent, &c);
}

int
znbd_dev_zone_op(struct znbd_dev *d, enum znbd_zone_op op, uint32_t zone)
{
  /* ZONED: zone engine management.  Not zoned: no zones. */
  errno = EINVAL;
  return -1;
}

uint32_t
znbd_dev_report(struct znbd_dev *d, uint32_t first, uint32_t nr,
                struct znbd_zone_info *out)
{
  /* ZONED: copy zone infos.  Not zoned: nothing to report. */
  return 0;
}

uint32_t
znbd_dev_zone_index(const struct znbd_dev *d, uint64_t off)
{
  /* ZONED: shift for power-of-2 zone sizes, else one division. */
  return 0;
}

void
znbd_dev_stats(struct znbd_dev *d, struct znbd_dev_stats *out)
{
  memset(out, 0, sizeof *out);
  /* ZONED: open/closed counters from the zone engine. */
  out->allocated = znbd_store_allocated(d->store);
}

int
znbd_dev_wire_errno(int err)
{
  switch (err) {
  case ETOOMANYREFS: /* open limit */
  case EOVERFLOW:    /* active limit */
    return ENOSPC;
  case EAGAIN:
  case ETIMEDOUT:
    return EIO;
  case EIO:
  case EINVAL:
  case ENOMEM:
  case ENOSPC:
  case EPERM:
    return err;
  default:
    return EIO;
  }
}
