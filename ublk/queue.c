/* znbd-ublk's queue runner (queue.h).  Sources: drivers/block/ublk_drv.c
 * (ublk_ch_mmap(): where a queue's descriptors are; ublk_ch_read_iter()
 * and ublk_ch_write_iter(): user copy at UBLKSRV_IO_BUF_OFFSET;
 * ublk_ch_uring_cmd(): FETCH_REQ and COMMIT_AND_FETCH_REQ),
 * include/uapi/linux/ublk_cmd.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "queue.h"
#include "znbd/redo.h"
#include "znbd/request.h"

/* Where the request of TAG on Q keeps its data in /dev/ublkcN. */
static uint64_t
buf_pos(const struct znbd_ublk_queue *q, uint16_t tag)
{
  return ZNBD_UBLKSRV_IO_BUF_OFFSET + ((uint64_t)q->q_id << ZNBD_UBLK_QID_OFF) +
         ((uint64_t)tag << ZNBD_UBLK_TAG_OFF);
}

struct req_ref {
  struct znbd_ublk_queue *q;
  uint16_t tag;
};

/* LEN bytes between BUF and byte OFF of R's request buffer: pwrite
 * (OUT, the request's data out to the kernel) or pread. */
static int
copy(struct req_ref *r, void *buf, size_t len, uint64_t off, bool out)
{
  uint64_t pos = buf_pos(r->q, r->tag) + off;
  for (size_t done = 0; done < len;) {
    char *p = (char *)buf + done;
    off_t at = (off_t)(pos + done);
    ssize_t n = out ? pwrite(r->q->cdev, p, len - done, at)
                    : pread(r->q->cdev, p, len - done, at);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n < 0 ? -errno : -EIO;
    done += (size_t)n;
  }
  return 0;
}

static int
copy_in(void *opaque, void *buf, size_t len, uint64_t off)
{
  return copy(opaque, buf, len, off, false);
}

static int
copy_out(void *opaque, const void *buf, size_t len, uint64_t off)
{
  return copy(opaque, (void *)buf, len, off, true);
}

/* Queue the I/O command OP for TAG: FETCH_REQ, or COMMIT_AND_FETCH_REQ
 * with RESULT (and ADDR: 0, or an append's sector). */
static int
prep(struct znbd_ublk_queue *q, uint32_t op, uint16_t tag, int32_t result,
     uint64_t addr)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
  if (!sqe)
    return -EBUSY;
  memset(sqe, 0, sizeof *sqe);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = q->cdev;
  sqe->cmd_op = op;
  sqe->user_data = tag;
  struct znbd_ublksrv_io_cmd *cmd = (void *)sqe->cmd;
  cmd->q_id = q->q_id;
  cmd->tag = tag;
  cmd->result = result;
  cmd->addr = addr;
  return 0;
}

/* What a CQE is for: the kind in bits 32-39 of its user_data, and the
 * tag (or, for a confirm, the slot) below.  A tag's commands (FETCH_REQ,
 * COMMIT_AND_FETCH_REQ) are kind 0: their user_data is the tag alone. */
enum cqe_kind { CQE_CMD = 0, CQE_CONFIRM = 1, CQE_TIMER = 2 };
#define CQE_KIND_SHIFT 32

static uint64_t
cqe_data(enum cqe_kind kind, uint32_t id)
{
  return (uint64_t)kind << CQE_KIND_SHIFT | id;
}

/* Zero the intent record of SLOT (its WORD, 4 bytes) with a read of
 * /dev/zero, which completes inline (FMODE_NOWAIT); no CQE unless it
 * fails (IOSQE_CQE_SKIP_SUCCESS).  The ring has room for a confirm
 * behind each tag's commit. */
static void
prep_confirm(struct znbd_ublk_queue *q, uint32_t slot, void *word)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
  if (!sqe) {
    znbd_dev_redo_confirm(q->io.dev, slot); /* cannot happen: room */
    return;
  }
  io_uring_prep_read(sqe, q->zero_fd, word, 4, 0);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  sqe->user_data = cqe_data(CQE_CONFIRM, slot);
}

