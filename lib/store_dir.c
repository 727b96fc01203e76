/* znbd: the directory store (lib/store_dir.h): one file per zone, as
 * Linux zloop lays them out, so a device survives a restart.  This file:
 * the store's life (open, free) and its I/O operations.
 *
 * Design, and why:
 *
 * - Files stay open for the life of the store (one descriptor per zone),
 *   and I/O is pread/pwrite through the page cache: fast, and a restart
 *   after kill -9 still sees every completed write.  RLIMIT_NOFILE is
 *   raised to its hard limit at open; a device with more zones than that
 *   allows is refused with a message saying so.
 *
 * - buffered_io=false (zloop's default, its buffered_io option off): a
 *   second descriptor per zone opened with O_DIRECT.  A piece of a request
 *   whose file offset and length are multiples of the file's direct-I/O
 *   alignment (statx STATX_DIOALIGN; 4096 when the kernel does not say)
 *   goes through it, from the caller's buffer when that is aligned in
 *   memory too, else through a per-thread aligned bounce buffer (the NBD
 *   server's payloads sit right after a 28-byte header).  Anything else,
 *   and a direct call that fails with EINVAL, uses the buffered
 *   descriptor: the kernel keeps the two coherent (a direct read or write
 *   writes back and invalidates the cached pages of its range first).
 *   FLUSH still fdatasyncs the files written (the disk's cache, and the
 *   file size of a sequential zone).  Measured slower than buffered on
 *   ext4 (bench/README.md): synchronous direct writes wait for the disk
 *   on every request, so buffered stays the default.
 *
 * - A sequential zone's file size IS its write pointer.  Writes come only
 *   at the wp (the zone engine checks before the store is called), so a
 *   write that fails part-way (disk full, I/O error) is undone by
 *   truncating the file back to where the write started: nothing changes.
 *   Conventional zones (and the zoned=false data file) have the range
 *   allocated with fallocate() before the data is written, so a full file
 *   system fails the request before any byte changes
 *   (lib/store_dir_alloc.c).
 *
 * - Reset truncates to 0 (which also frees preallocated space); finish
 *   truncates to the zone capacity (zloop since 2026; the engine's wp goes
 *   to the zone end as null_blk's, and both read as zeros past the data).
 *
 * - zone_prealloc: the first write into a sequential zone since it was
 *   empty (or an explicit open) fallocates its whole capacity with
 *   FALLOC_FL_KEEP_SIZE, so the file size stays the wp while appends never
 *   have to allocate (rublk found buffered appends that allocate slow).
 *   Best effort: a file system without fallocate, or without room for the
 *   whole zone, just writes without it (lib/store_dir_alloc.c).
 *
 * - Durability: every file written (or truncated) since the last flush is
 *   marked dirty; FLUSH starts writeback of all dirty files, then
 *   fdatasyncs each (the disk gets them together), FUA the files of its
 *   range.  The directory and the metadata are synced when they change.
 *
 * - Early writeback (writeback_mb=N, buffered I/O only): a thread of
 *   the store's starts the writeback of a zone file every N MiB written
 *   to it (lib/store_dir_wb.c).
 *
 * - Opening, formatting and adopting a directory: lib/store_dir_open.c;
 *   PATH/znbd.meta and the files' names: lib/store_dir_meta.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_dir.h"
#include "store_dir_impl.h"
#include "znbd/dev.h"
#include "err.h"

static const struct znbd_store_ops dir_ops;

static void
dir_free(struct znbd_store *base)
{
  struct dir_store *s = (struct dir_store *)base;
  znbd_dir_wb_stop(s);
  pthread_cond_destroy(&s->wb_cond);
  pthread_mutex_destroy(&s->wb_lock);
  if (s->z)
    for (uint32_t i = 0; i < s->nr_zones; i++) {
      if (s->z[i].fd >= 0)
        close(s->z[i].fd);
      if (s->z[i].dfd >= 0)
        close(s->z[i].dfd);
      pthread_mutex_destroy(&s->z[i].sync_lock);
    }
  free(s->z);
  if (s->jfd >= 0)
    close(s->jfd);
  if (s->lockfd >= 0)
    close(s->lockfd); /* drops the flock */
  if (s->dirfd >= 0)
    close(s->dirfd);
  pthread_mutex_destroy(&s->meta_lock);
  free(s->path);
  free(s);
}

