/* znbd: the store seam — where a device keeps its bytes.
 *
 * A store is a table of operations (struct znbd_store_ops, in the style of
 * nbdkit's common/allocators) behind one pointer; lib/dev.c and
 * lib/wcache.c call only through it.  The table has three parts: the data
 * ops every store answers, the zone hooks of a store that keeps state per
 * zone, and the persistence hooks of one that outlives its process; the
 * two hook tables are optional, one pointer each.  Two implementations:
 *   - the sparse RAM store (lib/store_ram.c, znbd_store_new): brd-like pages,
 *     never fails a write;
 *   - the directory store (lib/store_dir.c, znbd_store_dir_open): one file
 *     per zone as Linux zloop lays them out, persistent across restarts.
 * No zone rules live in a store: the zone engine (lib/zone.c) decides, the
 * store keeps bytes.  Offsets and lengths are bytes; callers check ranges.
 * Errors are -1 with errno; a failed write or zero changes no byte.
 */
#ifndef ZNBD_STORE_H
#define ZNBD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "znbd/async.h"

#define ZNBD_STORE_PAGE_SIZE 4096

struct znbd_store;

/* Flags of zero(). */
#define ZNBD_STORE_ZERO_ALLOCATE 0x1u /* keep the range allocated */
/* The range is a reset zone, usually written again soon, and no write to
 * it is in flight: a store may keep the memory for that rewrite (RAM:
 * MADV_FREE, lib/store_ram.c).  A hint; never with ALLOCATE.  Only
 * znbd_store_zone_reset() passes it. */
#define ZNBD_STORE_ZERO_LAZY 0x2u

typedef int (*znbd_store_extent_fn)(void *opaque, uint64_t off, uint64_t len,
                                    bool allocated);
/* A write's data that is not in memory yet (ZNBD_WRITE_SOURCE of
 * znbd/dev.h): copy its first LEN bytes to DST.  Returns 0, or -1 with
 * errno. */
typedef int (*znbd_store_fill_fn)(void *opaque, void *dst, uint64_t len);

/* The zone hooks of a store that keeps state per zone (a file each, the
 * conditions it records).  A store that has them answers every member.
 * Without them (ops->zones NULL, RAM) a zone is only its bytes: the
 * znbd_store_zone_*() calls below fall back to the data ops, and no zone
 * is loaded, faulted, opened or named.  ZNO counts zones from 0 (0
 * without zones: the whole device); offsets and lengths are bytes. */
struct znbd_store_zone_ops {
  /* Zone ZNO (bytes [START, START+LEN)) was reset: its data goes.  No
   * write to the zone is in flight (the zone engine waits for them).
   * RELEASE: give the memory back now (NBD TRIM).  Errors: ftruncate's
   * (EIO). */
  int (*reset)(struct znbd_store *s, uint32_t zno, uint64_t start, uint64_t len,
               bool release);
  /* Zone ZNO was finished: data from the old wp FROM to END goes (reads
   * as zeros).  Errors: ftruncate's (EIO). */
  int (*finish)(struct znbd_store *s, uint32_t zno, uint64_t from,
                uint64_t end);
  /* Zone ZNO became open (explicitly).  For preallocation; a failure is
   * not an error of the open. */
  void (*open)(struct znbd_store *s, uint32_t zno);
  /* Zone ZNO's condition became COND (enum znbd_zone_cond): READONLY or
   * OFFLINE, or back to EMPTY from one of them.  Errors: EIO (the
   * condition could not be recorded). */
  int (*fault)(struct znbd_store *s, uint32_t zno, unsigned cond);
  /* After a restart: zone ZNO's bytes written from its start in
   * *WRITTEN, and in *FAULT the condition kept for it (READONLY, OFFLINE)
   * or 0.  Errors: EIO. */
  int (*load)(struct znbd_store *s, uint32_t zno, uint64_t *written,
              unsigned *fault);
  /* Power cut (write_cache=true, lib/wcache.c): sequential zone ZNO,
   * bytes [START, START+LEN), keeps only its first SIZE bytes, the rest
   * reads as zeros (dir: the file is truncated to SIZE when longer, as
   * zloop's discard_write_cache does).  Errors: EIO. */
  int (*truncate)(struct znbd_store *s, uint32_t zno, uint64_t start,
                  uint64_t len, uint64_t size);
  /* The file that keeps zone ZNO: its name in NAME (NAMELEN bytes) and in
   * *CTIME_NS its last status change (st_ctim, ns since the epoch: every
   * write, truncate or allocation sets it, and no tool can set it back).
   * Errors: EIO. */
  int (*file)(struct znbd_store *s, uint32_t zno, char *name, size_t namelen,
              int64_t *ctime_ns);
};

