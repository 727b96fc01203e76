/* znbd unit tests: building a device from key=value pairs, and collecting
 * base:allocation extents, shared by the dev, zone-dev and model tests.
 * A set-up failure is a broken test, not a result: it exits 1 with the
 * parameter's message. */
#ifndef ZNBD_TEST_TESTDEV_H
#define ZNBD_TEST_TESTDEV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/dev.h"
#include "znbd/params.h"

/* Finished params from KV, a NULL-terminated list of key, value, ... */
static inline void
test_params(struct znbd_params *p, const char *const *kv)
{
  char err[256];

  znbd_params_init(p);
  for (; kv[0]; kv += 2)
    if (znbd_params_set(p, kv[0], kv[1], err, sizeof err) < 0) {
      fprintf(stderr, "%s=%s: %s\n", kv[0], kv[1], err);
      exit(1);
    }
  if (znbd_params_finish(p, err, sizeof err) < 0) {
    fprintf(stderr, "params: %s\n", err);
    exit(1);
  }
}

/* A device from finished params P, which are freed (the device keeps its
 * own copy). */
static inline struct znbd_dev *
test_dev(struct znbd_params *p)
{
  char err[256];
  struct znbd_dev *d = znbd_dev_new(p, err, sizeof err);

  znbd_params_free(p);
  if (!d) {
    fprintf(stderr, "dev_new: %s\n", err);
    exit(1);
  }
  return d;
}

/* Up to 16 extents as znbd_dev_extents() reports them; n counts all. */
struct ext {
  uint64_t off[16], len[16];
  uint32_t flags[16];
  int n;
};

static inline int
ext_add(void *opaque, uint64_t off, uint64_t len, uint32_t flags)
{
  struct ext *e = opaque;
  if (e->n < 16) {
    e->off[e->n] = off;
    e->len[e->n] = len;
    e->flags[e->n] = flags;
  }
  e->n++;
  return 0;
}

/* Zone I of D as reported (zeros past the end). */
static inline struct znbd_zone_info
test_zone(struct znbd_dev *d, uint32_t i)
{
  struct znbd_zone_info z;
  memset(&z, 0, sizeof z);
  znbd_dev_report(d, i, 1, &z);
  return z;
}

/* N bytes of a pattern that differs with SEED and along the bytes. */
static inline void
test_fill(uint8_t *b, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

/* A device from KV, a NULL-terminated list of key, value, ... */
static inline struct znbd_dev *
test_dev_kv(const char *const *kv)
{
  struct znbd_params p;
  test_params(&p, kv);
  return test_dev(&p);
}

/* Zone Z's wp (bytes), as znbd_dev_report() gives it. */
static inline uint64_t
test_wp(struct znbd_dev *d, uint32_t z)
{
  struct znbd_zone_info i;
  znbd_dev_report(d, z, 1, &i);
  return i.wp;
}

#endif
