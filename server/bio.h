/* znbd server: the bio submission model (--queue-mode=bio, bio.c): a
 * request executes on the worker that parsed it, as null_blk's
 * queue_mode=0 does in the submitting context.
 */
#ifndef ZNBD_SERVER_BIO_H
#define ZNBD_SERVER_BIO_H

#include <stdint.h>

#include "conn.h"
#include "proto.h"
#include "rq.h"

/* The worker bio submits for. */
struct bio_owner {
  struct worker *w;         /* rq->w of the requests bio holds */
  const struct rq_ops *ops; /* how they go back to W (complete) */
};

/* nbdc_submit_fn of bio mode for C's request R: executed inline and its
 * reply appended to C's output side at once; with a completion delay
 * (nbd_req_delay, ns: completion_nsec, mbps...) the reply is held in an
 * rq until a TAG_RQ_DONE timer on C's ring fires (null_blk irqmode=2),
 * which its worker retires.  A write ahead of its zone's wp
 * (pipeline_zoned_writes) is parked with the zone engine and its rq
 * comes back through O->ops->complete.  Without memory for an rq, R is
 * answered with NBD_ENOMEM.  Always 0 (taken). */
int bio_submit(const struct bio_owner *o, struct conn *c,
               const struct nbd_req *r);

#endif