/* The hooks of a store that outlives its process.  Without them
 * (ops->persist NULL, RAM) nothing is left to replay after a crash. */
struct znbd_store_persist_ops {
  /* The write cache's undo journal file (dir: PATH/znbd.wcache), opened
   * once and kept (and closed) by the store; CREATE makes it when absent.
   * Returns the descriptor, or -1 with errno (ENOENT: absent, not
   * CREATE; EIO). */
  int (*journal)(struct znbd_store *s, bool create);
  /* The intent records' file (dir: PATH/znbd.redo, include/znbd/redo.h),
   * opened, and made when absent, for the caller, who owns the new
   * descriptor.  Returns it, or -1 with errno (EACCES, EIO). */
  int (*redo)(struct znbd_store *s);
};

/* The hooks of a store whose bytes a front-end may move itself, with
 * I/O of its own (include/znbd/async.h): the store says where bytes lie
 * in its files and keeps its books before and after.  Offsets and
 * lengths are bytes. */
struct znbd_store_async_ops {
  /* [OFF, OFF+LEN) lies in one file: which, and where, in *IO; the
   * O_DIRECT descriptor (buffered_io=false) when the range suits its
   * alignment and ALIGNED says the caller's buffer is 4096-aligned.
   * Returns 0, or -1 with errno EXDEV (more than one file). */
  int (*map)(struct znbd_store *s, uint64_t len, uint64_t off, bool aligned,
             struct znbd_file_io *io);
  /* Before the caller writes [OFF, OFF+LEN): its blocks allocated (a
   * conventional zone's holes, recorded in *UNDO; a sequential zone's
   * capacity with zone_prealloc), so that a full file system refuses the
   * write here, nothing changed.  Returns 0, or -1 with errno ENOSPC,
   * EIO, ENOMEM. */
  int (*write_begin)(struct znbd_store *s, uint64_t len, uint64_t off,
                     void **undo);
  /* After it, which succeeded (OK) or not: the file is dirty (the next
   * FLUSH syncs it) and written back early per writeback_mb; or what the
   * write changed is undone (a sequential zone's file cut back to OFF,
   * the holes WRITE_BEGIN filled punched again).  Frees UNDO. */
  void (*write_end)(struct znbd_store *s, uint64_t len, uint64_t off,
                    void *undo, bool ok);
  /* FLUSH: the descriptors of the files written since their last sync,
   * or being synced by another FLUSH, into FDS and their zone numbers
   * into ZONES (room for every file), counted in *N; from now on they are
   * clean and being synced.  Never fails. */
  void (*flush_begin)(struct znbd_store *s, int *fds, uint32_t *zones,
                      unsigned *n);
  /* Those N files' syncs ended: OK, or they are dirty again. */
  void (*flush_end)(struct znbd_store *s, const uint32_t *zones, unsigned n,
                    bool ok);
  /* How many files the store has (the room flush_begin needs). */
  uint32_t (*nr_files)(struct znbd_store *s);
};

struct znbd_store_ops {
  const char *name; /* "ram", "dir" */
  /* Writes can fail (disk full, I/O error): a zoned write must then store
   * its data before it commits the write pointer (lib/dev.c). */
  bool write_may_fail;

