/* znbd lib-internal: the directory store's state, shared by its files
 * (lib/store_dir.c the store and its I/O, lib/store_dir_open.c opening a
 * directory, lib/store_dir_alloc.c allocating blocks ahead of writes,
 * lib/store_dir_wb.c early writeback); lib/store_dir.h is
 * what the rest of the library sees.  Offsets and lengths are bytes.
 */
#ifndef ZNBD_STORE_DIR_IMPL_H
#define ZNBD_STORE_DIR_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "store_dir_meta.h"
#include "znbd/geometry.h"
#include "znbd/params.h"

/* One zone file (zoned=false: the data file). */
struct dzone {
  int fd;
  int dfd; /* O_DIRECT descriptor (buffered_io=false), else -1 */
  bool seq;
  uint64_t start, len, cap;  /* bytes */
  uint64_t loaded;           /* file size found at open (seq: the wp) */
  _Atomic bool dirty;        /* written or truncated since the last sync */
  _Atomic uint32_t syncing;  /* asynchronous FLUSHes syncing it now */
  pthread_mutex_t sync_lock; /* held across taking dirty and its fdatasync */
  _Atomic bool prealloc;     /* capacity fallocated since the last reset */
  _Atomic uint64_t unkicked; /* bytes written since the last writeback kick */
  _Atomic uint64_t kick_end; /* kick: write back up to here (0: whole file) */
  _Atomic bool kick_queued;  /* in the writeback thread's queue */
  uint8_t fault;             /* 0, ZNBD_ZONE_COND_READONLY or _OFFLINE */
};

/* The store: a struct znbd_store whose ops are dir_ops (lib/store_dir.c). */
struct dir_store {
  struct znbd_store base;
  char *path;
  int dirfd, lockfd;
  int jfd; /* PATH/znbd.wcache (write_cache's undo journal), or -1 */
  bool prealloc;
  bool direct;            /* buffered_io=false */
  uint64_t wb_bytes;      /* writeback_mb in bytes; 0: no early kick */
  _Atomic uint64_t kicks; /* early writeback kicks, for tests */
  /* The writeback thread and its queue of zone numbers (each zone at most
   * once: kick_queued), under wb_lock. */
  pthread_mutex_t wb_lock;
  pthread_cond_t wb_cond;
  pthread_t wb_th;
  uint32_t *wb_q, wb_n;
  bool wb_started, wb_failed, wb_stop;
  uint32_t mem_align, off_align; /* direct I/O alignment, bytes */
  struct znbd_dir_meta m;
  struct znbd_geometry geo; /* the device's (the finished params') */
  uint32_t nr_zones;        /* zoned=false: one "zone", the data file */
  struct dzone *z;
  pthread_mutex_t meta_lock; /* rewriting znbd.meta */
};

/* The file name of zone I of S (LEN bytes at BUF). */
static inline void
dir_zone_name(const struct dir_store *s, uint32_t i, char *buf, size_t len)
{
  znbd_dir_zone_name(s->m.zoned, s->z[i].seq, i, buf, len);
}

/* lib/store_dir_open.c: open (or format, or adopt) the directory P->dir
 * into S, whose ops, descriptors (-1), options and locks the caller set
 * up; as znbd_store_dir_open() (lib/store_dir.h), which it is the body of.
 * Returns 0, or -1 with errno and ERR as there (ERR may be left empty: the
 * caller then names the directory). */
int znbd_dir_open(struct dir_store *s, const struct znbd_params *p, char *err,
                  size_t errlen);

/* lib/store_dir_open.c: rewrite PATH/znbd.meta from S (its record and
 * the zones' faults).  Caller holds meta_lock (or is alone).  Returns 0,
 * or -1 with errno as znbd_dir_meta_save(). */
int znbd_dir_save(struct dir_store *s);

/* The holes a write allocated, to give them back when it is refused. */
struct hole {
  int fd;
  uint64_t off, len;
};
struct holes {
  struct hole *v;
  size_t n, cap;
};

/* lib/store_dir_alloc.c: allocate [OFF, OFF+LEN) of conventional file FD
 * before a write, so the write cannot fail half done: only its holes,
 * each recorded in H first (H zeroed by the caller, its V freed by the
 * caller or by znbd_dir_unallocate()).  A file system without fallocate
 * is no error.  Returns 0, or -1 with errno (ENOSPC, EDQUOT, EIO from
 * fallocate; ENOMEM) and the holes allocated so far recorded in H. */
int znbd_dir_allocate(struct holes *h, int fd, uint64_t off, uint64_t len);

/* lib/store_dir_alloc.c: punch the holes recorded in H again and free
 * its list.  Leaves errno as it found it (a failure path's cleanup). */
void znbd_dir_unallocate(struct holes *h);

/* lib/store_dir_alloc.c: zone_prealloc: the capacity of sequential zone
 * Z allocated beyond its end of file, once per reset.  Best effort,
 * never fails. */
void znbd_dir_prealloc(struct dir_store *s, struct dzone *z);

/* lib/store_dir_wb.c: writeback_mb: N more bytes went into the page cache
 * of zone Z's file, up to file offset END; each writeback_mb of them
 * queues the file for the writeback thread (started by the first).  Best
 * effort, never fails (see lib/store_dir_wb.c). */
void znbd_dir_kick(struct dir_store *s, struct dzone *z, uint64_t n,
                   uint64_t end);

/* lib/store_dir_wb.c: stop the writeback thread of S (when started) and
 * free its queue; before the zones' files are closed.  Never fails. */
void znbd_dir_wb_stop(struct dir_store *s);

#endif
