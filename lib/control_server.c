/* znbd: the zone control socket -- a Unix stream socket server, one
 * thread per client, that reads request lines (and an append's data) and
 * answers each with the control language of lib/control_lang.c
 * (include/znbd/control.h).  It only calls the language; the language
 * never calls back here.
 *
 * Grammar and replies: man/znbd-zone-control.pod.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "znbd/control.h"
#include "znbd/dev.h"
#include "err.h"

#define MAX_CLIENTS 64 /* served at once, one thread each */

struct znbd_control {
  struct znbd_dev *dev;
  char *path;
  int listen_fd;
  int wake[2];  /* a byte on wake[1] tells every thread to stop */
  dev_t st_dev; /* the socket file we created, to unlink only that */
  ino_t st_ino;
  pthread_t thread;
  pthread_mutex_t lock; /* protects nr_clients */
  pthread_cond_t idle;  /* signalled when a client thread ends */
  unsigned nr_clients;
  znbd_control_stats_fn *stats_fn; /* the front-end's stats fields */
  void *stats_opaque;
};

/* Wait for EVENTS on FD or a stop request.  Returns 1 ready, 0 stop. */
static int
wait_fd(struct znbd_control *c, int fd, short events)
{
  struct pollfd p[2] = {{.fd = fd, .events = events},
                        {.fd = c->wake[0], .events = POLLIN}};

  for (;;) {
    if (poll(p, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      return 0;
    }
    if (p[1].revents)
      return 0;
    if (p[0].revents)
      return 1;
  }
}

/* Send all of BUF; -1 when the client is gone or we are stopping. */
static int
send_all(struct znbd_control *c, int fd, const char *buf, size_t len)
{
  while (len > 0) {
    ssize_t r = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!wait_fd(c, fd, POLLOUT))
          return -1;
        continue;
      }
      return -1;
    }
    buf += r;
    len -= (size_t)r;
  }
  return 0;
}

/* Execute LINE (an append with its DATA when DATA is not NULL) and send
 * its reply. */
static int
serve_line(struct znbd_control *c, int fd, const char *line, const void *data)
{
  char *reply = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&reply, &len);
  int r;

  if (m == NULL) {
    static const char nomem[] = "error ENOMEM out of memory\n";
    return send_all(c, fd, nomem, sizeof nomem - 1);
  }
  if (data)
    znbd_control_append(c->dev, line, data, m);
  else
    znbd_control_exec_stats(c->dev, line, m, c->stats_fn, c->stats_opaque);
  fclose(m);
  r = send_all(c, fd, reply, len);
  free(reply);
  return r;
}

/* Receive exactly LEN bytes into BUF (NULL: receive and drop them).
 * -1 when the client hangs up first or we are stopping. */
static int
recv_all(struct znbd_control *c, int fd, char *buf, uint64_t len)
{
  char sink[4096];

  while (len > 0) {
    char *p = buf ? buf : sink;
    size_t want = buf || len < sizeof sink ? len : sizeof sink;
    ssize_t r;

    if (!wait_fd(c, fd, POLLIN))
      return -1;
    r = recv(fd, p, want, MSG_DONTWAIT);
    if (r == -1) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return -1;
    }
    if (r == 0)
      return -1;
    if (buf)
      buf += r;
    len -= (uint64_t)r;
  }
  return 0;
}

/* LINE is "append ZONE LEN": take its LEN bytes of data, the first of
 * them from BUF[0..*HAVE) (what was received behind the line; consumed
 * and shifted out), the rest from the socket, then execute it.  A client
 * that hangs up before sending all the data gets nothing done. */
static int
serve_append(struct znbd_control *c, int fd, const char *line, uint64_t len,
             char *buf, size_t *have)
{
  size_t early = *have < len ? *have : (size_t)len;
  char *data = malloc(len);
  int r;

  if (data)
    memcpy(data, buf, early);
  memmove(buf, buf + early, *have - early);
  *have -= early;
  buf[*have] = '\0';
  if (recv_all(c, fd, data ? data + early : NULL, len - early) == -1) {
    free(data);
    return -1;
  }
  if (data == NULL) {
    static const char nomem[] = "error ENOMEM no memory for the append data\n";
    return send_all(c, fd, nomem, sizeof nomem - 1);
  }
  r = serve_line(c, fd, line, data);
  free(data);
  return r;
}

/* Whether LINE is an append request: 1 with its data length in *LEN, 0
 * if not, -1 if malformed (the error has been sent). */
static int
append_request(struct znbd_control *c, int fd, const char *line, uint64_t *len)
{
  char *reply = NULL;
  size_t rlen = 0;
  FILE *m = open_memstream(&reply, &rlen);
  int r;

  if (m == NULL)
    return -1;
  r = znbd_control_append_len(line, len, m);
  fclose(m);
  if (r == -1)
    send_all(c, fd, reply, rlen);
  free(reply);
  return r;
}

