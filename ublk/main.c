/* znbd-ublk [options] key=value...: a znbd device (the same key=value
 * words as znbd and the nbdkit plugin, lib/params.c) as a ublk block
 * device, /dev/ublkbN, zoned (host-managed, UBLK_F_ZONED) or plain.  See
 * man/znbd-ublk.pod.  Runs in the foreground until SIGTERM or SIGINT,
 * then stops the device (STOP_DEV), serves the queues until the kernel
 * aborts their fetches, and deletes it (DEL_DEV).  Every device is added
 * with user recovery: with --recover --dev-id N a new znbd-ublk takes
 * over device N, whose server died, instead of adding one.
 *
 * This file parses options and parameters and drives the device's life:
 * ctrl.c sends the control commands, setup.c makes the parameters,
 * recover.c begins a recovery, queue.c runs each queue's thread and
 * ring, io.c executes requests. */
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

/* --zero-copy, and whether device D can have it: the kernel offers
 * UBLK_F_AUTO_BUF_REG (GET_FEATURES; Linux 6.16) and D's requests go to
 * files on the queue's ring (znbd/async.h).  "auto": when both hold;
 * "on": both must, or start-up stops naming what is missing; "off".
 * Returns whether to add the device with it. */
static bool
zero_copy_wanted(struct znbd_ublk_ctrl *ctrl, const char *mode,
                 struct znbd_dev *d)
{
  uint64_t features = 0;
  bool on = strcmp(mode, "on") == 0;
  if (strcmp(mode, "off") == 0)
    return false;
  int r = znbd_ublk_ctrl_cmd(ctrl, ZNBD_UBLK_U_CMD_GET_FEATURES, 0, &features,
                             sizeof features, 0);
  bool kernel = r >= 0 && (features & ZNBD_UBLK_F_AUTO_BUF_REG);
  if (on && !kernel)
    errx(1, "--zero-copy on: the kernel's ublk driver has no "
            "UBLK_F_AUTO_BUF_REG (Linux 6.16 and later)");
  if (on && !znbd_dev_async(d))
    errx(1, "--zero-copy on: zero copy moves data between the kernel and "
            "files: it needs dir= with write_cache=false");
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
 * thread it starts: only main's sigwait() takes them. */
static void
block_stop_signals(sigset_t *set)
{
  sigemptyset(set);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGINT);
  pthread_sigmask(SIG_BLOCK, set, NULL);
}