/* TAG's request is done: queue its commit (the result and addr its
 * state holds) and, for an append with an intent record, the confirm
 * right behind it.  Returns 0, or -EBUSY (no SQE: cannot happen, the
 * ring has room for every tag's). */
static int
commit(struct znbd_ublk_queue *q, uint16_t tag)
{
  struct znbd_ublk_tag *t = &q->tags[tag];
  if (prep(q, ZNBD_UBLK_U_IO_COMMIT_AND_FETCH_REQ, tag, t->res, t->addr) < 0)
    return -EBUSY;
  q->pending++;
  /* An append's intent record (znbd/redo.h) goes in the same
   * io_uring_enter as its commit, right behind it: io_uring issues the
   * two in order, and ublk_drv.c completes the request inside the
   * COMMIT_AND_FETCH_REQ command, so a SIGKILL, which takes effect when
   * the call returns, finds both done or neither. */
  if (t->confirm)
    prep_confirm(q, t->slot, t->confirm);
  return 0;
}

/* Hold TAG's completion NS nanoseconds, on its own timer (an io_uring
 * timeout), as null_blk's timer mode holds each request on its own
 * hrtimer: the queue's other requests go on meanwhile.  Returns 0, or
 * -EBUSY (no SQE). */
static int
hold(struct znbd_ublk_queue *q, uint16_t tag, uint64_t ns)
{
  struct znbd_ublk_tag *t = &q->tags[tag];
  struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
  if (!sqe)
    return -EBUSY;
  t->ts.tv_sec = (long long)(ns / 1000000000u);
  t->ts.tv_nsec = (long long)(ns % 1000000000u);
  io_uring_prep_timeout(sqe, &t->ts, 0, 0);
  sqe->user_data = cqe_data(CQE_TIMER, tag);
  t->waits++;
  q->timers++;
  return 0;
}

/* One request of TAG, fetched: execute it, then commit it, at once or
 * when its injected delay is over. */
static void
serve_one(struct znbd_ublk_queue *q, uint16_t tag)
{
  struct znbd_ublksrv_io_desc iod;
  struct znbd_ublk_done done;
  struct req_ref ref = {q, tag};
  struct znbd_ublk_copy copy = {copy_in, copy_out, &ref};
  struct znbd_ublk_tag *t = &q->tags[tag];

  memcpy(&iod, (const void *)&q->descs[tag], sizeof iod);
  t->slot = (uint32_t)q->q_id * q->depth + tag;
  t->res = znbd_ublk_io_exec(&q->io, &iod, t->slot, &copy, &done);
  q->requests++;
  /* The commit's addr must be 0 but for an append's sector: the kernel
   * refuses anything else with EINVAL and the request never ends.  A
   * failed append's is its zone's start (io.h). */
  bool append = (iod.op_flags & 0xff) == ZNBD_UBLK_IO_OP_ZONE_APPEND;
  t->addr = append ? done.append_lba : 0;
  t->confirm = append ? znbd_dev_redo_word(q->io.dev, t->slot) : NULL;
  t->waits = 0;
  /* The injected delay (completion_nsec, mbps, zone latencies); without
   * an SQE for its timer the request is held no longer than this. */
  if (done.delay_nsec && hold(q, tag, done.delay_nsec) < 0)
    fprintf(stderr, "znbd-ublk: queue %u tag %u: no room for its timer\n",
            q->q_id, tag);
  if (t->waits == 0 && commit(q, tag) < 0)
    q->failed = 1;
}

/* A CQE of a timer or a confirm (not a tag's command). */
static void
serve_other(struct znbd_ublk_queue *q, const struct io_uring_cqe *cqe)
{
  uint32_t id = (uint32_t)cqe->user_data;
  switch ((enum cqe_kind)(cqe->user_data >> CQE_KIND_SHIFT)) {
  case CQE_CONFIRM:
    /* A confirm that failed: done from here, a moment later. */
    znbd_dev_redo_confirm(q->io.dev, id);
    break;
  case CQE_TIMER:
    /* -ETIME: the delay is over (anything else ends it too). */
    q->timers--;
    if (--q->tags[id].waits == 0 && commit(q, (uint16_t)id) < 0)
      q->failed = 1;
    break;
  case CQE_CMD:
    break;
  }
}

