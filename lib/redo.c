/* znbd: the redo of requests a dead server may have executed
 * (include/znbd/redo.h), with the intent records of lib/intent.c.
 *
 * A reissued write that ends at or past its zone's wp, starts below it,
 * and whose bytes up to the wp are already the store's, is taken as done,
 * the part past the wp (if the store was cut short) written at the wp
 * (znbd_zones_redo()).  A reissued append that matches a kept record
 * (its zone and length, the same bytes at the record's sector) is
 * answered with that sector and appends nothing.
 */
#include <stdint.h>
#include <string.h>

#include "znbd/redo.h"
#include "dev_impl.h"
#include "intent.h"

/* What the redo compares: the request's bytes, BUF from byte OFF. */
struct same_ctx {
  struct znbd_dev *d;
  const uint8_t *buf;
  uint64_t off;
};

/* znbd_zone_same_fn: the store's N bytes at OFF against the request's. */
static int
same_bytes(void *opaque, uint64_t off, uint64_t n)
{
  struct same_ctx *c = opaque;
  uint8_t stored[16384];
  for (uint64_t done = 0; done < n;) {
    size_t k = n - done < sizeof stored ? (size_t)(n - done) : sizeof stored;
    if (znbd_store_read(c->d->store, stored, k, off + done) < 0)
      return -1;
    if (memcmp(stored, c->buf + (off + done - c->off), k) != 0)
      return 0;
    done += k;
  }
  return 1;
}

/* The redo of LEN bytes from BUF at OFF in the engine (ANYWHERE: an
 * append's, below the wp), inside the write cache's hold as any write. */
static int
redo(struct znbd_dev *d, const void *buf, uint64_t len, uint64_t off,
     bool anywhere)
{
  struct same_ctx c = {d, buf, off};
  struct znbd_zone_write w = {.off = off,
                              .len = len,
                              .data = buf,
                              .store = dev_store_data,
                              .opaque = d};
  if (dev_wc_begin(d, ZNBD_NO_FENCE, true, len, off) < 0)
    return -1;
  return dev_wc_end(d, znbd_zones_redo(&d->zs, &w, anywhere, same_bytes, &c));
}

int
znbd_dev_redo_write(struct znbd_dev *d, const void *buf, uint64_t len,
                    uint64_t off)
{
  if (!d->p.zoned || !buf || len == 0 || off >= d->p.size ||
      len > d->p.size - off)
    return 0;
  return redo(d, buf, len, off, false);
}

int
znbd_dev_redo_append(struct znbd_dev *d, const void *buf, uint64_t len,
                     uint64_t zone_start, uint32_t slot, uint64_t *written)
{
  struct znbd_redo *r = d->redo;
  if (znbd_intent_kept(r) == 0 || !buf || len == 0 || zone_start >= d->p.size)
    return 0;
  uint32_t zno = znbd_zones_zone_no(&d->zs, zone_start);
  uint64_t off;
  for (uint32_t i = 0; znbd_intent_claim(r, zno, len, &i, &off); i++) {
    int m = redo(d, buf, len, off, true);
    znbd_intent_release(r, i, m == 1, slot);
    if (m != 0) {
      if (m == 1)
        *written = off;
      return m;
    }
  }
  return 0;
}
