/* znbd-tcmu NAME key=value...: a znbd device (the same key=value words
 * as znbd and the nbdkit plugin, lib/params.c) as a host-managed ZBC
 * SCSI disk in the kernel, through LIO's TCMU and tcm_loop.  Runs in the
 * foreground until SIGTERM or SIGINT, then removes what it configured. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configfs.h"
#include "ring.h"
#include "scsi.h"
#include "znbd/control.h"
#include "znbd/dev.h"
#include "znbd/log.h"
#include "znbd/params.h"
#include "znbd/start.h"

static void
die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputs("znbd-tcmu: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

/* lib/'s messages on stderr: notes as znbd-tcmu's, errors and warnings
 * as lib/'s ("znbd: "); injected faults are not reported. */
static void
log_sink(void *opaque, enum znbd_log_level level, const char *msg)
{
  (void)opaque;
  if (level == ZNBD_LOG_NOTE)
    fprintf(stderr, "znbd-tcmu: note: %s\n", msg);
  else if (level != ZNBD_LOG_FAULT)
    fprintf(stderr, "znbd: %s\n", msg);
}

/* znbd-tcmu's own word, cmd_time_out=SECONDS, into OPAQUE (a long);
 * the others are device parameters (znbd_start.own_word). */
static int
own_word(void *opaque, const char *word, char *err, size_t errlen)
{
  long *cmd_time_out = opaque;
  if (strncmp(word, "cmd_time_out=", 13) != 0)
    return 0;
  const char *v = word + 13;
  char *end;
  errno = 0;
  *cmd_time_out = strtol(v, &end, 10);
  if (errno || end == v || *end || *cmd_time_out < 1 || *cmd_time_out > 3600) {
    snprintf(err, errlen, "cmd_time_out=%s: expected seconds from 1 to 3600",
             v);
    return -1;
  }
  return 1;
}

/* The SCSI layer's checks (znbd_start.check). */
static int
check_params(void *opaque, const struct znbd_params *p, char *err,
             size_t errlen)
{
  (void)opaque;
  return znbd_scsi_check_params(p, err, errlen);
}

static struct tcmu_ring ring;
static struct znbd_scsi scsi;
static volatile sig_atomic_t stopping;
static int serve_rc;

static void *
serve(void *arg)
{
  (void)arg;
  serve_rc = tcmu_ring_serve(&ring, &scsi, &stopping);
  if (serve_rc < 0)
    fprintf(stderr, "znbd-tcmu: ring: %s\n", strerror(errno));
  return NULL;
}

int
main(int argc, char **argv)
{
  static struct znbd_params p;
  char err[512], uio[64];

  if (argc < 2 || argv[1][0] == '-' || strchr(argv[1], '=') ||
      strchr(argv[1], '/'))
    die("usage: znbd-tcmu NAME key=value... (see znbd-tcmu(1))");
  const char *name = argv[1];
  long cmd_time_out = -1; /* the kernel's default */
  znbd_log_set_sink(log_sink, NULL);
  /* Before anything needs the kernel: a parameter error comes first. */
  const struct znbd_start start = {.prog = "znbd-tcmu",
                                   .frontend = ZNBD_PARAM_FOR_TCMU,
                                   .own_word = own_word,
                                   .check = check_params,
                                   .opaque = &cmd_time_out};
  struct znbd_dev *dev =
      znbd_start_device(&start, &p, argc - 2, argv + 2, err, sizeof err);
  if (!dev) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  znbd_scsi_init(&scsi, dev, name);

  /* Every thread inherits the mask: only sigwait() below sees them. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);

  struct znbd_control *ctl = NULL;
  if (p.zone_control &&
      !(ctl = znbd_control_start(dev, p.zone_control, err, sizeof err)))
    die("%s", err);
  if (tcmu_backstore_create(name, znbd_dev_size(dev), p.blocksize,
                            (int)cmd_time_out, uio, sizeof uio, err,
                            sizeof err) < 0 ||
      tcmu_ring_open(&ring, uio, err, sizeof err) < 0) {
    char e2[512];
    tcmu_backstore_remove(name, e2, sizeof e2);
    die("%s", err);
  }
  pthread_t th;
  if (pthread_create(&th, NULL, serve, NULL) != 0)
    die("pthread_create failed");
  int rc = 0;
  if (tcmu_loop_create(name, err, sizeof err) < 0) {
    fprintf(stderr, "znbd-tcmu: %s\n", err);
    rc = 1;
  } else {
    fprintf(stderr, "znbd-tcmu: %s: serving on /dev/%s\n", name, uio);
    int sig;
    sigwait(&set, &sig);
  }
  /* Reverse order: the LUN goes while the ring still answers sd's last
   * commands, then the ring, then the backstore. */
  if (tcmu_loop_remove(name, err, sizeof err) < 0) {
    fprintf(stderr, "znbd-tcmu: %s\n", err);
    rc = 1;
  }
  tcmu_ring_stop(th, &stopping);
  fprintf(stderr,
          "znbd-tcmu: %s: %llu commands, at most %u in flight, %llu "
          "completed before an older one\n",
          name, (unsigned long long)ring.commands, ring.max_in_flight,
          (unsigned long long)ring.out_of_order);
  tcmu_ring_close(&ring);
  if (tcmu_backstore_remove(name, err, sizeof err) < 0) {
    fprintf(stderr, "znbd-tcmu: %s\n", err);
    rc = 1;
  }
  znbd_control_stop(ctl);
  znbd_dev_free(dev);
  znbd_params_free(&p);
  return rc || serve_rc ? 1 : 0;
}
