/* znbd lib-internal: the write cache's journal file (PATH/znbd.wcache)
 * as lib/wcache.c writes it and lib/wcache_replay.c reads it back after a
 * crash: its layout, the lease's timing, and whole-buffer I/O on it.  The
 * top of lib/wcache.c says why it is made this way.  Offsets and lengths
 * are bytes, times ns since the epoch (CLOCK_REALTIME).
 */
#ifndef ZNBD_WCACHE_JOURNAL_H
#define ZNBD_WCACHE_JOURNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

#define PAGE ((uint64_t)ZNBD_STORE_PAGE_SIZE)
#define MAGIC "znbd-wcache 2\n"
#define MAGIC_LEN 16
#define NONE UINT64_MAX /* FLUSHED of a zone that is not sequential */

enum { K_VOID, K_DATA, K_HOLE }; /* record kinds */

struct rec_hdr {
  uint64_t page, kind, len;
};

/* The lease: renewed for LEASE_NS once less than LEASE_MARGIN_NS of it is
 * left, so a change begins at least the margin before the recorded end
 * (a thread stalled that long between the check and its system call
 * would break the bound; the restart then refuses the directory, which
 * loses nothing). */
/* 10 s and 5 s: a wide margin, because a thread can stall for a second or
 * more on a loaded machine (two cores, sanitizers, writeback) and a stall
 * past the margin makes the restart refuse a directory it could serve;
 * the price is a wider window in which a change by someone else after a
 * crash goes unnoticed. */
#define LEASE_NS INT64_C(10000000000)
#define LEASE_MARGIN_NS INT64_C(5000000000)

/* Header: magic, zone count, FLUSHED of each zone, the lease. */
static inline uint64_t
hdr_len(uint32_t nr)
{
  return MAGIC_LEN + 8 + 8 * (uint64_t)nr + 8;
}

static inline uint64_t
lease_off(uint64_t nr)
{
  return MAGIC_LEN + 8 + 8 * nr;
}

static inline int64_t
now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* All N bytes of BUF written to (WRITE) or read from FD at OFF.  Errors:
 * ENOSPC when the file system is full (EDQUOT too), else EIO; EINVAL when
 * a read meets the end of the file. */
static inline int
io_full(int fd, void *buf, size_t n, uint64_t off, bool write)
{
  uint8_t *p = buf;
  while (n) {
    ssize_t r =
        write ? pwrite(fd, p, n, (off_t)off) : pread(fd, p, n, (off_t)off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      errno = r == 0 && !write                                ? EINVAL
              : r < 0 && (errno == ENOSPC || errno == EDQUOT) ? ENOSPC
                                                              : EIO;
      return -1;
    }
    p += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

static inline int
pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
  return io_full(fd, (void *)buf, n, off, true);
}

static inline int
pread_full(int fd, void *buf, size_t n, uint64_t off)
{
  return io_full(fd, buf, n, off, false);
}

#endif
