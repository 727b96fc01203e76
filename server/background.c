/* znbd server: running in the background (no -f) and the pidfile (-P),
 * as nbdkit's background.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

int
background_start(char *err, size_t errlen)
{
  pid_t pid = fork();
  if (pid == -1) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    return -1;
  }
  if (pid > 0)
    _exit(0);
  setsid();
  if (chdir("/") == -1) {
    snprintf(err, errlen, "chdir: %s", strerror(errno));
    return -1;
  }
  int nul = open("/dev/null", O_RDWR);
  if (nul == -1) {
    snprintf(err, errlen, "/dev/null: %s", strerror(errno));
    return -1;
  }
  dup2(nul, 0);
  dup2(nul, 1);
  dup2(nul, 2);
  if (nul > 2)
    close(nul);
  return 0;
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
