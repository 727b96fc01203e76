/* The request contract: what every front-end (the nbdkit plugin, znbd's
 * connections, znbd-tcmu's LUN, the control socket) keeps per connection,
 * LUN or queue and passes with each request to the device, so that the
 * rules around a request are written once, here, and not remembered by
 * each front-end:
 *   - the power-cut fence: a request of a connection made before a power
 *     cut changes nothing (ESHUTDOWN), checked under the cut's lock;
 *   - how a write ahead of the wp waits: through a callback (a front-end
 *     that must not block), or on the calling thread, bounded per context;
 *   - the injected delay (completion_nsec, mbps, zone latencies) and the
 *     drop-reply decision (lib/dev_inject.c, znbd_dev_request_delay and
 *     znbd_dev_drop_reply);
 *   - the ALL rule of zone management (lib/zone_all.c).
 * Offsets and lengths are bytes; errors are -1 with errno as for the
 * unfenced znbd_dev_* call each is (lib/dev_unfenced.h, where each call's
 * rules and errors are given; not public: a front-end has only these),
 * plus ESHUTDOWN, and beside the errno the reason of the refusal,
 * znbd_req_refusal().
 */
#ifndef ZNBD_REQUEST_H
#define ZNBD_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "znbd/dev.h"
#include "znbd/refusal.h"

struct znbd_req_ctx {
  struct znbd_dev *dev;
  /* znbd_dev_generation() when the connection was made: the fence.
   * ZNBD_NO_FENCE: tied to no connection (the control socket). */
  uint64_t gen;
  /* The count of this connection's threads waiting for a wp
   * (znbd_req_write without DONE), kept by the front-end, and how many
   * may wait (NULL: no bound). */
  _Atomic unsigned *waiting;
  unsigned max_waiting;
  /* A front-end that makes asynchronous requests (znbd/async.h): its
   * calls below fail with EBUSY on a zone held by an asynchronous write
   * (which only it may be able to end) instead of waiting for it. */
  bool busy_ok;
};

/* A context for a connection (LUN, queue) made now: fenced at the
 * device's current generation, no bound on waiting threads.  Never
 * fails. */
void znbd_req_ctx_init(struct znbd_req_ctx *c, struct znbd_dev *d);

/* Bound C's threads waiting for a wp: at most MAX counted in *WAITING
 * (the front-end's counter, e.g. one per connection, starting at 0) wait
 * at once; one more gets EAGAIN.  Never fails. */
void znbd_req_ctx_bound(struct znbd_req_ctx *c, _Atomic unsigned *waiting,
                        unsigned max);

/* C's calls fail with EBUSY where a zone is held by an asynchronous
 * write (znbd/async.h), for the front-end to try again once that write
 * ended; without it they wait for the write, up to 60 s (then EBUSY).
 * Never fails. */
void znbd_req_ctx_busy_ok(struct znbd_req_ctx *c);

/* A context tied to no connection (ZNBD_NO_FENCE): the control socket's.
 * Never fails. */
void znbd_req_ctx_init_unfenced(struct znbd_req_ctx *c, struct znbd_dev *d);

/* Whether a power cut happened since C was made: its connection is dead
 * (a front-end drops it, answering nothing more).  The fence in the calls
 * below is what makes this safe; this check only ends the connection
 * sooner.  Sets no errno. */
bool znbd_req_cut(const struct znbd_req_ctx *c);

/* The one read entry point: znbd_dev_read() with FLAGS ZNBD_READ_* (CHECK,
 * SINK, REF, ONE_TYPE), its reason left for znbd_req_refusal().  Not
 * fenced (a read changes nothing): a front-end that must not answer
 * after a power cut asks znbd_req_cut() first.  Returns 0 or -1 with
 * errno as znbd_dev_read(). */
int znbd_req_read(const struct znbd_req_ctx *c, void *buf, uint64_t len,
                  uint64_t off, unsigned flags);

/* The one write entry point: LEN bytes from BUF at OFF (BUF NULL: zeros),
 * FLAGS ZNBD_WRITE_* (NOWAIT, ALLOCATE, FUA, ONE_ZONE).  A write ahead of
 * the wp (pipeline_zoned_writes, not NOWAIT) is parked: with DONE, it
 * returns ZNBD_WRITE_PARKED at once and DONE(OPAQUE, err) is called once,
 * later, from another thread (BUF must stay valid until then; a parked
 * FUA write is not synced: DONE calls znbd_req_sync()); without DONE the
 * calling thread waits, or fails with EAGAIN when C's bound of waiting
 * threads is reached.  Returns 0, ZNBD_WRITE_PARKED or -1 with errno as
 * znbd_dev_write(), plus EAGAIN (bound) and ESHUTDOWN (fenced out). */
