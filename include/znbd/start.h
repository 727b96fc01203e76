/* znbd: the start-up that the front-ends taking key=value words on their
 * command line share (znbd, znbd-tcmu, znbd-ublk; nbdkit hands the
 * plugin its words one by one): the words into parameters, the refusal
 * of those the front-end ignores, znbd_params_finish(), the front-end's
 * own checks, and the device, which learns its front-end for the control
 * socket.  The log sink goes in before (znbd_log_set_sink) and the
 * control socket starts after (znbd_control_start), each where the
 * front-end's threads, signals and daemon fork allow.
 */
#ifndef ZNBD_START_H
#define ZNBD_START_H

#include <stddef.h>

#include "znbd/dev.h"
#include "znbd/params.h"

struct znbd_start {
  const char *prog;  /* the program, first word of a message: "znbd-ublk" */
  unsigned frontend; /* one ZNBD_PARAM_FOR_* bit */
  /* A word of the front-end's own (znbd-tcmu's cmd_time_out=), or NULL:
   * returns 1 (taken), 0 (a device parameter), or -1 with a message
   * naming it in ERR. */
  int (*own_word)(void *opaque, const char *word, char *err, size_t errlen);
  /* The front-end's checks of the finished parameters, before the device
   * is made, or NULL: returns 0 or -1 with a message in ERR. */
  int (*check)(void *opaque, const struct znbd_params *p, char *err,
               size_t errlen);
  void *opaque; /* for own_word and check */
};

/* Parse the NWORDS key=value WORDS (each is changed and restored) into
 * P, which this initialises, as S's front-end, and make the device.
 * Returns it (znbd_dev_free; P stays the caller's, znbd_params_free), or
 * NULL with errno EINVAL (a bare word, a bad or ignored parameter, a
 * failed check; ENOENT: an unknown key; or dev_new's errno) and in ERR
 * the whole message, one line starting with the program or front-end
 * ("znbd-ublk: hw_queue_depth has no effect here: ...") for the caller
 * to print before it exits with status 1. */
struct znbd_dev *znbd_start_device(const struct znbd_start *s,
                                   struct znbd_params *p, int nwords,
                                   char **words, char *err, size_t errlen);

#endif
