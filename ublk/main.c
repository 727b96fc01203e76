/* znbd-ublk [options] key=value...: a znbd device (the same key=value
 * words as znbd and the nbdkit plugin, lib/params.c) as a ublk block
 * device, /dev/ublkbN, zoned (host-managed, UBLK_F_ZONED) or plain.  See
 * man/znbd-ublk.pod.  Runs in the foreground until SIGTERM or SIGINT,
 * then stops the device (STOP_DEV), serves the queues until the kernel
 * aborts their fetches, and deletes it (DEL_DEV).  Every device is added
 * with user recovery: with --recover --dev-id N a new znbd-ublk takes
 * over device N, whose server died, instead of adding one.
 *
 * This file parses options and parameters and drives the device's life
 * in three steps, as the kernel's ublk selftest server (kublk) does:
 * setup() adds (or recovers) the device and starts its queues, serve()
 * waits for the stop signal, and teardown(), the one way out of every
 * failure and of the normal end, undoes what setup() did.  ctrl.c sends
 * the control commands, setup.c makes the parameters, recover.c begins a
 * recovery, queue.c runs each queue's thread and ring, io.c executes
 * requests. */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctrl.h"
#include "queue.h"
#include "recover.h"
#include "setup.h"
#include "uapi.h"
#include "znbd/async.h"
#include "znbd/control.h"
#include "znbd/dev.h"
#include "znbd/log.h"
#include "znbd/params.h"
#include "znbd/redo.h"
#include "znbd/start.h"
#include "../lib/err.h"

/* Each request's buffer, and so the largest request (max_sectors). */
#define MAX_IO_BYTES (512u * 1024u)

static void
usage(FILE *f)
{
  fprintf(f,
          "usage: znbd-ublk [options] key=value...\n"
          "  -n, --dev-id N     ublk device number (default -1: the "
          "kernel picks)\n"
          "  -q, --queues N     hardware queues, one thread each (default 1)\n"
          "  -d, --depth N      tags per queue (default 64)\n"
          "  -p, --poll-us N    poll N microseconds for the next requests "
          "after\n"
          "                     serving some, before sleeping (default 0)\n"
          "  -z, --zero-copy M  auto, on or off: dir= data between the "
          "request's\n"
          "                     pages and the zone files with no copy "
          "(Linux 6.16's\n"
          "                     UBLK_F_AUTO_BUF_REG; default auto: when the "
          "kernel has it)\n"
          "  -r, --recover      take over device --dev-id N, whose server "
          "died,\n"
          "                     instead of adding one (its queues and "
          "depth)\n"
          "  -f, --foreground   accepted; znbd-ublk always runs in the "
          "foreground\n"
          "  -h, --help         this text\n"
          "device parameters (key=value):\n%s",
          znbd_params_help);
}

/* lib/'s messages (znbd/log.h): notes as "znbd-ublk: note: ..." (err.h's
 * program name), errors and warnings as lib/'s ("znbd: "); injected
 * faults are not reported, as by znbd-tcmu. */
static void
log_sink(void *opaque, enum znbd_log_level level, const char *msg)
{
  (void)opaque;
  if (level == ZNBD_LOG_NOTE)
    warnx("note: %s", msg);
  else if (level != ZNBD_LOG_FAULT)
    fprintf(stderr, "znbd: %s\n", msg);
}

static long
number(const char *opt, const char *s, long min, long max)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max)
    errx(1, "%s %s: expected a number from %ld to %ld", opt, s, min, max);
  return v;
}

/* /dev/ublkcN appears once ADD_DEV made it (devtmpfs, no udev needed);
 * it may take a moment. */
static int
open_cdev(uint32_t id)
{
  char path[64];
  snprintf(path, sizeof path, "/dev/ublkc%u", id);
  for (int i = 0; i < 1000; i++) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0 || errno != ENOENT)
      return fd;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

/* What the command line asks for. */
struct options {
  long dev_id, nr_queues, depth, poll_us;
  const char *zc_mode; /* --zero-copy: "auto", "on" or "off" */
  bool recover;
};

