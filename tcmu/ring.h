/* znbd-tcmu: the TCMU command ring of one device, over /dev/uioN
 * (<linux/target_core_user.h>; the kernel side is
 * drivers/target/target_core_user.c). */
#ifndef ZNBD_TCMU_RING_H
#define ZNBD_TCMU_RING_H

#include <signal.h>
#include <stddef.h>

#include "scsi.h"

struct tcmu_ring {
  int fd;
  void *map;
  size_t map_size;
  unsigned last; /* our cursor into the command ring, bytes */
};

/* Open /dev/UIO (e.g. "uio0") and map its region (size from
 * /sys/class/uio/UIO/maps/map0/size).  Returns 0, or -1 with errno and a
 * message in ERR. */
int tcmu_ring_open(struct tcmu_ring *r, const char *uio, char *err,
                   size_t errlen);

/* Serve commands with S until *STOP is set (checked at least every
 * 200 ms), one at a time, completing each in ring order.  Returns 0, or
 * -1 with errno (a read/poll error on the UIO fd). */
int tcmu_ring_serve(struct tcmu_ring *r, struct znbd_scsi *s,
                    volatile sig_atomic_t *stop);

void tcmu_ring_close(struct tcmu_ring *r);

#endif
