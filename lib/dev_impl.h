/* znbd lib-internal: the device's state (struct znbd_dev of
 * include/znbd/dev.h), shared by lib/dev*.c, which make it and serve
 * requests on it, lib/intent.c, which keeps the intent records of a
 * server that may be recovered, and lib/redo.c, which redoes its
 * requests (include/znbd/redo.h).  Offsets and lengths are bytes.
 */
#ifndef ZNBD_DEV_IMPL_H
#define ZNBD_DEV_IMPL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "faults.h"
#include "refusal.h"
#include "store.h"
#include "wcache.h"
#include "zone.h"
#include "znbd/params.h"

struct znbd_redo;

struct znbd_dev {
  struct znbd_params p; /* a private copy (own strings) */
  struct znbd_store *store;
  struct znbd_zones zs;   /* ZONED: the zone engine (when p.zoned) */
  struct znbd_wcache *wc; /* write_cache=true, else NULL */
  struct znbd_faults f;   /* bad blocks, lost replies, mbps */
  struct znbd_redo *redo; /* intent records (lib/intent.c), or NULL */
  unsigned frontend;      /* znbd_dev_set_frontend(), or 0 */
};

static inline bool
dev_is_zoned(const struct znbd_dev *d)
{
  return d->p.zoned;
}

/* [OFF, OFF+LEN) inside the device and both ends on a block boundary (a
 * zero length is allowed and does nothing): 0, or -1 with errno EINVAL and
 * the reason ZNBD_REFUSAL_OUT_OF_RANGE. */
static inline int
dev_check_range(const struct znbd_dev *d, uint64_t len, uint64_t off)
{
  if (off > d->p.size || len > d->p.size - off || (off | len) % d->p.blocksize)
    return znbd_refuse(ZNBD_REFUSAL_OUT_OF_RANGE, EINVAL);
  return 0;
}

/* lib/dev_inject.c: a bad-block hit of dev_badblock_hit() below, FIRST its
 * first bad sector: logged, and the bytes badblocks_partial_io lets through
 * returned (those before FIRST, rounded down to the block size; 0
 * without it). */
uint64_t dev_badblock_ok(struct znbd_dev *d, const char *what, uint64_t len,
                         uint64_t off, uint64_t first);

/* Bad blocks, null_handle_badblocks(): whether [OFF, OFF+LEN) (bytes)
 * touches a bad sector.  If so the error is counted (by
 * znbd_faults_bb_hit, under the list's lock) and logged, and *OK gets the
 * bytes that badblocks_partial_io lets through (dev_badblock_ok()).
 * WHAT names the request in the log ("read", "write").  Lock-free when
 * the list is empty. */
static inline bool
dev_badblock_hit(struct znbd_dev *d, const char *what, uint64_t len,
                 uint64_t off, uint64_t *ok)
{
  uint64_t first;
  if (!znbd_faults_bb_hit(&d->f, off / 512, (len + 511) / 512,
                          d->p.badblocks_once, &first))
    return false;
  *ok = dev_badblock_ok(d, what, len, off, first);
  return true;
}

/* lib/dev.c: the zone engine's discard callback (znbd_zone_discard_fn)
 * for NBD TRIM: a reset zone's memory (OPAQUE the device) goes back to
 * the store at once, a finished one is finished there. */
void dev_discard_release(void *opaque, const struct znbd_zone *z,
                         uint64_t from);

/* lib/dev_power.c: write_cache: enter (a due power cut, or FENCE older than
 * the last cut: ESHUTDOWN) and keep the durable contents of [OFF,
 * OFF+LEN) before changing them; dev_wc_end() leaves, returning R with
 * errno kept.  Without write_cache both do nothing.  Returns 0, or -1
 * with errno (ESHUTDOWN, EIO). */
int dev_wc_begin(struct znbd_dev *d, uint64_t fence, bool write, uint64_t len,
                 uint64_t off);
int dev_wc_end(struct znbd_dev *d, int r);

/* lib/dev_write.c: the zone of an append of LEN bytes to the zone starting
 * at ZONE_START (bytes) into *ZNO.  Returns 0, or -1 with errno EINVAL
 * (not zoned, not a zone start, LEN 0 or not whole blocks). */
int dev_append_zone(const struct znbd_dev *d, uint64_t len, uint64_t zone_start,
                    uint32_t *zno);

/* lib/dev_write.c: the zone engine's store callback of a write (struct
 * znbd_zone_write): LEN bytes from DATA at OFF into D's store (OPAQUE),
 * zeros for DATA NULL.  Returns 0, or -1 with errno (ENOSPC, EIO). */
int dev_store_data(void *opaque, const void *data, uint64_t len, uint64_t off);

#endif
