/* The request contract (znbd/request.h): a front-end's context per
 * connection, LUN or queue, and the device calls made through it with
 * its fence and its bound on waiting writes. */
#include <errno.h>
#include <time.h>

#include "znbd/redo.h"
#include "znbd/request.h"
#include "busy.h"
#include "dev_fenced.h"
#include "dev_impl.h"
#include "intent.h"
#include "refusal.h"

void
znbd_req_ctx_init(struct znbd_req_ctx *c, struct znbd_dev *d)
{
  c->dev = d;
  c->gen = znbd_dev_generation(d);
  c->waiting = NULL;
  c->max_waiting = 0;
  c->busy_ok = false;
}

void
znbd_req_ctx_bound(struct znbd_req_ctx *c, _Atomic unsigned *waiting,
                   unsigned max)
{
  c->waiting = waiting;
  c->max_waiting = max;
}

void
znbd_req_ctx_init_unfenced(struct znbd_req_ctx *c, struct znbd_dev *d)
{
  znbd_req_ctx_init(c, d);
  c->gen = ZNBD_NO_FENCE;
}

bool
znbd_req_cut(const struct znbd_req_ctx *c)
{
  return c->gen != ZNBD_NO_FENCE && c->gen != znbd_dev_generation(c->dev);
}

void
znbd_req_ctx_busy_ok(struct znbd_req_ctx *c)
{
  c->busy_ok = true;
}

int
znbd_req_read(const struct znbd_req_ctx *c, void *buf, uint64_t len,
              uint64_t off, unsigned flags)
{
  znbd_refusal_now = ZNBD_REFUSAL_NONE;
  return znbd_dev_read(c->dev, buf, len, off, flags);
}

int
znbd_req_write(const struct znbd_req_ctx *c, const void *buf, uint64_t len,
               uint64_t off, unsigned flags, znbd_write_done_fn done,
               void *opaque)
{
  struct znbd_park_how h = {
      .fence = c->gen,
      .done = done,
      .opaque = opaque,
      /* Without DONE the thread waits: bounded when C says so. */
      .waiting = done ? NULL : c->waiting,
      .max = c->max_waiting,
  };
  unsigned tries = 0;
  int r;
  znbd_refusal_now = ZNBD_REFUSAL_NONE;
  while (znbd_busy_again(
      c->busy_ok, r = znbd_dev_write_how(c->dev, buf, len, off, flags, &h),
      &tries))
    ;
  return r;
}

/* Both appends: SLOT's intent record noted, or none (ZNBD_NO_SLOT). */
static int
req_append(const struct znbd_req_ctx *c, const void *buf, uint64_t len,
           uint64_t zone_start, uint32_t slot, uint64_t *written)
{
  unsigned tries = 0;
  int r;
  znbd_refusal_now = ZNBD_REFUSAL_NONE;
  while (znbd_busy_again(c->busy_ok,
                         r = znbd_dev_append_fenced(c->dev, c->gen, buf, len,
                                                    zone_start, slot, written),
                         &tries))
    ;
  return r;
}

int
znbd_req_append(const struct znbd_req_ctx *c, const void *buf, uint64_t len,
                uint64_t zone_start, uint64_t *written)
{
  return req_append(c, buf, len, zone_start, ZNBD_NO_SLOT, written);
}

int
znbd_req_append_noted(const struct znbd_req_ctx *c, const void *buf,
                      uint64_t len, uint64_t zone_start, uint32_t slot,
                      uint64_t *written)
{
  uint32_t n = znbd_intent_slots(c->dev->redo);
  if (slot != ZNBD_NO_SLOT && n && slot >= n) {
    errno = EINVAL;
    return -1;
  }
  return req_append(c, buf, len, zone_start, slot, written);
}

int
znbd_req_trim(const struct znbd_req_ctx *c, uint64_t len, uint64_t off,
              unsigned flags)
{
  unsigned tries = 0;
  int r;
  znbd_refusal_now = ZNBD_REFUSAL_NONE;
  while (znbd_busy_again(
      c->busy_ok, r = znbd_dev_trim_fenced(c->dev, c->gen, len, off, flags),
      &tries))
    ;
  return r;
}

int
znbd_req_flush(const struct znbd_req_ctx *c)
{
  znbd_refusal_now = ZNBD_REFUSAL_NONE;
  return znbd_dev_flush_fenced(c->dev, c->gen);
}

int
znbd_req_sync(const struct znbd_req_ctx *c, uint64_t len, uint64_t off)
{
  znbd_refusal_now = ZNBD_REFUSAL_NONE;
  return znbd_dev_sync_fenced(c->dev, c->gen, len, off);
}

int
znbd_req_zone_op(const struct znbd_req_ctx *c, enum znbd_zone_op op,
                 uint32_t zone)
{
  unsigned tries = 0;
  int r;
  znbd_refusal_now = ZNBD_REFUSAL_NONE;
  while (znbd_busy_again(c->busy_ok,
                         r = znbd_dev_zone_op_fenced(c->dev, c->gen, op, zone),
                         &tries))
    ;
  return r;
}

uint64_t
znbd_req_delay(const struct znbd_req_ctx *c, unsigned kind, uint64_t len,
               enum znbd_zone_op op)
{
  return znbd_dev_request_delay(c->dev, kind, len, op);
}

bool
znbd_req_drop_reply(const struct znbd_req_ctx *c, unsigned kind)
{
  return znbd_dev_drop_reply(c->dev, kind);
}

enum znbd_refusal
znbd_req_refusal(void)
{
  return znbd_refusal_now;
}

void
znbd_sleep_ns(uint64_t ns)
{
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (ns && nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}
