/* The device's request entry points with the power-cut fence and the
 * way a write ahead of the wp waits given explicitly: what
 * lib/request.c builds the request contract (include/znbd/request.h)
 * on.  Private to lib/: front-ends hold a struct znbd_req_ctx instead,
 * and the unfenced znbd_dev_* calls of znbd/dev.h are these with
 * ZNBD_NO_FENCE. */
#ifndef ZNBD_DEV_FENCED_H
#define ZNBD_DEV_FENCED_H

#include <stdatomic.h>
#include <stdint.h>

#include "znbd/dev.h"

/* How a write ahead of the wp is parked: completed through DONE, or
 * (DONE NULL) with this thread waiting, if fewer than MAX threads counted
 * in *WAITING (NULL: no bound) wait already.  FENCE: the generation the
 * request belongs to (ZNBD_NO_FENCE: none), as for the calls below. */
struct znbd_park_how {
  uint64_t fence;
  znbd_write_done_fn done;
  void *opaque;
  _Atomic unsigned *waiting;
  unsigned max;
};

/* znbd_dev_write() parked as H says.  Returns 0, ZNBD_WRITE_PARKED (H
 * has DONE: it is called once, later), or -1 with errno as
 * znbd_dev_write(), plus EAGAIN when the bound of H is reached and
 * ESHUTDOWN when a power cut happened after H's fence. */
int znbd_dev_write_how(struct znbd_dev *d, const void *buf, uint64_t len,
                       uint64_t off, unsigned flags,
                       const struct znbd_park_how *h);

/* znbd_dev_append() (its intent noted in SLOT, znbd/redo.h;
 * ZNBD_NO_SLOT: none), znbd_dev_trim() (with FLAGS: ZNBD_WRITE_FUA),
 * znbd_dev_flush(), znbd_dev_sync() and znbd_dev_zone_op() for a request
 * fenced at FENCE: each fails with ESHUTDOWN, changing nothing, when a
 * power cut happened after FENCE (checked under the lock the cut takes
 * exclusive, so a request runs wholly before a cut or not at all). */
int znbd_dev_append_fenced(struct znbd_dev *d, uint64_t fence, const void *buf,
                           uint64_t len, uint64_t zone_start, uint32_t slot,
                           uint64_t *written);
int znbd_dev_trim_fenced(struct znbd_dev *d, uint64_t fence, uint64_t len,
                         uint64_t off, unsigned flags);
int znbd_dev_flush_fenced(struct znbd_dev *d, uint64_t fence);
int znbd_dev_sync_fenced(struct znbd_dev *d, uint64_t fence, uint64_t len,
                         uint64_t off);
int znbd_dev_zone_op_fenced(struct znbd_dev *d, uint64_t fence,
                            enum znbd_zone_op op, uint32_t zone);

#endif
