/* znbd server: the listening sockets (-U, -p, -i; as nbdkit's sockets.c),
 * or those a service manager passed (socket activation, as nbdkit's
 * socket-activation.c).  The loop that accepts on them is in mainloop.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "server.h"

static int
listen_unix(const char *path, char *err, size_t errlen)
{
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path) {
    snprintf(err, errlen, "-U %s: path too long", path);
    return -1;
  }
  strcpy(a.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
  }
  unlink(path); /* a stale socket from an earlier run */
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == -1 ||
      listen(fd, SOMAXCONN) == -1) {
    snprintf(err, errlen, "cannot listen on the Unix socket: %s",
             strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

static int
listen_tcp(const char *addr, int port, char *err, size_t errlen)
{
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
    snprintf(err, errlen, "-i %s: not an IPv4 address", addr);
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd == -1) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == -1 ||
      listen(fd, SOMAXCONN) == -1) {
    snprintf(err, errlen, "cannot listen on TCP: %s", strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

int
listeners_open(struct listeners *l, const char *unix_path, bool tmp,
               const char *ipaddr, int port, char *err, size_t errlen)
{
  memset(l, 0, sizeof *l);
  if (tmp) {
    strcpy(l->tmpdir, "/tmp/znbdXXXXXX");
    if (!mkdtemp(l->tmpdir)) {
      snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
      return -1;
    }
    l->tmp = true;
    snprintf(l->tmpsock, sizeof l->tmpsock, "%s/socket", l->tmpdir);
    unix_path = l->tmpsock;
  }
  if (unix_path) {
    int fd = listen_unix(unix_path, err, errlen);
    if (fd == -1)
      goto fail;
    l->fd[l->n++] = fd;
    l->unix_path = unix_path;
  }
  if (port != -1) {
    int fd = listen_tcp(ipaddr, port, err, errlen);
    if (fd == -1)
      goto fail;
    l->tcp[l->n] = true;
    l->fd[l->n++] = fd;
  }
  return 0;

fail:
  listeners_close(l);
  return -1;
}

/* sd_listen_fds(3): the first passed descriptor. */
#define LISTEN_FDS_START 3

/* Descriptor FD is a listening stream socket: 0, or -1 with the reason. */
static int
activated_socket(int fd, bool *tcp, char *err, size_t errlen)
{
  int type = 0, listening = 0;
  socklen_t tlen = sizeof type, llen = sizeof listening;
  struct sockaddr_storage a;
  socklen_t alen = sizeof a;
  int f = fcntl(fd, F_GETFD);
  if (f == -1 || fcntl(fd, F_SETFD, f | FD_CLOEXEC) == -1 ||
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == -1 ||
      getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &llen) == -1 ||
      getsockname(fd, (struct sockaddr *)&a, &alen) == -1) {
    snprintf(err, errlen, "socket activation: descriptor %d: %s", fd,
             strerror(errno));
    return -1;
  }
  if (type != SOCK_STREAM || !listening) {
    snprintf(err, errlen,
             "socket activation: descriptor %d is not a listening stream "
             "socket (ListenStream=)",
             fd);
    return -1;
  }
  *tcp = a.ss_family == AF_INET || a.ss_family == AF_INET6;
  return 0;
}

int
listeners_activated(struct listeners *l, char *err, size_t errlen)
{
  const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
  char *end;
  memset(l, 0, sizeof *l);
  if (!pid_s)
    return 0;
  errno = 0;
  uintmax_t pid = strtoumax(pid_s, &end, 10);
  if (errno || end == pid_s || *end || pid != (uintmax_t)getpid()) {
    fprintf(stderr,
            "znbd: note: LISTEN_PID=%s is not this process's: no "
            "socket activation\n",
            pid_s);
    return 0;
  }
  errno = 0;
  uintmax_t n = fds_s ? strtoumax(fds_s, &end, 10) : 0;
  if (!fds_s || errno || end == fds_s || *end || n == 0 || n > LISTENERS_MAX) {
    snprintf(err, errlen,
             "socket activation: LISTEN_FDS=%s: want 1 to %d descriptors",
             fds_s ? fds_s : "(unset)", LISTENERS_MAX);
    return -1;
  }
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  for (unsigned i = 0; i < n; i++) {
    if (activated_socket(LISTEN_FDS_START + (int)i, &l->tcp[i], err, errlen) ==
        -1) {
      l->n = 0;
      return -1;
    }
    l->fd[i] = LISTEN_FDS_START + (int)i;
  }
  l->n = (unsigned)n;
  l->activated = true;
  return (int)n;
}

void
listeners_close(struct listeners *l)
{
  for (unsigned i = 0; i < l->n; i++)
    close(l->fd[i]);
  l->n = 0;
  if (l->unix_path)
    unlink(l->unix_path);
  l->unix_path = NULL;
  if (l->tmp)
    rmdir(l->tmpdir);
  l->tmp = false;
}
