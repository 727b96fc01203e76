/* znbd: the device of the libFuzzer harnesses over the front-ends'
 * request layers (server/fuzz.c, ublk/fuzz.c): 1 MiB, and with ZONED 16
 * zones of 64 KiB, 2 of them conventional, at most 4 open, writes never
 * parked (pipeline_zoned_writes=false, so no thread waits).  A parameter
 * the core refuses is the harness's own bug: it aborts, so a fuzz run
 * never goes on with a device it did not ask for.  P is initialised
 * here; free it with znbd_params_free() after znbd_dev_free().  Returns
 * NULL (errno set) only when the device cannot be made. */
#ifndef ZNBD_LIB_FUZZ_DEV_H
#define ZNBD_LIB_FUZZ_DEV_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "znbd/dev.h"
#include "znbd/params.h"

static inline struct znbd_dev *
fuzz_dev_new(struct znbd_params *p, bool zoned)
{
  /* A NULL value leaves its key out: the zoned keys of a RAM disk. */
  const char *const list[] = {"size",
                              "1M",
                              "zoned",
                              zoned ? "true" : "false",
                              "zone_size",
                              zoned ? "64k" : NULL,
                              "zone_nr_conv",
                              zoned ? "2" : NULL,
                              "zone_max_open",
                              zoned ? "4" : NULL,
                              "pipeline_zoned_writes",
                              zoned ? "false" : NULL,
                              NULL};
  const char *const *kv = list;
  char err[256];
  znbd_params_init(p);
  for (; kv[0]; kv += 2)
    if (kv[1] && znbd_params_set(p, kv[0], kv[1], err, sizeof err) == -1) {
      fprintf(stderr, "fuzz: %s=%s: %s\n", kv[0], kv[1], err);
      abort();
    }
  if (znbd_params_finish(p, err, sizeof err) == -1)
    return NULL;
  return znbd_dev_new(p, err, sizeof err);
}

#endif
