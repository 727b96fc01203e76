/* znbd: the device's injected faults and delays (include/znbd/dev.h):
 * bad blocks (null_blk's badblocks), lost replies, completion and zone
 * operation latencies, and the errno a front-end puts on the wire. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>

#include "znbd/dev.h"
#include "znbd/log.h"
#include "dev_impl.h"
#include "faults.h"

uint64_t
dev_badblock_ok(struct znbd_dev *d, const char *what, uint64_t len,
                uint64_t off, uint64_t first)
{
  uint64_t bad = first * 512 / d->p.blocksize * d->p.blocksize;
  uint64_t ok = d->p.badblocks_partial_io && bad > off ? bad - off : 0;
  znbd_log(ZNBD_LOG_FAULT,
           "badblock: %s of %" PRIu64 " bytes at %" PRIu64
           ": bad sectors from %" PRIu64 "%s; %" PRIu64 " bytes done",
           what, len, off, first, d->p.badblocks_once ? " (cleared)" : "", ok);
  return ok;
}

int
znbd_dev_badblocks_edit(struct znbd_dev *d, const char *list, bool add,
                        char *err, size_t errlen)
{
  return znbd_faults_bb_edit(&d->f, list, add, err, errlen);
}

size_t
znbd_dev_badblocks_list(struct znbd_dev *d, char *buf, size_t len)
{
  return znbd_faults_bb_format(&d->f, buf, len);
}

void
znbd_dev_drop_reply_set(struct znbd_dev *d, uint32_t every, unsigned kinds)
{
  atomic_store(&d->f.drop_every, 0);
  atomic_store(&d->f.drop_kinds, kinds);
  atomic_store(&d->f.drop_seen, 0);
  atomic_store(&d->f.drop_every, every);
}

void
znbd_dev_drop_reply_get(struct znbd_dev *d, uint32_t *every, unsigned *kinds)
{
  *every = (uint32_t)atomic_load(&d->f.drop_every);
  *kinds = atomic_load(&d->f.drop_kinds);
}

bool
znbd_dev_drop_reply(struct znbd_dev *d, unsigned kind)
{
  uint32_t every =
      (uint32_t)atomic_load_explicit(&d->f.drop_every, memory_order_relaxed);
  if (!every || !(atomic_load(&d->f.drop_kinds) & kind))
    return false;
  if ((atomic_fetch_add(&d->f.drop_seen, 1) + 1) % every != 0)
    return false;
  atomic_fetch_add(&d->f.dropped, 1);
  znbd_log(ZNBD_LOG_FAULT, "drop-reply: the reply to this %s is not sent",
           kind == ZNBD_IO_READ    ? "read"
           : kind == ZNBD_IO_WRITE ? "write"
           : kind == ZNBD_IO_FLUSH ? "flush"
           : kind == ZNBD_IO_TRIM  ? "trim"
                                   : "request");
  return true;
}

uint64_t
znbd_dev_delay_nsec(struct znbd_dev *d, unsigned kind, uint64_t len)
{
  if (kind == ZNBD_IO_READ || kind == ZNBD_IO_WRITE)
    return znbd_faults_throttle(&d->f, len);
  if (kind == ZNBD_IO_TRIM && dev_is_zoned(d))
    return d->p.zone_reset_nsec;
  return 0;
}

uint64_t
znbd_dev_request_delay(struct znbd_dev *d, unsigned kind, uint64_t len,
                       enum znbd_zone_op op)
{
  uint64_t ns = d->p.completion_nsec;
  if (kind == ZNBD_IO_ZONE_MGMT)
    ns += znbd_dev_zone_op_nsec(d, op);
  else
    ns += znbd_dev_delay_nsec(d, kind, len);
  if (ns) { /* counted here, so one test can see every front-end ask */
    atomic_fetch_add(&d->f.delayed, 1);
    atomic_fetch_add(&d->f.delay_nsec, ns);
  }
  return ns;
}

uint64_t
znbd_dev_zone_op_nsec(const struct znbd_dev *d, enum znbd_zone_op op)
{
  switch (op) {
  case ZNBD_ZONE_OP_OPEN:
    return d->p.zone_open_nsec;
  case ZNBD_ZONE_OP_CLOSE:
    return d->p.zone_close_nsec;
  case ZNBD_ZONE_OP_FINISH:
    return d->p.zone_finish_nsec;
  case ZNBD_ZONE_OP_RESET:
    return d->p.zone_reset_nsec;
  default:
    return 0;
  }
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
  case ESHUTDOWN: /* a power cut (NBD_ESHUTDOWN) */
    return err;
  default:
    return EIO;
  }
}
