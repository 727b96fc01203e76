/* znbd server: a thread's failure report (server_fail, see server.h):
 * the message goes to stderr, and the main loop, which reads
 * S->fail_efd, stops the server.  The threads that fail (workers,
 * hardware queues) report here rather than to the main loop by name.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "server.h"

void
server_fail(struct server *s, const char *fmt, ...)
{
  va_list ap;
  char msg[256];
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "znbd: %s: stopping\n", msg);
  atomic_store(&s->failed, true);
  uint64_t one = 1;
  if (write(s->fail_efd, &one, sizeof one) != sizeof one)
    perror("znbd: eventfd write");
}
