/* znbd-ublk: the runner of one ublk queue: its thread and io_uring, the
 * tags' descriptors mmap()ed from /dev/ublkcN, FETCH_REQ for every tag
 * and COMMIT_AND_FETCH_REQ for each request done, from the same thread
 * and ring (ublk_drv.c binds a queue to the task that fetched its tags).
 * The requests themselves are io.c's. */
#ifndef ZNBD_UBLK_QUEUE_H
#define ZNBD_UBLK_QUEUE_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io.h"

/* One tag's request between its fetch and its commit. */
struct znbd_ublk_tag {
  int32_t res;    /* the result to commit */
  uint64_t addr;  /* the commit's addr: an append's sector, else 0 */
  uint32_t slot;  /* its intent-record slot (queue * depth + tag) */
  void *confirm;  /* an append's intent record to zero, or NULL */
  unsigned waits; /* events before the commit: its timer, its file I/O */
  struct __kernel_timespec ts; /* its timer's, read at submission */
  uint8_t *buf;                /* its data: max_io_bytes of its own */
  /* A request whose file I/O the runner does (io.h): what it is, the
   * bytes moved so far, a FLUSH's next file and syncs in flight, and the
   * first error. */
  struct znbd_ublk_async a;
  uint64_t moved;
  unsigned next, busy;
  int err;
};

struct znbd_ublk_queue {
  int cdev; /* /dev/ublkcN, shared by the queues, owned by the caller */
  uint16_t q_id, depth;
  struct znbd_ublksrv_io_desc *descs;
  size_t descs_len; /* bytes mmap()ed */
  struct io_uring ring;
  struct znbd_ublk_io io;
  pthread_t thread;
  /* Set by the caller once STOP_DEV returned (or START_DEV failed): a
   * queue whose fetches the kernel never aborts gives up waiting. */
  const atomic_bool *stopping;
  /* After a pass that served requests, poll this long for the next ones
   * before sleeping (--poll-us); 0: sleep at once. */
  uint64_t poll_ns;
  int zero_fd;                /* /dev/zero: confirms appends' intent records */
  struct znbd_ublk_tag *tags; /* depth of them */
  void *bufs;                 /* the tags' buffers, one mapping */
  size_t bufs_len;
  /* Commands the kernel holds (a fetch per tag), timers running, file
   * I/Os in flight. */
  unsigned pending, timers, files;
  /* Tags whose request met a zone held by another write (EBUSY), to be
   * executed again, in order. */
  uint16_t *retry;
  unsigned nretry;
  /* Out, once joined: requests done, those of them found by polling,
   * and whether the thread failed. */
  uint64_t requests, polled;
  int failed;
};

/* Set queue Q_ID of DEPTH tags up on CDEV for device D (requests of at
 * most MAX_IO_BYTES bytes; REDO_WRITES: the server recovered the device,
 * io.h; ZERO_COPY: the device was added with UBLK_F_AUTO_BUF_REG; POLL_NS:
 * nanoseconds to poll after a busy pass, 0 for none) and
 * start its thread, which fetches every tag and serves until the kernel
 * aborts them (STOP_DEV) or STOPPING is set and nothing is pending.
 * Returns 0, or -1 with errno and a message in ERR (Q is then
 * released). */
int znbd_ublk_queue_start(struct znbd_ublk_queue *q, int cdev, uint16_t q_id,
                          uint16_t depth, struct znbd_dev *d,
                          uint32_t max_io_bytes, bool redo_writes,
                          bool zero_copy, uint64_t poll_ns,
                          const atomic_bool *stopping, char *err,
                          size_t errlen);

/* Wait for Q's thread and release its ring, buffer and descriptors (the
 * mmap holds /dev/ublkcN open as the fd does: DEL_DEV waits for both).
 * Never fails. */
void znbd_ublk_queue_join(struct znbd_ublk_queue *q);

#endif
