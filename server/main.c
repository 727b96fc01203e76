/* znbd: standalone io_uring NBD server for the znbd device.
 *   znbd [options] key=value...
 * See man/znbd.pod.  Options follow nbdkit's where they overlap.
 *
 * This file parses the options and parameters and starts and stops the
 * server; the parts live in files named for their job: sockets.c
 * (listeners, socket activation), background.c (daemon, pidfile), captive.c
 * (--run), signals.c, mainloop.c (accept loop), fail.c (a thread's failure),
 * worker.c (the worker loop), conn.c (connection I/O), ring.c (io_uring
 * helpers), bio.c and mq.c (the two queue models), handshake.c,
 * proto.c and exec.c (the protocol), tls.c (TLS sessions), tag.h
 * (io_uring user data).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "znbd/control.h"
#include "znbd/log.h"
#include "znbd/params.h"
#include "znbd/sched.h"
#include "znbd/start.h"
#include "mq.h"
#include "server.h"
#include "tls.h"
#include "worker.h"

static void
usage(FILE *f)
{
  fprintf(f,
          "usage: znbd [options] key=value...\n"
          "  -U, --unix PATH        listen on a Unix socket (- = temporary)\n"
          "  -p, --port PORT        listen on TCP PORT (default 10809)\n"
          "  -i, --ipaddr ADDR      TCP address (default 127.0.0.1)\n"
          "  -f, --foreground       do not fork into the background\n"
          "  -P, --pidfile FILE     write the process id to FILE\n"
          "  -r, --readonly         read-only export\n"
          "  -e, --exportname NAME  export name\n"
          "      --run CMD          run CMD ($uri set), stop when it exits\n"
          "  -t, --threads N        worker threads (default: online CPUs)\n"
          "  -v, --verbose          log every refused request and its reason\n"
          "  -V, --version          print the version and exit\n"
          "      --queue-mode bio|mq     submission model (default bio)\n"
          "      --scheduler none|mq-deadline  mq scheduler (default none)\n"
          "      --tls off|on|require   NBD_OPT_STARTTLS (default off)\n"
          "      --tls-certificates DIR X.509: DIR/ca-cert.pem, "
          "server-cert.pem, server-key.pem\n"
          "      --tls-psk FILE         pre-shared keys (psktool format)\n"
          "      --tls-verify-peer      clients need a certificate signed by "
          "the CA\n"
#ifndef HAVE_GNUTLS
          "      (this znbd was built without GnuTLS: --tls=off only)\n"
#endif
          "device parameters (key=value):\n%s",
          znbd_params_help);
}

static void
note(const char *msg)
{
  fprintf(stderr, "znbd: %s\n", msg);
}

static void
die(const char *fmt, const char *arg)
{
  fprintf(stderr, "znbd: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  exit(EXIT_FAILURE);
}

/* Say so when an option given on the command line has no effect in the
 * chosen queue model, rather than ignoring it silently (the key=value
 * words that have none are refused by parse_params). */
static void
warn_ineffective(const struct server *s, const struct znbd_params *p,
                 bool zoned)
{
  if (s->mode == QM_BIO) {
    if (s->sched_deadline)
      note("--scheduler=mq-deadline has no effect with --queue-mode=bio "
           "(no queues, nothing to schedule)");
    return;
  }
  if (s->sched_deadline && zoned && !p->zone_write_plugging &&
      (p->pipeline_zoned_writes || p->no_zone_write_lock))
    note("--scheduler=mq-deadline: zone write locking is off because "
         "pipeline_zoned_writes=true (the default) or no_zone_write_lock=true; "
         "give pipeline_zoned_writes=false to lock zones");
}

/* The command line, as given. */
struct options {
  const char *unix_path, *ipaddr, *pidfile, *run;
  int port; /* -1: not given */
  bool ipaddr_set, foreground;
  long nthreads;
  struct tls_opts tls;
};

enum {
  OPT_RUN = 256,
  OPT_QMODE,
  OPT_SCHED,
  OPT_TLS,
  OPT_TLS_CERTS,
  OPT_TLS_PSK,
  OPT_TLS_VERIFY
};

/* Long option C (OPT_*), whose argument is ARG (NULL: none), into O and
 * S; stops with a message naming a bad word. */
