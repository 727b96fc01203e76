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
#include "../lib/err.h"
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
  /* Zero copy: the index the kernel registers the tag's next request's
   * pages at, with the fallback (user copy) should that fail. */
  if (q->io.zero_copy)
    sqe->addr = tag | (uint64_t)ZNBD_UBLK_AUTO_BUF_REG_FALLBACK << 16;
  return 0;
}

/* What a CQE is for: the kind in bits 32-39 of its user_data, and the
 * tag (or, for a confirm, the slot) below.  A tag's commands (FETCH_REQ,
 * COMMIT_AND_FETCH_REQ) are kind 0: their user_data is the tag alone. */
enum cqe_kind { CQE_CMD = 0, CQE_CONFIRM = 1, CQE_TIMER = 2, CQE_FILE = 3 };
#define CQE_KIND_SHIFT 32

static uint64_t
cqe_data(enum cqe_kind kind, uint32_t id)
{
  return (uint64_t)kind << CQE_KIND_SHIFT | id;
}

/* An SQE, submitting what is queued first when the ring has room for
 * fewer than N more. */
static struct io_uring_sqe *
get_sqe(struct znbd_ublk_queue *q, unsigned n)
{
  if (io_uring_sq_space_left(&q->ring) < n)
    io_uring_submit(&q->ring);
  return io_uring_get_sqe(&q->ring);
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
  /* A commit and its confirm go into the same io_uring_enter. */
  if (io_uring_sq_space_left(&q->ring) < 2)
    io_uring_submit(&q->ring);
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
  struct io_uring_sqe *sqe = get_sqe(q, 1);
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

/* The copy callbacks of TAG's request, its data in the tag's buffer. */
static struct znbd_ublk_copy
tag_copy(struct znbd_ublk_queue *q, struct req_ref *ref, uint16_t tag)
{
  *ref = (struct req_ref){q, tag};
  q->io.buf = q->tags[tag].buf;
  return (struct znbd_ublk_copy){copy_in, copy_out, ref};
}

/* One more of TAG's events done (its timer, its file I/O): commit it
 * after the last. */
static void
event_done(struct znbd_ublk_queue *q, uint16_t tag)
{
  if (--q->tags[tag].waits == 0 && commit(q, tag) < 0)
    q->failed = 1;
}

/* TAG's file I/O ended with ERR (0 or an errno): end the request in the
 * core (io.h's znbd_ublk_io_finish) for its result. */
static void
file_done(struct znbd_ublk_queue *q, uint16_t tag, int err)
{
  struct req_ref ref;
  struct znbd_ublk_copy copy = tag_copy(q, &ref, tag);
  struct znbd_ublk_tag *t = &q->tags[tag];
  t->res = znbd_ublk_io_finish(&q->io, &t->a, err, &copy);
  event_done(q, tag);
}

/* The rest of TAG's read or write: from byte T->moved of the request,
 * on the file T->a says; RWF_DSYNC for a FUA write (O_DSYNC's durability
 * for its range and the file size that covers it). */
static void
file_rw(struct znbd_ublk_queue *q, uint16_t tag)
{
  struct znbd_ublk_tag *t = &q->tags[tag];
  bool write = t->a.kind == ZNBD_UBLK_ASYNC_WRITE;
  const struct znbd_file_io *io = write ? &t->a.w.io : &t->a.r.io;
  struct io_uring_sqe *sqe = get_sqe(q, 1);
  if (!sqe) { /* cannot happen: get_sqe() makes room */
    file_done(q, tag, EIO);
    return;
  }
  uint8_t *buf = t->buf + t->moved;
  unsigned n = (unsigned)(io->len - t->moved);
  off_t at = (off_t)(io->at + t->moved);
  /* Zero copy: the request's own pages, registered at the tag's index,
   * addressed from 0. */
  if (t->a.zc) {
    void *pos = (void *)(uintptr_t)t->moved;
    if (write)
      io_uring_prep_write_fixed(sqe, io->fd, pos, n, (uint64_t)at, tag);
    else
      io_uring_prep_read_fixed(sqe, io->fd, pos, n, (uint64_t)at, tag);
  } else if (write) {
    io_uring_prep_write(sqe, io->fd, buf, n, (uint64_t)at);
  } else {
    io_uring_prep_read(sqe, io->fd, buf, n, (uint64_t)at);
  }
  sqe->rw_flags = write && t->a.dsync ? RWF_DSYNC : 0;
  sqe->user_data = cqe_data(CQE_FILE, tag);
  q->files++;
}

/* FLUSH: fdatasync the files of TAG's flush not yet begun, at most
 * eight in flight. */
static void
file_syncs(struct znbd_ublk_queue *q, uint16_t tag)
{
  struct znbd_ublk_tag *t = &q->tags[tag];
  while (t->next < t->a.f.n && t->busy < 8) {
    struct io_uring_sqe *sqe = get_sqe(q, 1);
    if (!sqe)
      break;
    io_uring_prep_fsync(sqe, t->a.f.fds[t->next++], IORING_FSYNC_DATASYNC);
    sqe->user_data = cqe_data(CQE_FILE, tag);
    t->busy++;
    q->files++;
  }
}

/* Begin TAG's file I/O, which the request left to the runner. */
static void
file_begin(struct znbd_ublk_queue *q, uint16_t tag)
{
  struct znbd_ublk_tag *t = &q->tags[tag];
  t->waits++;
  t->moved = t->next = t->busy = 0;
  t->err = 0;
  switch (t->a.kind) {
  case ZNBD_UBLK_ASYNC_READ:
    if (t->a.r.io.len == 0) { /* all of it past the data */
      file_done(q, tag, 0);
      return;
    }
    file_rw(q, tag);
    return;
  case ZNBD_UBLK_ASYNC_WRITE:
    file_rw(q, tag);
    return;
  case ZNBD_UBLK_ASYNC_FLUSH:
    if (t->a.f.n == 0) {
      file_done(q, tag, 0);
      return;
    }
    file_syncs(q, tag);
    return;
  case ZNBD_UBLK_ASYNC_NONE:
    break;
  }
  file_done(q, tag, EINVAL);
}

/* A CQE of TAG's file I/O, with its result RES. */
static void
file_cqe(struct znbd_ublk_queue *q, uint16_t tag, int res)
{
  struct znbd_ublk_tag *t = &q->tags[tag];
  q->files--;
  if (t->a.kind == ZNBD_UBLK_ASYNC_FLUSH) {
    t->busy--;
    if (res < 0 && !t->err)
      t->err = -res;
    file_syncs(q, tag);
    if (t->busy == 0 && t->next == t->a.f.n)
      file_done(q, tag, t->err);
    return;
  }
  bool write = t->a.kind == ZNBD_UBLK_ASYNC_WRITE;
  uint64_t len = write ? t->a.w.io.len : t->a.r.io.len;
  if (res < 0) {
    file_done(q, tag, -res);
    return;
  }
  if (res == 0) {
    /* A write that moves nothing: the file system is full; a read at
     * the end of the file: zeros from there (a zone reset meanwhile). */
    if (write) {
      file_done(q, tag, ENOSPC);
      return;
    }
    memset(t->buf + t->moved, 0, len - t->moved);
    if (t->a.zc) { /* into the request's pages: user copy */
      struct req_ref ref;
      struct znbd_ublk_copy copy = tag_copy(q, &ref, tag);
      int r = copy.copy_out(copy.opaque, t->buf + t->moved, len - t->moved,
                            t->moved);
      if (r < 0) {
        file_done(q, tag, -r);
        return;
      }
    }
    t->moved = len;
  }
  t->moved += (uint64_t)res;
  if (t->moved < len)
    file_rw(q, tag); /* the rest */
  else
    file_done(q, tag, 0);
}

/* One request of TAG, fetched (or tried again): execute it, then commit
 * it when its injected delay and its file I/O are over.  A request that
 * met a zone held by another write waits in the retry list. */
static void
serve_one(struct znbd_ublk_queue *q, uint16_t tag)
{
  struct znbd_ublksrv_io_desc iod;
  struct znbd_ublk_done done;
  struct req_ref ref;
  struct znbd_ublk_copy copy = tag_copy(q, &ref, tag);
  struct znbd_ublk_tag *t = &q->tags[tag];

  memcpy(&iod, (const void *)&q->descs[tag], sizeof iod);
  t->slot = (uint32_t)q->q_id * q->depth + tag;
  t->res = znbd_ublk_io_exec(&q->io, &iod, t->slot, &copy, &t->a, &done);
  if (t->res == ZNBD_UBLK_RETRY) {
    q->retry[q->nretry++] = tag;
    return;
  }
  q->requests++;
  /* The commit's addr must be 0 but for an append's sector: the kernel
   * refuses anything else with EINVAL and the request never ends.  A
   * failed append's is its zone's start (io.h). */
  bool append = (iod.op_flags & 0xff) == ZNBD_UBLK_IO_OP_ZONE_APPEND;
  t->addr = append ? done.append_lba : 0;
  t->confirm = append ? znbd_dev_redo_word(q->io.dev, t->slot) : NULL;
  t->waits = 1; /* this function's own, dropped at its end */
  /* The injected delay (completion_nsec, mbps, zone latencies); without
   * an SQE for its timer the request is held no longer than this. */
  if (done.delay_nsec && hold(q, tag, done.delay_nsec) < 0)
    fprintf(stderr, "znbd-ublk: queue %u tag %u: no room for its timer\n",
            q->q_id, tag);
  if (t->a.kind != ZNBD_UBLK_ASYNC_NONE)
    file_begin(q, tag);
  event_done(q, tag);
}

/* The requests that met a held zone, tried again in their order (those
 * that meet one again wait for the next time). */
static void
retry_all(struct znbd_ublk_queue *q)
{
  unsigned n = q->nretry;
  q->nretry = 0;
  for (unsigned i = 0; i < n; i++) {
    uint16_t tag = q->retry[i];
    serve_one(q, tag);
  }
}

/* A CQE of a timer, a confirm or a file I/O (not a tag's command). */
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
    event_done(q, (uint16_t)id);
    break;
  case CQE_FILE:
    file_cqe(q, (uint16_t)id, cqe->res);
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
  /* Zero copy: a fixed-buffer table with a slot per tag, for the kernel
   * to register requests' pages in (from the issuer: SINGLE_ISSUER). */
  if (q->io.zero_copy &&
      (r = io_uring_register_buffers_sparse(&q->ring, q->depth)) < 0) {
    fprintf(stderr, "znbd-ublk: queue %u: a fixed-buffer table: %s\n", q->q_id,
            strerror(-r));
    q->failed = 1;
    return NULL;
  }
  for (uint16_t tag = 0; tag < q->depth; tag++)
    if (prep(q, ZNBD_UBLK_U_IO_FETCH_REQ, tag, -1, 0) == 0)
      q->pending++;
  bool busy = false; /* the last pass served requests */
  while (q->pending || q->timers || q->files || q->nretry) {
    struct io_uring_cqe *cqe;
    /* A request waiting for a held zone is tried again soon, whatever
     * comes meanwhile (the write holding it may be another queue's). */
    struct __kernel_timespec ts = {q->nretry ? 0 : 1, q->nretry ? 100000 : 0};
    /* One system call a pass: the commits of the last pass go in and the
     * next requests come out (as the kernel's selftest server kublk.c
     * does).  The fetches of the first pass go in the same way. */
    bool polled = busy && q->poll_ns && poll_next(q);
    if (polled)
      r = 0;
    else
      r = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts, NULL);
    if (r == -ETIME || r == -EINTR) {
      retry_all(q);
      /* Nothing for a second: only a stopped device whose fetches the
       * kernel did not abort ends the loop here (closing the ring then
       * cancels them). */
      if (atomic_load(q->stopping) && !q->files && !q->nretry)
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
    retry_all(q);
    busy = seen != 0;
  }
  return NULL;
}