struct znbd_store *
znbd_store_dir_open(const struct znbd_params *p, char *err, size_t errlen)
{
  struct dir_store *s = calloc(1, sizeof *s);
  int e;

  if (!s) {
    set_err(err, errlen, "dir: out of memory");
    return NULL;
  }
  s->base.ops = &dir_ops;
  s->dirfd = s->lockfd = s->jfd = -1;
  s->geo = p->geo;
  s->prealloc = p->zone_prealloc;
  s->direct = !p->buffered_io;
  s->wb_bytes = s->direct ? 0 : (uint64_t)p->writeback_mb << 20;
  pthread_mutex_init(&s->wb_lock, NULL);
  pthread_cond_init(&s->wb_cond, NULL);
  pthread_mutex_init(&s->meta_lock, NULL);
  if (znbd_dir_open(s, p, err, errlen) < 0)
    goto fail;
  return &s->base;

fail:
  e = errno ? errno : EIO;
  if (err && errlen && !err[0])
    set_err(err, errlen, "dir: %s: %s", p->dir, strerror(e));
  dir_free(&s->base);
  errno = e;
  return NULL;
}

/* ----------------------------------------------------------------- I/O */

/* The zone holding byte OFF, and in *PLEN how much of [OFF, END) is in
 * it. */
static struct dzone *
piece(struct dir_store *s, uint64_t off, uint64_t end, uint64_t *plen)
{
  struct dzone *z = &s->z[off / znbd_geometry_span_size(&s->geo)];
  uint64_t zend = z->start + z->len;
  *plen = (zend < end ? zend : end) - off;
  return z;
}

#define FOR_EACH_PIECE(s, off0, len0, z, off, plen)                            \
  for (uint64_t off = (off0), plen = 0, end_ = (off0) + (len0);                \
       off < end_ && ((z) = piece((s), off, end_, &plen)); off += plen)

/* Bounce buffers of buffered_io=false, one per thread (freed when the
 * thread ends). */
#define BOUNCE_SIZE (1u << 20) /* bytes */
#define BOUNCE_ALIGN 4096u     /* bytes; larger mem_align: no bounce */
static pthread_key_t bounce_key;
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;

static void
bounce_init(void)
{
  (void)pthread_key_create(&bounce_key, free);
}

/* This thread's bounce buffer, or NULL (out of memory). */
static uint8_t *
bounce(void)
{
  void *p;
  pthread_once(&bounce_once, bounce_init);
  p = pthread_getspecific(bounce_key);
  if (!p) {
    if (posix_memalign(&p, BOUNCE_ALIGN, BOUNCE_SIZE))
      return NULL;
    if (pthread_setspecific(bounce_key, p)) {
      free(p);
      return NULL;
    }
  }
  return p;
}

/* One pread (WR false) or pwrite of up to N bytes at file offset OFF of
 * zone Z, direct when buffered_io=false and OFF and N are aligned (see
 * the top of this file), else buffered.  Returns the bytes done (0: end
 * of file), or -1 with errno. */
static ssize_t
zone_io(struct dir_store *s, struct dzone *z, uint8_t *buf, uint64_t n,
        uint64_t off, bool wr)
{
  if (z->dfd >= 0 && off % s->off_align == 0 && n % s->off_align == 0) {
    uint8_t *b = buf;
    ssize_t r;
    if ((uintptr_t)buf % s->mem_align) {
      b = s->mem_align <= BOUNCE_ALIGN ? bounce() : NULL;
      if (n > BOUNCE_SIZE)
        n = BOUNCE_SIZE;
      if (b && wr)
        memcpy(b, buf, n);
    }
    if (b) {
      r = wr ? pwrite(z->dfd, b, n, (off_t)off)
             : pread(z->dfd, b, n, (off_t)off);
      if (r > 0 && b != buf && !wr)
        memcpy(buf, b, (size_t)r);
      if (r >= 0 || errno != EINVAL)
        return r;
    }
  }
  return wr ? pwrite(z->fd, buf, n, (off_t)off)
            : pread(z->fd, buf, n, (off_t)off);
}