int znbd_req_write(const struct znbd_req_ctx *c, const void *buf, uint64_t len,
                   uint64_t off, unsigned flags, znbd_write_done_fn done,
                   void *opaque);

/* znbd_dev_append(), fenced. */
int znbd_req_append(const struct znbd_req_ctx *c, const void *buf, uint64_t len,
                    uint64_t zone_start, uint64_t *written);

/* znbd_dev_trim(), fenced; FLAGS ZNBD_WRITE_FUA syncs the range in the
 * same hold of the power-cut lock, so a TRIM with FUA that fails with
 * ESHUTDOWN reset or freed nothing. */
int znbd_req_trim(const struct znbd_req_ctx *c, uint64_t len, uint64_t off,
                  unsigned flags);

/* znbd_dev_flush() and znbd_dev_sync(), fenced. */
int znbd_req_flush(const struct znbd_req_ctx *c);
int znbd_req_sync(const struct znbd_req_ctx *c, uint64_t len, uint64_t off);

/* znbd_dev_zone_op(), fenced. */
int znbd_req_zone_op(const struct znbd_req_ctx *c, enum znbd_zone_op op,
                     uint32_t zone);

/* What znbd_req_zone_op_all() did: zones changed, and on a refusal the
 * zone refused (else ZNBD_ALL_ZONES) with its state before; for OPEN,
 * the CLOSED zones it counted against the open limit. */
struct znbd_zone_all {
  uint32_t done;
  uint32_t closed;
  uint32_t zone;
  struct znbd_zone_info before;
};

/* OP on every zone it fits, the one rule for every front-end's "all"
 * (lib/zone_all.c): RESET resets every sequential zone (null_blk's
 * reset-all; DONE counts those not EMPTY, READONLY or OFFLINE); CLOSE
 * closes the open zones; FINISH finishes the open zones, then the
 * CLOSED ones, so that finishing the open ones frees the slots the
 * CLOSED ones need; OPEN opens the CLOSED zones, refused with
 * ETOOMANYREFS, changing nothing, when they and the EXP_OPEN zones
 * exceed zone_max_open (ZBC-2 5.5).  Zones in index order; stops at
 * the first refusal, leaving the zones done so far done.  Returns 0, or
 * -1 with errno: EINVAL (not zoned, or another op) or
 * znbd_req_zone_op()'s for the zone in RES->zone. */
int znbd_req_zone_op_all(const struct znbd_req_ctx *c, enum znbd_zone_op op,
                         struct znbd_zone_all *res);

/* The injected delay of a request (znbd_dev_request_delay(): KIND one
 * ZNBD_IO_* bit, LEN bytes on the wire, OP for ZNBD_IO_ZONE_MGMT),
 * nanoseconds; it takes from the mbps bucket: once per request.  And
 * whether its reply is to be dropped (znbd_dev_drop_reply(): once per
 * request, before replying).  Never fail. */
uint64_t znbd_req_delay(const struct znbd_req_ctx *c, unsigned kind,
                        uint64_t len, enum znbd_zone_op op);
bool znbd_req_drop_reply(const struct znbd_req_ctx *c, unsigned kind);

/* Why the calling thread's last call above that returned -1 was refused
 * (znbd/refusal.h): the rule's reason, decided where the rule refused,
 * under the zone's lock for a zone rule; ZNBD_REFUSAL_NONE when no rule
 * refused (ENOMEM, a store's EIO, EBUSY).  Per thread, as errno: each
 * call above clears it as it begins.  A parked write's failure
 * (ZNBD_WRITE_PARKED, then DONE with an error) has its reason here for
 * the time of DONE, on the thread that calls it: FULL, READONLY or
 * OFFLINE when the zone stopped taking writes, UNALIGNED_WRITE when its
 * wp went past the write, the rule's when the write ran and was refused,
 * NONE when it timed out or its zone was reset.  Never fails. */
enum znbd_refusal znbd_req_refusal(void);

/* Hold the calling thread NS nanoseconds (a delay znbd_req_delay()
 * handed out, or a retry's pause), sleeping again for what is left
 * after a signal.  No errors. */
void znbd_sleep_ns(uint64_t ns);

#endif