/* Enable RING, made with IORING_SETUP_R_DISABLED, from the calling
 * thread.  liburing 2.3 declares io_uring_enable_rings() but does not
 * export it: the system call itself.  Returns 0, or -1 with errno. */
static int
enable(struct io_uring *ring)
{
  return (int)syscall(__NR_io_uring_register, ring->ring_fd,
                      IORING_REGISTER_ENABLE_RINGS, NULL, 0);
}

static uint64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --poll-us: submit the pass's commits and look for the next requests
 * without sleeping, for up to Q's poll_ns.  With DEFER_TASKRUN a request
 * the kernel hands over waits as task work until the thread enters
 * io_uring_enter, so each look is one io_uring_enter(GETEVENTS) that
 * does not wait (io_uring_get_events).  A thread that does not sleep
 * need not be woken: the wake-up (on a virtual machine also the idle
 * vCPU's) goes out of each request's latency, for the CPU time spent
 * looking.  Returns true when completions are ready; false (nothing in
 * time, or an error, which the waiting call then reports) to sleep as
 * without polling. */
static bool
poll_next(struct znbd_ublk_queue *q)
{
  uint64_t end = now_ns() + q->poll_ns;
  if (io_uring_submit_and_get_events(&q->ring) < 0)
    return false;
  while (!io_uring_cq_ready(&q->ring)) {
    if (now_ns() >= end || io_uring_get_events(&q->ring) < 0)
      return false;
  }
  return true;
}

static void *
run(void *arg)
{
  struct znbd_ublk_queue *q = arg;

  int r;
  /* A ring made disabled is this thread's from here (SINGLE_ISSUER). */
  if ((q->ring.flags & IORING_SETUP_R_DISABLED) && enable(&q->ring) < 0) {
    fprintf(stderr, "znbd-ublk: queue %u: IORING_REGISTER_ENABLE_RINGS: %s\n",
            q->q_id, strerror(errno));
    q->failed = 1;
    return NULL;
  }
  for (uint16_t tag = 0; tag < q->depth; tag++)
    if (prep(q, ZNBD_UBLK_U_IO_FETCH_REQ, tag, -1, 0) == 0)
      q->pending++;
  bool busy = false; /* the last pass served requests */
  while (q->pending || q->timers) {
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = {1, 0};
    /* One system call a pass: the commits of the last pass go in and the
     * next requests come out (as the kernel's selftest server kublk.c
     * does).  The fetches of the first pass go in the same way. */
    bool polled = busy && q->poll_ns && poll_next(q);
    if (polled)
      r = 0;
    else
      r = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts, NULL);
    if (r == -ETIME || r == -EINTR) {
      /* Nothing for a second: only a stopped device whose fetches the
       * kernel did not abort ends the loop here (closing the ring then
       * cancels them). */
      if (atomic_load(q->stopping))
        break;
      continue;
    }
    if (r < 0) {
      fprintf(stderr, "znbd-ublk: queue %u: io_uring: %s\n", q->q_id,
              strerror(-r));
      q->failed = 1;
      break;
    }
    unsigned seen = 0, head;
    io_uring_for_each_cqe(&q->ring, head, cqe)
    {
      uint16_t tag = (uint16_t)cqe->user_data;
      int res = cqe->res;
      seen++;
      if (cqe->user_data >> CQE_KIND_SHIFT) {
        serve_other(q, cqe);
        continue;
      }
      q->pending--;
      if (res == ZNBD_UBLK_IO_RES_ABORT)
        continue; /* the device stops: this tag is done */
      if (res < 0) {
        fprintf(stderr, "znbd-ublk: queue %u tag %u: %s\n", q->q_id, tag,
                strerror(-res));
        q->failed = 1;
        continue;
      }
      q->polled += polled;
      serve_one(q, tag);
    }
    io_uring_cq_advance(&q->ring, seen);
    busy = seen != 0;
  }
  return NULL;
}

