/* znbd-tcmu: the TCMU command ring of one device, over /dev/uioN
 * (<linux/target_core_user.h>; the kernel side is
 * drivers/target/target_core_user.c). */
#ifndef ZNBD_TCMU_RING_H
#define ZNBD_TCMU_RING_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "scsi.h"

/* Worker threads executing commands: up to this many are in flight at
 * once and complete in whatever order they finish. */
#define TCMU_RING_WORKERS 4

/* After a batch, how long the ring thread keeps looking for the next
 * command before it sleeps, yielding the CPU between looks (see
 * tcmu_ring_serve()). */
#define TCMU_RING_POLL_NS 20000

struct tcmu_job;

struct tcmu_ring {
  int fd;
  void *map;
  size_t map_size;
  unsigned last;        /* reader's cursor into the command ring, bytes */
  unsigned tail;        /* completion cursor (the mailbox's cmd_tail), bytes */
  pthread_mutex_t lock; /* the queue, the tail and the counters */
  pthread_cond_t ready;
  struct tcmu_job *head, **qtail;
  struct tcmu_job *dropped; /* executed, replies dropped (drop-reply) */
  /* Executed commands held for their injected latency, soonest first,
   * completed by the timer thread when due. */
  struct tcmu_job *timed;
  pthread_cond_t timer; /* CLOCK_MONOTONIC */
  int quit, timer_quit; /* workers', then (once they ended) the timer's */
  /* Completions not yet signalled to the kernel, and whether a thread is
   * in the write(2) that signals them (see complete() in ring.c). */
  unsigned unkicked;
  int kicking;
  uint64_t seq_in, seq_out; /* commands taken from / completed to the ring */
  /* Counters, for the log at the end: */
  uint64_t commands;     /* commands completed */
  uint64_t out_of_order; /* completed before an older command */
  unsigned in_flight, max_in_flight;
};

/* Open /dev/UIO (e.g. "uio0") and map its region (size from
 * /sys/class/uio/UIO/maps/map0/size).  Returns 0, or -1 with errno and a
 * message in ERR. */
int tcmu_ring_open(struct tcmu_ring *r, const char *uio, char *err,
                   size_t errlen);

/* Check the command entry OFF bytes into R's command ring against the
 * map: the entry holds its buffer list, the CDB (of the length its
 * opcode's group gives, stored in *CDB_LEN) and every data buffer lie
 * inside the map, the buffers inside the data area.  Returns NULL, or
 * what is wrong (the command then fails with HARDWARE ERROR 04/44/00,
 * touching nothing). */
const char *tcmu_ring_check_entry(const struct tcmu_ring *r, uint32_t off,
                                  size_t *cdb_len);

/* Serve commands with S until *STOP is set and this thread woken
 * (tcmu_ring_stop()): this thread takes each command off the ring (copying its
 * CDB and buffer list, since the kernel reuses the slot for a reply) and
 * executes it itself when it is a fast one (no injected latency, no
 * cache flush), or queues it; TCMU_RING_WORKERS threads execute the
 * queued ones, each waiting the
 * injected latency of its command (znbd_scsi_delay_nsec()), and
 * complete them in the order they finish (TCMU_MAILBOX_FLAG_CAP_OOOC:
 * the reply goes into the next slot at cmd_tail with the command's
 * cmd_id).  Returns once every queued command has completed: 0, or -1
 * with errno (a read/write error on the UIO fd, or no thread).  After a
 * batch it looks for new commands for up to TCMU_RING_POLL_NS, calling
 * sched_yield(2) between looks, and only then sleeps in a blocking
 * read(2) of the UIO fd, one system call per wake-up (tcmu-runner polls
 * and then reads: two). */
int tcmu_ring_serve(struct tcmu_ring *r, struct znbd_scsi *s,
                    volatile sig_atomic_t *stop);

/* Set *STOP and wake thread TH, which runs tcmu_ring_serve(), out of its
 * read(2) (TCMU_RING_WAKE_SIGNAL, whose handler does nothing; sent again
 * until TH has returned, since one may land just before the read), then
 * join it. */
#define TCMU_RING_WAKE_SIGNAL SIGUSR1
void tcmu_ring_stop(pthread_t th, volatile sig_atomic_t *stop);

void tcmu_ring_close(struct tcmu_ring *r);

#endif
