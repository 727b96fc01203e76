/* znbd: the device (include/znbd/dev.h): a store (RAM, or a directory
 * with dir=), optionally with zones on top.  This file makes and frees
 * it (parameters, store, zones restored from a persistent store, the
 * write cache's journal replayed), and answers what it is: its geometry,
 * its zones (report, zone operations) and its counters.  The requests
 * live beside it, one idea a file: reads (lib/dev_read.c), writes,
 * appends and trims (lib/dev_write.c), flush, sync and power cuts
 * (lib/dev_power.c), extents (lib/dev_extents.c), injected faults and
 * delays (lib/dev_inject.c).  Every entry point checks the range and
 * alignment first (dev_check_range: EINVAL), then either serves a plain
 * disk straight from the store, or hands a zoned device's request to the
 * zone engine (lib/zone.c); zoned branches are marked "ZONED:".  The
 * store is called only through its table of operations (lib/store.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "znbd/dev.h"
#include "znbd/log.h"
#include "busy.h"
#include "dev_fenced.h"
#include "dev_impl.h"
#include "dev_unfenced.h"
#include "err.h"
#include "faults.h"
#include "intent.h"
#include "store.h"
#include "store_dir.h"
#include "wcache.h"
#include "zone.h"

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

/* ZONED: discard callback of the zone engine (reset, finish, online):
 * the store hears which it was, so a file store can truncate.  A store
 * that fails here (a file system error) says so in the log; the zone's
 * new condition stands, as a drive's would. */
static void
discard_how(struct znbd_dev *d, const struct znbd_zone *z, uint64_t from,
            bool release)
{
  uint32_t zno = (uint32_t)(z - d->zs.zone);
  int r;
  if (z->cond == ZNBD_ZONE_COND_FULL)
    r = znbd_store_zone_finish(d->store, zno, from, z->start + z->len);
  else
    r = znbd_store_zone_reset(d->store, zno, z->start, z->len, release);
  if (r < 0)
    znbd_log(ZNBD_LOG_ERROR, "zone %" PRIu32 ": %s store: %s", zno,
             d->store->ops->name, strerror(errno));
  znbd_intent_zone_gone(d->redo, zno);
  /* Zone management is durable when it completes (lib/wcache.c). */
  if (d->wc)
    znbd_wcache_zone_durable(d->wc, zno,
                             z->cond == ZNBD_ZONE_COND_FULL ? z->capacity : 0);
}

/* Zone management: a reset zone's memory may be kept for its rewrite. */
static void
discard(void *opaque, const struct znbd_zone *z, uint64_t from)
{
  discard_how(opaque, z, from, false);
}

void
dev_discard_release(void *opaque, const struct znbd_zone *z, uint64_t from)
{
  discard_how(opaque, z, from, true);
}

/* ZONED: tell the store a zone's condition changed to or from READONLY /
 * OFFLINE, so a persistent store keeps it. */
static int
keep_fault(struct znbd_dev *d, uint32_t zno)
{
  return znbd_store_zone_fault(d->store, zno, d->zs.zone[zno].cond);
}

struct fault_ctx {
  struct znbd_dev *d;
  enum znbd_zone_op op;
  enum znbd_zone_cond cond;
};

/* One zone of a zone_readonly/zone_offline list at start-up.  The lists
 * set the condition; a zone named twice stays in it (null_blk's configfs
 * toggles back to EMPTY on a second write, which makes no sense for a
 * start-up list). */
static int
apply_fault(void *opaque, uint32_t zone)
{
  struct fault_ctx *c = opaque;
  if (c->d->zs.zone[zone].cond == c->cond)
    return 0;
  if (znbd_zones_mgmt(&c->d->zs, c->op, zone, discard, c->d) < 0)
    return -1;
  return keep_fault(c->d, zone) < 0 ? -1 : 0;
}

/* ZONED: a persistent store's zones come back as after a power cycle
 * (znbd_zones_restore): wp from the bytes written, READONLY and OFFLINE
 * as recorded. */