int
znbd_ublk_queue_start(struct znbd_ublk_queue *q, int cdev, uint16_t q_id,
                      uint16_t depth, struct znbd_dev *d, uint32_t max_io_bytes,
                      bool redo_writes, uint64_t poll_ns,
                      const atomic_bool *stopping, char *err, size_t errlen)
{
  long page = sysconf(_SC_PAGESIZE);
  size_t max_len =
      ((size_t)ZNBD_UBLK_MAX_QUEUE_DEPTH * sizeof(struct znbd_ublksrv_io_desc) +
       (size_t)page - 1) /
      (size_t)page * (size_t)page;
  int r;

  memset(q, 0, sizeof *q);
  q->cdev = cdev;
  q->q_id = q_id;
  q->depth = depth;
  q->stopping = stopping;
  q->poll_ns = poll_ns;
  q->descs_len =
      ((size_t)depth * sizeof(struct znbd_ublksrv_io_desc) + (size_t)page - 1) /
      (size_t)page * (size_t)page;
  q->descs = mmap(NULL, q->descs_len, PROT_READ, MAP_SHARED | MAP_POPULATE,
                  cdev, (off_t)(ZNBD_UBLKSRV_CMD_BUF_OFFSET + q_id * max_len));
  if (q->descs == MAP_FAILED) {
    int e = errno;
    snprintf(err, errlen, "queue %u: mmap of the descriptors: %s", q_id,
             strerror(e));
    errno = e;
    return -1;
  }
  /* Page-aligned: a dir= store with buffered_io=false reads and writes
   * its files with O_DIRECT straight from it (lib/store_dir.c copies an
   * unaligned buffer to a bounce buffer of its own first). */
  void *buf = NULL;
  if (posix_memalign(&buf, (size_t)page, max_io_bytes)) {
    munmap(q->descs, q->descs_len);
    snprintf(err, errlen, "queue %u: out of memory", q_id);
    errno = ENOMEM;
    return -1;
  }
  q->tags = calloc(depth, sizeof *q->tags);
  q->zero_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (!q->tags || q->zero_fd < 0) {
    r = q->tags ? -errno : -ENOMEM;
    free(buf);
    free(q->tags);
    if (q->zero_fd >= 0)
      close(q->zero_fd);
    munmap(q->descs, q->descs_len);
    snprintf(err, errlen, "queue %u: %s", q_id,
             q->tags ? "/dev/zero: cannot open" : "out of memory");
    errno = -r;
    return -1;
  }
  znbd_ublk_io_init(&q->io, d, buf, max_io_bytes);
  q->io.redo_writes = redo_writes;
  /* Task work (the kernel handing this queue a request, ublk_drv.c's
   * io_uring_cmd_complete_in_task()) runs when the thread next waits in
   * io_uring_enter, in one batch, instead of interrupting it
   * (DEFER_TASKRUN, which wants SINGLE_ISSUER: the ring is made disabled
   * so that the queue's thread, which enables it, is its one issuer).
   * Kernels before 6.1 refuse the flags: the plain ring then. */
  /* Room for each tag's command, its timer and its confirm. */
  r = io_uring_queue_init(3u * depth, &q->ring,
                          IORING_SETUP_SINGLE_ISSUER |
                              IORING_SETUP_DEFER_TASKRUN |
                              IORING_SETUP_R_DISABLED);
  if (r == -EINVAL)
    r = io_uring_queue_init(3u * depth, &q->ring, 0);
  if (r < 0) {
    snprintf(err, errlen, "queue %u: io_uring_queue_init: %s", q_id,
             strerror(-r));
    goto fail;
  }
  if ((r = -pthread_create(&q->thread, NULL, run, q)) < 0) {
    io_uring_queue_exit(&q->ring);
    snprintf(err, errlen, "queue %u: pthread_create: %s", q_id, strerror(-r));
    goto fail;
  }
  return 0;
fail:
  free(buf);
  free(q->tags);
  close(q->zero_fd);
  munmap(q->descs, q->descs_len);
  errno = -r;
  return -1;
}

void
znbd_ublk_queue_join(struct znbd_ublk_queue *q)
{
  pthread_join(q->thread, NULL);
  io_uring_queue_exit(&q->ring);
  free(q->io.buf);
  free(q->tags);
  close(q->zero_fd);
  munmap(q->descs, q->descs_len);
}
