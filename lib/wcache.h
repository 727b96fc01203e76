/* znbd: the volatile write cache (write_cache=true) and power cuts
 * (lib/wcache.c; the replay after a crash, lib/wcache_replay.c).
 *
 * The device keeps a "durable state": what the last completed FLUSH made
 * durable, plus FUA writes and zone management since.  A power cut
 * (znbd_wcache_cut) brings the device back to it: every sequential zone
 * to the bytes written from its start at the last flush (its wp then),
 * every conventional block (the whole device when not zoned) written
 * since to its contents then, and the zones' conditions to what a drive
 * shows after a power cycle (znbd_zones_power_cycle).  A persistent store
 * keeps the durable state in an undo journal (PATH/znbd.wcache) so that a
 * restart after kill -9 applies the same rollback (znbd_wcache_replay).
 *
 * Offsets and lengths are bytes.  Errors are -1 with errno.
 */
#ifndef ZNBD_WCACHE_H
#define ZNBD_WCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "zone.h"
#include "znbd/geometry.h"

struct znbd_wcache;

/* A write cache over store ST for a device of SIZE bytes, zones ZS (NULL:
 * not zoned), whose current state is durable (call after the zones are
 * restored).  With a persistent store the journal is created and written.
 * Returns NULL with errno ENOMEM or EIO. */
struct znbd_wcache *znbd_wcache_new(struct znbd_store *st,
                                    struct znbd_zones *zs, uint64_t size);
void znbd_wcache_free(struct znbd_wcache *wc);

/* A request not tied to a connection (the control socket's own zone
 * operations): never fenced out. */
#define ZNBD_WCACHE_NO_FENCE UINT64_MAX

/* Around every request that changes the device (WRITE is true for writes,
 * which count towards "power-cut after N"): enter fails with errno
 * ESHUTDOWN, after carrying it out, when an armed power cut is due (the N
 * writes are done), and with ESHUTDOWN, changing nothing, when FENCE (the
 * generation the request's connection was made at, or
 * ZNBD_WCACHE_NO_FENCE) is older than the current one: the check runs
 * under the lock a cut takes exclusive, so a request of a connection made
 * before a cut either entered before it or never does.  Leave must follow
 * a successful enter. */
int znbd_wcache_enter(struct znbd_wcache *wc, bool write, uint64_t fence);
void znbd_wcache_leave(struct znbd_wcache *wc);

/* A write that entered did not execute and will be sent again (EAGAIN:
 * ahead of its wp with ZNBD_WRITE_NOWAIT): it gives back its count
 * towards an armed cut, so it counts once. */
void znbd_wcache_refund(struct znbd_wcache *wc);

/* Before writing, zeroing or trimming [OFF, OFF+LEN) (entered): keep the
 * durable contents of every conventional 4 KiB page of the range not yet
 * kept since the last flush.  Errors: ENOMEM, ENOSPC (the journal's file
 * system is full), EIO; nothing written. */
int znbd_wcache_save(struct znbd_wcache *wc, uint64_t len, uint64_t off);

/* Zone management made zone ZNO (under its lock) hold WRITTEN bytes from
 * its start durably at once: reset and online (0), finish (its
 * capacity). */
void znbd_wcache_zone_durable(struct znbd_wcache *wc, uint32_t zno,
                              uint64_t written);

/* NBD FLUSH: store flush, then the current state is the durable one.
 * ESHUTDOWN as enter (a due power cut happens first, or FENCE is older
 * than the current generation); EIO. */
int znbd_wcache_flush(struct znbd_wcache *wc, uint64_t fence);

/* The device stops after a FLUSH that succeeded (nothing is written any
 * more): the journal is emptied, so the next start rolls nothing back and
 * another tool (Linux zloop, say) may use the files meanwhile.  Errors:
 * EIO (the journal stays, and the next start checks the files against
 * it). */
int znbd_wcache_retire(struct znbd_wcache *wc);

/* NBD FUA after a write of [OFF, OFF+LEN): the store syncs the range;
 * conventional pages of it become durable as they are now; a sequential
 * zone holding part of it becomes durable up to the end of that part
 * (with all it holds before: a zone has no holes).  Errors: EIO,
 * ESHUTDOWN (FENCE older than the current generation, as enter). */
int znbd_wcache_sync(struct znbd_wcache *wc, uint64_t len, uint64_t off,
                     uint64_t fence);

/* znbd_wcache_sync() for a caller inside znbd_wcache_enter() (holding
 * the cut lock shared, its fence already checked): the FUA of a write
 * done in the same hold, so no cut can come between the write and its
 * FUA.  Errors: EIO. */
int znbd_wcache_sync_held(struct znbd_wcache *wc, uint64_t len, uint64_t off);

/* Power cut.  AFTER 0: now.  AFTER N > 0: the next N writes (WRITE,
 * WRITE_ZEROES, zone append; counted when they start, failed ones too,
 * requeued ones once: znbd_wcache_refund)
 * execute, and the cut happens when the next request that changes the
 * device (a write, trim, flush or zone operation) arrives, before it
 * executes; that request fails with ESHUTDOWN.  Errors: EIO (a store
 * error during the rollback: the rollback goes on). */
int znbd_wcache_cut(struct znbd_wcache *wc, uint64_t after);

/* Incremented by every power cut (front-ends drop older connections). */
uint64_t znbd_wcache_generation(struct znbd_wcache *wc);

/* FN(OPAQUE) is called after each power cut (one callback). */
void znbd_wcache_on_cut(struct znbd_wcache *wc, void (*fn)(void *opaque),
                        void *opaque);

/* After a crash: apply the journal FD of store ST (a device of geometry
 * GEO, the finished params' geo: its zones, or one conventional span when
 * not zoned):
 * sequential zones are truncated to their durable bytes, conventional
 * pages get their durable contents back; then the journal is emptied.
 * The whole journal is checked before anything is changed, and entries
 * can only truncate sequential zones and write conventional pages, so a
 * damaged journal changes no file; a replay cut short by a crash is
 * simply done again.  An empty journal does nothing.  The journal's
 * lease bounds when the server that wrote it could last change a file:
 * a zone file whose status change time (ctime) is later was changed after
 * that server stopped (by zloop or by hand), and is not rolled back.
 * Errors: EINVAL (damaged journal, nothing changed), ESTALE (a file
 * changed since, nothing changed), EIO, ENOMEM; WHY (WHYLEN bytes) then
 * says what is wrong, as a clause ("its header is cut short ..."). */
int znbd_wcache_replay(struct znbd_store *st, int fd,
                       const struct znbd_geometry *geo, char *why,
                       size_t whylen);

#endif
