/* znbd: multi-zone write transactions.  A write may cross zone
 * boundaries and mix conventional and sequential zones; it is checked
 * piece by piece as separate writes in ascending order would be
 * (lib/zone.c's write rules), and then every piece's wp is committed, or
 * none (doc/zone-rules.md, rule write-all-or-nothing).  A prepared
 * transaction holds the resource slots and implicit-close victims it
 * needs, so its commit cannot fail.  See lib/zone.h for the contract;
 * all offsets and lengths are bytes. */
#include <errno.h>
#include <string.h>

#include "zone_impl.h"

int
znbd_zones_write_prepare(struct znbd_zones *zs, struct znbd_zone_txn *t,
                         uint64_t off, uint64_t len)
{
  struct znbd_zone *z;
  struct znbd_zone_counts c = {0, 0, 0};
  uint32_t cursor = 0;
  bool need_res = false;

  memset(t, 0, sizeof *t);
  t->zs = zs;
  t->off = off;
  t->len = len;
  t->victims = t->victims_small;
  t->cap_victims = 2;
  if (len == 0 || off >= zs->size || len > zs->size - off) {
    errno = EINVAL;
    return -1;
  }
  t->first = znbd_zones_zone_no(zs, off);
  t->last = znbd_zones_last_zone_no(zs, t->first, off, len);

  /* Resource checks need the resource lock from the first piece on; the
   * conditions are stable (all the zones are locked). */
  FOR_EACH_PIECE(zs, off, len, z, poff, plen)
  {
    if (z->cond == ZNBD_ZONE_COND_EMPTY || z->cond == ZNBD_ZONE_COND_CLOSED)
      need_res = true;
  }
  if (need_res) {
    pthread_mutex_lock(&zs->res_lock);
    t->res_locked = true;
    c = znbd_zones_load_counts(zs);
    cursor = zs->imp_close_zone_no;
  }

  /* Piece by piece, as separate writes in ascending order would be; a
   * zone held by a write in flight takes none (znbd_zones_hold). */
  FOR_EACH_PIECE(zs, off, len, z, poff, plen)
  {
    if (z->held)
      errno = EBUSY;
    if (z->held ||
        znbd_zone_write_check(zs, t, z, poff, plen, &c, &cursor) < 0) {
      znbd_zones_write_abort(t);
      return -1;
    }
  }
  return 0;
}

int
znbd_zones_append_prepare(struct znbd_zones *zs, struct znbd_zone_txn *t,
                          uint32_t zno, uint64_t len, uint64_t *off)
{
  struct znbd_zone *z;

  memset(t, 0, sizeof *t);
  t->victims = t->victims_small;
  if (zno >= zs->nr_zones || len == 0) {
    errno = EINVAL;
    return -1;
  }
  z = &zs->zone[zno];
  if (znbd_zone_append_check(z, len) < 0)
    return -1;
  *off = z->wp;
  return znbd_zones_write_prepare(zs, t, z->wp, len);
}

void
znbd_zones_write_commit(struct znbd_zone_txn *t)
{
  struct znbd_zones *zs = t->zs;
  struct znbd_zone *z;
  bool locked = t->res_locked;

  FOR_EACH_PIECE(zs, t->off, t->len, z, poff, plen)
  {
    (void)poff;
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
      continue;
    if (!locked && (z->wp + plen == z->start + z->capacity)) {
      pthread_mutex_lock(&zs->res_lock);
      locked = true;
    }
  }
  /* Victims first: in null_blk they close before the write opens. */
  znbd_zones_close_victims(zs, t);
  FOR_EACH_PIECE(zs, t->off, t->len, z, poff, plen)
  {
    (void)poff;
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
      continue;
    znbd_zone_advance_wp(zs, z, plen);
  }
  if (locked)
    pthread_mutex_unlock(&zs->res_lock);
  t->res_locked = false;
  znbd_zone_txn_release_victims(t);
}

void
znbd_zones_write_abort(struct znbd_zone_txn *t)
{
  znbd_zone_txn_release_victims(t);
  if (t->res_locked)
    pthread_mutex_unlock(&t->zs->res_lock);
  t->res_locked = false;
}

int
znbd_zones_run_write(struct znbd_zones *zs, struct znbd_zone_write *w,
                     uint32_t first, uint32_t last, bool late)
{
  struct znbd_zone_txn t;
  int r = -1;

  if (first < last)
    znbd_zones_lock_range(zs, first + 1, last);
  enum znbd_refusal why =
      w->one_zone && first < last
          ? znbd_zones_span_why(zs, first, last, w->off, w->len)
          : ZNBD_REFUSAL_NONE;
  if (why != ZNBD_REFUSAL_NONE) {
    znbd_refusal_now = why;
    errno = EIO;
  } else if (znbd_zones_write_prepare(zs, &t, w->off, w->len) < 0) {
    /* errno from the zone rules */
  } else if (!late && w->store(w->opaque, w->data, w->len, w->off) < 0) {
    znbd_zones_write_abort(&t); /* keeps errno */
  } else {
    znbd_zones_write_commit(&t);
    for (uint32_t i = first; i <= last && late; i++)
      znbd_zone_copy_begin(&zs->zone[i]);
    r = 0;
  }
  if (first < last)
    znbd_zones_unlock_range(zs, first + 1, last); /* keeps errno */
  return r;
}

int
znbd_zones_run_append(struct znbd_zones *zs, uint32_t zno,
                      struct znbd_zone_write *w)
{
  struct znbd_zone_txn t;

  if (znbd_zones_append_prepare(zs, &t, zno, w->len, &w->off) < 0)
    return -1;
  if (w->store(w->opaque, w->data, w->len, w->off) < 0) {
    znbd_zones_write_abort(&t); /* keeps errno */
    return -1;
  }
  znbd_zones_write_commit(&t);
  return 0;
}
