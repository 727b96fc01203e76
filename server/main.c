/* znbd: standalone io_uring NBD server for the znbd device.
 *   znbd [options] key=value...
 * See man/znbd.pod.  Options follow nbdkit's where they overlap.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "znbd/control.h"
#include "znbd/params.h"
#include "znbd/sched.h"
#include "server.h"

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

/* Say so when a knob given on the command line has no effect in the
 * chosen queue model, rather than ignoring it silently.  ARGS are the
 * key=value words. */
static void
warn_ineffective(const struct server *s, const struct znbd_params *p,
                 bool zoned, int nargs, char **args)
{
  static const char *const mq_only[] = {
      "hw_queue_depth=", "submit_queues=", "no_zone_write_lock="};

  if (s->mode == QM_BIO) {
    if (s->sched_deadline)
      note("--scheduler=mq-deadline has no effect with --queue-mode=bio "
           "(no queues, nothing to schedule)");
    for (int i = 0; i < nargs; i++)
      for (size_t k = 0; k < sizeof mq_only / sizeof mq_only[0]; k++)
        if (strncmp(args[i], mq_only[k], strlen(mq_only[k])) == 0)
          fprintf(stderr, "znbd: %s has no effect with --queue-mode=bio\n",
                  args[i]);
    return;
  }
  if (s->sched_deadline && zoned &&
      (p->pipeline_zoned_writes || p->no_zone_write_lock))
    note("--scheduler=mq-deadline: zone write locking is off because "
         "pipeline_zoned_writes=true (the default) or no_zone_write_lock=true; "
         "give pipeline_zoned_writes=false to lock zones");
}

static char *
shell_quote(const char *s)
{
  size_t n = 3;
  for (const char *p = s; *p; p++)
    n += *p == '\'' ? 4 : 1;
  char *q = malloc(n), *o = q;
  if (!q)
    exit(EXIT_FAILURE);
  *o++ = '\'';
  for (const char *p = s; *p; p++) {
    if (*p == '\'') {
      memcpy(o, "'\\''", 4);
      o += 4;
    } else {
      *o++ = *p;
    }
  }
  *o++ = '\'';
  *o = 0;
  return q;
}

static int
listen_unix(const char *path)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path)
    die("-U %s: path too long", path);
  strcpy(a.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    die("socket: %s", strerror(errno));
  unlink(path); /* a stale socket from an earlier run */
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == -1 ||
      listen(fd, SOMAXCONN) == -1)
    die("cannot listen on the Unix socket: %s", strerror(errno));
  return fd;
}

static int
listen_tcp(const char *addr, int port)
{
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
    die("-i %s: not an IPv4 address", addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd == -1)
    die("socket: %s", strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == -1 ||
      listen(fd, SOMAXCONN) == -1)
    die("cannot listen on TCP: %s", strerror(errno));
  return fd;
}

enum { OPT_RUN = 256, OPT_QMODE, OPT_SCHED };

/* Out of descriptors (EMFILE, ENFILE) or memory (ENOBUFS, ENOMEM):
 * accepting again at once fails again at once, so a listener pauses
 * ACCEPT_PAUSE_NSEC before its next accept while connections wait in the
 * backlog, and the condition is logged at most once a minute. */
#define ACCEPT_PAUSE_NSEC 100000000ULL
#define ACCEPT_LOG_SEC 60

