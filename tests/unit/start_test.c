/* znbd_start_device (lib/start.c): the key=value words of znbd,
 * znbd-tcmu and znbd-ublk into parameters and a device, with every
 * refusal one line naming the program or front-end and the word. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "znbd/control.h"
#include "znbd/dev.h"
#include "znbd/params.h"
#include "znbd/start.h"

struct seen {
  int own, checked;
  long value;
  uint32_t nr_zones; /* of the parameters the check saw */
};

/* "own=N" is the front-end's word; "own=bad" is refused. */
static int
own_word(void *opaque, const char *word, char *err, size_t errlen)
{
  struct seen *s = opaque;
  if (strncmp(word, "own=", 4) != 0)
    return 0;
  s->own++;
  if (strcmp(word + 4, "bad") == 0) {
    snprintf(err, errlen, "own=bad: expected a number");
    return -1;
  }
  s->value = atol(word + 4);
  return 1;
}

/* Refuses a device of more than 4 zones; sees the finished geometry. */
static int
check(void *opaque, const struct znbd_params *p, char *err, size_t errlen)
{
  struct seen *s = opaque;
  s->checked++;
  s->nr_zones = p->geo.nr_zones;
  if (p->geo.nr_zones > 4) {
    snprintf(err, errlen, "%u zones: at most 4 here", p->geo.nr_zones);
    return -1;
  }
  return 0;
}

/* Start with WORDS (a NULL-terminated list, copied) as FRONTEND; return
 * the device, or NULL with ERR and *E. */
static struct znbd_dev *
start(unsigned frontend, struct seen *s, const char *const *words,
      struct znbd_params *p, char *err, size_t errlen, int *e)
{
  char *w[8];
  int n = 0;
  for (; words[n]; n++)
    w[n] = strdup(words[n]);
  const struct znbd_start st = {.prog = "prog",
                                .frontend = frontend,
                                .own_word = own_word,
                                .check = check,
                                .opaque = s};
  memset(s, 0, sizeof *s);
  errno = 0;
  struct znbd_dev *d = znbd_start_device(&st, p, n, w, err, errlen);
  *e = errno;
  for (int i = 0; i < n; i++) {
    CHECKF(strcmp(w[i], words[i]) == 0, "word %d changed: '%s'", i, w[i]);
    free(w[i]);
  }
  return d;
}

/* WORDS are refused with errno E and exactly MSG. */
static void
refused(unsigned frontend, const char *const *words, int e, const char *msg)
{
  struct znbd_params p;
  struct seen s;
  char err[512];
  int got;
  struct znbd_dev *d = start(frontend, &s, words, &p, err, sizeof err, &got);
  CHECKF(d == NULL && got == e, "'%s': errno %d, expected %d", msg, got, e);
  CHECKF(strcmp(err, msg) == 0, "message '%s', expected '%s'", err, msg);
  znbd_dev_free(d);
  znbd_params_free(&p);
}

int
main(void)
{
  static const char *const ok[] = {"size=8M", "own=7", "zone_size=2M",
                                   "rotational=true", NULL};
  struct znbd_params p;
  struct seen s;
  char err[512];
  int e;
  struct znbd_dev *d =
      start(ZNBD_PARAM_FOR_UBLK, &s, ok, &p, err, sizeof err, &e);
  CHECK(d != NULL);
  CHECK(s.own == 1 && s.value == 7);
  CHECK(s.checked == 1 && s.nr_zones == 4);
  CHECK(p.size == 8u << 20 && p.zone_size == 2u << 20 && p.rotational);
  CHECK(znbd_params_given(&p, "rotational") && !znbd_params_given(&p, "own"));
  if (d) {
    CHECK(znbd_dev_size(d) == 8u << 20 && znbd_dev_nr_zones(d) == 4);
    /* The device knows its front-end: znbd-ublk's control socket refuses
     * drop-reply. */
    CHECK(znbd_dev_frontend(d) == ZNBD_PARAM_FOR_UBLK);
    FILE *out = fopen("/dev/null", "w");
    CHECK(out && znbd_control_exec(d, "drop-reply every 1", out) == -1);
    if (out)
      fclose(out);
  }
  znbd_dev_free(d);
  znbd_params_free(&p);

  refused(ZNBD_PARAM_FOR_MQ, (const char *const[]){"size=8M", "notkv", NULL},
          EINVAL, "prog: notkv: expected key=value");
  refused(ZNBD_PARAM_FOR_MQ, (const char *const[]){"size=8M", "own=bad", NULL},
          EINVAL, "prog: own=bad: expected a number");
  refused(ZNBD_PARAM_FOR_MQ, (const char *const[]){"nokey=1", NULL}, ENOENT,
          "prog: unknown parameter 'nokey' (see --help for the list)");
  refused(ZNBD_PARAM_FOR_UBLK,
          (const char *const[]){"size=8M", "zone_size=2M", "hw_queue_depth=4",
                                NULL},
          EINVAL,
          "znbd-ublk: hw_queue_depth has no effect here: the queues are the "
          "kernel's; use --queues/--depth");
  refused(ZNBD_PARAM_FOR_BIO,
          (const char *const[]){"size=8M", "submit_queues=2", NULL}, EINVAL,
          "znbd --queue-mode=bio: submit_queues has no effect here: bio mode "
          "has no queues or scheduler (--queue-mode=mq has them)");
  refused(ZNBD_PARAM_FOR_MQ,
          (const char *const[]){"size=16M", "zone_size=2M", NULL}, EINVAL,
          "prog: 8 zones: at most 4 here");
  /* A finish error stops start-up before the check. */
  refused(ZNBD_PARAM_FOR_MQ, (const char *const[]){"zoned=false", NULL}, EINVAL,
          "prog: size: required and must not be 0 (e.g. size=4G)");
  return check_done("start_test");
}