static void
parse_long_option(int c, const char *arg, struct options *o, struct server *s)
{
  switch (c) {
  case OPT_RUN:
    o->run = arg;
    break;
  case OPT_QMODE:
    if (strcmp(arg, "bio") == 0)
      s->mode = QM_BIO;
    else if (strcmp(arg, "mq") == 0)
      s->mode = QM_MQ;
    else
      die("--queue-mode %s: want bio or mq", arg);
    break;
  case OPT_SCHED:
    if (strcmp(arg, "none") == 0)
      s->sched_deadline = false;
    else if (strcmp(arg, "mq-deadline") == 0)
      s->sched_deadline = true;
    else
      die("--scheduler %s: want none or mq-deadline", arg);
    break;
  case OPT_TLS: /* nbdkit also takes its booleans for off and on */
    if (strcmp(arg, "require") == 0 || strcmp(arg, "force") == 0)
      o->tls.mode = TLS_REQUIRE;
    else if (strcmp(arg, "on") == 0 || strcmp(arg, "true") == 0 ||
             strcmp(arg, "yes") == 0 || strcmp(arg, "1") == 0)
      o->tls.mode = TLS_ON;
    else if (strcmp(arg, "off") == 0 || strcmp(arg, "false") == 0 ||
             strcmp(arg, "no") == 0 || strcmp(arg, "0") == 0)
      o->tls.mode = TLS_OFF;
    else
      die("--tls %s: want off, on or require", arg);
    break;
  case OPT_TLS_CERTS:
    o->tls.certs_dir = arg;
    break;
  case OPT_TLS_PSK:
    o->tls.psk_file = arg;
    break;
  case OPT_TLS_VERIFY:
    o->tls.verify_peer = true;
    break;
  }
}

/* Options into O and S; returns -1 to go on, else the exit status
 * (--help, --version, a bad option). */
static int
parse_options(int argc, char **argv, struct options *o, struct server *s)
{
  static const struct option longopts[] = {
      {"unix", required_argument, NULL, 'U'},
      {"port", required_argument, NULL, 'p'},
      {"ipaddr", required_argument, NULL, 'i'},
      {"foreground", no_argument, NULL, 'f'},
      {"pidfile", required_argument, NULL, 'P'},
      {"readonly", no_argument, NULL, 'r'},
      {"exportname", required_argument, NULL, 'e'},
      {"threads", required_argument, NULL, 't'},
      {"run", required_argument, NULL, OPT_RUN},
      {"queue-mode", required_argument, NULL, OPT_QMODE},
      {"scheduler", required_argument, NULL, OPT_SCHED},
      {"tls", required_argument, NULL, OPT_TLS},
      {"tls-certificates", required_argument, NULL, OPT_TLS_CERTS},
      {"tls-psk", required_argument, NULL, OPT_TLS_PSK},
      {"tls-verify-peer", no_argument, NULL, OPT_TLS_VERIFY},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {"verbose", no_argument, NULL, 'v'},
      {NULL, 0, NULL, 0},
  };
  *o = (struct options){.ipaddr = "127.0.0.1",
                        .port = -1,
                        .nthreads = sysconf(_SC_NPROCESSORS_ONLN)};
  s->cfg.export_name = "";
  int c;
  while ((c = getopt_long(argc, argv, "U:p:i:fP:re:t:hVv", longopts, NULL)) !=
         -1) {
    char *end;
    switch (c) {
    case 'U':
      o->unix_path = optarg;
      break;
    case 'p':
      o->port = (int)strtol(optarg, &end, 10);
      if (*end || o->port <= 0 || o->port > 65535)
        die("-p %s: not a port number", optarg);
      break;
    case 'i':
      o->ipaddr = optarg;
      o->ipaddr_set = true;
      break;
    case 'f':
      o->foreground = true;
      break;
    case 'P':
      o->pidfile = optarg;
      break;
    case 'r':
      s->cfg.readonly = true;
      break;
    case 'e':
      if (strlen(optarg) > 4096)
        die("-e: export name longer than 4096 bytes%s", "");
      s->cfg.export_name = optarg;
      s->cfg.export_name_set = true;
      break;
    case 't':
      o->nthreads = strtol(optarg, &end, 10);
      if (*end || o->nthreads < 1 || o->nthreads > 1024)
        die("--threads %s: want 1..1024", optarg);
      break;
    case OPT_RUN:
    case OPT_QMODE:
    case OPT_SCHED:
    case OPT_TLS:
    case OPT_TLS_CERTS:
    case OPT_TLS_PSK:
    case OPT_TLS_VERIFY:
      parse_long_option(c, optarg, o, s);
      break;
    case 'h':
      usage(stdout);
      return 0;
    case 'V':
      printf("znbd %s\n", PACKAGE_VERSION);
      return 0;
    case 'v':
      s->cfg.verbose = true;
      break;
    default:
      usage(stderr);
      return EXIT_FAILURE;
    }
  }
  if (o->nthreads < 1)
    o->nthreads = 1;
  o->tls.verbose = s->cfg.verbose;
  return -1;
}