static bool
accept_exhausted(int err)
{
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

/* Log accept error ERR (an errno), at most once per ACCEPT_LOG_SEC for
 * the exhaustion errors, with how many were not logged in between. */
static void
accept_log(int err)
{
  static struct timespec last;
  static unsigned long quiet;
  static bool logged;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (accept_exhausted(err) && logged &&
      now.tv_sec - last.tv_sec < ACCEPT_LOG_SEC) {
    quiet++;
    return;
  }
  if (accept_exhausted(err))
    fprintf(stderr,
            "znbd: accept: %s: pausing new connections %llu ms at a time "
            "(%lu more since the last message; logged at most once every "
            "%d s)\n",
            strerror(err), ACCEPT_PAUSE_NSEC / 1000000, quiet, ACCEPT_LOG_SEC);
  else
    fprintf(stderr, "znbd: accept: %s\n", strerror(err));
  if (accept_exhausted(err)) {
    last = now;
    logged = true;
    quiet = 0;
  }
}

int
main(int argc, char **argv)
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
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {"verbose", no_argument, NULL, 'v'},
      {NULL, 0, NULL, 0},
  };
  const char *unix_path = NULL, *ipaddr = "127.0.0.1", *pidfile = NULL;
  const char *run = NULL;
  int port = -1;
  bool foreground = false;
  static struct server s;
  s.cfg.export_name = "";
  long nthreads = sysconf(_SC_NPROCESSORS_ONLN);
  int o;
  while ((o = getopt_long(argc, argv, "U:p:i:fP:re:t:hVv", longopts, NULL)) !=
         -1) {
    char *end;
    switch (o) {
    case 'U':
      unix_path = optarg;
      break;
    case 'p':
      port = (int)strtol(optarg, &end, 10);
      if (*end || port <= 0 || port > 65535)
        die("-p %s: not a port number", optarg);
      break;
    case 'i':
      ipaddr = optarg;
      break;
    case 'f':
      foreground = true;
      break;
    case 'P':
      pidfile = optarg;
      break;
    case 'r':
      s.cfg.readonly = true;
      break;
    case 'e':
      if (strlen(optarg) > 4096)
        die("-e: export name longer than 4096 bytes%s", "");
      s.cfg.export_name = optarg;
      s.cfg.export_name_set = true;
      break;
    case 't':
      nthreads = strtol(optarg, &end, 10);
      if (*end || nthreads < 1 || nthreads > 1024)
        die("--threads %s: want 1..1024", optarg);
      break;
    case OPT_RUN:
      run = optarg;
      break;
    case OPT_QMODE:
      if (strcmp(optarg, "bio") == 0)
        s.mode = QM_BIO;
      else if (strcmp(optarg, "mq") == 0)
        s.mode = QM_MQ;
      else
        die("--queue-mode %s: want bio or mq", optarg);
      break;
    case OPT_SCHED:
      if (strcmp(optarg, "none") == 0)
        s.sched_deadline = false;
      else if (strcmp(optarg, "mq-deadline") == 0)
        s.sched_deadline = true;
      else
        die("--scheduler %s: want none or mq-deadline", optarg);
      break;
    case 'h':
      usage(stdout);
      return 0;
    case 'V':
      printf("znbd %s\n", PACKAGE_VERSION);
      return 0;
    case 'v':
      s.cfg.verbose = true;
      break;
    default:
      usage(stderr);
      return EXIT_FAILURE;
    }
  }
  if (nthreads < 1)
    nthreads = 1;

  /* Device parameters. */
  static struct znbd_params p;
  char err[512];
  znbd_params_init(&p);
  for (int i = optind; i < argc; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq)
      die("%s: expected key=value", argv[i]);
    *eq = 0;
    if (znbd_params_set(&p, argv[i], eq + 1, err, sizeof err) == -1)
      die("%s", err);
    *eq = '=';
  }
  if (znbd_params_finish(&p, note, err, sizeof err) == -1)
    die("%s", err);
  struct znbd_dev *dev = znbd_dev_new(&p, err, sizeof err);
  if (!dev)
    die("%s", err);
  warn_ineffective(&s, &p, znbd_dev_nr_zones(dev) > 0, argc - optind,
                   argv + optind);
  s.cfg.dev = dev;
  s.cfg.params = &p;
  s.cfg.size = znbd_dev_size(dev);
  s.cfg.blocksize = p.blocksize ? p.blocksize : 512;
  s.cfg.holes_ok = !(znbd_dev_nr_zones(dev) > 0 &&
                     p.zone_read_past_wp != ZNBD_READ_PAST_WP_ZERO);
  int dlen = znbd_dev_describe(dev, NULL, 0);
  s.cfg.description = malloc((size_t)dlen + 1);
  if (!s.cfg.description)
    die("%s", "out of memory");
  znbd_dev_describe(dev, s.cfg.description, (size_t)dlen + 1);
  /* Before any thread starts: they inherit it (lib/sched.c says why). */
  if (p.sched_batch && znbd_sched_batch() < 0)
    fprintf(stderr, "znbd: note: sched_batch: SCHED_BATCH: %s\n",
            strerror(errno));
  s.completion_nsec = s.mode == QM_BIO ? p.completion_nsec : 0;
  s.nworkers = (unsigned)nthreads;
  /* Queues and workers before the sockets: a limit they meet stops
   * start-up with the option's name, before anything is served. */
  if (s.mode == QM_MQ && !(s.mq = mq_new(&s, err, sizeof err)))
    die("%s", err);
  if (!(s.workers = calloc(s.nworkers, sizeof *s.workers)))
    die("%s", "out of memory");
  for (unsigned i = 0; i < s.nworkers; i++)
    if (!(s.workers[i] = worker_new(&s, i, err, sizeof err)))
      die("%s", err);

  /* Sockets. */
  char tmpdir[] = "/tmp/znbdXXXXXX", tmpsock[64];
  bool tmp = false;
  if ((unix_path && strcmp(unix_path, "-") == 0) ||
      (run && !unix_path && port == -1)) {
    if (!mkdtemp(tmpdir))
      die("mkdtemp: %s", strerror(errno));
    snprintf(tmpsock, sizeof tmpsock, "%s/socket", tmpdir);
    unix_path = tmpsock;
    tmp = true;
  }
  int lfd[2], nl = 0;
  if (unix_path)
    lfd[nl++] = listen_unix(unix_path);
  if (port != -1 || !unix_path) {
    if (port == -1)
      port = 10809;
    lfd[nl++] = listen_tcp(ipaddr, port);
  }

  if (!foreground && !run) {
    pid_t pid = fork();
    if (pid == -1)
      die("fork: %s", strerror(errno));
    if (pid > 0)
      _exit(0);
    setsid();
    if (chdir("/") == -1)
      die("chdir: %s", strerror(errno));
    int nul = open("/dev/null", O_RDWR);
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(nul, 2);
    if (nul > 2)
      close(nul);
  }

  /* Signals arrive through a signalfd on the main ring. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  if (sfd == -1)
    die("signalfd: %s", strerror(errno));

  struct znbd_control *ctl = NULL;
  if (p.zone_control) {
    ctl = znbd_control_start(dev, p.zone_control, err, sizeof err);
    if (!ctl)
      die("%s", err);
  }
  if (s.mq && mq_start(s.mq, err, sizeof err))
    die("%s", err);
  for (unsigned i = 0; i < s.nworkers; i++)
    if (worker_start(s.workers[i], err, sizeof err))
      die("%s", err);

  if (pidfile) {
    char tmpf[PATH_MAX];
    snprintf(tmpf, sizeof tmpf, "%s.tmp", pidfile);
    FILE *f = fopen(tmpf, "w");
    if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
        rename(tmpf, pidfile) == -1)
      die("-P: cannot write the pidfile: %s", strerror(errno));
  }

  pid_t child = -1;
  if (run) {
    char *uri;
    const char *q_exp = s.cfg.export_name;
    int r;
    if (unix_path)
      r = asprintf(&uri, "nbd+unix:///%s?socket=%s", q_exp, unix_path);
    else
      r = asprintf(&uri, "nbd://%s:%d/%s", ipaddr, port, q_exp);
    char *script;
    char *qu = shell_quote(uri), *qs = shell_quote(unix_path ? unix_path : "");
    char *qe = shell_quote(s.cfg.export_name);
    if (r < 0 ||
        asprintf(&script,
                 "uri=%s\nnbd=%s\nunixsocket=%s\nport=%s%d\nexportname=%s\n%s",
                 qu, qu, qs, "", unix_path ? 0 : port, qe, run) < 0)
      die("%s", "out of memory");
    child = fork();
    if (child == -1)
      die("fork: %s", strerror(errno));
    if (child == 0) {
      pthread_sigmask(SIG_UNBLOCK, &set, NULL);
      signal(SIGPIPE, SIG_DFL);
      execl("/bin/sh", "sh", "-c", script, (char *)NULL);
      _exit(127);
    }
    free(uri);
    free(script);
    free(qu);
    free(qs);
    free(qe);
  }

  /* Accept loop. */
  struct io_uring ring;
  if (ring_init(&ring, 16, false) < 0)
    die("%s", "io_uring setup failed");
  struct signalfd_siginfo si;
  struct __kernel_timespec pause_ts[2];
  struct io_uring_sqe *sqe;
  for (int i = 0; i < nl; i++) {
    sqe = get_sqe(&ring);
    io_uring_prep_accept(sqe, lfd[i], NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, tag_index(TAG_ACCEPT, (unsigned)i));
  }
  sqe = get_sqe(&ring);
  io_uring_prep_read(sqe, sfd, &si, sizeof si, 0);
  io_uring_sqe_set_data64(sqe, tag_index(TAG_SIGNAL, 0));
  int status = 0;
  unsigned rr = 0;
  bool done = false;
  while (!done) {
    int r = io_uring_submit_and_wait(&ring, 1);
    if (r < 0 && r != -EINTR)
      die("io_uring: %s", strerror(-r));
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&ring, head, cqe)
    {
      n++;
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      unsigned ud = tag_get_index(tag);
      if (tag_op(tag) == TAG_SIGNAL) {
        if (si.ssi_signo == SIGCHLD) {
          int st;
          if (child > 0 && waitpid(child, &st, WNOHANG) == child) {
            status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            done = true;
          }
        } else {
          done = true;
        }
        sqe = get_sqe(&ring);
        io_uring_prep_read(sqe, sfd, &si, sizeof si, 0);
        io_uring_sqe_set_data64(sqe, tag_index(TAG_SIGNAL, 0));
        continue;
      }
      if (tag_op(tag) == TAG_ACCEPT_PAUSE) /* the listener's pause is over */
        goto rearm;
      int fd = cqe->res;
      if (fd >= 0) {
        if (lfd[ud] >= 0 && ud == (uint64_t)(nl - 1) && port != -1) {
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        worker_add_conn(s.workers[rr++ % s.nworkers], fd);
      } else if (accept_exhausted(-fd)) {
        accept_log(-fd);
        arm_timeout(&ring, &pause_ts[ud], ACCEPT_PAUSE_NSEC,
                    tag_index(TAG_ACCEPT_PAUSE, ud));
        continue;
      } else if (fd != -EINTR && fd != -ECONNABORTED && fd != -EAGAIN) {
        accept_log(-fd);
      }
    rearm:
      sqe = get_sqe(&ring);
      io_uring_prep_accept(sqe, lfd[ud], NULL, NULL, SOCK_CLOEXEC);
      io_uring_sqe_set_data64(sqe, tag_index(TAG_ACCEPT, ud));
    }
    io_uring_cq_advance(&ring, n);
  }

  /* Clean stop: no new connections, finish and close the others. */
  for (int i = 0; i < nl; i++)
    close(lfd[i]);
  io_uring_queue_exit(&ring);
  if (unix_path)
    unlink(unix_path);
  if (tmp)
    rmdir(tmpdir);
  for (unsigned i = 0; i < s.nworkers; i++)
    worker_stop(s.workers[i]);
  for (unsigned i = 0; i < s.nworkers; i++)
    worker_join(s.workers[i]);
  if (s.mq)
    mq_stop(s.mq);
  for (unsigned i = 0; i < s.nworkers; i++)
    worker_free(s.workers[i]);
  free(s.workers);
  mq_free(s.mq);
  close(sfd);
  znbd_control_stop(ctl);
  if (child > 0 && !done) {
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
  }
  if (pidfile)
    unlink(pidfile);
  znbd_dev_free(dev);
  znbd_params_free(&p);
  free(s.cfg.description);
  return status;
}