  /* The data ops: every store answers them (flush, sync and ref may be
   * NULL, as said there). */
  void (*free)(struct znbd_store *s);
  /* Copy LEN bytes at OFF into BUF; never-written bytes read as zeros.
   * Errors: EIO. */
  int (*read)(struct znbd_store *s, void *buf, uint64_t len, uint64_t off);
  /* Store LEN bytes from BUF at OFF.  Errors: ENOSPC, EIO; then no byte
   * changed (partial file writes are undone). */
  int (*write)(struct znbd_store *s, const void *buf, uint64_t len,
               uint64_t off);
  /* Make LEN bytes at OFF read as zeros (NBD TRIM and WRITE_ZEROES);
   * FLAGS: ZNBD_STORE_ZERO_ALLOCATE keeps them allocated,
   * ZNBD_STORE_ZERO_LAZY may keep their memory.  Errors as write. */
  int (*zero)(struct znbd_store *s, uint64_t len, uint64_t off, unsigned flags);
  /* Allocated and unallocated runs of [OFF, OFF+LEN) in ascending order;
   * returns FN's first non-zero result, else 0. */
  int (*extents)(struct znbd_store *s, uint64_t off, uint64_t len,
                 znbd_store_extent_fn fn, void *opaque);
  /* Everything written so far is on stable storage (NBD FLUSH).  NULL: no
   * stable storage to reach (RAM).  Errors: EIO. */
  int (*flush)(struct znbd_store *s);
  /* [OFF, OFF+LEN) is on stable storage (NBD FUA).  NULL as flush. */
  int (*sync)(struct znbd_store *s, uint64_t len, uint64_t off);
  /* Bytes of data held now. */
  uint64_t (*allocated)(struct znbd_store *s);
  /* The LEN bytes at OFF in place (zero-copy send), or NULL: the caller
   * then copies with read().  NULL op: never in place. */
  const void *(*ref)(struct znbd_store *s, uint64_t len, uint64_t off);
  /* write() with the data from FILL(OPAQUE, ...), which copies it
   * straight to where the store keeps it (one copy instead of two: a
   * front-end's bounce buffer skipped).  Errors: write()'s, or FILL's
   * errno, after which the range's bytes are undefined (the store may
   * have taken part of them).  NULL op: znbd_store_write_from() fills a
   * bounce buffer and calls write(). */
  int (*write_from)(struct znbd_store *s, znbd_store_fill_fn fill, void *opaque,
                    uint64_t len, uint64_t off);

  /* Zone hooks, or NULL: no state per zone (RAM). */
  const struct znbd_store_zone_ops *zones;
  /* Persistence hooks, or NULL: not persistent (RAM). */
  const struct znbd_store_persist_ops *persist;
  /* Asynchronous I/O hooks, or NULL: the store moves its bytes itself
   * (RAM). */
  const struct znbd_store_async_ops *async;
};

/* Every store starts with this. */
struct znbd_store {
  const struct znbd_store_ops *ops;
  /* Writes can fail although ops->write_may_fail is false (RAM with a
   * memory limit below its size: znbd_store_ram_limit). */
  bool may_fail;
  /* Called by a store with files right before each system call that
   * changes one (write, truncate, allocate, punch), and again after the
   * last of a request's, when set: the write cache's journal keeps a bound
   * of the files' change times (lib/wcache.c, the lease); the call after
   * renews it at once should a thread have stalled past it between the
   * first call and its system call.  NULL: nothing to call. */
  void (*before_change)(void *opaque);
  void *before_change_opaque;
};

/* A file of store S is about to change (see before_change). */
static inline void
znbd_store_before_change(struct znbd_store *s)
{
  if (s->before_change)
    s->before_change(s->before_change_opaque);
}

/* Whether a write or zero may fail (then a zoned write stores its data
 * before it commits the write pointer, lib/dev.c). */
static inline bool
znbd_store_write_may_fail(const struct znbd_store *s)
{
  return s->ops->write_may_fail || s->may_fail;
}

/* RAM store S holds at most BYTES of data (rounded down to whole pages):
 * a write or an allocating zero that needs new pages beyond it fails with
 * ENOSPC and changes nothing; trims and zeros that free pages make room.
 * Pages being written count from the start of their write, so near the
 * limit concurrent writes to the same new pages may be refused although
 * one of them would fit.  No effect on other stores or with
 * memory_backed=false. */
void znbd_store_ram_limit(struct znbd_store *s, uint64_t bytes);

/* The sparse RAM store of SIZE bytes (lib/store_ram.c).  Pages
 * (ZNBD_STORE_PAGE_SIZE bytes) are allocated on their first write and
 * freed when a trim or zero covers them whole; never-written and trimmed
 * ranges read back as zeros without allocating.  MEMORY_BACKED false keeps
 * no data: writes are discarded and reads return zeros (null_blk
 * memory_backed=0).  Returns NULL with errno ENOMEM or EINVAL (SIZE 0). */
struct znbd_store *znbd_store_new(uint64_t size, bool memory_backed);

/* The calls, one per op. */
static inline void
znbd_store_free(struct znbd_store *s)
{
  if (s)
    s->ops->free(s);
}

static inline int
znbd_store_read(struct znbd_store *s, void *buf, uint64_t len, uint64_t off)
{
  return s->ops->read(s, buf, len, off);
}