static int
dir_read(struct znbd_store *base, void *buf, uint64_t len, uint64_t off0)
{
  struct dir_store *s = (struct dir_store *)base;
  struct dzone *z;
  uint8_t *out = buf;

  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    uint64_t zoff = off - z->start, got = 0;
    while (got < plen) {
      ssize_t r = zone_io(s, z, out + got, plen - got, zoff + got, false);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0) {
        errno = EIO;
        return -1;
      }
      if (r == 0) { /* past the end of the file: zeros */
        memset(out + got, 0, plen - got);
        break;
      }
      got += (uint64_t)r;
    }
    out += plen;
  }
  return 0;
}

/* Write N bytes from P at OFF of zone Z's file (S, Z NULL: of FD). */
static int
pwrite_all(struct dir_store *s, struct dzone *z, int fd, const uint8_t *p,
           uint64_t n, uint64_t off)
{
  while (n) {
    if (s)
      znbd_store_before_change(&s->base);
    ssize_t r = z ? zone_io(s, z, (uint8_t *)(uintptr_t)p, n, off, true)
                  : pwrite(fd, p, n, (off_t)off);
    if (s)
      znbd_store_before_change(&s->base); /* and after: see store.h */
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -1;
    p += r;
    n -= (uint64_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

/* Real zeros over [OFF, OFF+LEN) of FD: NBD's NO_HOLE wants the range
 * provisioned, and file systems report fallocated (unwritten) extents as
 * holes to SEEK_DATA. */
static int
write_zeros(struct dir_store *s, int fd, uint64_t len, uint64_t off)
{
  static const uint8_t zeros[64 * 1024];
  for (uint64_t pos = 0; pos < len;) {
    uint64_t n = len - pos < sizeof zeros ? len - pos : sizeof zeros;
    if (pwrite_all(s, NULL, fd, zeros, n, off + pos) < 0)
      return -1;
    pos += n;
  }
  return 0;
}

/* Write (BUF) or zero (BUF NULL; FLAGS of zero()) [OFF0, OFF0+LEN).
 * First every conventional piece gets its blocks (fallocate), so a full
 * file system fails here before a byte changes; then the data goes in;
 * if that fails, sequential pieces are truncated back to where they
 * started (their file size is their wp: the write was at the wp). */
static int
put(struct dir_store *s, const uint8_t *buf, uint64_t len, uint64_t off0,
    unsigned flags)
{
  struct dzone *z;
  int e = 0;

  struct holes h = {0};
  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    uint64_t zoff = off - z->start;
    znbd_store_before_change(&s->base);
    if (z->seq) {
      znbd_dir_prealloc(s, z);
    } else if ((buf || (flags & ZNBD_STORE_ZERO_ALLOCATE)) &&
               znbd_dir_allocate(&h, z->fd, zoff, plen) < 0) {
      e = errno == EDQUOT ? ENOSPC : errno;
      znbd_dir_unallocate(&h); /* ENOSPC: nothing written yet, nothing left */
      errno = e;
      return -1;
    }
  }
  free(h.v);
  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    uint64_t zoff = off - z->start;
    int r;
    znbd_store_before_change(&s->base);
    if (buf)
      r = pwrite_all(s, z, -1, buf + (off - off0), plen, zoff);
    else if (z->seq) /* zeros at the wp: the file grows */
      r = ftruncate(z->fd, (off_t)(zoff + plen));
    else if (flags & ZNBD_STORE_ZERO_ALLOCATE)
      r = write_zeros(s, z->fd, plen, zoff);
    else
      r = fallocate(z->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    (off_t)zoff, (off_t)plen);
    atomic_store(&z->dirty, true);
    if (r == 0 && (buf || (!z->seq && (flags & ZNBD_STORE_ZERO_ALLOCATE))))
      znbd_dir_kick(s, z, plen, zoff + plen);
    if (r < 0) {
      e = errno == ENOSPC || errno == EDQUOT ? ENOSPC : EIO;
      /* Undo the sequential pieces written so far, this one included. */
      struct dzone *u;
      FOR_EACH_PIECE(s, off0, off + plen - off0, u, uoff, ulen)
      {
        (void)ulen;
        /* Best effort: the write's own error is the one returned.  (A
         * cast to void does not quiet warn_unused_result, which
         * _FORTIFY_SOURCE gives ftruncate.) */
        if (u->seq && ftruncate(u->fd, (off_t)(uoff - u->start)) < 0) {
        }
      }
      znbd_store_before_change(&s->base); /* and after: see store.h */
      errno = e;
      return -1;
    }
  }
  znbd_store_before_change(&s->base);
  return 0;
}

static int
dir_write(struct znbd_store *base, const void *buf, uint64_t len, uint64_t off)
{
  return put((struct dir_store *)base, buf, len, off, 0);
}

static int
dir_zero(struct znbd_store *base, uint64_t len, uint64_t off, unsigned flags)
{
  return put((struct dir_store *)base, NULL, len, off, flags);
}

/* Allocated runs of a conventional zone's file (or the data file), from
 * SEEK_DATA / SEEK_HOLE; sequential zones: data up to the end of file. */
static int
dir_extents(struct znbd_store *base, uint64_t off0, uint64_t len,
            znbd_store_extent_fn fn, void *opaque)
{
  struct dir_store *s = (struct dir_store *)base;
  struct dzone *z;
  int r;

  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    uint64_t pos = off - z->start, end = pos + plen;
    while (pos < end) {
      off_t d = lseek(z->fd, (off_t)pos, SEEK_DATA);
      uint64_t next;
      bool data = d >= 0 && (uint64_t)d == pos;
      if (d < 0 && errno != ENXIO) { /* no SEEK_DATA: all data */
        data = true;
        next = end;
      } else if (data) {
        off_t h = lseek(z->fd, (off_t)pos, SEEK_HOLE);
        next = h < 0 ? end : (uint64_t)h;
      } else {
        next = d < 0 ? end : (uint64_t)d;
      }
      if (next > end)
        next = end;
      if ((r = fn(opaque, z->start + pos, next - pos, data)))
        return r;
      pos = next;
    }
  }
  return 0;
}

