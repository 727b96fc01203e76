/* znbd-tcmu: the TCMU command ring (see ring.h).  The protocol is the one
 * documented at the top of <linux/target_core_user.h>: the kernel puts
 * entries at mailbox->cmd_head; we copy each out and execute it on a
 * worker thread, which writes the reply into the next slot at cmd_tail,
 * moves cmd_tail past it and writes 4 bytes to the UIO fd so the kernel
 * reaps the completions (tcmu_handle_completions()). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ring.h"
#include "znbd/request.h"

/* The UAPI header pulls in <linux/uio.h>, whose struct iovec clashes
 * with libc's <sys/uio.h> (same layout): keep libc's. */
#define __LINUX_UIO_H
#include <linux/target_core_user.h>

static void
wake(int sig)
{
  (void)sig; /* only to end the read(2) with EINTR */
}

int
tcmu_ring_open(struct tcmu_ring *r, const char *uio, char *err, size_t errlen)
{
  char path[128], buf[64];
  snprintf(path, sizeof path, "/sys/class/uio/%s/maps/map0/size", uio);
  FILE *f = fopen(path, "r");
  if (!f || !fgets(buf, sizeof buf, f)) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    if (f)
      fclose(f);
    return -1;
  }
  fclose(f);
  r->map_size = strtoull(buf, NULL, 0);
  snprintf(path, sizeof path, "/dev/%s", uio);
  r->fd = open(path, O_RDWR | O_CLOEXEC);
  if (r->fd < 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  r->map =
      mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (r->map == MAP_FAILED) {
    snprintf(err, errlen, "mmap %s (%zu bytes): %s", path, r->map_size,
             strerror(errno));
    close(r->fd);
    return -1;
  }
  /* Before any thread can be told to stop: no SA_RESTART, so
   * tcmu_ring_stop()'s signal ends tcmu_ring_serve()'s read(2). */
  struct sigaction sa = {.sa_handler = wake};
  sigemptyset(&sa.sa_mask);
  sigaction(TCMU_RING_WAKE_SIGNAL, &sa, NULL);
  struct tcmu_mailbox *mb = r->map;
  /* Whatever a previous handler left unanswered is answered by the
   * kernel's timeout; start at the tail. */
  r->last = r->tail = __atomic_load_n(&mb->cmd_tail, __ATOMIC_ACQUIRE);
  r->seq_in = r->seq_out = r->commands = r->out_of_order = 0;
  r->in_flight = r->max_in_flight = 0;
  return 0;
}

struct tcmu_job {
  struct tcmu_job *next;
  uint64_t seq; /* ring order, counted over commands */
  uint16_t cmd_id;
  uint8_t cdb[16];   /* sd sends at most 16-byte CDBs */
  size_t cdb_len;    /* from the opcode's group: znbd_scsi_cdb_len() */
  uint64_t delay_ns; /* injected latency: znbd_scsi_delay_nsec() */
  uint64_t due_ns;   /* taken + delay_ns, CLOCK_MONOTONIC */
  /* A dropped reply's result, kept until the ring stops, or a delayed
   * one's until it is due: */
  int st;
  uint32_t read_len;
  uint8_t sense[ZNBD_SCSI_SENSE_LEN];
  uint32_t iovcnt;
  struct iovec iov[];
};

/* Tell the kernel about the completions made so far: one write(2) to
 * the UIO fd makes it reap every completion up to cmd_tail
 * (tcmu_irqcontrol() -> tcmu_handle_completions()).  While another
 * thread is in that write, leave ours to it: it writes again after its
 * own if completions came meanwhile, so none waits.  Returns 0, or -1
 * with errno from write(2). */
static int
kick(struct tcmu_ring *r)
{
  int rc = 0;
  pthread_mutex_lock(&r->lock);
  if (!r->kicking) {
    r->kicking = 1;
    while (r->unkicked && rc == 0) {
      r->unkicked = 0;
      pthread_mutex_unlock(&r->lock);
      uint32_t one = 0;
      rc = write(r->fd, &one, sizeof one) < 0 ? -1 : 0;
      pthread_mutex_lock(&r->lock);
    }
    r->kicking = 0;
  }
  pthread_mutex_unlock(&r->lock);
  return rc;
}

/* Whether LEN is a length a ring entry can have: a non-zero multiple of
 * TCMU_OP_ALIGN_SIZE inside the ring (a zero one would have the reader
 * go round in place). */
static bool
entry_len_ok(const struct tcmu_mailbox *mb, uint32_t len)
{
  return len >= sizeof(struct tcmu_cmd_entry_hdr) &&
         len % TCMU_OP_ALIGN_SIZE == 0 && len <= mb->cmdr_size;
}

