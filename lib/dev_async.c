/* znbd: requests whose store I/O the front-end does itself
 * (include/znbd/async.h).  The device checks and holds (the zone engine's
 * znbd_zones_hold, lib/zone_hold.c), the store says where the bytes lie
 * and keeps its books (struct znbd_store_async_ops, lib/store_dir.c);
 * the data never passes through here.  Offsets and lengths are bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/async.h"
#include "znbd/redo.h"
#include "dev_impl.h"
#include "intent.h"

_Static_assert(sizeof(struct znbd_zone_hold) <=
                   sizeof(((struct znbd_async_write *)0)->priv),
               "struct znbd_async_write's priv holds a struct znbd_zone_hold");

bool
znbd_dev_async(const struct znbd_dev *d)
{
  return d->store->ops->async && !d->wc;
}

/* The zone hold kept in W. */
static struct znbd_zone_hold *
hold_of(struct znbd_async_write *w)
{
  return (struct znbd_zone_hold *)(void *)w->priv;
}

/* Whether a request of LEN bytes at OFF can take the asynchronous path
 * here at all: bad blocks are checked (counted, cleared with
 * badblocks_once) by the synchronous calls alone, so a device that lists
 * any sends its requests there. */
static bool
async_ok(const struct znbd_dev *d, uint64_t len, uint64_t off)
{
  return znbd_dev_async(d) && atomic_load(&d->f.nr_bb) == 0 &&
         off <= d->p.size && len <= d->p.size - off && len &&
         (off | len) % d->p.blocksize == 0;
}

/* The store's part of a begin: allocate, or undo the hold. */
static int
store_begin(struct znbd_dev *d, struct znbd_async_write *w)
{
  struct znbd_zone_hold *h = hold_of(w);
  if (d->store->ops->async->write_begin(d->store, h->len, w->off, &w->undo) ==
      0)
    return 0;
  if (d->p.zoned) /* not done: it only locks and unlocks, errno kept */
    znbd_zones_unhold(&d->zs, h, false);
  return -1;
}

int
znbd_req_write_begin(const struct znbd_req_ctx *c, uint64_t len, uint64_t off,
                     unsigned flags, bool aligned, struct znbd_async_write *w)
{
  struct znbd_dev *d = c->dev;
  struct znbd_zone_hold *h = hold_of(w);
  memset(w, 0, sizeof *w);
  if (!async_ok(d, len, off) ||
      (flags & ~(unsigned)(ZNBD_WRITE_NOWAIT | ZNBD_WRITE_FUA)))
    return ZNBD_ASYNC_SYNC;
  if (d->store->ops->async->map(d->store, len, off, aligned, &w->io) < 0)
    return ZNBD_ASYNC_SYNC; /* over two files */
  *h = (struct znbd_zone_hold){.off = off, .len = len};
  w->off = off;
  if (d->p.zoned && znbd_zones_hold(&d->zs, h) < 0)
    return -1;
  return store_begin(d, w);
}

int
znbd_req_append_begin(const struct znbd_req_ctx *c, uint64_t len,
                      uint64_t zone_start, uint32_t slot, bool aligned,
                      struct znbd_async_write *w)
{
  struct znbd_dev *d = c->dev;
  struct znbd_zone_hold *h = hold_of(w);
  uint32_t zno;
  memset(w, 0, sizeof *w);
  if (dev_append_zone(d, len, zone_start, &zno) < 0)
    return -1;
  if (!znbd_dev_async(d) || atomic_load(&d->f.nr_bb) != 0)
    return ZNBD_ASYNC_SYNC;
  if (slot != ZNBD_NO_SLOT && !znbd_dev_redo_word(d, slot) && d->redo) {
    errno = EINVAL;
    return -1;
  }
  *h = (struct znbd_zone_hold){.append = true, .zno = zno, .len = len};
  if (znbd_zones_hold(&d->zs, h) < 0)
    return -1;
  w->off = h->off;
  /* The zone is held and the sector chosen: the intent goes down before
   * a byte of the data does (znbd/redo.h). */
  if (d->redo)
    znbd_intent_note(d->redo, slot, zno, w->off, len);
  if (d->store->ops->async->map(d->store, len, w->off, aligned, &w->io) < 0) {
    znbd_zones_unhold(&d->zs, h, false);
    errno = EIO; /* a zone is one file: cannot happen */
    return -1;
  }
  return store_begin(d, w);
}