int
znbd_ublk_queue_start(struct znbd_ublk_queue *q, int cdev, uint16_t q_id,
                      uint16_t depth, struct znbd_dev *d, uint32_t max_io_bytes,
                      bool redo_writes, bool zero_copy, uint64_t poll_ns,
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
    set_err(err, errlen, "queue %u: mmap of the descriptors: %s", q_id,
            strerror(errno));
    return -1;
  }
  /* A buffer per tag, each max_io_bytes, page-aligned (a dir= store
   * with buffered_io=false reads and writes its files with O_DIRECT
   * straight from it): a request's data stays there while its file I/O
   * is in flight.  Memory is taken as the tags use it (NORESERVE). */
  q->bufs_len = (size_t)depth * max_io_bytes;
  q->bufs = mmap(NULL, q->bufs_len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  q->tags = calloc(depth, sizeof *q->tags);
  q->retry = calloc(depth, sizeof *q->retry);
  q->zero_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (q->bufs == MAP_FAILED || !q->tags || !q->retry || q->zero_fd < 0) {
    r = q->zero_fd < 0 ? -errno : -ENOMEM;
    if (q->bufs != MAP_FAILED)
      munmap(q->bufs, q->bufs_len);
    free(q->tags);
    free(q->retry);
    if (q->zero_fd >= 0)
      close(q->zero_fd);
    munmap(q->descs, q->descs_len);
    return fail_err(err, errlen, -r, "queue %u: %s", q_id,
                    r == -ENOMEM ? "out of memory" : "/dev/zero: cannot open");
  }
  for (uint16_t tag = 0; tag < depth; tag++)
    q->tags[tag].buf = (uint8_t *)q->bufs + (size_t)tag * max_io_bytes;
  znbd_ublk_io_init(&q->io, d, q->tags[0].buf, max_io_bytes);
  q->io.redo_writes = redo_writes;
  q->io.zero_copy = zero_copy;
  /* Task work (the kernel handing this queue a request, ublk_drv.c's
   * io_uring_cmd_complete_in_task()) runs when the thread next waits in
   * io_uring_enter, in one batch, instead of interrupting it
   * (DEFER_TASKRUN, which wants SINGLE_ISSUER: the ring is made disabled
   * so that the queue's thread, which enables it, is its one issuer).
   * Kernels before 6.1 refuse the flags: the plain ring then. */
  /* Room for each tag's command, its timer, its confirm and its file
   * I/O (a FLUSH's syncs go in batches, get_sqe() submitting between). */
  r = io_uring_queue_init(4u * depth, &q->ring,
                          IORING_SETUP_SINGLE_ISSUER |
                              IORING_SETUP_DEFER_TASKRUN |
                              IORING_SETUP_R_DISABLED);
  if (r == -EINVAL)
    r = io_uring_queue_init(4u * depth, &q->ring, 0);
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
  munmap(q->bufs, q->bufs_len);
  free(q->tags);
  free(q->retry);
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
  munmap(q->bufs, q->bufs_len);
  free(q->tags);
  free(q->retry);
  close(q->zero_fd);
  munmap(q->descs, q->descs_len);
}