/* Serve one client until it hangs up or we stop. */
static void
serve_client(struct znbd_control *c, int fd)
{
  char buf[ZNBD_CONTROL_LINE_MAX + 2];
  size_t have = 0;
  bool skipping = false; /* discarding the rest of an over-long line */

  for (;;) {
    ssize_t r;
    char *nl;

    if (!wait_fd(c, fd, POLLIN))
      return;
    r = recv(fd, buf + have, sizeof buf - 1 - have, MSG_DONTWAIT);
    if (r == -1) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return;
    }
    if (r == 0) { /* hang-up: a last line without newline still counts */
      if (have > 0 && !skipping) {
        buf[have] = '\0';
        serve_line(c, fd, buf, NULL);
      }
      return;
    }
    have += (size_t)r;
    buf[have] = '\0';
    while ((nl = memchr(buf, '\n', have)) != NULL) {
      size_t used = (size_t)(nl - buf) + 1;
      char line[ZNBD_CONTROL_LINE_MAX + 2];
      uint64_t alen;
      int a;

      *nl = '\0';
      memcpy(line, buf, used);
      memmove(buf, buf + used, have - used);
      have -= used;
      buf[have] = '\0';
      if (skipping) {
        skipping = false;
        continue;
      }
      a = append_request(c, fd, line, &alen);
      if (a == -1)
        return; /* malformed append: its data cannot be skipped */
      if (a == 1) {
        if (serve_append(c, fd, line, alen, buf, &have) == -1)
          return;
      } else if (serve_line(c, fd, line, NULL) == -1)
        return;
    }
    if (have == sizeof buf - 1) { /* no newline in a full buffer */
      if (!skipping) {
        char msg[80];
        snprintf(msg, sizeof msg, "error EINVAL request longer than %d bytes\n",
                 ZNBD_CONTROL_LINE_MAX);
        if (send_all(c, fd, msg, strlen(msg)) == -1)
          return;
      }
      skipping = true;
      have = 0;
    }
  }
}

struct client {
  struct znbd_control *c;
  int fd;
};

static void *
client_thread(void *arg)
{
  struct client *cl = arg;
  struct znbd_control *c = cl->c;

  serve_client(c, cl->fd);
  close(cl->fd);
  free(cl);
  pthread_mutex_lock(&c->lock);
  c->nr_clients--;
  pthread_cond_broadcast(&c->idle);
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* Serve FD on a thread of its own; refuse it when MAX_CLIENTS are
 * served already or no thread can be made. */
static void
start_client(struct znbd_control *c, int fd)
{
  static const char busy[] = "error EAGAIN too many control clients\n";
  struct client *cl = malloc(sizeof *cl);
  pthread_attr_t attr;
  pthread_t t;
  bool ok = false;

  pthread_mutex_lock(&c->lock);
  if (cl && c->nr_clients < MAX_CLIENTS && pthread_attr_init(&attr) == 0) {
    cl->c = c;
    cl->fd = fd;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    ok = pthread_create(&t, &attr, client_thread, cl) == 0;
    pthread_attr_destroy(&attr);
    if (ok)
      c->nr_clients++;
  }
  pthread_mutex_unlock(&c->lock);
  if (!ok) {
    free(cl);
    send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
  }
}

static void *
control_thread(void *arg)
{
  struct znbd_control *c = arg;

  while (wait_fd(c, c->listen_fd, POLLIN)) {
    int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1) {
      /* Out of descriptors or memory: the connection stays queued, so
       * back off instead of spinning; otherwise just try again. */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        struct pollfd p = {.fd = c->wake[0], .events = POLLIN};
        if (poll(&p, 1, 100) > 0)
          break;
      }
      continue;
    }
    start_client(c, fd);
  }
  return NULL;
}

