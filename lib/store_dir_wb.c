/* znbd: the directory store's early writeback (writeback_mb=N), one
 * thread per store (lib/store_dir_impl.h).
 *
 * Buffered I/O only: once N MiB have been written to a zone file since its
 * last kick, the file is queued for the store's writeback thread, which
 * starts writeback of its dirty pages (sync_file_range with
 * SYNC_FILE_RANGE_WRITE: queues the I/O, waits for none of it), as a drive
 * destages its cache while more data comes in; the FLUSH that follows then
 * finds most pages clean.  A thread of its own because the call can block
 * while the disk's queue is full, and submitting the I/O costs CPU the
 * serving thread would otherwise spend before its next request (measured:
 * inline kicks gave no gain, bench/README.md).  The thread starts with the
 * first kick, so a process that forks after opening the store (a daemon) has
 * it.  It changes no durability promise: FLUSH and FUA still fdatasync, the
 * zone stays marked dirty, a write-back error is reported by that fdatasync
 * (sync_file_range without a WAIT flag leaves the file's error state alone),
 * and the power-cut rollback (lib/wcache.c) truncates and rewrites files,
 * which does not depend on which pages happen to be on disk.  A sequential
 * zone's kick stops before the page the wp is in (the next append would
 * dirty it again).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "stop_thread.h"
#include "store_dir_impl.h"

/* The writeback thread: takes the queued zones and starts the
 * writeback of each (see the top of this file). */
static void *
wb_main(void *arg)
{
  struct dir_store *s = arg;
  pthread_mutex_lock(&s->wb_lock);
  while (!s->wb_stop) {
    if (!s->wb_n) {
      pthread_cond_wait(&s->wb_cond, &s->wb_lock);
      continue;
    }
    struct dzone *z = &s->z[s->wb_q[--s->wb_n]];
    pthread_mutex_unlock(&s->wb_lock);
    atomic_store(&z->kick_queued, false);
    uint64_t end = atomic_load(&z->kick_end);
    (void)sync_file_range(z->fd, 0, (off_t)end, SYNC_FILE_RANGE_WRITE);
    pthread_mutex_lock(&s->wb_lock);
  }
  pthread_mutex_unlock(&s->wb_lock);
  return NULL;
}

/* Queue zone Z for the writeback thread, starting the thread the first
 * time.  Caller holds wb_lock.  Out of memory or threads: no early
 * writeback from then on (FLUSH still writes everything). */
static void
wb_queue(struct dir_store *s, struct dzone *z)
{
  if (!s->wb_started && !s->wb_failed) {
    s->wb_q = malloc(s->nr_zones * sizeof *s->wb_q);
    s->wb_started = s->wb_q && pthread_create(&s->wb_th, NULL, wb_main, s) == 0;
    s->wb_failed = !s->wb_started;
  }
  if (s->wb_started) {
    s->wb_q[s->wb_n++] = (uint32_t)(z - s->z);
    pthread_cond_signal(&s->wb_cond);
  }
}

/* writeback_mb: N more bytes went into the page cache of zone Z's file,
 * up to file offset END; each writeback_mb of them queues the file for
 * the writeback thread (sequential zones: the pages before END's page;
 * others: the whole file).  Best effort: an error of the write-back
 * (ENOSPC, EIO) is the next fdatasync's to report, and the pages stay in
 * the cache until then. */
void
znbd_dir_kick(struct dir_store *s, struct dzone *z, uint64_t n, uint64_t end)
{
  if (!s->wb_bytes || atomic_fetch_add(&z->unkicked, n) + n < s->wb_bytes)
    return;
  atomic_store(&z->unkicked, 0);
  end &= ~(uint64_t)(ZNBD_STORE_PAGE_SIZE - 1);
  if (z->seq && !end)
    return;
  atomic_fetch_add(&s->kicks, 1);
  atomic_store(&z->kick_end, z->seq ? end : 0);
  if (atomic_exchange(&z->kick_queued, true))
    return; /* still queued: the thread reads the new end */
  pthread_mutex_lock(&s->wb_lock);
  wb_queue(s, z);
  pthread_mutex_unlock(&s->wb_lock);
}

void
znbd_dir_wb_stop(struct dir_store *s)
{
  znbd_stop_thread(&s->wb_lock, &s->wb_cond, &s->wb_stop, s->wb_started,
                   s->wb_th);
  free(s->wb_q);
}
