/* znbd server: threads and queues shared by worker.c, mq.c and main.c.
 *
 * Workers (--threads) each own one io_uring and serve a set of
 * connections: receive, parse (proto.c), submit, send.  In bio mode a
 * request executes on the worker that parsed it.  In mq mode it takes a
 * tag of one hardware queue (mq.c), whose own thread dispatches it
 * (queue_rq) and hands the finished request back to the worker.
 */
#ifndef ZNBD_SERVER_SERVER_H
#define ZNBD_SERVER_SERVER_H

#include <linux/time_types.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <liburing.h>

#include "proto.h"

enum queue_mode { QM_BIO, QM_MQ };

struct worker;
struct mq;

struct server {
  struct srv_cfg cfg;
  enum queue_mode mode;
  bool sched_deadline; /* --scheduler mq-deadline */
  unsigned nworkers;
  struct worker **workers;
  struct mq *mq;
  uint64_t completion_nsec;
};

/* A request held by the mq model or by a delayed bio completion. */
struct rq {
  struct nbd_req req;
  uint8_t *payload; /* copy of a WRITE payload */
  size_t payload_cap;
  struct buf reply; /* the complete reply, built by queue_rq */
  struct conn *conn;
  const struct nbdc *proto; /* conn's protocol state */
  struct worker *w;
  struct hwq *hq; /* NULL: bio delayed completion */
  unsigned attempts;
  bool zone_locked;
  uint32_t zone;
  struct rq *next;
  struct __kernel_timespec ts;
};

/* worker.c */
struct worker *worker_new(struct server *s, unsigned idx);
int worker_start(struct worker *w);
void worker_add_conn(struct worker *w, int fd);
void worker_stop(struct worker *w); /* ask: finish, close, exit */
void worker_join(struct worker *w);
void worker_free(struct worker *w); /* after worker_join */
/* Called by hardware queue threads: RQ is finished; its reply goes out on
 * its connection and its tag is released by the worker. */
void worker_complete(struct rq *rq);
/* Tags were freed on a queue with stalled readers: retry them. */
void worker_retry_stalled(struct worker *w);

/* mq.c */
struct mq *mq_new(struct server *s, char *err, size_t errlen);
int mq_start(struct mq *m);
void mq_stop(struct mq *m);
void mq_free(struct mq *m); /* after mq_stop; M may be NULL */
/* A free tag of hardware queue for worker index IDX, or NULL (all busy:
 * the reader waits, as blk-mq's). */
struct rq *mq_get_tag(struct mq *m, unsigned idx);
/* Insert RQ (tagged, filled) through the scheduler. */
void mq_submit(struct mq *m, struct rq *rq);
/* Release RQ's tag; wakes stalled readers. */
void mq_put_tag(struct mq *m, struct rq *rq);

/* Arm an io_uring timeout of NSEC on RING for user data UD, using TS. */
void arm_timeout(struct io_uring *ring, struct __kernel_timespec *ts,
                 uint64_t nsec, uint64_t ud);
struct io_uring_sqe *get_sqe(struct io_uring *ring);
int ring_init(struct io_uring *ring, unsigned entries);

#endif