/* fdatasync Z if it was written since its last sync.  Under the zone's
 * sync_lock: a second FLUSH (another thread) that finds the flag already
 * taken waits for the fdatasync in progress instead of answering before
 * the data it must cover is on disk. */
static int
sync_zone(struct dzone *z)
{
  int r = 0;
  pthread_mutex_lock(&z->sync_lock);
  if (atomic_exchange(&z->dirty, false) && fdatasync(z->fd) < 0) {
    atomic_store(&z->dirty, true);
    errno = EIO;
    r = -1;
  }
  pthread_mutex_unlock(&z->sync_lock);
  return r;
}

static int
dir_flush(struct znbd_store *base)
{
  struct dir_store *s = (struct dir_store *)base;
  int r = 0;
  /* Start the writeback of every dirty file first, then wait for each:
   * the disk gets all of them at once instead of one file per
   * fdatasync's round trip (a FLUSH after writes to many zones). */
  for (uint32_t i = 0; i < s->nr_zones; i++)
    if (atomic_load(&s->z[i].dirty))
      (void)sync_file_range(s->z[i].fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  for (uint32_t i = 0; i < s->nr_zones; i++)
    if (sync_zone(&s->z[i]) < 0)
      r = -1;
  return r;
}

static int
dir_sync(struct znbd_store *base, uint64_t len, uint64_t off0)
{
  struct dir_store *s = (struct dir_store *)base;
  struct dzone *z;
  int r = 0;
  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    (void)off;
    (void)plen;
    if (sync_zone(z) < 0)
      r = -1;
  }
  return r;
}

/* Truncate sequential zone ZNO to SIZE bytes. */
static int
truncate_zone(struct dir_store *s, uint32_t zno, uint64_t size)
{
  struct dzone *z = &s->z[zno];
  atomic_store(&z->dirty, true);
  znbd_store_before_change(&s->base);
  int r = ftruncate(z->fd, (off_t)size);
  znbd_store_before_change(&s->base);
  if (r < 0)
    return -1;
  return 0;
}

/* Reset: the file is emptied, preallocation included (zloop). */
static int
dir_zone_reset(struct znbd_store *base, uint32_t zno, uint64_t start,
               uint64_t len, bool release)
{
  struct dir_store *s = (struct dir_store *)base;
  (void)start;
  (void)len;
  (void)release; /* the page cache is the kernel's */
  atomic_store(&s->z[zno].prealloc, false);
  return truncate_zone(s, zno, 0);
}

/* Finish: the file grows to the zone capacity (zloop's current rule). */
static int
dir_zone_finish(struct znbd_store *base, uint32_t zno, uint64_t from,
                uint64_t end)
{
  struct dir_store *s = (struct dir_store *)base;
  (void)from;
  (void)end;
  return truncate_zone(s, zno, s->z[zno].cap);
}