/* Reply to command ID (the SEQ-th taken off the ring) with status ST,
 * SENSE (CHECK CONDITION only) and READ_LEN data-in bytes, in the next
 * command slot at the tail.  Entries are replied to in ring order but
 * each reply names its command (cmd_id), so any command may take any slot
 * (TCMU_MAILBOX_FLAG_CAP_OOOC; tcmu_handle_completions() looks the id
 * up).  Every slot up to the tail was copied out by the reader already:
 * fewer commands were completed than taken.  DO_KICK: tell the kernel
 * now (kick()); else the caller kicks later, for a batch. */
static int
complete(struct tcmu_ring *r, uint16_t id, uint64_t seq, int st,
         const uint8_t *sense, uint32_t read_len, bool do_kick)
{
  struct tcmu_mailbox *mb = r->map;
  uint8_t *ring = (uint8_t *)r->map + mb->cmdr_off;

  pthread_mutex_lock(&r->lock);
  struct tcmu_cmd_entry *e = (void *)(ring + r->tail);
  /* Past PAD entries; the reader checked every length up to the tail. */
  while (tcmu_hdr_get_op(e->hdr.len_op) != TCMU_OP_CMD &&
         entry_len_ok(mb, tcmu_hdr_get_len(e->hdr.len_op))) {
    r->tail = (r->tail + tcmu_hdr_get_len(e->hdr.len_op)) % mb->cmdr_size;
    e = (void *)(ring + r->tail);
  }
  e->hdr.cmd_id = id;
  e->hdr.uflags = TCMU_UFLAG_READ_LEN;
  e->rsp.scsi_status = st;
  if (st != ZNBD_SCSI_GOOD)
    memcpy(e->rsp.sense_buffer, sense, TCMU_SENSE_BUFFERSIZE);
  e->rsp.read_len = read_len;
  r->tail = (r->tail + tcmu_hdr_get_len(e->hdr.len_op)) % mb->cmdr_size;
  __atomic_store_n(&mb->cmd_tail, r->tail, __ATOMIC_RELEASE);
  if (seq != r->seq_out)
    r->out_of_order++;
  r->seq_out++;
  r->commands++;
  r->in_flight--;
  r->unkicked++;
  pthread_mutex_unlock(&r->lock);
  return do_kick ? kick(r) : 0;
}

struct worker_arg {
  struct tcmu_ring *r;
  struct znbd_scsi *s;
};

static uint64_t
mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Hold executed job J (its result in it) until J->due_ns: into the
 * timer thread's list, soonest first.  Caller holds R's lock. */
static void
hold(struct tcmu_ring *r, struct tcmu_job *j)
{
  struct tcmu_job **pp = &r->timed;
  while (*pp && (*pp)->due_ns <= j->due_ns)
    pp = &(*pp)->next;
  j->next = *pp;
  *pp = j;
  pthread_cond_signal(&r->timer);
}

/* Execute job J with S and reply (DO_KICK as for complete()), or, with
 * an injected latency, leave the reply to the timer thread, due that
 * long after the command was taken, as null_blk's timer mode holds each
 * request on its own hrtimer: the thread goes on meanwhile, and commands
 * in flight together wait their latencies together.  Frees J. */
static void
run_job(struct tcmu_ring *r, struct znbd_scsi *s, struct tcmu_job *j,
        bool do_kick)
{
  struct znbd_scsi_cmd c = {
      .cdb = j->cdb, .cdb_len = j->cdb_len, .iov = j->iov, .iovcnt = j->iovcnt};
  int st = znbd_scsi_exec(s, &c);
  if (j->delay_ns && !c.drop_reply) {
    j->st = st;
    j->read_len = c.read_len;
    memcpy(j->sense, c.sense, sizeof j->sense);
    pthread_mutex_lock(&r->lock);
    hold(r, j);
    pthread_mutex_unlock(&r->lock);
    return;
  }
  if (c.drop_reply) {
    /* Lost on its way back: the kernel hears nothing and fails the
     * command after its cmd_time_out.  The entry is completed when the
     * ring stops (drain_dropped()), so that its slot and data blocks are
     * given back to a kernel that has long given up on it. */
    j->st = st;
    j->read_len = c.read_len;
    memcpy(j->sense, c.sense, sizeof j->sense);
    pthread_mutex_lock(&r->lock);
    j->next = r->dropped;
    r->dropped = j;
    pthread_mutex_unlock(&r->lock);
    return;
  }
  if (complete(r, j->cmd_id, j->seq, st, c.sense, c.read_len, do_kick) < 0)
    perror("znbd-tcmu: write to the UIO device");
  free(j);
}

