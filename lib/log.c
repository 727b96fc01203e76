/* znbd: the log sink (include/znbd/log.h): one function pointer that
 * every message of lib/ goes through, and the default that prints
 * errors and warnings on stderr. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "znbd/log.h"

static znbd_log_fn *sink;
static void *sink_opaque;

void
znbd_log_set_sink(znbd_log_fn *fn, void *opaque)
{
  sink = fn;
  sink_opaque = opaque;
}

void
znbd_log(enum znbd_log_level level, const char *fmt, ...)
{
  int saved = errno;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (sink)
    sink(sink_opaque, level, msg);
  else if (level == ZNBD_LOG_ERROR || level == ZNBD_LOG_WARNING)
    fprintf(stderr, "znbd: %s\n", msg);
  errno = saved;
}