/* Power cut: the file keeps its first SIZE bytes (zloop's
 * discard_write_cache truncates to the size at the last flush). */
static int
dir_zone_truncate(struct znbd_store *base, uint32_t zno, uint64_t start,
                  uint64_t len, uint64_t size)
{
  struct dir_store *s = (struct dir_store *)base;
  struct stat st;
  (void)start;
  (void)len;
  if (fstat(s->z[zno].fd, &st) < 0 ||
      ((uint64_t)st.st_size > size && truncate_zone(s, zno, size) < 0)) {
    errno = EIO;
    return -1;
  }
  if (size < (uint64_t)st.st_size)
    atomic_store(&s->z[zno].prealloc, false); /* truncate dropped it */
  if (s->z[zno].loaded > size)
    s->z[zno].loaded = size;
  return 0;
}

static int
dir_journal(struct znbd_store *base, bool create)
{
  struct dir_store *s = (struct dir_store *)base;
  if (s->jfd < 0) {
    s->jfd = openat(s->dirfd, JOURNAL_NAME,
                    O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (s->jfd >= 0 && create)
      (void)fsync(s->dirfd);
  }
  return s->jfd;
}

static int
dir_redo(struct znbd_store *base)
{
  struct dir_store *s = (struct dir_store *)base;
  int fd = openat(s->dirfd, REDO_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0)
    (void)fsync(s->dirfd);
  return fd;
}

static void
dir_zone_open(struct znbd_store *base, uint32_t zno)
{
  struct dir_store *s = (struct dir_store *)base;
  znbd_dir_prealloc(s, &s->z[zno]);
}

static int
dir_zone_fault(struct znbd_store *base, uint32_t zno, unsigned cond)
{
  struct dir_store *s = (struct dir_store *)base;
  uint8_t f = cond == ZNBD_ZONE_COND_READONLY || cond == ZNBD_ZONE_COND_OFFLINE
                  ? (uint8_t)cond
                  : 0;
  int r = 0;
  pthread_mutex_lock(&s->meta_lock);
  if (s->z[zno].fault != f) {
    uint8_t old = s->z[zno].fault;
    s->z[zno].fault = f;
    r = znbd_dir_save(s);
    if (r < 0) {
      s->z[zno].fault = old;
      errno = EIO;
    }
  }
  pthread_mutex_unlock(&s->meta_lock);
  return r;
}

static int
dir_zone_load(struct znbd_store *base, uint32_t zno, uint64_t *written,
              unsigned *fault)
{
  struct dir_store *s = (struct dir_store *)base;
  *written = s->z[zno].loaded;
  *fault = s->z[zno].fault;
  return 0;
}

static int
dir_zone_file(struct znbd_store *base, uint32_t zno, char *name, size_t namelen,
              int64_t *ctime_ns)
{
  struct dir_store *s = (struct dir_store *)base;
  struct stat st;
  dir_zone_name(s, zno, name, namelen);
  if (fstat(s->z[zno].fd, &st) < 0) {
    errno = EIO;
    return -1;
  }
  *ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
  return 0;
}

/* Blocks the files hold (st_blocks), in bytes. */
static uint64_t
dir_allocated(struct znbd_store *base)
{
  struct dir_store *s = (struct dir_store *)base;
  uint64_t sum = 0;
  struct stat st;
  for (uint32_t i = 0; i < s->nr_zones; i++)
    if (fstat(s->z[i].fd, &st) == 0)
      sum += (uint64_t)st.st_blocks * 512;
  return sum;
}

uint64_t
znbd_store_dir_kicks(const struct znbd_store *st)
{
  return atomic_load(&((const struct dir_store *)st)->kicks);
}

/* ---------------------------------------- asynchronous I/O (async.h) */

static int
dir_map(struct znbd_store *base, uint64_t len, uint64_t off, bool aligned,
        struct znbd_file_io *io)
{
  struct dir_store *s = (struct dir_store *)base;
  uint64_t plen;
  struct dzone *z = piece(s, off, off + len, &plen);
  if (plen != len) {
    errno = EXDEV;
    return -1;
  }
  io->at = off - z->start;
  io->len = len;
  io->direct = aligned && z->dfd >= 0 && s->mem_align <= BOUNCE_ALIGN &&
               io->at % s->off_align == 0 && len % s->off_align == 0;
  io->fd = io->direct ? z->dfd : z->fd;
  return 0;
}

/* The blocks of a write the caller does, as put() allocates them before
 * its own pwrite: prealloc for a sequential zone, the holes of a
 * conventional one (recorded in *UNDO, a struct holes, to punch again
 * if the write fails). */
static int
dir_write_begin(struct znbd_store *base, uint64_t len, uint64_t off,
                void **undo)
{
  struct dir_store *s = (struct dir_store *)base;
  uint64_t plen;
  struct dzone *z = piece(s, off, off + len, &plen);
  *undo = NULL;
  if (z->seq) {
    znbd_dir_prealloc(s, z);
    return 0;
  }
  struct holes *h = calloc(1, sizeof *h);
  if (!h) {
    errno = ENOMEM;
    return -1;
  }
  if (znbd_dir_allocate(h, z->fd, off - z->start, len) < 0) {
    int e = errno == EDQUOT ? ENOSPC : errno;
    znbd_dir_unallocate(h);
    free(h);
    errno = e;
    return -1;
  }
  *undo = h;
  return 0;
}

static void
dir_write_end(struct znbd_store *base, uint64_t len, uint64_t off, void *undo,
              bool ok)
{
  struct dir_store *s = (struct dir_store *)base;
  struct holes *h = undo;
  uint64_t plen;
  struct dzone *z = piece(s, off, off + len, &plen);
  uint64_t zoff = off - z->start;
  atomic_store(&z->dirty, true);
  if (ok)
    znbd_dir_kick(s, z, len, zoff + len);
  else if (z->seq) { /* its file size is the wp: back to where it was */
    /* Best effort, as in dir_write (a void cast does not quiet
     * _FORTIFY_SOURCE's warn_unused_result). */
    if (ftruncate(z->fd, (off_t)zoff) < 0) {
    }
  } else if (h)
    znbd_dir_unallocate(h);
  if (h)
    free(h->v);
  free(h);
}

static void
dir_flush_begin(struct znbd_store *base, int *fds, uint32_t *zones, unsigned *n)
{
  struct dir_store *s = (struct dir_store *)base;
  *n = 0;
  for (uint32_t i = 0; i < s->nr_zones; i++) {
    struct dzone *z = &s->z[i];
    /* A file another FLUSH is syncing is synced again: that sync may
     * have started before writes this FLUSH must cover. */
    if (!atomic_exchange(&z->dirty, false) && !atomic_load(&z->syncing))
      continue;
    atomic_fetch_add(&z->syncing, 1);
    fds[*n] = z->fd;
    zones[(*n)++] = i;
  }
}

static void
dir_flush_end(struct znbd_store *base, const uint32_t *zones, unsigned n,
              bool ok)
{
  struct dir_store *s = (struct dir_store *)base;
  for (unsigned i = 0; i < n; i++) {
    struct dzone *z = &s->z[zones[i]];
    if (!ok)
      atomic_store(&z->dirty, true);
    atomic_fetch_sub(&z->syncing, 1);
  }
}

static uint32_t
dir_nr_files(struct znbd_store *base)
{
  return ((struct dir_store *)base)->nr_zones;
}

static const struct znbd_store_async_ops dir_async_ops = {
    .map = dir_map,
    .write_begin = dir_write_begin,
    .write_end = dir_write_end,
    .flush_begin = dir_flush_begin,
    .flush_end = dir_flush_end,
    .nr_files = dir_nr_files,
};

static const struct znbd_store_zone_ops dir_zone_ops = {
    .reset = dir_zone_reset,
    .finish = dir_zone_finish,
    .open = dir_zone_open,
    .fault = dir_zone_fault,
    .load = dir_zone_load,
    .truncate = dir_zone_truncate,
    .file = dir_zone_file,
};

static const struct znbd_store_persist_ops dir_persist_ops = {
    .journal = dir_journal,
    .redo = dir_redo,
};

static const struct znbd_store_ops dir_ops = {
    .name = "dir",
    .write_may_fail = true,
    .free = dir_free,
    .read = dir_read,
    .write = dir_write,
    .zero = dir_zero,
    .extents = dir_extents,
    .flush = dir_flush,
    .sync = dir_sync,
    .allocated = dir_allocated,
    .zones = &dir_zone_ops,
    .persist = &dir_persist_ops,
    .async = &dir_async_ops,
};