/* Remove a stale socket at PATH; refuse a live one or a non-socket. */
static int
clear_stale(const char *path, char *err, size_t errlen)
{
  struct stat st;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  int fd, r;

  if (lstat(path, &st) == -1) {
    if (errno == ENOENT)
      return 0;
    return fail_err(err, errlen, errno, "zone_control: %s: %s", path,
                    strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    snprintf(err, errlen, "zone_control: %s exists and is not a socket", path);
    errno = EEXIST;
    return -1;
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return fail_err(err, errlen, errno, "zone_control: socket: %s",
                    strerror(errno));
  memcpy(addr.sun_path, path, strlen(path) + 1);
  r = connect(fd, (struct sockaddr *)&addr, sizeof addr);
  close(fd);
  if (r == 0) {
    snprintf(err, errlen,
             "zone_control: %s is in use by another running server", path);
    errno = EADDRINUSE;
    return -1;
  }
  if (unlink(path) == -1 && errno != ENOENT)
    return fail_err(err, errlen, errno, "zone_control: removing stale %s: %s",
                    path, strerror(errno));
  return 0;
}

/* Free C, closing what it holds; BOUND: a socket file it bound, to remove
 * too (a failed start), or NULL.  Leaves errno as it found it (a failure
 * path's cleanup, lib/err.h). */
static void
control_free(struct znbd_control *c, const char *bound)
{
  int e = errno;
  if (bound)
    unlink(bound);
  if (c->listen_fd >= 0)
    close(c->listen_fd);
  if (c->wake[0] >= 0)
    close(c->wake[0]);
  if (c->wake[1] >= 0)
    close(c->wake[1]);
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->idle);
  free(c->path);
  free(c);
  errno = e;
}

struct znbd_control *
znbd_control_start(struct znbd_dev *d, const char *path, char *err,
                   size_t errlen)
{
  return znbd_control_start_stats(d, path, NULL, NULL, err, errlen);
}

struct znbd_control *
znbd_control_start_stats(struct znbd_dev *d, const char *path,
                         znbd_control_stats_fn *fn, void *opaque, char *err,
                         size_t errlen)
{
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  struct znbd_control *c;
  struct stat st;
  const char *made = NULL; /* a socket file to remove on failure */
  int e;

  if (path == NULL || *path == '\0' || strlen(path) >= sizeof addr.sun_path) {
    snprintf(err, errlen,
             "zone_control: socket path must be 1 to %zu bytes long",
             sizeof addr.sun_path - 1);
    errno = path && *path ? ENAMETOOLONG : EINVAL;
    return NULL;
  }
  memcpy(addr.sun_path, path, strlen(path) + 1);

  c = calloc(1, sizeof *c);
  if (c == NULL || (c->path = strdup(path)) == NULL) {
    free(c);
    snprintf(err, errlen, "zone_control: out of memory");
    errno = ENOMEM;
    return NULL;
  }
  c->dev = d;
  c->stats_fn = fn;
  c->stats_opaque = opaque;
  c->listen_fd = c->wake[0] = c->wake[1] = -1;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->idle, NULL);

  if (clear_stale(path, err, errlen) == -1)
    goto fail_errno;
  if (pipe2(c->wake, O_CLOEXEC) == -1)
    goto fail_sys;
  c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->listen_fd == -1)
    goto fail_sys;
  /* The socket is bound to a temporary name beside PATH, listens, and
   * only then is renamed to PATH: a client that waits for PATH to appear
   * never finds a socket that refuses it (ECONNREFUSED before listen).
   * A PATH too long for the suffix is bound directly.
   * Linux creates the socket file with the socket inode's mode (less the
   * umask), so it is never more open than 0600, even for a moment; the
   * chmod below then makes it exactly 0600 whatever the umask. */
  char tmp[sizeof addr.sun_path];
  int n = snprintf(tmp, sizeof tmp, "%s.%ld~", path, (long)getpid());
  bool renamed = n > 0 && (size_t)n < sizeof tmp;
  if (renamed)
    memcpy(addr.sun_path, tmp, (size_t)n + 1);
  const char *bound = renamed ? tmp : path;
  if (renamed && unlink(tmp) == -1 && errno != ENOENT)
    goto fail_sys;
  if (fchmod(c->listen_fd, 0600) == -1 ||
      bind(c->listen_fd, (struct sockaddr *)&addr, sizeof addr) == -1)
    goto fail_sys;
  if (chmod(bound, 0600) == -1 || stat(bound, &st) == -1 ||
      listen(c->listen_fd, 4) == -1 || (renamed && rename(tmp, path) == -1)) {
    made = bound;
    goto fail_sys;
  }
  c->st_dev = st.st_dev;
  c->st_ino = st.st_ino;
  e = pthread_create(&c->thread, NULL, control_thread, c);
  if (e != 0) {
    made = path;
    errno = e;
    goto fail_sys;
  }
  return c;

fail_sys:
  set_err(err, errlen, "zone_control: %s: %s", path, strerror(errno));
fail_errno:
  control_free(c, made);
  return NULL;
}

void
znbd_control_stop(struct znbd_control *c)
{
  struct stat st;
  char b = 1;

  if (c == NULL)
    return;
  while (write(c->wake[1], &b, 1) == -1 && errno == EINTR)
    ;
  pthread_join(c->thread, NULL);
  /* The byte stays in the pipe: every client thread sees it too. */
  pthread_mutex_lock(&c->lock);
  while (c->nr_clients > 0)
    pthread_cond_wait(&c->idle, &c->lock);
  pthread_mutex_unlock(&c->lock);
  /* Unlink only the socket we made, not a successor's. */
  if (lstat(c->path, &st) == 0 && st.st_dev == c->st_dev &&
      st.st_ino == c->st_ino)
    unlink(c->path);
  control_free(c, NULL);
}
