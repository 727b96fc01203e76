/* znbd server: signals.  SIGINT, SIGTERM and SIGHUP stop the server,
 * SIGCHLD tells it the --run command exited; all four are blocked in
 * every thread and read from a signalfd on the main loop's ring. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "server.h"

int
signals_setup(sigset_t *set, char *err, size_t errlen)
{
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGCHLD);
  sigaddset(set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, set, NULL);
  signal(SIGPIPE, SIG_IGN);
  int sfd = signalfd(-1, set, SFD_CLOEXEC);
  if (sfd == -1)
    snprintf(err, errlen, "signalfd: %s", strerror(errno));
  return sfd;
}

bool
signal_stops(const struct signalfd_siginfo *si, pid_t child, int *status)
{
  if (si->ssi_signo != SIGCHLD)
    return true;
  int st;
  if (child > 0 && waitpid(child, &st, WNOHANG) == child) {
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
  }
  return false;
}