/* Complete the commands whose replies were dropped, as the ring stops.
 * Leaves errno as it found it: the ring's own error is the one its loop
 * returns (lib/err.h's idiom). */
static void
drain_dropped(struct tcmu_ring *r)
{
  int e = errno;
  struct tcmu_job *j = r->dropped;
  r->dropped = NULL;
  while (j) {
    struct tcmu_job *next = j->next;
    complete(r, j->cmd_id, j->seq, j->st, j->sense, j->read_len, false);
    free(j);
    j = next;
  }
  if (kick(r) < 0)
    perror("znbd-tcmu: write to the UIO device");
  errno = e;
}

/* The timer thread: completes each held job when it is due; once the
 * ring quits, all of them at once. */
static void *
timer(void *arg)
{
  struct tcmu_ring *r = arg;
  pthread_mutex_lock(&r->lock);
  for (;;) {
    struct tcmu_job *j = r->timed;
    if (!j && r->timer_quit)
      break;
    if (!j) {
      pthread_cond_wait(&r->timer, &r->lock);
      continue;
    }
    uint64_t now = mono_ns();
    if (j->due_ns > now && !r->timer_quit) {
      struct timespec ts = {(time_t)(j->due_ns / 1000000000u),
                            (long)(j->due_ns % 1000000000u)};
      pthread_cond_timedwait(&r->timer, &r->lock, &ts);
      continue;
    }
    r->timed = j->next;
    pthread_mutex_unlock(&r->lock);
    if (complete(r, j->cmd_id, j->seq, j->st, j->sense, j->read_len, true) < 0)
      perror("znbd-tcmu: write to the UIO device");
    free(j);
    pthread_mutex_lock(&r->lock);
  }
  pthread_mutex_unlock(&r->lock);
  return NULL;
}

static void *
worker(void *arg)
{
  struct tcmu_ring *r = ((struct worker_arg *)arg)->r;
  struct znbd_scsi *s = ((struct worker_arg *)arg)->s;
  for (;;) {
    pthread_mutex_lock(&r->lock);
    while (!r->head && !r->quit)
      pthread_cond_wait(&r->ready, &r->lock);
    struct tcmu_job *j = r->head;
    if (j && !(r->head = j->next))
      r->qtail = &r->head;
    pthread_mutex_unlock(&r->lock);
    if (!j) /* quit, and the queue is drained */
      return NULL;
    run_job(r, s, j, true);
  }
}

/* Whether a command runs on the ring's own thread: any but a cache
 * flush, which may wait for the disk (an injected latency waits on the
 * timer thread, run_job()).  Flushes go to the workers, so they hold up
 * nothing; the others are done where they are read, as tcmu-runner does,
 * since handing each to a worker (two thread wake-ups) costs more than
 * the command itself. */
static bool
run_inline(const struct tcmu_job *j)
{
  return j->cdb[0] != 0x35 && j->cdb[0] != 0x91;
}

/* ---- What the kernel wrote: checked before use ---------------------
 *
 * The ring's entries, offsets and buffer lists are written by the kernel
 * (tcmu_queue_cmd_ring() in target_core_user.c), which is trusted: an
 * iSCSI initiator's bytes reach us only as the CDB and the data, which
 * znbd_scsi_exec() checks.  The offsets are bound-checked all the same,
 * so that a kernel defect or a stray writer of the shared map fails one
 * command (or stops the device) instead of making us read or write
 * outside the map. */

const char *
tcmu_ring_check_entry(const struct tcmu_ring *r, uint32_t off, size_t *cdb_len)
{
  const struct tcmu_mailbox *mb = r->map;
  const uint8_t *base = r->map;
  uint64_t data_start = (uint64_t)mb->cmdr_off + mb->cmdr_size;
  if (data_start > r->map_size || off >= mb->cmdr_size ||
      mb->cmdr_size - off < sizeof(struct tcmu_cmd_entry_hdr))
    return "entry outside the command ring";
  const struct tcmu_cmd_entry *e = (const void *)(base + mb->cmdr_off + off);
  uint64_t len = tcmu_hdr_get_len(e->hdr.len_op);
  uint64_t need = offsetof(struct tcmu_cmd_entry, req.iov) +
                  (uint64_t)e->req.iov_cnt * sizeof(struct iovec);
  if (len < need || len > mb->cmdr_size - off)
    return "buffer list longer than its entry";
  if (e->req.cdb_off >= r->map_size)
    return "CDB outside the map";
  *cdb_len = znbd_scsi_cdb_len(base[e->req.cdb_off]);
  if (r->map_size - e->req.cdb_off < *cdb_len)
    return "CDB outside the map";
  for (uint32_t i = 0; i < e->req.iov_cnt; i++) {
    uint64_t b = (uint64_t)(uintptr_t)e->req.iov[i].iov_base;
    uint64_t n = e->req.iov[i].iov_len;
    if (b < data_start || b > r->map_size || n > r->map_size - b)
      return "data buffer outside the data area";
  }
  return NULL;
}