/* The device's life: what setup() made, for serve() and teardown(). */
struct server {
  struct options o; /* nr_queues, depth: a recovered device's own */
  struct znbd_params p;
  struct znbd_ublk_params up;
  struct znbd_dev *dev;
  sigset_t stop_signals;
  struct znbd_ublk_ctrl ctrl;
  bool ctrl_open;
  struct znbd_control *ctl;
  bool zero_copy;
  /* The kernel has device ID for this server: ADD_DEV done, or the
   * recovery begun (START_USER_RECOVERY). */
  bool have_dev;
  uint32_t id;
  int kept; /* appends the dead server may have done (--recover) */
  atomic_bool stopping;
  struct znbd_ublk_queue *queues;
  int cdev, started; /* /dev/ublkcN or -1; queues started */
  bool live;         /* START_DEV or END_USER_RECOVERY done */
};

/* --zero-copy, and whether device D can have it: the kernel offers
 * UBLK_F_AUTO_BUF_REG (GET_FEATURES; Linux 6.16) and D's requests go to
 * files on the queue's ring (znbd/async.h).  "auto": when both hold;
 * "on": both must; "off".  Returns whether to add the device with it
 * (0 or 1), or -1 with errno EOPNOTSUPP and a message naming what is
 * missing in ERR. */
static int
zero_copy_wanted(struct znbd_ublk_ctrl *ctrl, const char *mode,
                 struct znbd_dev *d, char *err, size_t errlen)
{
  uint64_t features = 0;
  bool on = strcmp(mode, "on") == 0;
  if (strcmp(mode, "off") == 0)
    return 0;
  int r = znbd_ublk_ctrl_cmd(ctrl, ZNBD_UBLK_U_CMD_GET_FEATURES, 0, &features,
                             sizeof features, 0);
  bool kernel = r >= 0 && (features & ZNBD_UBLK_F_AUTO_BUF_REG);
  if (on && !kernel)
    return fail_err(err, errlen, EOPNOTSUPP,
                    "--zero-copy on: the kernel's ublk driver has no "
                    "UBLK_F_AUTO_BUF_REG (Linux 6.16 and later)");
  if (on && !znbd_dev_async(d))
    return fail_err(err, errlen, EOPNOTSUPP,
                    "--zero-copy on: zero copy moves data between the kernel "
                    "and files: it needs dir= with write_cache=false");
  return kernel && znbd_dev_async(d);
}

/* znbd_ublk_ctrl_cmd() for recover.c, OPAQUE the control ring. */
static int
ctrl_cmd(void *opaque, uint32_t op, uint32_t dev_id, void *addr, uint16_t len,
         uint64_t data0)
{
  return znbd_ublk_ctrl_cmd(opaque, op, dev_id, addr, len, data0);
}

/* znbd_ublk_setup_params() of the finished parameters P into OPAQUE,
 * the device's ublk parameters (znbd_start.check). */
static int
setup_params(void *opaque, const struct znbd_params *p, char *err,
             size_t errlen)
{
  return znbd_ublk_setup_params(p, MAX_IO_BYTES, opaque, err, errlen);
}

/* SIGTERM and SIGINT into SET, blocked in this thread and so in every
 * thread it starts: only serve()'s sigwait() takes them. */
static void
block_stop_signals(sigset_t *set)
{
  sigemptyset(set);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGINT);
  pthread_sigmask(SIG_BLOCK, set, NULL);
}

/* The options into O; OPTIND is left at the first key=value word.
 * Returns -1 to go on, or the status to exit with (--help: 0, a bad
 * option: 1, after the usage).  A bad number exits with a message. */