int
main(int argc, char **argv)
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
  static struct znbd_params p;
  static struct znbd_ublk_params up;
  char err[512];
  long dev_id = -1, nr_queues = 1, depth = 64, poll_us = 0;
  const char *zc_mode = "auto";
  bool recover = false;
  int c;

  while ((c = getopt_long(argc, argv, "n:q:d:p:z:rfh", longopts, NULL)) != -1) {
    switch (c) {
    case 'n':
      dev_id = number("--dev-id", optarg, -1, 1 << 20);
      break;
    case 'q':
      nr_queues = number("--queues", optarg, 1, 64);
      break;
    case 'd':
      depth = number("--depth", optarg, 1, ZNBD_UBLK_MAX_QUEUE_DEPTH);
      break;
    case 'p':
      poll_us = number("--poll-us", optarg, 0, 1000000);
      break;
    case 'z':
      if (strcmp(optarg, "auto") && strcmp(optarg, "on") &&
          strcmp(optarg, "off"))
        errx(1, "--zero-copy %s: expected auto, on or off", optarg);
      zc_mode = optarg;
      break;
    case 'r':
      recover = true;
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
  if (recover && dev_id < 0)
    errx(1, "--recover needs --dev-id N, the device to take over");
  znbd_log_set_sink(log_sink, NULL);
  /* Before anything needs the kernel: a parameter error comes first. */
  const struct znbd_start start = {.prog = "znbd-ublk",
                                   .frontend = ZNBD_PARAM_FOR_UBLK,
                                   .check = setup_params,
                                   .opaque = &up};
  struct znbd_dev *dev = znbd_start_device(&start, &p, argc - optind,
                                           argv + optind, err, sizeof err);
  if (!dev) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }

  sigset_t set;
  block_stop_signals(&set);
  struct znbd_ublk_ctrl ctrl;
  if (znbd_ublk_ctrl_open(&ctrl, err, sizeof err) < 0)
    errx(1, "%s", err);
  bool zero_copy = zero_copy_wanted(&ctrl, zc_mode, dev);
  struct znbd_control *ctl = NULL;
  if (p.zone_control &&
      !(ctl = znbd_control_start(dev, p.zone_control, err, sizeof err)))
    errx(1, "%s", err);

  /* Every device outlives its server (USER_RECOVERY), and the requests a
   * dead server had fetched go to the next one (REISSUE) rather than fail
   * a file system on the disk: a request may so run twice (redo_writes in
   * io.h). */
  struct znbd_ublksrv_ctrl_dev_info info = {
      .nr_hw_queues = (uint16_t)nr_queues,
      .queue_depth = (uint16_t)depth,
      .max_io_buf_bytes = MAX_IO_BYTES,
      .dev_id = (uint32_t)dev_id,
      .ublksrv_pid = getpid(),
      .flags = ZNBD_UBLK_F_USER_COPY | ZNBD_UBLK_F_CMD_IOCTL_ENCODE |
               ZNBD_UBLK_F_USER_RECOVERY | ZNBD_UBLK_F_USER_RECOVERY_REISSUE |
               (p.zoned ? ZNBD_UBLK_F_ZONED : 0) |
               (zero_copy ? ZNBD_UBLK_F_AUTO_BUF_REG : 0),
  };
  int r;
  if (recover) {
    /* Up to 10 s for the kernel to see the old server gone. */
    if (znbd_ublk_recover_begin(ctrl_cmd, &ctrl, (uint32_t)dev_id, &up, 500, 20,
                                &info, err, sizeof err) < 0)
      errx(1, "--recover: %s", err);
    if (!p.dir)
      warnx("--recover without dir=: device %ld gets this server's new RAM "
            "store, whose data is not the dead server's",
            dev_id);
    nr_queues = info.nr_hw_queues;
    depth = info.queue_depth;
    /* The queues take requests as the device was added to give them. */
    bool had = info.flags & ZNBD_UBLK_F_AUTO_BUF_REG;
    if (had != zero_copy && strcmp(zc_mode, "auto") != 0)
      warnx("--recover: device %ld was added %s zero copy: so it stays", dev_id,
            had ? "with" : "without");
    if (had && !znbd_dev_async(dev))
      errx(1,
           "--recover: device %ld was added with zero copy, which needs "
           "dir= with write_cache=false",
           dev_id);
    zero_copy = had;
  } else if ((r = znbd_ublk_ctrl_cmd(&ctrl, ZNBD_UBLK_U_CMD_ADD_DEV,
                                     info.dev_id, &info, sizeof info, 0)) < 0)
    errx(1, "ADD_DEV: %s", strerror(-r));
  uint32_t id = info.dev_id;
  int rc = 1;
  /* A zoned dir= device notes each append's intent, so that a server
   * recovering it after a crash takes an append the dead one did as
   * done instead of appending it twice (znbd/redo.h); a recovering
   * server keeps the dead one's records. */
  int kept = 0;
  if (p.dir && p.zoned &&
      (kept = znbd_dev_redo_open(dev, (uint32_t)(nr_queues * depth), recover,
                                 err, sizeof err)) < 0)
    warnx("%s", err);
  atomic_bool stopping = false;
  struct znbd_ublk_queue *queues = calloc((size_t)nr_queues, sizeof *queues);
  int cdev = -1, started = 0;
  bool live = false;

  if (kept < 0) {
    if (recover)
      goto stop; /* the device is not this server's to delete */
    goto del;
  }
  if (!recover && (r = znbd_ublk_ctrl_cmd(&ctrl, ZNBD_UBLK_U_CMD_SET_PARAMS, id,
                                          &up, sizeof up, 0)) < 0) {
    warnx("SET_PARAMS: %s", strerror(-r));
    goto del;
  }
  if ((cdev = open_cdev(id)) < 0) {
    warnx("/dev/ublkc%u: %s", id, strerror(errno));
    if (recover)
      goto stop; /* the device is not this server's to delete */
    goto del;
  }
  /* The queues fetch their tags before START_DEV, which waits for every
   * tag and then adds the disk (reading the zones through them), or
   * before END_USER_RECOVERY, which waits for them too and then lets the
   * disk's waiting requests through. */
  for (; started < nr_queues; started++)
    if (!queues ||
        znbd_ublk_queue_start(&queues[started], cdev, (uint16_t)started,
                              (uint16_t)depth, dev, MAX_IO_BYTES, recover,
                              zero_copy, (uint64_t)poll_us * 1000, &stopping,
                              err, sizeof err) < 0) {
      warnx("%s", queues ? err : "out of memory");
      goto stop;
    }
  if (recover) {
    if ((r = znbd_ublk_ctrl_cmd(&ctrl, ZNBD_UBLK_U_CMD_END_USER_RECOVERY, id,
                                NULL, 0, (uint64_t)getpid())) < 0) {
      warnx("END_USER_RECOVERY: %s", strerror(-r));
      goto stop;
    }
    warnx("/dev/ublkb%u recovered (%ld queues of %ld tags; %d appends the "
          "dead server may have done)%s",
          id, nr_queues, depth, kept, zero_copy ? ", zero copy" : "");
  } else if ((r = znbd_ublk_ctrl_cmd(&ctrl, ZNBD_UBLK_U_CMD_START_DEV, id, NULL,
                                     0, (uint64_t)getpid())) < 0) {
    warnx("START_DEV: %s", strerror(-r));
    goto stop;
  }
  live = true;
  if (!recover && zero_copy)
    warnx("/dev/ublkb%u: zero copy (UBLK_F_AUTO_BUF_REG)", id);
  printf("/dev/ublkb%u\n", id);
  fflush(stdout);
  int sig;
  sigwait(&set, &sig);
  rc = 0;
stop:
  /* STOP_DEV removes the disk and aborts the queues' fetches; a device
   * that never started has nothing to stop, and its queues give up.  A
   * recovery that failed leaves the device as it found it, waiting for
   * another server: the queues give up, and /dev/ublkcN released puts the
   * device back to QUIESCED. */
  if (recover && !live) {
    atomic_store(&stopping, true);
    for (int i = 0; i < started; i++)
      znbd_ublk_queue_join(&queues[i]);
    if (cdev >= 0)
      close(cdev);
    free(queues);
    znbd_ublk_ctrl_close(&ctrl);
    znbd_control_stop(ctl);
    znbd_dev_free(dev);
    znbd_params_free(&p);
    return 1;
  }
  if ((r = znbd_ublk_ctrl_cmd(&ctrl, ZNBD_UBLK_U_CMD_STOP_DEV, id, NULL, 0,
                              0)) < 0 &&
      live) {
    warnx("STOP_DEV: %s", strerror(-r));
    rc = 1;
  }
  atomic_store(&stopping, true);
  uint64_t requests = 0, redone = 0, redone_appends = 0, polled = 0;
  for (int i = 0; i < started; i++) {
    znbd_ublk_queue_join(&queues[i]);
    requests += queues[i].requests;
    redone += queues[i].io.redone;
    redone_appends += queues[i].io.redone_appends;
    polled += queues[i].polled;
    if (queues[i].failed)
      rc = 1;
  }
  char redo_msg[160] = "", poll_msg[64] = "";
  if (recover)
    snprintf(redo_msg, sizeof redo_msg,
             ", %llu writes and %llu appends redone by the kernel that the "
             "dead server had done",
             (unsigned long long)redone, (unsigned long long)redone_appends);
  if (poll_us)
    snprintf(poll_msg, sizeof poll_msg, ", %llu found by polling",
             (unsigned long long)polled);
  warnx("/dev/ublkb%u: %llu requests%s%s", id, (unsigned long long)requests,
        redo_msg, poll_msg);
del:
  /* DEL_DEV waits until /dev/ublkcN is released: the fd and every
   * queue's mmap (gone with the queues above). */
  if (cdev >= 0)
    close(cdev);
  if ((r = znbd_ublk_ctrl_cmd(&ctrl, ZNBD_UBLK_U_CMD_DEL_DEV, id, NULL, 0, 0)) <
      0) {
    warnx("DEL_DEV: %s", strerror(-r));
    rc = 1;
  }
  free(queues);
  znbd_ublk_ctrl_close(&ctrl);
  znbd_control_stop(ctl);
  znbd_dev_free(dev);
  znbd_params_free(&p);
  return rc;
}
