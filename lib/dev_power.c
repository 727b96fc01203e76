/* znbd: the device's durability (include/znbd/dev.h): flush and sync,
 * the power cut that write_cache=true emulates, and the hold of the cut's
 * lock every request that changes data takes (dev_wc_begin, dev_wc_end:
 * lib/dev_impl.h), so that a cut comes before a request or after it. */

#include "znbd/dev.h"
#include "dev_fenced.h"
#include "dev_impl.h"
#include "dev_unfenced.h"
#include "store.h"
#include "wcache.h"

/* Returns R with errno kept. */
int
dev_wc_end(struct znbd_dev *d, int r)
{
  if (d->wc)
    znbd_wcache_leave(d->wc); /* an rwlock unlock: keeps errno */
  return r;
}

/* write_cache: enter (a due power cut, or FENCE older than the last cut:
 * ESHUTDOWN) and keep the durable contents of [OFF, OFF+LEN) before
 * changing them. */
int
dev_wc_begin(struct znbd_dev *d, uint64_t fence, bool write, uint64_t len,
             uint64_t off)
{
  if (!d->wc)
    return 0;
  if (znbd_wcache_enter(d->wc, write, fence) < 0)
    return -1;
  if (znbd_wcache_save(d->wc, len, off) < 0)
    return dev_wc_end(d, -1);
  return 0;
}

int
znbd_dev_flush_fenced(struct znbd_dev *d, uint64_t fence)
{
  if (d->wc)
    return znbd_wcache_flush(d->wc, fence);
  return znbd_store_flush(d->store);
}

int
znbd_dev_flush(struct znbd_dev *d)
{
  return znbd_dev_flush_fenced(d, ZNBD_NO_FENCE);
}

int
znbd_dev_sync_fenced(struct znbd_dev *d, uint64_t fence, uint64_t len,
                     uint64_t off)
{
  if (dev_check_range(d, len, off) < 0)
    return -1;
  if (d->wc)
    return znbd_wcache_sync(d->wc, len, off, fence);
  return znbd_store_sync(d->store, len, off);
}

int
znbd_dev_sync(struct znbd_dev *d, uint64_t len, uint64_t off)
{
  return znbd_dev_sync_fenced(d, ZNBD_NO_FENCE, len, off);
}

int
znbd_dev_power_cut(struct znbd_dev *d, uint64_t after)
{
  if (!d->wc) {
    errno = EINVAL;
    return -1;
  }
  return znbd_wcache_cut(d->wc, after);
}

uint64_t
znbd_dev_generation(struct znbd_dev *d)
{
  return d->wc ? znbd_wcache_generation(d->wc) : 0;
}

void
znbd_dev_on_power_cut(struct znbd_dev *d, void (*fn)(void *opaque),
                      void *opaque)
{
  if (d->wc)
    znbd_wcache_on_cut(d->wc, fn, opaque);
}
