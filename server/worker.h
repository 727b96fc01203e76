/* znbd server: the worker threads (--threads, worker.c), each serving its
 * connections on its own io_uring.  The main loop hands them connections;
 * main.c makes, starts, stops and frees them.
 */
#ifndef ZNBD_SERVER_WORKER_H
#define ZNBD_SERVER_WORKER_H

#include <stddef.h>

struct server;
struct worker;

/* Worker IDX of S (its eventfd and a ring its thread enables), or NULL
 * with the reason, naming --threads, in ERR (ENOMEM, or eventfd's and
 * io_uring_setup's errno: EMFILE, ENFILE, ...). */
struct worker *worker_new(struct server *s, unsigned idx, char *err,
                          size_t errlen);
/* Start W's thread: 0, or -1 with the reason (pthread_create's errno)
 * in ERR. */
int worker_start(struct worker *w, char *err, size_t errlen);
/* Serve connected socket FD (taken over; closed if it cannot be queued,
 * ENOMEM). */
void worker_add_conn(struct worker *w, int fd);
void worker_stop(struct worker *w); /* ask: finish, close, exit */
/* After a power cut (write_cache=true): drop every connection made
 * before it, as a device losing power drops its links. */
void worker_power_cut(struct worker *w);
void worker_join(struct worker *w);
void worker_free(struct worker *w); /* after worker_join; W may be NULL */

#endif
