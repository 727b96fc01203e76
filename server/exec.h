/* znbd server: executing NBD requests against lib/'s device (exec.c),
 * appending each complete reply to a buffer; parked writes of the zone
 * engine (pipeline_zoned_writes); the completion delays of a request.
 */
#ifndef ZNBD_SERVER_EXEC_H
#define ZNBD_SERVER_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "proto.h"

/* Execution flags. */
#define EXEC_NOWAIT 0x1  /* writes ahead of the wp fail (ZNBD_WRITE_NOWAIT) */
#define EXEC_REQUEUE 0x2 /* ... and return EXEC_AGAIN without a reply */
#define EXEC_REF 0x4     /* READ data may go out by c->add_ref (no copy) */
#define REF_MIN 2048     /* smaller READs are copied: cheaper than an iovec */
#define EXEC_AGAIN 1

/* Execute R against the device and append its complete reply to OUT.
 * Returns 0, or EXEC_AGAIN (EXEC_REQUEUE only; OUT untouched). */
int nbd_exec(const struct nbdc *c, const struct nbd_req *r, unsigned xflags,
             struct buf *out);
/* nbd_exec() with READ data going to ADD_REF(OPAQUE, ...) instead of
 * c->add_ref (ADD_REF NULL: copied into OUT): for a thread that executes
 * for C without owning its send path (mq's hardware queues).  ADD_REF is
 * called after OUT holds the bytes that go before the data. */
int nbd_exec_ref(const struct nbdc *c, const struct nbd_req *r, unsigned xflags,
                 struct buf *out, nbd_add_ref_fn add_ref, void *opaque);

/* R's kind as a ZNBD_IO_* bit (drop-reply, delays). */
unsigned nbd_req_kind(const struct nbd_req *r);

/* The injected delay of R, ns (znbd_req_delay: completion_nsec, mbps,
 * zone_reset_nsec); call once per request (it takes from the mbps
 * bucket). */
uint64_t nbd_req_delay(const struct nbdc *c, const struct nbd_req *r);

/* A WRITE or WRITE_ZEROES the zone engine may park (nbd_exec_park):
 * filled by the caller, who keeps it, the request's payload and OUT
 * until DONE is called. */
struct nbd_park {
  const struct nbdc *c;
  struct nbd_req req; /* a copy of the request */
  struct buf *out;    /* gets the complete reply before DONE */
  /* Called once, from another thread (the one that ran the write, the
   * timeout sweeper, or one resetting the zone), with the reply in OUT. */
  void (*done)(struct nbd_park *p);
};
#define EXEC_PARKED 2

/* nbd_exec(P->c, &P->req, xflags, P->out) for a WRITE or WRITE_ZEROES,
 * except that a write ahead of its zone's wp (pipeline_zoned_writes) is
 * parked (znbd_req_write with DONE) rather than refused: returns EXEC_PARKED
 * and the reply comes through P->done; else returns 0 with the reply in
 * P->out, as nbd_exec. */
int nbd_exec_park(struct nbd_park *p, unsigned xflags);

#endif