int
znbd_req_write_end(const struct znbd_req_ctx *c, struct znbd_async_write *w,
                   int err)
{
  struct znbd_dev *d = c->dev;
  struct znbd_zone_hold *h = hold_of(w);
  /* The store's books first: a FLUSH that sees the new wp finds the file
   * dirty; a failed write's bytes are cut off before another can come. */
  d->store->ops->async->write_end(d->store, h->len, w->off, w->undo, !err);
  w->undo = NULL;
  if (d->p.zoned)
    znbd_zones_unhold(&d->zs, h, !err);
  if (!err)
    return 0;
  errno = err == ENOSPC || err == EDQUOT ? ENOSPC : EIO;
  return -1;
}

/* A read's plan, built span by span (znbd_zones_spans). */
struct plan {
  struct znbd_dev *d;
  struct znbd_async_read *r;
  uint64_t off; /* the read's */
  bool aligned;
  unsigned nfill;
};

/* znbd_zone_span_fn: CONV and DATA spans from the store (at most one,
 * first: a read within one zone), the rest filled as read_span() in
 * lib/dev_read.c fills it. */
static int
plan_span(void *opaque, uint64_t off, uint64_t len, enum znbd_zone_span span)
{
  struct plan *p = opaque;
  enum znbd_read_past_wp past = p->d->p.zone_read_past_wp;
  switch (span) {
  case ZNBD_SPAN_CONV:
  case ZNBD_SPAN_DATA:
    if (off != p->off || p->r->io.len)
      return ZNBD_ASYNC_SYNC;
    return p->d->store->ops->async->map(p->d->store, len, off, p->aligned,
                                        &p->r->io) < 0
               ? ZNBD_ASYNC_SYNC
               : 0;
  case ZNBD_SPAN_GAP:
  case ZNBD_SPAN_PAST_WP:
    if (past == ZNBD_READ_PAST_WP_ERROR)
      break;
    if (p->nfill == 2)
      return ZNBD_ASYNC_SYNC;
    p->r->fill_len[p->nfill] = len;
    p->r->fill[p->nfill++] =
        past == ZNBD_READ_PAST_WP_ONES && span == ZNBD_SPAN_PAST_WP ? 0xff : 0;
    return 0;
  case ZNBD_SPAN_OFFLINE:
    break;
  }
  errno = EIO;
  return -1;
}

int
znbd_req_read_begin(const struct znbd_req_ctx *c, uint64_t len, uint64_t off,
                    bool aligned, struct znbd_async_read *r)
{
  struct znbd_dev *d = c->dev;
  memset(r, 0, sizeof *r);
  if (!async_ok(d, len, off))
    return ZNBD_ASYNC_SYNC;
  if (!d->p.zoned)
    return d->store->ops->async->map(d->store, len, off, aligned, &r->io) < 0
               ? ZNBD_ASYNC_SYNC
               : 0;
  struct plan p = {d, r, off, aligned, 0};
  int rc = znbd_zones_spans(&d->zs, off, len, plan_span, &p);
  if (rc == ZNBD_ASYNC_SYNC)
    memset(r, 0, sizeof *r);
  return rc;
}

int
znbd_req_flush_begin(const struct znbd_req_ctx *c, struct znbd_async_flush *f)
{
  struct znbd_store *st = c->dev->store;
  uint32_t n = st->ops->async ? st->ops->async->nr_files(st) : 0;
  memset(f, 0, sizeof *f);
  if (!n)
    return 0;
  f->fds = malloc(n * sizeof *f->fds);
  f->zones = malloc(n * sizeof *f->zones);
  if (!f->fds || !f->zones) {
    free(f->fds);
    free(f->zones);
    memset(f, 0, sizeof *f);
    errno = ENOMEM;
    return -1;
  }
  st->ops->async->flush_begin(st, f->fds, f->zones, &f->n);
  return 0;
}

int
znbd_req_flush_end(const struct znbd_req_ctx *c, struct znbd_async_flush *f,
                   int err)
{
  struct znbd_store *st = c->dev->store;
  if (f->n)
    st->ops->async->flush_end(st, f->zones, f->n, !err);
  free(f->fds);
  free(f->zones);
  memset(f, 0, sizeof *f);
  if (!err)
    return 0;
  errno = EIO;
  return -1;
}
