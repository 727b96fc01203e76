/* znbd server: the blk-mq-like submission model (--queue-mode=mq, mq.c):
 * a tag set, hardware queues each dispatched by its own thread, zone
 * write locking and zone write plugging.  Requests come in as struct rq
 * (rq.h) and go back to their worker through its rq_ops.
 */
#ifndef ZNBD_SERVER_MQ_H
#define ZNBD_SERVER_MQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <liburing.h>

#include "rq.h"

struct server;
struct mq;

/* The tag set and hardware queues of S (tags, eventfds, rings), or NULL
 * with the reason, naming hw_queue_depth or submit_queues, in ERR; frees
 * what it made on failure. */
struct mq *mq_new(struct server *s, char *err, size_t errlen);
/* Start the hardware queue threads: 0, or -1 with the reason in ERR
 * (those started are stopped again). */
int mq_start(struct mq *m, char *err, size_t errlen);
void mq_stop(struct mq *m);
void mq_free(struct mq *m); /* after mq_stop; M may be NULL */
/* What mq_submit_bio() did with a request. */
enum mq_submit_result {
  MQ_QUEUED,  /* took a tag, queued to its hardware queue */
  MQ_PLUGGED, /* zone write plugging: waits in its zone's plug, no tag */
  MQ_NO_TAG,  /* nothing done: no free tag (the reader waits, as blk-mq's)
               * and the request must be offered again */
  MQ_NOMEM    /* nothing done: no memory to plug it; fail it with ENOMEM */
};
/* blk_mq_submit_bio: BIO (on the caller's stack: req, pin, conn, proto,
 * w, ops, widx filled) goes through zone write plugging (zone_write_plugging)
 * and, unless plugged, takes a tag of worker WIDX's hardware queue and is
 * inserted through the scheduler.  FROM is the caller's ring, which
 * carries the hardware queue's wakeup with its next submit.  With
 * MQ_QUEUED or MQ_PLUGGED the request belongs to mq; the caller still
 * counts it in flight and pins its payload. */
enum mq_submit_result mq_submit_bio(struct mq *m, struct rq *bio,
                                    struct io_uring *from);
/* A plugged write BIO (untagged) handed to its worker by its rq_ops unplug:
 * take a tag of its hardware queue and dispatch it (BIO is freed), or
 * false when no tag is free (try again when one is). */
bool mq_issue_plugged(struct mq *m, struct rq *bio, struct io_uring *from);
/* Zone write plugging counters (all under the zone lock): writes to
 * sequential zones seen, those that waited in a plug, waiting now, the
 * most that waited in one zone's plug at once, those merged into the
 * request ahead of them, and those failed by a zone reset. */
struct mq_plug_stats {
  uint64_t writes, plugged, merged, aborted;
  unsigned now, max_depth;
};
void mq_plug_stats(struct mq *m, struct mq_plug_stats *out);
/* The zone control socket's `stats` hook (znbd_control_stats_fn): appends
 * " plug_writes=N plug_plugged=N plug_now=N plug_max_depth=N
 * plug_merged=N plug_aborted=N" when plugging is on, else nothing.
 * OPAQUE is the struct mq. */
void mq_stats_print(void *opaque, FILE *out);
/* Release RQ's tag; wakes stalled readers (through FROM).  RQ belongs to
 * the tag set again on return: the caller must not touch it. */
void mq_put_tag(struct mq *m, struct rq *rq, struct io_uring *from);

/* Free the reply buffers larger than KEEP bytes of the tags that are
 * free now (an idle worker giving memory back). */
void mq_trim(struct mq *m, size_t keep);

#endif
