/* znbd server: captive mode (--run CMD), as nbdkit's captive.c: CMD runs
 * under /bin/sh with $uri, $nbd, $unixsocket, $port and $exportname set,
 * and the server stops when it exits, with its exit status. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server.h"

/* S in single quotes for sh, or NULL when out of memory. */
static char *
shell_quote(const char *s)
{
  size_t n = 3;
  for (const char *p = s; *p; p++)
    n += *p == '\'' ? 4 : 1;
  char *q = malloc(n), *o = q;
  if (!q)
    return NULL;
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

/* The shell script: the variables, then CMD. */
static char *
captive_script(const char *cmd, const struct listeners *l, const char *ipaddr,
               int port, const char *export_name)
{
  char *uri = NULL, *script = NULL, *qu = NULL, *qs = NULL, *qe = NULL;
  int r;
  if (l->unix_path)
    r = asprintf(&uri, "nbd+unix:///%s?socket=%s", export_name, l->unix_path);
  else
    r = asprintf(&uri, "nbd://%s:%d/%s", ipaddr, port, export_name);
  if (r < 0)
    return NULL;
  qu = shell_quote(uri);
  qs = shell_quote(l->unix_path ? l->unix_path : "");
  qe = shell_quote(export_name);
  if (qu && qs && qe &&
      asprintf(&script,
               "uri=%s\nnbd=%s\nunixsocket=%s\nport=%s%d\nexportname=%s\n%s",
               qu, qu, qs, "", l->unix_path ? 0 : port, qe, cmd) < 0)
    script = NULL;
  free(uri);
  free(qu);
  free(qs);
  free(qe);
  return script;
}

pid_t
captive_start(const char *cmd, const struct listeners *l, const char *ipaddr,
              int port, const char *export_name, const sigset_t *blocked,
              char *err, size_t errlen)
{
  char *script = captive_script(cmd, l, ipaddr, port, export_name);
  if (!script) {
    snprintf(err, errlen, "--run: out of memory");
    return -1;
  }
  pid_t child = fork();
  if (child == -1) {
    snprintf(err, errlen, "--run: fork: %s", strerror(errno));
    free(script);
    return -1;
  }
  if (child == 0) {
    pthread_sigmask(SIG_UNBLOCK, blocked, NULL);
    signal(SIGPIPE, SIG_DFL);
    execl("/bin/sh", "sh", "-c", script, (char *)NULL);
    _exit(127);
  }
  free(script);
  return child;
}

void
captive_stop(pid_t child)
{
  kill(child, SIGTERM);
  waitpid(child, NULL, 0);
}
