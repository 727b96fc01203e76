/* znbd server: the server's shared state (struct server), a thread's
 * failure report (fail.c), and the process plumbing main.c uses
 * (sockets.c, background.c, captive.c, signals.c, mainloop.c).
 *
 * Workers (--threads, worker.h) each own one io_uring and serve a set of
 * connections (conn.h): receive, parse (proto.h), submit, send.  In bio
 * mode (bio.h) a request executes on the worker that parsed it.  In mq
 * mode it takes a tag of one hardware queue (mq.h), whose own thread
 * dispatches it (queue_rq) and hands the finished request back to the
 * worker through the worker's rq_ops (rq.h).
 */
#ifndef ZNBD_SERVER_SERVER_H
#define ZNBD_SERVER_SERVER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "proto.h"

enum queue_mode { QM_BIO, QM_MQ };

struct worker;
struct mq;

struct server {
  struct srv_cfg cfg;
  enum queue_mode mode;
  bool sched_deadline; /* --scheduler mq-deadline */
  unsigned nworkers;
  struct worker **workers;
  struct mq *mq;
  int fail_efd;       /* server_fail() wakes the main loop through it */
  atomic_bool failed; /* a thread failed: stop without waiting for it */
};

/* A thread that cannot go on (its io_uring failed) calls this instead of
 * exiting the process: the message (printf FMT) goes to stderr and the
 * main loop stops the server, exit status 1.  fail.c. */
void server_fail(struct server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- process plumbing used by main.c ---- */

/* sockets.c: the listening sockets.  At most LISTENERS_MAX: -U and -p,
 * or the sockets a service manager passed (socket activation; nbdkit
 * takes up to 16 too). */
#define LISTENERS_MAX 16
struct listeners {
  int fd[LISTENERS_MAX];
  unsigned n;
  bool tcp[LISTENERS_MAX]; /* fd[i] is a TCP socket (TCP_NODELAY) */
  const char *unix_path;   /* the Unix socket, removed by listeners_close */
  bool tmp;                /* unix_path is in the temporary tmpdir */
  bool activated;          /* the service manager's sockets */
  char tmpdir[32], tmpsock[64];
};
/* Listen on UNIX_PATH (NULL: none; TMP: a socket in a new temporary
 * directory instead) and on IPADDR:PORT (PORT -1: no TCP).  0, or -1
 * with the reason (naming -U or -i where it is theirs) in ERR. */
int listeners_open(struct listeners *l, const char *unix_path, bool tmp,
                   const char *ipaddr, int port, char *err, size_t errlen);
/* Socket activation, sd_listen_fds(3)'s protocol as systemd and nbdkit
 * (server/socket-activation.c) follow it: when LISTEN_PID is this
 * process's id, the LISTEN_FDS (1 to LISTENERS_MAX) descriptors from 3
 * (SD_LISTEN_FDS_START) are listening sockets passed by the service
 * manager.  Takes them into L (close-on-exec, TCP ones marked), unsets
 * LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES so no child sees them, and
 * returns their number; 0 when not activated (no LISTEN_PID, or another
 * process's: a note on stderr then); -1 with the reason in ERR when
 * LISTEN_FDS is not a number in range (EINVAL) or a descriptor is not a
 * listening stream socket (EBADF, ENOTSOCK, EINVAL from fcntl(2) and
 * getsockopt(2)). */
int listeners_activated(struct listeners *l, char *err, size_t errlen);
/* Close them; remove the Unix socket (not an activated one: it is the
 * service manager's) and the temporary directory. */
void listeners_close(struct listeners *l);

/* background.c: fork; the parent waits and exits 0 once the child calls
 * background_ready (1 if the child exits first: its error went to the
 * shared stderr).  The child detaches (setsid, stdin and stdout on
 * /dev/null).  0, or -1 with the reason in ERR. */
int background_start(char *err, size_t errlen);
/* In the child once it serves (listeners, control socket, threads,
 * pidfile): cwd /, stderr on /dev/null, and the parent released.  No-op
 * without background_start. */
void background_ready(void);
/* PATH made absolute against the current directory (a copy; NULL with
 * errno ENOMEM, or getcwd's errno). */
char *absolute_path(const char *path);
/* Write this process's id to PATH atomically (PATH.tmp, rename).  0, or
 * -1 with the reason in ERR. */
int pidfile_write(const char *path, char *err, size_t errlen);

/* captive.c: run CMD (--run) with /bin/sh, its variables describing
 * listeners L and EXPORT_NAME, and BLOCKED unblocked.  The child's pid,
 * or -1 with the reason in ERR. */
pid_t captive_start(const char *cmd, const struct listeners *l,
                    const char *ipaddr, int port, const char *export_name,
                    const sigset_t *blocked, char *err, size_t errlen);
/* The server stops first: SIGTERM CHILD and reap it. */
void captive_stop(pid_t child);

/* signals.c: block SIGINT, SIGTERM, SIGCHLD and SIGHUP (in SET) in this
 * and every later thread, ignore SIGPIPE, and return a signalfd for
 * them, or -1 with the reason in ERR.  Call before any thread starts. */
int signals_setup(sigset_t *set, char *err, size_t errlen);
/* SI was read from the signalfd: true if the server must stop.  A
 * SIGCHLD stops it only when captive CHILD exited, whose exit status
 * (128 + signal if killed) goes to *STATUS. */
bool signal_stops(const struct signalfd_siginfo *si, pid_t child, int *status);

/* mainloop.c: accept on L until a signal, the captive CHILD's exit or a
 * failed thread says stop; returns the exit status (CHILD's, or 1 after
 * a failure).  *CHILD_REAPED tells whether CHILD exited. */
int main_loop(struct server *s, const struct listeners *l, int sfd, pid_t child,
              bool *child_reaped);

#endif
