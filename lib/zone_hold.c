/* znbd: writes held across their store I/O (lib/zone.h,
 * znbd_zones_hold): null_blk's null_zone_write() with the data copy,
 * which it does with the zone locked, done by the caller outside the
 * lock (an io_uring write of znbd-ublk's queue), the zone held instead:
 * no other write, append or zone management touches it until the copy
 * ended, and the wp moves only then.  All offsets and lengths are bytes;
 * the rules are lib/zone.c's, cited in doc/zone-rules.md. */
#include <errno.h>

#include "zone_impl.h"

int
znbd_zones_hold(struct znbd_zones *zs, struct znbd_zone_hold *h)
{
  struct znbd_zone_txn t;
  uint32_t zno;
  int r;

  h->seq = false;
  if (h->len == 0 ||
      (!h->append && (h->off >= zs->size || h->len > zs->size - h->off))) {
    errno = EINVAL;
    return -1;
  }
  zno = h->append ? h->zno : znbd_zones_zone_no(zs, h->off);
  if (zno >= zs->nr_zones) {
    errno = EINVAL;
    return -1;
  }
  struct znbd_zone *z = &zs->zone[zno];
  if (!h->append && h->off + h->len > z->start + z->len) {
    errno = EINVAL;
    return -1;
  }
  if (!h->append && z->type == ZNBD_ZONE_TYPE_CONVENTIONAL)
    return 0; /* rule write-conv: no state to hold */
  pthread_mutex_lock(&z->lock);
  if (z->held) {
    errno = EBUSY;
    r = -1;
  } else if (h->append) {
    r = znbd_zones_append_prepare(zs, &t, zno, h->len, &h->off);
  } else {
    r = znbd_zones_write_prepare(zs, &t, h->off, h->len);
  }
  if (r == 0) {
    /* The condition part of the commit now, as null_zone_write() opens
     * the zone before it copies: victims closed, IMP_OPEN (both under
     * the resource lock, which the prepare took when they are due). */
    if (t.res_locked)
      znbd_zones_close_victims(zs, &t);
    znbd_zone_advance_wp(zs, z, 0);
    if (t.res_locked)
      pthread_mutex_unlock(&zs->res_lock);
    t.res_locked = false;
    znbd_zone_txn_release_victims(&t);
    z->held = true;
    h->zno = zno;
    h->seq = true;
  }
  pthread_mutex_unlock(&z->lock); /* keeps errno */
  return r;
}

void
znbd_zones_unhold(struct znbd_zones *zs, const struct znbd_zone_hold *h,
                  bool done)
{
  if (!h->seq)
    return;
  struct znbd_zone *z = &zs->zone[h->zno];
  pthread_mutex_lock(&z->lock);
  if (done) {
    /* Rule write-full: FULL at the capacity, under the resource lock as
     * every condition change that moves the counters. */
    bool full = z->wp + h->len == z->start + z->capacity;
    if (full)
      pthread_mutex_lock(&zs->res_lock);
    znbd_zone_advance_wp(zs, z, h->len);
    if (full)
      pthread_mutex_unlock(&zs->res_lock);
  }
  z->held = false;
  pthread_mutex_unlock(&z->lock);
}