/* RAM: the LEN bytes at OFF inside the mapping if every page of the range
 * is allocated, else NULL; they stay mapped until znbd_store_free() (a
 * write or trim that overlaps them changes what they read, as for any
 * overlapping requests).  Other stores: NULL. */
static inline const void *
znbd_store_ref(struct znbd_store *s, uint64_t len, uint64_t off)
{
  return s->ops->ref ? s->ops->ref(s, len, off) : NULL;
}

/* RAM: fails only with ENOSPC beyond znbd_store_ram_limit() (page
 * faults on a NORESERVE mapping cannot return an error; out of memory
 * beyond the limit is the OOM killer's business). */
static inline int
znbd_store_write(struct znbd_store *s, const void *buf, uint64_t len,
                 uint64_t off)
{
  return s->ops->write(s, buf, len, off);
}

/* LEN bytes at OFF from FILL(OPAQUE, ...): in place where the store can
 * (write_from), else through BOUNCE (LEN bytes) and write().  Errors as
 * write_from. */
static inline int
znbd_store_write_from(struct znbd_store *s, znbd_store_fill_fn fill,
                      void *opaque, void *bounce, uint64_t len, uint64_t off)
{
  if (s->ops->write_from)
    return s->ops->write_from(s, fill, opaque, len, off);
  if (fill(opaque, bounce, len) < 0)
    return -1;
  return s->ops->write(s, bounce, len, off);
}

/* RAM: pages covered whole are freed, partial pages have exactly those
 * bytes zeroed, nothing is allocated (unless ZNBD_STORE_ZERO_ALLOCATE). */
static inline int
znbd_store_zero(struct znbd_store *s, uint64_t len, uint64_t off,
                unsigned flags)
{
  return s->ops->zero(s, len, off, flags);
}

static inline int
znbd_store_extents(struct znbd_store *s, uint64_t off, uint64_t len,
                   znbd_store_extent_fn fn, void *opaque)
{
  return s->ops->extents(s, off, len, fn, opaque);
}

static inline int
znbd_store_flush(struct znbd_store *s)
{
  return s->ops->flush ? s->ops->flush(s) : 0;
}

static inline int
znbd_store_sync(struct znbd_store *s, uint64_t len, uint64_t off)
{
  return s->ops->sync ? s->ops->sync(s, len, off) : 0;
}

static inline uint64_t
znbd_store_allocated(struct znbd_store *s)
{
  return s->ops->allocated(s);
}

/* The zone calls: a store's zone hook, or without zone hooks the data
 * op that does the same to the bytes.  Errors as the hook's, or as
 * zero()'s. */

/* Zone reset (see the hook); RAM frees the memory lazily unless RELEASE,
 * for the rewrite that usually follows (ZNBD_STORE_ZERO_LAZY). */
static inline int
znbd_store_zone_reset(struct znbd_store *s, uint32_t zno, uint64_t start,
                      uint64_t len, bool release)
{
  if (s->ops->zones)
    return s->ops->zones->reset(s, zno, start, len, release);
  return s->ops->zero(s, len, start, release ? 0 : ZNBD_STORE_ZERO_LAZY);
}

static inline int
znbd_store_zone_finish(struct znbd_store *s, uint32_t zno, uint64_t from,
                       uint64_t end)
{
  if (s->ops->zones)
    return s->ops->zones->finish(s, zno, from, end);
  return s->ops->zero(s, end - from, from, 0);
}

/* Without zone hooks: nothing to do. */
static inline void
znbd_store_zone_open(struct znbd_store *s, uint32_t zno)
{
  if (s->ops->zones)
    s->ops->zones->open(s, zno);
}

/* Without zone hooks: not kept, 0. */
static inline int
znbd_store_zone_fault(struct znbd_store *s, uint32_t zno, unsigned cond)
{
  return s->ops->zones ? s->ops->zones->fault(s, zno, cond) : 0;
}

/* Without zone hooks (RAM): the bytes past SIZE are freed. */
static inline int
znbd_store_zone_truncate(struct znbd_store *s, uint32_t zno, uint64_t start,
                         uint64_t len, uint64_t size)
{
  if (s->ops->zones)
    return s->ops->zones->truncate(s, zno, start, len, size);
  return size < len ? s->ops->zero(s, len - size, start + size, 0) : 0;
}

#endif
