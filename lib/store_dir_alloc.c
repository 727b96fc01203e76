/* znbd: the directory store's blocks allocated ahead of its writes
 * (lib/store_dir_impl.h): a conventional zone's holes fallocated before a
 * write so that a full file system refuses the write before a byte
 * changes, and punched again when it is refused; a sequential zone's
 * capacity preallocated when it opens (zone_prealloc).  Offsets and
 * lengths are bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "store_dir_impl.h"

/* Not supported by this file system: not an error for best-effort
 * allocation. */
static bool
unsupported(int e)
{
  return e == EOPNOTSUPP || e == ENOSYS;
}

static int
holes_add(struct holes *h, int fd, uint64_t off, uint64_t len)
{
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 8;
    struct hole *v = realloc(h->v, cap * sizeof *v);
    if (!v)
      return -1;
    h->v = v;
    h->cap = cap;
  }
  h->v[h->n++] = (struct hole){fd, off, len};
  return 0;
}

/* Punch the holes in H again and free H. */
void
znbd_dir_unallocate(struct holes *h)
{
  int e = errno;
  for (size_t i = 0; i < h->n; i++)
    (void)fallocate(h->v[i].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    (off_t)h->v[i].off, (off_t)h->v[i].len);
  free(h->v);
  h->v = NULL;
  h->n = h->cap = 0;
  errno = e;
}

/* Allocate [OFF, OFF+LEN) of conventional file FD before a write, so the
 * write cannot fail half done: only its holes (SEEK_HOLE / SEEK_DATA),
 * each recorded in H first.  A refused fallocate (ENOSPC) can leave part
 * of its range allocated (ext4 does): the caller's znbd_dir_unallocate()
 * punches the recorded holes again, which were holes before, so no data is
 * touched.  Without SEEK_HOLE the whole range is allocated and nothing
 * recorded.  A file system without fallocate is no error (0). */
int
znbd_dir_allocate(struct holes *h, int fd, uint64_t off, uint64_t len)
{
  uint64_t pos = off, end = off + len;
  while (pos < end) {
    off_t a = lseek(fd, (off_t)pos, SEEK_HOLE);
    if (a < 0 && errno != ENXIO) { /* no SEEK_HOLE: the whole range */
      if (fallocate(fd, 0, (off_t)off, (off_t)len) < 0 && !unsupported(errno))
        return -1;
      return 0;
    }
    if (a < 0 || (uint64_t)a >= end)
      return 0;
    off_t b = lseek(fd, a, SEEK_DATA);
    uint64_t hend = b < 0 || (uint64_t)b > end ? end : (uint64_t)b;
    if (hend <= (uint64_t)a) {
      /* A write racing this one filled the hole between the two lseeks
       * (SEEK_DATA found data at A): nothing to allocate there, and a
       * zero-length fallocate would fail with EINVAL.  Go on after it. */
      off_t n = lseek(fd, a, SEEK_HOLE);
      if (n < 0 || n <= a)
        return 0;
      pos = (uint64_t)n;
      continue;
    }
    if (holes_add(h, fd, (uint64_t)a, hend - (uint64_t)a) < 0) {
      errno = ENOMEM;
      return -1;
    }
    if (fallocate(fd, 0, a, (off_t)(hend - (uint64_t)a)) < 0) {
      if (unsupported(errno)) {
        h->n--; /* nothing to give back */
        return 0;
      }
      return -1;
    }
    pos = hend;
  }
  return 0;
}

/* zone_prealloc: the capacity of sequential zone Z allocated beyond its
 * end of file (KEEP_SIZE: the size stays the wp).  Best effort. */
void
znbd_dir_prealloc(struct dir_store *s, struct dzone *z)
{
  if (!s->prealloc || !z->seq || atomic_load(&z->prealloc))
    return;
  atomic_store(&z->prealloc, true);
  znbd_store_before_change(&s->base);
  (void)fallocate(z->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)z->cap);
  znbd_store_before_change(&s->base);
}