static int
restore_zones(struct znbd_dev *d, char *err, size_t errlen)
{
  struct znbd_zones *zs = &d->zs;
  uint32_t closed = 0;

  for (uint32_t i = zs->nr_conv; i < zs->nr_zones; i++) {
    uint64_t written;
    unsigned fault;
    if (d->store->ops->zones->load(d->store, i, &written, &fault) < 0) {
      set_err(err, errlen, "dir: zone %" PRIu32 ": %s", i, strerror(errno));
      return -1;
    }
    if (znbd_zones_restore(zs, i, written) < 0) {
      set_err(err, errlen,
              "dir: zone %" PRIu32 " holds %" PRIu64
              " bytes, more than its capacity",
              i, written);
      errno = EINVAL;
      return -1;
    }
    if (fault == ZNBD_ZONE_COND_READONLY || fault == ZNBD_ZONE_COND_OFFLINE)
      znbd_zones_mgmt(zs,
                      fault == ZNBD_ZONE_COND_READONLY
                          ? ZNBD_ZONE_OP_SET_READONLY
                          : ZNBD_ZONE_OP_SET_OFFLINE,
                      i, NULL, NULL);
    closed += zs->zone[i].cond == ZNBD_ZONE_COND_CLOSED;
  }
  if (zs->max_active && closed > zs->max_active)
    znbd_log(ZNBD_LOG_WARNING,
             "dir=%s: %" PRIu32
             " zones are CLOSED after the restart, more than "
             "zone_max_active=%" PRIu32
             "; they stay CLOSED and no other zone can become active until "
             "enough of them are finished or reset",
             d->p.dir, closed, zs->max_active);
  return 0;
}

/* ZONED: lay out the zones from the finished params and apply the
 * zone_readonly and zone_offline lists (in that order). */
