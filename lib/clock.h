/* znbd lib-internal: the monotonic clock lib/ measures delays and
 * deadlines with (the mbps bucket, the parked writes' timeout). */
#ifndef ZNBD_LIB_CLOCK_H
#define ZNBD_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, nanoseconds.  No errors. */
static inline uint64_t
znbd_mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
