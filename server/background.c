/* znbd server: running in the background (no -f) and the pidfile (-P),
 * as nbdkit's background.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

/* The write end of the pipe the waiting parent reads: one byte once the
 * child serves (background_ready), EOF if it dies first. */
static int ready_fd = -1;

int
background_start(char *err, size_t errlen)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) == -1) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid == -1) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  if (pid > 0) {
    /* The caller's shell goes on only once the child serves, so the next
     * command finds the sockets (the control socket too) and the pidfile.
     * A child that fails start-up has printed why on our stderr. */
    close(p[1]);
    char c;
    ssize_t n;
    do
      n = read(p[0], &c, 1);
    while (n == -1 && errno == EINTR);
    _exit(n == 1 ? 0 : 1);
  }
  close(p[0]);
  ready_fd = p[1];
  setsid();
  int nul = open("/dev/null", O_RDWR);
  if (nul == -1) {
    snprintf(err, errlen, "/dev/null: %s", strerror(errno));
    return -1;
  }
  dup2(nul, 0);
  dup2(nul, 1);
  if (nul > 2)
    close(nul);
  return 0;
}

void
background_ready(void)
{
  if (ready_fd == -1)
    return;
  /* Paths were made absolute at start-up (the socket and the pid file
   * by absolute_path() below, path parameters in lib/params_parse.c):
   * the daemon keeps no directory busy. */
  if (chdir("/") == -1)
    perror("znbd: chdir /");
  int nul = open("/dev/null", O_RDWR);
  if (nul != -1) {
    dup2(nul, 2);
    if (nul > 2)
      close(nul);
  }
  if (write(ready_fd, "r", 1) != 1) {
    /* The parent is gone: nobody waits, nothing to tell. */
  }
  close(ready_fd);
  ready_fd = -1;
}

char *
absolute_path(const char *path)
{
  if (path[0] == '/')
    return strdup(path);
  char *cwd = getcwd(NULL, 0), *a = NULL;
  if (cwd && asprintf(&a, "%s/%s", cwd, path) == -1)
    a = NULL;
  free(cwd);
  return a;
}

int
pidfile_write(const char *path, char *err, size_t errlen)
{
  char tmp[PATH_MAX];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
    snprintf(err, errlen, "-P %s: path too long", path);
    return -1;
  }
  FILE *f = fopen(tmp, "w");
  if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
      rename(tmp, path) == -1) {
    snprintf(err, errlen, "-P: cannot write the pidfile: %s", strerror(errno));
    return -1;
  }
  return 0;
}