static int
zoned_setup(struct znbd_dev *d, char *err, size_t errlen)
{
  const struct znbd_params *p = &d->p;
  /* Already clamped (znbd_params_finish): the engine's clamps change
   * nothing. */
  struct znbd_zone_geometry g = {
      .size = p->geo.size,
      .zone_size = p->geo.zone_size,
      .zone_capacity = p->geo.zone_capacity,
      .nr_conv = p->geo.nr_conv,
      .max_open = p->geo.max_open,
      .max_active = p->geo.max_active,
      /* dir=: the files say which zones are full (store_dir.c formats
       * zone_full=true as full files). */
      .zone_full = p->zone_full && !p->dir,
  };
  if (znbd_zones_init(&d->zs, &g) < 0)
    return fail_err(err, errlen, errno,
                    "zone_size: cannot lay out %" PRIu32 " zones: %s",
                    p->geo.nr_zones, strerror(errno));
  if (d->store->ops->zones && restore_zones(d, err, errlen) < 0)
    return -1;
  struct fault_ctx ro = {d, ZNBD_ZONE_OP_SET_READONLY, ZNBD_ZONE_COND_READONLY};
  struct fault_ctx off = {d, ZNBD_ZONE_OP_SET_OFFLINE, ZNBD_ZONE_COND_OFFLINE};
  if (p->zone_readonly && znbd_parse_zone_list(p->zone_readonly, d->zs.nr_zones,
                                               apply_fault, &ro) != 0) {
    set_err(err, errlen, "zone_readonly: cannot apply \"%s\"",
            p->zone_readonly);
    errno = EINVAL;
    return -1;
  }
  if (p->zone_offline && znbd_parse_zone_list(p->zone_offline, d->zs.nr_zones,
                                              apply_fault, &off) != 0) {
    set_err(err, errlen, "zone_offline: cannot apply \"%s\"", p->zone_offline);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* max_memory=0: 80 % of the physical memory (sysconf), so that a RAM
 * disk larger than the machine fails writes with ENOSPC before the OOM
 * killer ends the server; no limit if the size is unknown. */
static uint64_t
default_max_memory(void)
{
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || psize <= 0)
    return UINT64_MAX;
  return (uint64_t)pages / 5 * 4 * (uint64_t)psize;
}

/* A persistent store's write cache journal left by a crash: apply it
 * before the zones are restored from the files (lib/wcache.c).  Done with
 * write_cache=false too: the files may hold writes that were never
 * flushed.  A damaged journal changes nothing and stops start-up. */
static int
replay_journal(struct znbd_dev *d, char *err, size_t errlen)
{
  struct znbd_store *st = d->store;
  int fd = st->ops->persist ? st->ops->persist->journal(st, false) : -1;
  char why[256] = "";
  if (fd < 0)
    return 0;
  if (znbd_wcache_replay(st, fd, &d->p.geo, why, sizeof why) < 0) {
    /* set_err() keeps errno */
    if (errno == EINVAL)
      set_err(err, errlen,
              "write_cache: %s/znbd.wcache, the undo journal of writes not "
              "yet flushed, is damaged: %s; no file was changed. To start "
              "with the zone files as they are (keeping unflushed writes), "
              "move znbd.wcache out of the directory",
              d->p.dir, why);
    else if (errno == ESTALE)
      set_err(err, errlen,
              "write_cache: %s/znbd.wcache holds the writes a crash left "
              "unflushed, but %s; no file was changed. To start with the "
              "zone files as they are (nothing rolled back), move "
              "znbd.wcache out of the directory",
              d->p.dir, why);
    else
      set_err(err, errlen,
              "write_cache: %s/znbd.wcache (the undo journal): %s: %s",
              d->p.dir, why, strerror(errno));
    return -1;
  }
  return 0;
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
  struct znbd_dev *d = calloc(1, sizeof *d);
  if (!d)
    goto nomem;
  d->p = *p;
  bool fail = false;
  d->p.zone_readonly = dup_or_null(p->zone_readonly, &fail);
  d->p.zone_offline = dup_or_null(p->zone_offline, &fail);
  d->p.zone_control = dup_or_null(p->zone_control, &fail);
  d->p.dir = dup_or_null(p->dir, &fail);
  d->p.badblocks = dup_or_null(p->badblocks, &fail);
  znbd_faults_init(&d->f, p->size / 512, p->mbps);
  if (fail)
    goto nomem;
  if (p->badblocks &&
      znbd_faults_bb_edit(&d->f, p->badblocks, true, err, errlen) < 0) {
    znbd_dev_free(d);
    return NULL;
  }

  if (p->dir) {
    d->store = znbd_store_dir_open(p, err, errlen);
    if (!d->store) {
      znbd_dev_free(d);
      return NULL;
    }
  } else {
    d->store = znbd_store_new(p->size, p->memory_backed);
    if (!d->store) {
      set_err(err, errlen, "size: cannot map a store of %" PRIu64 " bytes: %s",
              p->size, strerror(errno));
      znbd_dev_free(d);
      return NULL;
    }
    znbd_store_ram_limit(d->store,
                         p->max_memory ? p->max_memory : default_max_memory());
  }
  if (replay_journal(d, err, errlen) < 0 ||
      (p->zoned && zoned_setup(d, err, errlen) < 0)) {
    znbd_dev_free(d);
    return NULL;
  }
  if (p->write_cache &&
      !(d->wc = znbd_wcache_new(d->store, p->zoned ? &d->zs : NULL, p->size))) {
    set_err(err, errlen, "write_cache: cannot set up: %s", strerror(errno));
    znbd_dev_free(d);
    return NULL;
  }
  return d;

nomem:
  znbd_dev_free(d);
  set_err(err, errlen, "device: out of memory");
  errno = ENOMEM;
  return NULL;
}

/* Keeps errno (lib/err.h): callers free on their failure paths. */
void
znbd_dev_free(struct znbd_dev *d)
{
  if (!d)
    return;
  int e = errno;
  if (d->wc) {
    /* Shutting down: flush as a drive does before power goes. */
    if (znbd_wcache_flush(d->wc, ZNBD_NO_FENCE) < 0)
      znbd_log(ZNBD_LOG_ERROR, "shutdown flush: %s", strerror(errno));
    else if (znbd_wcache_retire(d->wc) < 0)
      znbd_log(ZNBD_LOG_ERROR, "shutdown: emptying the journal: %s",
               strerror(errno));
    znbd_wcache_free(d->wc);
  }
  znbd_intent_free(d->redo);
  znbd_zones_destroy(&d->zs);
  znbd_store_free(d->store);
  znbd_params_free(&d->p);
  znbd_faults_destroy(&d->f);
  free(d);
  errno = e;
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
  return d->p.geo.nr_zones; /* 0 when not zoned */
}

int
znbd_dev_describe(const struct znbd_dev *d, char *buf, size_t len)
{
  const struct znbd_geometry *g = &d->p.geo;
  if (!dev_is_zoned(d))
    return snprintf(buf, len,
                    "znbd model=none size=%" PRIu64 " blocksize=%" PRIu32,
                    g->size, g->blocksize);
  return snprintf(buf, len,
                  "znbd model=host-managed size=%" PRIu64 " zone_size=%" PRIu64
                  " zone_capacity=%" PRIu64 " nr_zones=%" PRIu32
                  " nr_conv=%" PRIu32 " max_open=%" PRIu32
                  " max_active=%" PRIu32 " blocksize=%" PRIu32,
                  g->size, g->zone_size, g->zone_capacity, g->nr_zones,
                  g->nr_conv, g->max_open, g->max_active, g->blocksize);
}

int
znbd_dev_zone_op_fenced(struct znbd_dev *d, uint64_t fence,
                        enum znbd_zone_op op, uint32_t zone)
{
  /* Not zoned: no zones. */
  if (!dev_is_zoned(d) ||
      (zone == ZNBD_ALL_ZONES && op != ZNBD_ZONE_OP_RESET)) {
    errno = EINVAL;
    return -1;
  }
  if (dev_wc_begin(d, fence, false, 0, 0) < 0)
    return -1;
  if (znbd_zones_mgmt(&d->zs, op, zone, discard, d) < 0)
    return dev_wc_end(d, -1);
  if (op == ZNBD_ZONE_OP_OPEN)
    znbd_store_zone_open(d->store, zone);
  if (op >= ZNBD_ZONE_OP_SET_READONLY)
    return dev_wc_end(d, keep_fault(d, zone));
  return dev_wc_end(d, 0);
}

int
znbd_dev_zone_op(struct znbd_dev *d, enum znbd_zone_op op, uint32_t zone)
{
  unsigned tries = 0;
  int r;
  while (znbd_busy_again(
      false, r = znbd_dev_zone_op_fenced(d, ZNBD_NO_FENCE, op, zone), &tries))
    ;
  return r;
}

uint32_t
znbd_dev_report(struct znbd_dev *d, uint32_t first, uint32_t nr,
                struct znbd_zone_info *out)
{
  /* Not zoned: nothing to report. */
  if (!dev_is_zoned(d) || first >= d->zs.nr_zones)
    return 0;
  if (nr > d->zs.nr_zones - first)
    nr = d->zs.nr_zones - first;
  for (uint32_t i = 0; i < nr; i++)
    znbd_zone_info(&d->zs.zone[first + i], &out[i]);
  return nr;
}

uint32_t
znbd_dev_zone_index(const struct znbd_dev *d, uint64_t off)
{
  /* A shift for power-of-2 zone sizes, else one division. */
  return dev_is_zoned(d) ? znbd_zones_zone_no(&d->zs, off) : 0;
}

void
znbd_dev_stats(struct znbd_dev *d, struct znbd_dev_stats *out)
{
  memset(out, 0, sizeof *out);
  if (dev_is_zoned(d)) {
    znbd_zones_counters(&d->zs, &out->nr_imp_open, &out->nr_exp_open,
                        &out->nr_closed);
    out->park_waits = atomic_load(&d->zs.park_waits);
    out->park_sleeps = atomic_load(&d->zs.park_sleeps);
  }
  out->allocated = znbd_store_allocated(d->store);
  out->badblock_errors = atomic_load(&d->f.bb_errors);
  out->dropped_replies = atomic_load(&d->f.dropped);
  out->delayed_requests = atomic_load(&d->f.delayed);
  out->delay_nsec = atomic_load(&d->f.delay_nsec);
}

void
znbd_dev_set_frontend(struct znbd_dev *d, unsigned frontend)
{
  d->frontend = frontend;
}

unsigned
znbd_dev_frontend(const struct znbd_dev *d)
{
  return d->frontend;
}
