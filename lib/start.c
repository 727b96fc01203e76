/* znbd: the front-ends' shared start-up (include/znbd/start.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "znbd/start.h"
#include "err.h"

/* MSG as "PROG: MSG" in ERR; keeps errno. */
static void
prefix(const struct znbd_start *s, char *err, size_t errlen)
{
  int e = errno;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", errlen ? err : "");
  set_err(err, errlen, "%s: %s", s->prog, msg);
  errno = e;
}

struct znbd_dev *
znbd_start_device(const struct znbd_start *s, struct znbd_params *p, int nwords,
                  char **words, char *err, size_t errlen)
{
  znbd_params_init(p);
  for (int i = 0; i < nwords; i++) {
    char *eq = strchr(words[i], '=');
    if (!eq) {
      set_err(err, errlen, "%s: %s: expected key=value", s->prog, words[i]);
      errno = EINVAL;
      return NULL;
    }
    int own = s->own_word ? s->own_word(s->opaque, words[i], err, errlen) : 0;
    if (own < 0) {
      errno = EINVAL;
      prefix(s, err, errlen);
      return NULL;
    }
    if (own)
      continue;
    *eq = 0;
    int r = znbd_params_set(p, words[i], eq + 1, err, errlen);
    *eq = '=';
    if (r < 0) {
      prefix(s, err, errlen);
      return NULL;
    }
  }
  /* Before anything needs the kernel: a parameter error comes first.
   * The message names the front-end already. */
  if (znbd_params_refuse_unused(p, s->frontend, err, errlen) < 0)
    return NULL;
  if (znbd_params_finish(p, err, errlen) < 0 ||
      (s->check && s->check(s->opaque, p, err, errlen) < 0)) {
    errno = EINVAL;
    prefix(s, err, errlen);
    return NULL;
  }
  struct znbd_dev *d = znbd_dev_new(p, err, errlen);
  if (!d) {
    prefix(s, err, errlen);
    return NULL;
  }
  znbd_dev_set_frontend(d, s->frontend); /* for the control socket */
  return d;
}
