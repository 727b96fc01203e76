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
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include <liburing.h>

#include "exec.h"
#include "handshake.h"
#include "proto.h"
#include "tag.h"

enum queue_mode { QM_BIO, QM_MQ };

struct worker;
struct mq;
struct inbuf; /* worker.c: a connection's input buffer, refcounted */

/* The wakeup of a thread that sleeps in io_uring_submit_and_wait() on its
 * own ring: other threads post a CQE to that ring with an io_uring
 * MSG_RING request from their own ring (sent with their next submit, so a
 * whole batch of hand-overs costs one wakeup), or write its eventfd when
 * they have no ring or the ring is not up yet.  KICKED makes it one
 * wakeup per batch: set by the first sender, cleared by the woken thread
 * before it takes the handed-over work. */
struct waker {
  _Alignas(TAG_ALIGN) atomic_int ring_fd; /* -1 until the ring exists and
                                           * after it is gone */
  int efd;
  uint64_t msg_ud; /* tag of the CQE posted on the woken ring */
  atomic_bool kicked;
};
/* A failed MSG_RING posts TAG_WAKE_FAIL with the waker on the sender's
 * ring (tag.h); on success it posts nothing there. */
/* Wake T once per batch: MSG_RING from FROM (NULL: eventfd write). */
void waker_kick(struct waker *t, struct io_uring *from);
/* Wake T now, by eventfd (a failed MSG_RING, stop, new connections). */
void waker_kick_efd(struct waker *t);

struct server {
  struct srv_cfg cfg;
  enum queue_mode mode;
  bool sched_deadline; /* --scheduler mq-deadline */
  unsigned nworkers;
  struct worker **workers;
  struct mq *mq;
  uint64_t completion_nsec;
  int fail_efd;       /* server_fail() wakes the main loop through it */
  atomic_bool failed; /* a thread failed: stop without waiting for it */
};

/* A thread that cannot go on (its io_uring failed) calls this instead of
 * exiting the process: the message (printf FMT) goes to stderr and the
 * main loop stops the server, exit status 1.  mainloop.c. */