/* The key=value words into P and the device they describe (stops with a
 * message naming a bad parameter, or one that queue model MODE ignores). */
static struct znbd_dev *
parse_params(int nargs, char **args, struct znbd_params *p,
             enum queue_mode mode)
{
  char err[512];
  const struct znbd_start start = {
      .prog = "znbd",
      .frontend = mode == QM_BIO ? ZNBD_PARAM_FOR_BIO : ZNBD_PARAM_FOR_MQ};
  struct znbd_dev *dev =
      znbd_start_device(&start, p, nargs, args, err, sizeof err);
  if (!dev) {
    fprintf(stderr, "%s\n", err);
    exit(EXIT_FAILURE);
  }
  return dev;
}

/* lib/'s messages on stderr; an injected fault only with -v (OPAQUE:
 * the server's verbose flag). */
static void
log_sink(void *opaque, enum znbd_log_level level, const char *msg)
{
  const bool *verbose = opaque;
  if (level == ZNBD_LOG_FAULT) {
    if (*verbose)
      fprintf(stderr, "znbd: fault: %s\n", msg);
    return;
  }
  fprintf(stderr, "znbd: %s\n", msg);
}

/* What every connection shares, from the device and its parameters. */
static void
setup_cfg(struct server *s, struct znbd_dev *dev, const struct znbd_params *p)
{
  s->cfg.dev = dev;
  s->cfg.params = p;
  s->cfg.size = znbd_dev_size(dev);
  s->cfg.blocksize = p->blocksize ? p->blocksize : 512;
  s->cfg.holes_ok = !(znbd_dev_nr_zones(dev) > 0 &&
                      p->zone_read_past_wp != ZNBD_READ_PAST_WP_ZERO);
  int dlen = znbd_dev_describe(dev, NULL, 0);
  s->cfg.description = malloc((size_t)dlen + 1);
  if (!s->cfg.description)
    die("%s", "out of memory");
  znbd_dev_describe(dev, s->cfg.description, (size_t)dlen + 1);
}

/* Queues and workers, before the sockets: a limit they meet stops
 * start-up with the option's name, before anything is served. */
/* A power cut (write_cache=true): every worker drops its connections. */
static void
on_power_cut(void *opaque)
{
  struct server *s = opaque;
  for (unsigned i = 0; i < s->nworkers; i++)
    worker_power_cut(s->workers[i]);
}

static void
build_server(struct server *s, unsigned nworkers)
{
  char err[512];
  s->nworkers = nworkers;
  s->fail_efd = eventfd(0, EFD_CLOEXEC);
  if (s->fail_efd == -1)
    die("eventfd: %s", strerror(errno));
  if (s->mode == QM_MQ && !(s->mq = mq_new(s, err, sizeof err)))
    die("%s", err);
  if (!(s->workers = calloc(s->nworkers, sizeof *s->workers)))
    die("%s", "out of memory");
  for (unsigned i = 0; i < s->nworkers; i++)
    if (!(s->workers[i] = worker_new(s, i, err, sizeof err)))
      die("%s", err);
  znbd_dev_on_power_cut(s->cfg.dev, on_power_cut, s);
}

static void
start_threads(struct server *s)
{
  char err[512];
  if (s->mq && mq_start(s->mq, err, sizeof err))
    die("%s", err);
  for (unsigned i = 0; i < s->nworkers; i++)
    if (worker_start(s->workers[i], err, sizeof err))
      die("%s", err);
}

/* Clean stop: workers finish and close their connections, then the
 * hardware queues stop; everything is freed. */
