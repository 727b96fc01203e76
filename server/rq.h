/* znbd server: a request held past its parsing — by the mq model (a tag,
 * or a plugged write) or by a bio worker (a delayed completion, a parked
 * write) — and how it goes back to the worker that submitted it: the
 * worker's rq_ops, called by whichever thread finishes it, and the
 * lock-free lists they hand requests over on.
 */
#ifndef ZNBD_SERVER_RQ_H
#define ZNBD_SERVER_RQ_H

#include <linux/time_types.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <liburing.h>

#include "buf.h"
#include "exec.h"
#include "proto.h"
#include "tag.h"

struct rq;
struct worker; /* opaque here: only rq_ops look inside */
struct conn;   /* conn.h */
struct inbuf;  /* conn.h: a connection's input buffer, refcounted */
struct hwq;    /* mq.c: a hardware queue */

/* How requests go back to the worker that submitted them (worker.c sets
 * them on every rq it hands on).  Each may be called from any thread;
 * FROM is the caller's ring, which carries the worker's wakeup with its
 * next submit (NULL: none, the wakeup is an eventfd write). */
struct rq_ops {
  /* RQ is finished: its reply goes out on its connection and its tag is
   * released by its worker RQ->w. */
  void (*complete)(struct rq *rq, struct io_uring *from);
  /* Plugged write BIO (untagged) is next in its zone but no tag was
   * free: its worker issues it (mq_issue_plugged) once one is, before
   * other requests of that worker take tags. */
  void (*unplug)(struct rq *bio, struct io_uring *from);
  /* Tags were freed on a queue with stalled readers: worker W retries
   * them. */
  void (*retry_stalled)(struct worker *w, struct io_uring *from);
};

/* A request held by the mq model or by a delayed bio completion. */
#define RQ_REFS 2
struct rq {
  _Alignas(TAG_ALIGN) struct nbd_req req; /* tagged: TAG_RQ_DONE */
  struct inbuf *pin; /* input buffer holding the WRITE payload (a ref) */
  struct buf reply;  /* the complete reply, built by queue_rq */
  struct conn *conn;
  const struct nbdc *proto; /* conn's protocol state */
  struct worker *w;
  const struct rq_ops *ops; /* W's: how the request goes back to it */
  struct hwq *hq;    /* NULL: bio delayed completion, or a plugged write */
  unsigned widx;     /* index of worker W (its hardware queue) */
  struct rq *merged; /* zone write plugging: writes merged behind REQ */
  bool zone_locked;
  uint32_t zone;
  struct rq *next;
  struct __kernel_timespec ts;
  /* A write ahead of its zone's wp, parked by the zone engine
   * (pipeline_zoned_writes): PARKED is set when its reply is ready. */
  struct nbd_park park;
  bool parked;
  /* READ data borrowed from the store (nbd_exec_ref, EXEC_REF): REF[K]'s
   * bytes go out after reply.p[0, REF[K].at), so the hardware queue does
   * not copy them; the worker queues them as bio does (none copied
   * twice).  More than RQ_REFS data chunks are copied into the reply. */
  struct rq_ref {
    size_t at;
    const void *p;
    size_t len;
  } ref[RQ_REFS];
  unsigned nref;
};

/* The rq holding parked write P. */
static inline struct rq *
rq_of_park(struct nbd_park *p)
{
  return (struct rq *)(void *)((char *)p - offsetof(struct rq, park));
}

/* Free an rq that is no tag (HQ NULL: bio's, or a plugged write) and its
 * reply buffer. */
static inline void
rq_free(struct rq *rq)
{
  buf_free(&rq->reply);
  free(rq);
}

/* A lock-free hand-over list of rqs: any thread pushes, one thread takes
 * them all at once.  Sequentially consistent, so a taker that clears its
 * waker's KICKED flag before taking sees every push whose sender found the
 * flag still set. */
typedef _Atomic(struct rq *) rq_stack;

static inline void
rq_stack_push(rq_stack *top, struct rq *rq)
{
  struct rq *old = atomic_load(top);
  do
    rq->next = old;
  while (!atomic_compare_exchange_weak(top, &old, rq));
}

/* Take every pushed rq, oldest first (so each sender's order is kept). */
static inline struct rq *
rq_stack_take(rq_stack *top)
{
  struct rq *l = atomic_exchange(top, NULL), *r = NULL;
  while (l) {
    struct rq *n = l->next;
    l->next = r;
    r = l;
    l = n;
  }
  return r;
}

#endif