/* Take the command entry E off the ring: copy what the job needs (CDB,
 * buffer list as pointers into the map; the request shares its bytes
 * with the reply) and run it here or queue it for a worker.  Out of memory
 * fails this command alone, with HARDWARE ERROR.  Completions made here
 * are kicked by the caller. */
static int
take(struct tcmu_ring *r, struct znbd_scsi *s, uint32_t off)
{
  struct tcmu_mailbox *mb = r->map;
  uint8_t *base = r->map;
  struct tcmu_cmd_entry *e = (void *)(base + mb->cmdr_off + off);
  size_t cdb_len = 0;
  const char *why = tcmu_ring_check_entry(r, off, &cdb_len);
  uint32_t n = why ? 0 : e->req.iov_cnt;
  struct tcmu_job *j = why ? NULL : malloc(sizeof *j + n * sizeof j->iov[0]);

  pthread_mutex_lock(&r->lock);
  uint64_t seq = r->seq_in++;
  if (++r->in_flight > r->max_in_flight)
    r->max_in_flight = r->in_flight;
  if (!j) {
    pthread_mutex_unlock(&r->lock);
    /* HARDWARE ERROR; INTERNAL TARGET FAILURE for a malformed entry. */
    uint8_t sense[TCMU_SENSE_BUFFERSIZE] = {0x70, 0, 0x04, 0, 0, 0, 0, 0x0a};
    if (why) {
      fprintf(stderr, "znbd-tcmu: command %u: %s; failed\n",
              (unsigned)e->hdr.cmd_id, why);
      sense[12] = 0x44;
    }
    return complete(r, e->hdr.cmd_id, seq, ZNBD_SCSI_CHECK_CONDITION, sense, 0,
                    false);
  }
  j->next = NULL;
  j->seq = seq;
  j->cmd_id = e->hdr.cmd_id;
  memset(j->cdb, 0, sizeof j->cdb);
  memcpy(j->cdb, base + e->req.cdb_off, cdb_len);
  j->cdb_len = cdb_len;
  j->iovcnt = n;
  for (uint32_t i = 0; i < n; i++) {
    j->iov[i].iov_base = base + (size_t)e->req.iov[i].iov_base;
    j->iov[i].iov_len = e->req.iov[i].iov_len;
  }
  j->delay_ns = znbd_scsi_delay_nsec(s, j->cdb); /* once: it takes mbps */
  j->due_ns = j->delay_ns ? mono_ns() + j->delay_ns : 0;
  if (run_inline(j)) {
    pthread_mutex_unlock(&r->lock);
    run_job(r, s, j, false); /* the ring thread kicks for its batch */
    return 0;
  }
  *r->qtail = j;
  r->qtail = &j->next;
  pthread_cond_signal(&r->ready);
  pthread_mutex_unlock(&r->lock);
  return 0;
}

/* Whether the kernel put commands on the ring within TCMU_RING_POLL_NS,
 * looking again after each sched_yield(2).  Why look before sleeping:
 * the kernel work a completion sets off (target_complete_cmd()'s work
 * item, the block layer's completion, and for a zone's next queued write
 * the dispatch and tcm_loop's submission work) is queued on this
 * thread's CPU and runs once this thread lets it, so the next command
 * often arrives within microseconds of the kick.  Yielding lets that
 * work run now; sleeping instead costs a wake-up per command, and for
 * writes smaller merges behind mq-deadline's zone write lock.  The
 * measured effect is in bench/README.md ("Kernel zoned disks"); the cost
 * is at most TCMU_RING_POLL_NS of CPU per batch. */
static bool
poll_ring(struct tcmu_ring *r, struct tcmu_mailbox *mb)
{
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (r->last != __atomic_load_n(&mb->cmd_head, __ATOMIC_ACQUIRE))
      return true;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >=
        TCMU_RING_POLL_NS)
      return false;
    sched_yield();
  }
}