static void
stop_server(struct server *s)
{
  znbd_dev_on_power_cut(s->cfg.dev, NULL, NULL);
  for (unsigned i = 0; i < s->nworkers; i++)
    worker_stop(s->workers[i]);
  /* Parked writes answer EIO now, not after zone_write_timeout, and the
   * zone engine calls back no worker once they are gone. */
  znbd_dev_close_parking(s->cfg.dev);
  for (unsigned i = 0; i < s->nworkers; i++)
    worker_join(s->workers[i]);
  if (s->mq)
    mq_stop(s->mq);
  for (unsigned i = 0; i < s->nworkers; i++)
    worker_free(s->workers[i]);
  free(s->workers);
  mq_free(s->mq);
  close(s->fail_efd);
  free(s->cfg.description);
}

int
main(int argc, char **argv)
{
  static struct server s;
  static struct znbd_params p;
  struct options o;
  char err[512];
  int rc = parse_options(argc, argv, &o, &s);
  if (rc != -1)
    return rc;
  znbd_log_set_sink(log_sink, &s.cfg.verbose);
  /* Socket activation (systemd's znbd.socket): the sockets are the
   * service manager's, and the server stays its child (as nbdkit). */
  struct listeners l;
  int activated = listeners_activated(&l, err, sizeof err);
  if (activated == -1)
    die("%s", err);
  if (activated > 0) {
    if (o.unix_path || o.port != -1 || o.ipaddr_set || o.run)
      die("%s", "socket activation (LISTEN_FDS): -U, -p, -i and --run "
                "cannot be used: the sockets are the service manager's");
    o.foreground = true;
  }
  /* Credentials first: a bad file stops start-up before any device is
   * made or socket opened. */
  if (tls_setup(&o.tls, err, sizeof err) == -1)
    die("%s", err);
  s.cfg.tls = o.tls.mode;
  /* -U and -P absolute: the background server changes to "/". */
  char *abs_unix = NULL, *abs_pid = NULL;
  if (o.unix_path && strcmp(o.unix_path, "-") != 0 &&
      !(o.unix_path = abs_unix = absolute_path(o.unix_path)))
    die("-U: %s", strerror(errno));
  if (o.pidfile && !(o.pidfile = abs_pid = absolute_path(o.pidfile)))
    die("-P: %s", strerror(errno));
  struct znbd_dev *dev = parse_params(argc - optind, argv + optind, &p, s.mode);
  warn_ineffective(&s, &p, znbd_dev_nr_zones(dev) > 0);
  setup_cfg(&s, dev, &p);
  /* Before any thread starts: they inherit it (lib/sched.c says why). */
  if (p.sched_batch && znbd_sched_batch() < 0)
    fprintf(stderr, "znbd: note: sched_batch: SCHED_BATCH: %s\n",
            strerror(errno));
  build_server(&s, (unsigned)o.nthreads);

  bool tmp = (o.unix_path && strcmp(o.unix_path, "-") == 0) ||
             (o.run && !o.unix_path && o.port == -1);
  if (!o.unix_path && !tmp && o.port == -1)
    o.port = 10809;
  if (!activated && listeners_open(&l, tmp ? NULL : o.unix_path, tmp, o.ipaddr,
                                   o.port, err, sizeof err) == -1)
    die("%s", err);
  if (!o.foreground && !o.run && background_start(err, sizeof err) == -1)
    die("%s", err);
  sigset_t set;
  int sfd = signals_setup(&set, err, sizeof err);
  if (sfd == -1)
    die("%s", err);
  struct znbd_control *ctl = NULL;
  if (p.zone_control && !(ctl = znbd_control_start_stats(
                              dev, p.zone_control, s.mq ? mq_stats_print : NULL,
                              s.mq, err, sizeof err)))
    die("%s", err);
  start_threads(&s);
  if (o.pidfile && pidfile_write(o.pidfile, err, sizeof err) == -1)
    die("%s", err);
  background_ready();
  pid_t child = -1;
  if (o.run &&
      (child = captive_start(o.run, &l, o.ipaddr, o.port, s.cfg.export_name,
                             &set, err, sizeof err)) == -1)
    die("%s", err);

  bool reaped = false;
  int status = main_loop(&s, &l, sfd, child, &reaped);

  listeners_close(&l); /* no new connections */
  stop_server(&s);
  close(sfd);
  znbd_control_stop(ctl);
  if (child > 0 && !reaped)
    captive_stop(child);
  if (o.pidfile)
    unlink(o.pidfile);
  free(abs_unix);
  free(abs_pid);
  znbd_dev_free(dev);
  znbd_params_free(&p);
  tls_cleanup();
  return status;
}
