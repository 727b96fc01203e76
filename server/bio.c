/* znbd server: the bio submission model (see bio.h): requests execute
 * inline on the worker that parsed them; delayed completions wait on its
 * ring, parked writes in the zone engine.
 */
#include <stdlib.h>

#include "bio.h"
#include "exec.h"
#include "ring.h"
#include "wire.h"

/* Send the replies collected so far after this many requests of one
 * received batch, so client and server overlap instead of taking turns. */
#define EARLY_SEND_AFTER 8

/* A parked write's reply is ready (any thread): back to its worker. */
static void
bio_park_done(struct nbd_park *p)
{
  struct rq *rq = rq_of_park(p);
  rq->ops->complete(rq, NULL);
}

/* Writes that may be parked: with pipeline_zoned_writes, WRITE and
 * WRITE_ZEROES. */
static bool
parkable(const struct conn *c, const struct nbd_req *r)
{
  return c->set->cfg->params->pipeline_zoned_writes &&
         (r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES);
}

/* R is a write ahead of its zone's wp (nbd_exec said EXEC_AGAIN).  Park
 * it in RQ (NULL: a new one) with its payload's input buffer pinned, so
 * no thread and no event loop waits for the wp: its reply comes back
 * through the worker's done list when it ran or failed.  Executed at
 * once if the wp moved meanwhile (or it cannot be parked): replied now. */
static void
bio_park(const struct bio_owner *o, struct conn *c, const struct nbd_req *r,
         struct rq *rq)
{
  if (!rq && !(rq = calloc(1, sizeof *rq))) {
    nbd_reply_error(&c->proto, r, NBD_ENOMEM, "out of memory",
                    &c->out[c->fill]);
    return;
  }
  rq->conn = c;
  rq->proto = &c->proto;
  rq->w = o->w;
  rq->ops = o->ops;
  rq->req = *r;
  rq->park = (struct nbd_park){&c->proto, *r, &rq->reply, bio_park_done};
  if (r->type == NBD_CMD_WRITE) { /* the payload stays where it arrived */
    rq->pin = c->inb;
    c->inb->refs++;
  }
  c->inflight++;
  if (nbd_exec_park(&rq->park, 0) != EXEC_PARKED) {
    conn_rq_reply(c, rq);
    rq_free(rq);
  }
}

int
bio_submit(const struct bio_owner *o, struct conn *c, const struct nbd_req *r)
{
  unsigned park = parkable(c, r) ? EXEC_REQUEUE : 0;
  uint64_t ns = nbd_req_delay(&c->proto, r);
  if (ns == 0) {
    if (nbd_exec(&c->proto, r, EXEC_NOWAIT | EXEC_REF | park,
                 &c->out[c->fill]) == EXEC_AGAIN)
      bio_park(o, c, r, NULL);
    /* Let the client start on the first replies of a long batch while
     * the rest execute (see conn_process). */
    if (++c->batch == EARLY_SEND_AFTER && !c->sending)
      c->proto.pause = true;
    return 0;
  }
  /* Timer completion (null_blk irqmode=2): hold the reply. */
  struct rq *rq = calloc(1, sizeof *rq);
  if (!rq) {
    nbd_reply_error(&c->proto, r, NBD_ENOMEM, "out of memory",
                    &c->out[c->fill]);
    return 0;
  }
  rq->conn = c;
  rq->proto = &c->proto;
  rq->w = o->w;
  rq->ops = o->ops;
  if (nbd_exec(&c->proto, r, EXEC_NOWAIT | park, &rq->reply) == EXEC_AGAIN) {
    bio_park(o, c, r, rq); /* replied when it runs, without the delay */
    return 0;
  }
  c->inflight++;
  arm_timeout(c->set->ring, &rq->ts, ns, tag_ptr(TAG_RQ_DONE, rq));
  return 0;
}