int
tcmu_ring_serve(struct tcmu_ring *r, struct znbd_scsi *s,
                volatile sig_atomic_t *stop)
{
  struct tcmu_mailbox *mb = r->map;
  uint8_t *ring = (uint8_t *)r->map + mb->cmdr_off;
  struct worker_arg wa = {r, s};
  pthread_t th[TCMU_RING_WORKERS], tth;
  int nth = 0, rc = 0;

  r->head = r->dropped = r->timed = NULL;
  r->qtail = &r->head;
  r->quit = r->timer_quit = 0;
  r->unkicked = 0;
  r->kicking = 0;
  pthread_mutex_init(&r->lock, NULL);
  pthread_cond_init(&r->ready, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->timer, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&tth, NULL, timer, r) != 0) {
    errno = EAGAIN;
    return -1;
  }
  while (nth < TCMU_RING_WORKERS &&
         pthread_create(&th[nth], NULL, worker, &wa) == 0)
    nth++;
  if (!nth) {
    pthread_mutex_lock(&r->lock);
    r->timer_quit = 1;
    pthread_cond_signal(&r->timer);
    pthread_mutex_unlock(&r->lock);
    pthread_join(tth, NULL);
    errno = EAGAIN;
    return -1;
  }
  /* Serve what is on the ring, look for more a while (poll_ring()),
   * then sleep: commands queued before we started are served before the
   * first sleep.  A read of the UIO fd returns at once when the kernel
   * has queued commands since the last one (uio_read() compares event
   * counts), so none that arrives during a batch is left waiting. */
  while (rc == 0 && !*stop) {
    unsigned batch = 0;
    while (rc == 0 &&
           r->last != __atomic_load_n(&mb->cmd_head, __ATOMIC_ACQUIRE)) {
      struct tcmu_cmd_entry *ent = (void *)(ring + r->last);
      uint32_t len = tcmu_hdr_get_len(ent->hdr.len_op);
      if (!entry_len_ok(mb, len) ||
          __atomic_load_n(&mb->cmd_head, __ATOMIC_ACQUIRE) >= mb->cmdr_size) {
        /* Entries cannot be found any more: stop rather than loop. */
        fprintf(stderr,
                "znbd-tcmu: command ring entry at %u: length %u, "
                "head %u: the ring is corrupt\n",
                r->last, len, mb->cmd_head);
        errno = EPROTO;
        rc = -1;
        break;
      }
      unsigned next = (r->last + len) % mb->cmdr_size;
      /* PAD and TMR entries carry no command (TMR only with
       * tmr_notification=1, which znbd-tcmu never sets). */
      if (tcmu_hdr_get_op(ent->hdr.len_op) == TCMU_OP_CMD &&
          take(r, s, r->last) < 0)
        rc = -1;
      r->last = next;
      /* The kernel hears of a batch's completions at its end, and at
       * least every 16 commands of a long one. */
      if (++batch % 16 == 0 && kick(r) < 0)
        rc = -1;
    }
    if (batch && kick(r) < 0)
      rc = -1;
    if (rc == 0 && batch && poll_ring(r, mb))
      continue;
    uint32_t irq;
    if (rc == 0 && !*stop && read(r->fd, &irq, sizeof irq) < 0 &&
        errno != EINTR)
      rc = -1;
  }
  /* errno stays the loop's: the rest only locks, joins and drains. */
  pthread_mutex_lock(&r->lock);
  r->quit = 1;
  pthread_cond_broadcast(&r->ready);
  pthread_mutex_unlock(&r->lock);
  for (int i = 0; i < nth; i++)
    pthread_join(th[i], NULL);
  /* The workers have held their last jobs: the timer completes every
   * held one now. */
  pthread_mutex_lock(&r->lock);
  r->timer_quit = 1;
  pthread_cond_signal(&r->timer);
  pthread_mutex_unlock(&r->lock);
  pthread_join(tth, NULL);
  pthread_cond_destroy(&r->timer);
  drain_dropped(r);
  return rc;
}

void
tcmu_ring_stop(pthread_t th, volatile sig_atomic_t *stop)
{
  *stop = 1;
  for (;;) {
    pthread_kill(th, TCMU_RING_WAKE_SIGNAL);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 50 * 1000 * 1000;
    if (t.tv_nsec >= 1000000000) {
      t.tv_sec++;
      t.tv_nsec -= 1000000000;
    }
    if (pthread_timedjoin_np(th, NULL, &t) == 0)
      return;
  }
}

void
tcmu_ring_close(struct tcmu_ring *r)
{
  munmap(r->map, r->map_size);
  close(r->fd);
}
