/* znbd: what the parameter table tells people: the --help text
 * (znbd_params_help_text), who uses each parameter, and the refusal of a
 * parameter given to a front-end it has no effect in
 * (znbd_params_refuse_unused).  The table is lib/params.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/params.h"
#include "err.h"
#include "params_impl.h"

/* The front-ends as the help lines name them, in ZNBD_PARAM_FOR_* bit
 * order; bio and mq together are "znbd". */
static const char *const user_words[] = {
    "nbdkit plugin", "znbd bio mode", "znbd mq mode", "znbd-tcmu", "znbd-ublk"};

/* Who uses a parameter, for its help line, into BUF: "" for every
 * front-end, else "znbd mq mode only", "nbdkit plugin and znbd only"... */
static const char *
users_text(unsigned users, char *buf, size_t len)
{
  const char *w[5];
  size_t n = 0;
  users &= ZNBD_PARAM_FOR_ALL;
  buf[0] = '\0';
  if (users == ZNBD_PARAM_FOR_ALL)
    return buf;
  for (unsigned k = 0; k < 5; k++) {
    unsigned bit = 1u << k;
    if (!(users & bit))
      continue;
    if (bit == ZNBD_PARAM_FOR_BIO && (users & ZNBD_PARAM_FOR_MQ)) {
      w[n++] = "znbd";
      k++; /* mq too */
    } else {
      w[n++] = user_words[k];
    }
  }
  size_t used = 0;
  for (size_t k = 0; k < n && used < len; k++) {
    int r = snprintf(buf + used, len - used, "%s%s",
                     k == 0       ? ""
                     : k + 1 == n ? " and "
                                  : ", ",
                     w[k]);
    used += r > 0 ? (size_t)r : 0;
  }
  if (used < len)
    snprintf(buf + used, len - used, " only");
  return buf;
}

const char *
znbd_param_frontend_name(unsigned frontend)
{
  switch (frontend) {
  case ZNBD_PARAM_FOR_PLUGIN:
    return "nbdkit-zoned-plugin";
  case ZNBD_PARAM_FOR_BIO:
    return "znbd --queue-mode=bio";
  case ZNBD_PARAM_FOR_MQ:
    return "znbd --queue-mode=mq";
  case ZNBD_PARAM_FOR_TCMU:
    return "znbd-tcmu";
  case ZNBD_PARAM_FOR_UBLK:
    return "znbd-ublk";
  default:
    return "znbd";
  }
}

/* Why a parameter has no effect in a front-end, where more can be said
 * than who uses it (the fallback): the first entry naming both. */
static const struct {
  const char *name; /* a parameter, or NULL: every one of the front-ends */
  unsigned frontends;
  const char *why;
} unused_why[] = {
    {"hw_queue_depth", ZNBD_PARAM_FOR_UBLK,
     "the queues are the kernel's; use --queues/--depth"},
    {"submit_queues", ZNBD_PARAM_FOR_UBLK,
     "the queues are the kernel's; use --queues/--depth"},
    {"hw_queue_depth", ZNBD_PARAM_FOR_TCMU,
     "the queues are the kernel's (tcm_loop's and the SCSI disk's)"},
    {"submit_queues", ZNBD_PARAM_FOR_TCMU,
     "the queues are the kernel's (tcm_loop's and the SCSI disk's)"},
    {"no_zone_write_lock", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "the kernel's block layer orders each zone's writes"},
    {"zone_write_plugging", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "the kernel's block layer orders each zone's writes"},
    {"pipeline_zoned_writes", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "writes never wait for the wp: one ahead of it fails at once"},
    {"zone_write_timeout", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "writes never wait for the wp: one ahead of it fails at once"},
    {"sched_batch", ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK,
     "its threads keep their scheduling class"},
    {NULL, ZNBD_PARAM_FOR_BIO,
     "bio mode has no queues or scheduler (--queue-mode=mq has them)"},
    {NULL, ZNBD_PARAM_FOR_PLUGIN,
     "nbdkit's threads serve the requests, with no queues or scheduler"},
};

int
znbd_params_refuse_unused(const struct znbd_params *p, unsigned frontend,
                          char *err, size_t errlen)
{
  if (errlen)
    err[0] = '\0';
  for (size_t k = 0; k < znbd_param_nr; k++) {
    const struct znbd_param_info *i = &znbd_param_table[k].i;
    if (!(p->given >> k & 1) || (i->users & frontend))
      continue;
    char who[128];
    const char *why = NULL;
    for (size_t r = 0; !why && r < sizeof unused_why / sizeof unused_why[0];
         r++)
      if ((unused_why[r].frontends & frontend) &&
          (!unused_why[r].name || strcmp(unused_why[r].name, i->name) == 0))
        why = unused_why[r].why;
    if (!why) {
      users_text(i->users, who, sizeof who);
      why = who;
    }
    set_err(err, errlen, "%s: %s has no effect here: %s",
            znbd_param_frontend_name(frontend), i->name, why);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* "key=META" padded to this width, then the help line. */
#define HELP_COLUMN 26

/* One help line for E into BUF (LEN may be 0 to measure); returns its
 * length as snprintf does. */
static int
help_line(const struct param *e, char *buf, size_t len)
{
  const struct znbd_param_info *i = &e->i;
  char usage[128], extra[256] = "";
  int n = snprintf(usage, sizeof usage, "%s=%s", i->name, i->meta);
  int pad = n < HELP_COLUMN ? HELP_COLUMN - n : 2;

  char whobuf[128];
  const char *who = users_text(i->users, whobuf, sizeof whobuf);

  if (i->def || *who)
    snprintf(extra, sizeof extra, " (%s%s%s%s)", i->def ? "default " : "",
             i->def ? i->def : "", i->def && *who ? "; " : "", who);
  return snprintf(buf, len, "%s%*s%s%s.", usage, pad, "", i->help, extra);
}

static char *help_text;

static void
build_help(void)
{
  size_t total = 1, used = 0;
  for (size_t k = 0; k < znbd_param_nr; k++)
    total += (size_t)help_line(&znbd_param_table[k], NULL, 0) + 1;
  help_text = malloc(total);
  if (!help_text)
    return;
  for (size_t k = 0; k < znbd_param_nr; k++) {
    used +=
        (size_t)help_line(&znbd_param_table[k], help_text + used, total - used);
    if (k + 1 < znbd_param_nr)
      help_text[used++] = '\n';
  }
  help_text[used] = '\0';
}

const char *
znbd_params_help_text(void)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, build_help);
  return help_text ? help_text
                   : "(the parameter list needs memory that was not there)";
}