static int
parse_options(int argc, char **argv, struct options *o)
{
  static const struct option longopts[] = {
      {"dev-id", required_argument, NULL, 'n'},
      {"queues", required_argument, NULL, 'q'},
      {"depth", required_argument, NULL, 'd'},
      {"poll-us", required_argument, NULL, 'p'},
      {"zero-copy", required_argument, NULL, 'z'},
      {"recover", no_argument, NULL, 'r'},
      {"foreground", no_argument, NULL, 'f'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;

  *o = (struct options){
      .dev_id = -1, .nr_queues = 1, .depth = 64, .zc_mode = "auto"};
  while ((c = getopt_long(argc, argv, "n:q:d:p:z:rfh", longopts, NULL)) != -1) {
    switch (c) {
    case 'n':
      o->dev_id = number("--dev-id", optarg, -1, 1 << 20);
      break;
    case 'q':
      o->nr_queues = number("--queues", optarg, 1, 64);
      break;
    case 'd':
      o->depth = number("--depth", optarg, 1, ZNBD_UBLK_MAX_QUEUE_DEPTH);
      break;
    case 'p':
      o->poll_us = number("--poll-us", optarg, 0, 1000000);
      break;
    case 'z':
      if (strcmp(optarg, "auto") && strcmp(optarg, "on") &&
          strcmp(optarg, "off"))
        errx(1, "--zero-copy %s: expected auto, on or off", optarg);
      o->zc_mode = optarg;
      break;
    case 'r':
      o->recover = true;
      break;
    case 'f':
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 1;
    }
  }
  if (o->recover && o->dev_id < 0)
    errx(1, "--recover needs --dev-id N, the device to take over");
  return -1;
}

/* --recover: take device S->o.dev_id over as INFO (its queues, depth and
 * zero copy), its recovery begun.  Returns 0, or -1 after a message. */
static int
recover_device(struct server *s, struct znbd_ublksrv_ctrl_dev_info *info,
               char *err, size_t errlen)
{
  long dev_id = s->o.dev_id;
  /* Up to 10 s for the kernel to see the old server gone. */
  if (znbd_ublk_recover_begin(ctrl_cmd, &s->ctrl, (uint32_t)dev_id, &s->up, 500,
                              20, info, err, errlen) < 0) {
    warnx("--recover: %s", err);
    return -1;
  }
  s->have_dev = true;
  if (!s->p.dir)
    warnx("--recover without dir=: device %ld gets this server's new RAM "
          "store, whose data is not the dead server's",
          dev_id);
  s->o.nr_queues = info->nr_hw_queues;
  s->o.depth = info->queue_depth;
  /* The queues take requests as the device was added to give them. */
  bool had = info->flags & ZNBD_UBLK_F_AUTO_BUF_REG;
  if (had != s->zero_copy && strcmp(s->o.zc_mode, "auto") != 0)
    warnx("--recover: device %ld was added %s zero copy: so it stays", dev_id,
          had ? "with" : "without");
  s->zero_copy = had;
  if (had && !znbd_dev_async(s->dev)) {
    warnx("--recover: device %ld was added with zero copy, which needs "
          "dir= with write_cache=false",
          dev_id);
    return -1;
  }
  return 0;
}

/* The device from the parameters on the command line (ARGC, ARGV from
 * OPTIND), its control socket, and the kernel's device: added
 * (ADD_DEV), or taken over (--recover).  Returns 0, or -1 after a
 * message. */
static int
add_device(struct server *s, int argc, char **argv, char *err, size_t errlen)
{
  znbd_log_set_sink(log_sink, NULL);
  /* Before anything needs the kernel: a parameter error comes first. */
  const struct znbd_start start = {.prog = "znbd-ublk",
                                   .frontend = ZNBD_PARAM_FOR_UBLK,
                                   .check = setup_params,
                                   .opaque = &s->up};
  if (!(s->dev = znbd_start_device(&start, &s->p, argc - optind, argv + optind,
                                   err, errlen))) {
    fprintf(stderr, "%s\n", err);
    return -1;
  }
  block_stop_signals(&s->stop_signals);
  if (znbd_ublk_ctrl_open(&s->ctrl, err, errlen) < 0) {
    warnx("%s", err);
    return -1;
  }
  s->ctrl_open = true;
  int zc = zero_copy_wanted(&s->ctrl, s->o.zc_mode, s->dev, err, errlen);
  if (zc < 0 ||
      (s->p.zone_control && !(s->ctl = znbd_control_start(
                                  s->dev, s->p.zone_control, err, errlen)))) {
    warnx("%s", err);
    return -1;
  }
  s->zero_copy = zc;
  /* Every device outlives its server (USER_RECOVERY), and the requests a
   * dead server had fetched go to the next one (REISSUE) rather than fail
   * a file system on the disk: a request may so run twice (redo_writes in
   * io.h). */
  struct znbd_ublksrv_ctrl_dev_info info = {
      .nr_hw_queues = (uint16_t)s->o.nr_queues,
      .queue_depth = (uint16_t)s->o.depth,
      .max_io_buf_bytes = MAX_IO_BYTES,
      .dev_id = (uint32_t)s->o.dev_id,
      .ublksrv_pid = getpid(),
      .flags = ZNBD_UBLK_F_USER_COPY | ZNBD_UBLK_F_CMD_IOCTL_ENCODE |
               ZNBD_UBLK_F_USER_RECOVERY | ZNBD_UBLK_F_USER_RECOVERY_REISSUE |
               (s->p.zoned ? ZNBD_UBLK_F_ZONED : 0) |
               (s->zero_copy ? ZNBD_UBLK_F_AUTO_BUF_REG : 0),
  };
  int r;
  if (s->o.recover) {
    if (recover_device(s, &info, err, errlen) < 0)
      return -1;
  } else if ((r = znbd_ublk_ctrl_cmd(&s->ctrl, ZNBD_UBLK_U_CMD_ADD_DEV,
                                     info.dev_id, &info, sizeof info, 0)) < 0) {
    warnx("ADD_DEV: %s", strerror(-r));
    return -1;
  }
  s->have_dev = true;
  s->id = info.dev_id;
  return 0;
}

/* Device S->id's queues, each a thread on /dev/ublkcN, and the device
 * made LIVE: START_DEV, or END_USER_RECOVERY (--recover).  Returns 0, or
 * -1 after a message. */
static int
start_queues(struct server *s, char *err, size_t errlen)
{
  const struct options *o = &s->o;
  uint32_t id = s->id;
  int r;
  /* A zoned dir= device notes each append's intent, so that a server
   * recovering it after a crash takes an append the dead one did as
   * done instead of appending it twice (znbd/redo.h); a recovering
   * server keeps the dead one's records. */
  if (s->p.dir && s->p.zoned &&
      (s->kept = znbd_dev_redo_open(s->dev, (uint32_t)(o->nr_queues * o->depth),
                                    o->recover, err, errlen)) < 0) {
    warnx("%s", err);
    return -1;
  }
  s->queues = calloc((size_t)o->nr_queues, sizeof *s->queues);
  if (!o->recover &&
      (r = znbd_ublk_ctrl_cmd(&s->ctrl, ZNBD_UBLK_U_CMD_SET_PARAMS, id, &s->up,
                              sizeof s->up, 0)) < 0) {
    warnx("SET_PARAMS: %s", strerror(-r));
    return -1;
  }
  if ((s->cdev = open_cdev(id)) < 0) {
    warnx("/dev/ublkc%u: %s", id, strerror(errno));
    return -1;
  }
  /* The queues fetch their tags before START_DEV, which waits for every
   * tag and then adds the disk (reading the zones through them), or
   * before END_USER_RECOVERY, which waits for them too and then lets the
   * disk's waiting requests through. */
  for (; s->started < o->nr_queues; s->started++)
    if (!s->queues ||
        znbd_ublk_queue_start(
            &s->queues[s->started], s->cdev, (uint16_t)s->started,
            (uint16_t)o->depth, s->dev, MAX_IO_BYTES, o->recover, s->zero_copy,
            (uint64_t)o->poll_us * 1000, &s->stopping, err, errlen) < 0) {
      warnx("%s", s->queues ? err : "out of memory");
      return -1;
    }
  if (o->recover) {
    if ((r = znbd_ublk_ctrl_cmd(&s->ctrl, ZNBD_UBLK_U_CMD_END_USER_RECOVERY, id,
                                NULL, 0, (uint64_t)getpid())) < 0) {
      warnx("END_USER_RECOVERY: %s", strerror(-r));
      return -1;
    }
    warnx("/dev/ublkb%u recovered (%ld queues of %ld tags; %d appends the "
          "dead server may have done)%s",
          id, o->nr_queues, o->depth, s->kept,
          s->zero_copy ? ", zero copy" : "");
  } else if ((r = znbd_ublk_ctrl_cmd(&s->ctrl, ZNBD_UBLK_U_CMD_START_DEV, id,
                                     NULL, 0, (uint64_t)getpid())) < 0) {
    warnx("START_DEV: %s", strerror(-r));
    return -1;
  }
  s->live = true;
  return 0;
}

/* Everything up to a LIVE device, into S.  Returns 0, or -1 after a
 * message, with what was made left for teardown(). */
static int
setup(struct server *s, int argc, char **argv)
{
  char err[512];
  s->cdev = -1;
  if (add_device(s, argc, argv, err, sizeof err) < 0)
    return -1;
  return start_queues(s, err, sizeof err);
}

/* Name the device on stdout and serve it (the queues' threads do) until
 * SIGTERM or SIGINT.  Returns 0, the exit status. */
static int
serve(struct server *s)
{
  if (!s->o.recover && s->zero_copy)
    warnx("/dev/ublkb%u: zero copy (UBLK_F_AUTO_BUF_REG)", s->id);
  printf("/dev/ublkb%u\n", s->id);
  fflush(stdout);
  int sig;
  sigwait(&s->stop_signals, &sig);
  return 0;
}

/* Tell S's queues to give up once nothing is pending, wait for them,
 * and report their requests when REPORT.  Returns 1 if a queue's thread
 * failed, else 0. */
static int
join_queues(struct server *s, bool report)
{
  uint64_t requests = 0, redone = 0, redone_appends = 0, polled = 0;
  int failed = 0;
  atomic_store(&s->stopping, true);
  for (int i = 0; i < s->started; i++) {
    struct znbd_ublk_queue *q = &s->queues[i];
    znbd_ublk_queue_join(q);
    requests += q->requests;
    redone += q->io.redone;
    redone_appends += q->io.redone_appends;
    polled += q->polled;
    if (q->failed)
      failed = 1;
  }
  if (!report)
    return failed;
  char redo_msg[160] = "", poll_msg[64] = "";
  if (s->o.recover)
    snprintf(redo_msg, sizeof redo_msg,
             ", %llu writes and %llu appends redone by the kernel that the "
             "dead server had done",
             (unsigned long long)redone, (unsigned long long)redone_appends);
  if (s->o.poll_us)
    snprintf(poll_msg, sizeof poll_msg, ", %llu found by polling",
             (unsigned long long)polled);
  warnx("/dev/ublkb%u: %llu requests%s%s", s->id, (unsigned long long)requests,
        redo_msg, poll_msg);
  return failed;
}

/* Undo what setup() did, however far it got, RC the exit status so far.
 * A device whose queues were set up to start is stopped (STOP_DEV
 * removes the disk and aborts the queues' fetches; a device that never
 * started has nothing to stop, and its queues give up), its queues
 * joined and their requests reported, and deleted (DEL_DEV).  A
 * recovery that failed leaves the device as it found it, waiting for
 * another server: the queues give up, and /dev/ublkcN released puts the
 * device back to QUIESCED.  Returns the exit status: RC, or 1 if a
 * command or a queue failed. */
static int
teardown(struct server *s, int rc)
{
  int r;
  if (s->have_dev && s->o.recover && !s->live) {
    join_queues(s, false);
    rc = 1;
  } else if (s->have_dev) {
    if (s->cdev >= 0) {
      if ((r = znbd_ublk_ctrl_cmd(&s->ctrl, ZNBD_UBLK_U_CMD_STOP_DEV, s->id,
                                  NULL, 0, 0)) < 0 &&
          s->live) {
        warnx("STOP_DEV: %s", strerror(-r));
        rc = 1;
      }
      if (join_queues(s, true))
        rc = 1;
    }
    /* DEL_DEV waits until /dev/ublkcN is released: the fd and every
     * queue's mmap (gone with the queues above). */
    if (s->cdev >= 0)
      close(s->cdev);
    s->cdev = -1;
    if ((r = znbd_ublk_ctrl_cmd(&s->ctrl, ZNBD_UBLK_U_CMD_DEL_DEV, s->id, NULL,
                                0, 0)) < 0) {
      warnx("DEL_DEV: %s", strerror(-r));
      rc = 1;
    }
  }
  if (s->cdev >= 0)
    close(s->cdev);
  free(s->queues);
  if (s->ctrl_open)
    znbd_ublk_ctrl_close(&s->ctrl);
  znbd_control_stop(s->ctl);
  znbd_dev_free(s->dev);
  znbd_params_free(&s->p);
  return rc;
}

int
main(int argc, char **argv)
{
  static struct server s;
  int rc = parse_options(argc, argv, &s.o);
  if (rc >= 0)
    return rc;
  rc = setup(&s, argc, argv) < 0 ? 1 : serve(&s);
  return teardown(&s, rc);
}
