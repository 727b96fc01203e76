/* znbd lib-internal: fault and timing injection state of one device
 * (lib/faults.c): bad blocks (null_blk's badblocks), lost replies
 * (null_blk's timeout_inject, NBD style), the mbps token bucket.
 * lib/dev.c owns one and exposes it through include/znbd/dev.h. */
#ifndef ZNBD_LIB_FAULTS_H
#define ZNBD_LIB_FAULTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bad sectors, 512-byte units, as sorted disjoint half-open ranges. */
struct znbd_bb_range {
  uint64_t start, end;
};

struct znbd_faults {
  pthread_mutex_t lock; /* protects bb, bb_cap, the bucket */
  /* Number of ranges in bb: 0 lets the I/O path skip the lock. */
  atomic_uint_fast32_t nr_bb;
  struct znbd_bb_range *bb;
  uint32_t bb_cap;
  uint64_t nr_sectors; /* device size, sectors: the list's bound */

  atomic_uint_fast64_t bb_errors; /* requests failed by a bad block */
  atomic_uint_fast64_t dropped;   /* replies dropped */
  /* Injected delays handed to front-ends (znbd_dev_request_delay): how
   * many requests got one, and their sum in nanoseconds. */
  atomic_uint_fast64_t delayed, delay_nsec;
  atomic_uint_fast64_t drop_seen;  /* requests of the selected kinds */
  atomic_uint_fast32_t drop_every; /* 0: off */
  atomic_uint drop_kinds;          /* ZNBD_IO_* bits */

  uint64_t mbps;      /* MiB/s, 0: no limit */
  uint64_t next_free; /* bucket: CLOCK_MONOTONIC ns when the link is free */
};

void znbd_faults_init(struct znbd_faults *f, uint64_t nr_sectors,
                      uint64_t mbps);
void znbd_faults_destroy(struct znbd_faults *f);

/* Parse LIST ("100-107,2048" inclusive sector ranges) and add (ADD) or
 * remove every range.  All or nothing: 0, or -1 with errno EINVAL
 * (malformed, a sector >= nr_sectors; message in ERR) or ENOMEM. */
int znbd_faults_bb_edit(struct znbd_faults *f, const char *list, bool add,
                        char *err, size_t errlen);

/* Whether [SECTOR, SECTOR+N) touches a bad range (null_blk's
 * badblocks_check()).  If so, *FIRST_BAD gets the first sector of the
 * first such range, which is removed when ONCE (badblocks_once), and the
 * hit is counted in bb_errors under the lock (so a count read after an
 * edit returned includes every hit of the list before it).  Lock-free
 * when the list is empty. */
static inline bool znbd_faults_bb_hit(struct znbd_faults *f, uint64_t sector,
                                      uint64_t n, bool once,
                                      uint64_t *first_bad);
bool znbd_faults_bb_hit_slow(struct znbd_faults *f, uint64_t sector, uint64_t n,
                             bool once, uint64_t *first_bad);

static inline bool
znbd_faults_bb_hit(struct znbd_faults *f, uint64_t sector, uint64_t n,
                   bool once, uint64_t *first_bad)
{
  if (atomic_load_explicit(&f->nr_bb, memory_order_relaxed) == 0)
    return false;
  return znbd_faults_bb_hit_slow(f, sector, n, once, first_bad);
}

/* The list as "100-107,2048" (inclusive ranges; "" when empty) into BUF;
 * returns the length needed (snprintf-style). */
size_t znbd_faults_bb_format(struct znbd_faults *f, char *buf, size_t len);

/* The bucket: how long (ns) a transfer of BYTES must wait so that all
 * transfers together stay within mbps MiB/s.  0 without a limit. */
uint64_t znbd_faults_throttle(struct znbd_faults *f, uint64_t bytes);

#endif
