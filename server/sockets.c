/* znbd server: the listening sockets (-U, -p, -i; as nbdkit's sockets.c).
 * The loop that accepts on them is in mainloop.c. */
#include <arpa/inet.h>
#include <errno.h>
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
  l->tcp = -1;
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
    l->tcp = (int)l->n;
    l->fd[l->n++] = fd;
  }
  return 0;

fail:
  listeners_close(l);
  return -1;
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