void server_fail(struct server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- process plumbing used by main.c ---- */

/* sockets.c: the listening sockets. */
struct listeners {
  int fd[2];
  unsigned n;
  int tcp;               /* index of the TCP listener, or -1 */
  const char *unix_path; /* the Unix socket, removed by listeners_close */
  bool tmp;              /* unix_path is in the temporary tmpdir */
  char tmpdir[32], tmpsock[64];
};
/* Listen on UNIX_PATH (NULL: none; TMP: a socket in a new temporary
 * directory instead) and on IPADDR:PORT (PORT -1: no TCP).  0, or -1
 * with the reason (naming -U or -i where it is theirs) in ERR. */
int listeners_open(struct listeners *l, const char *unix_path, bool tmp,
                   const char *ipaddr, int port, char *err, size_t errlen);
/* Close them, remove the Unix socket and the temporary directory. */
void listeners_close(struct listeners *l);

/* background.c: fork; the parent waits and exits 0 once the child calls
 * background_ready (1 if the child exits first: its error went to the
 * shared stderr).  The child detaches (setsid, stdin and stdout on
 * /dev/null).  0, or -1 with the reason in ERR. */
int background_start(char *err, size_t errlen);
/* In the child once it serves (listeners, control socket, threads,
 * pidfile): cwd /, stderr on /dev/null, and the parent released.  No-op
 * without background_start. */
void background_ready(void);
/* PATH made absolute against the current directory (a copy; NULL with
 * errno ENOMEM, or getcwd's errno). */
char *absolute_path(const char *path);
/* Write this process's id to PATH atomically (PATH.tmp, rename).  0, or
 * -1 with the reason in ERR. */
int pidfile_write(const char *path, char *err, size_t errlen);

/* captive.c: run CMD (--run) with /bin/sh, its variables describing
 * listeners L and EXPORT_NAME, and BLOCKED unblocked.  The child's pid,
 * or -1 with the reason in ERR. */
pid_t captive_start(const char *cmd, const struct listeners *l,
                    const char *ipaddr, int port, const char *export_name,
                    const sigset_t *blocked, char *err, size_t errlen);
/* The server stops first: SIGTERM CHILD and reap it. */
void captive_stop(pid_t child);

/* signals.c: block SIGINT, SIGTERM, SIGCHLD and SIGHUP (in SET) in this
 * and every later thread, ignore SIGPIPE, and return a signalfd for
 * them, or -1 with the reason in ERR.  Call before any thread starts. */
int signals_setup(sigset_t *set, char *err, size_t errlen);
/* SI was read from the signalfd: true if the server must stop.  A
 * SIGCHLD stops it only when captive CHILD exited, whose exit status
 * (128 + signal if killed) goes to *STATUS. */
bool signal_stops(const struct signalfd_siginfo *si, pid_t child, int *status);

/* mainloop.c: accept on L until a signal, the captive CHILD's exit or a
 * failed thread says stop; returns the exit status (CHILD's, or 1 after
 * a failure).  *CHILD_REAPED tells whether CHILD exited. */
int main_loop(struct server *s, const struct listeners *l, int sfd, pid_t child,
              bool *child_reaped);

/* A request held by the mq model or by a delayed bio completion. */
#define RQ_REFS 2
struct rq {
  _Alignas(TAG_ALIGN) struct nbd_req req; /* tagged: TAG_RQ_DONE */
  struct inbuf *pin; /* input buffer holding the WRITE payload (a ref) */
  struct buf reply;  /* the complete reply, built by queue_rq */
  struct conn *conn;
  const struct nbdc *proto; /* conn's protocol state */
  struct worker *w;
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

/* worker.c */
/* Worker IDX of S (its eventfd and a ring its thread enables), or NULL
 * with the reason, naming --threads, in ERR. */
struct worker *worker_new(struct server *s, unsigned idx, char *err,
                          size_t errlen);
/* Start W's thread: 0, or -1 with the reason in ERR. */
int worker_start(struct worker *w, char *err, size_t errlen);
void worker_add_conn(struct worker *w, int fd);
void worker_stop(struct worker *w); /* ask: finish, close, exit */
/* After a power cut (write_cache=true): drop every connection made
 * before it, as a device losing power drops its links. */
void worker_power_cut(struct worker *w);
void worker_join(struct worker *w);
void worker_free(struct worker *w); /* after worker_join; W may be NULL */
/* Called by hardware queue threads: RQ is finished; its reply goes out on
 * its connection and its tag is released by the worker. */
void worker_complete(struct rq *rq, struct io_uring *from);
/* Tags were freed on a queue with stalled readers: retry them. */
void worker_retry_stalled(struct worker *w, struct io_uring *from);
/* Called by hardware queue threads: plugged write BIO is next in its
 * zone but no tag was free; its worker issues it (mq_issue_plugged) once
 * one is, before other requests of that worker take tags. */
void worker_unplug(struct rq *bio, struct io_uring *from);

/* mq.c */
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
 * w, widx filled) goes through zone write plugging (zone_write_plugging)
 * and, unless plugged, takes a tag of worker WIDX's hardware queue and is
 * inserted through the scheduler.  FROM is the caller's ring, which
 * carries the hardware queue's wakeup with its next submit.  With
 * MQ_QUEUED or MQ_PLUGGED the request belongs to mq; the caller still
 * counts it in flight and pins its payload. */
enum mq_submit_result mq_submit_bio(struct mq *m, struct rq *bio,
                                    struct io_uring *from);
/* A plugged write BIO (untagged) handed to its worker by worker_unplug():
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

/* Arm an io_uring timeout of NSEC on RING with TAG (tag.h), using TS. */
void arm_timeout(struct io_uring *ring, struct __kernel_timespec *ts,
                 uint64_t nsec, uint64_t tag);
struct io_uring_sqe *get_sqe(struct io_uring *ring);
/* io_uring_queue_init with SINGLE_ISSUER and DEFER_TASKRUN where the
 * kernel has them; DISABLED: created disabled (IORING_SETUP_R_DISABLED),
 * the thread that calls ring_enable() becomes its issuer.
 * Returns 0 or -errno. */
int ring_init(struct io_uring *ring, unsigned entries, bool disabled);
/* Enable a ring made with DISABLED from the thread that will use it:
 * 0 or -errno. */
int ring_enable(struct io_uring *ring);

#endif
