/* znbd: the device every front-end serves — a RAM store, optionally with
 * null_blk-faithful zones on top, and the mapping of zones onto NBD's
 * standard commands (man/nbdkit-zoned-plugin.pod, ZONES OVER NBD).
 *
 * Offsets and lengths are bytes.  Front-ends validate NBD ranges and
 * alignment before calling (nbdkit does part of it); these functions still
 * refuse a misaligned or out-of-range request with EINVAL so a front-end
 * bug cannot corrupt state.  Errors are returned as -1 with errno set to
 * the Linux value null_blk would give; front-ends map them to the wire
 * (znbd_dev_wire_errno()).  Safe to call from many threads at once.
 *
 * The unfenced calls that change data or zones, for callers tied to no
 * connection (tools, tests), are lib/dev_unfenced.h's, not public: a
 * front-end serving connections, LUNs or queues goes through the request
 * contract of znbd/request.h, which carries the power-cut fence, the
 * bound on waiting writes, the injected delay and drop-reply.
 */
#ifndef ZNBD_DEV_H
#define ZNBD_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "znbd/params.h"

/* Zone types and conditions use Linux's numbering
 * (include/uapi/linux/blkzoned.h), so they can be shown as blkzone does. */
enum znbd_zone_type {
  ZNBD_ZONE_TYPE_CONVENTIONAL = 0x1,
  ZNBD_ZONE_TYPE_SEQWRITE_REQ = 0x2,
};
enum znbd_zone_cond {
  ZNBD_ZONE_COND_NOT_WP = 0x0,
  ZNBD_ZONE_COND_EMPTY = 0x1,
  ZNBD_ZONE_COND_IMP_OPEN = 0x2,
  ZNBD_ZONE_COND_EXP_OPEN = 0x3,
  ZNBD_ZONE_COND_CLOSED = 0x4,
  ZNBD_ZONE_COND_READONLY = 0xd,
  ZNBD_ZONE_COND_FULL = 0xe,
  ZNBD_ZONE_COND_OFFLINE = 0xf,
};

#define ZNBD_WP_INVALID UINT64_MAX

/* One zone as reported.  Bytes.  wp is ZNBD_WP_INVALID for conventional,
 * READONLY and OFFLINE zones. */
struct znbd_zone_info {
  uint64_t start, len, capacity, wp;
  enum znbd_zone_type type;
  enum znbd_zone_cond cond;
};

/* Zone management operations (null_blk REQ_OP_ZONE_*). */
enum znbd_zone_op {
  ZNBD_ZONE_OP_OPEN,
  ZNBD_ZONE_OP_CLOSE,
  ZNBD_ZONE_OP_FINISH,
  ZNBD_ZONE_OP_RESET,
  ZNBD_ZONE_OP_SET_READONLY, /* null_blk configfs zone_readonly */
  ZNBD_ZONE_OP_SET_OFFLINE,  /* null_blk configfs zone_offline */
  ZNBD_ZONE_OP_ONLINE,       /* back to EMPTY from READONLY/OFFLINE */
};
#define ZNBD_ALL_ZONES UINT32_MAX /* with RESET only: reset-all */

/* Counters, for `stats` and tests. */
struct znbd_dev_stats {
  uint32_t nr_imp_open, nr_exp_open, nr_closed; /* active = sum */
  uint64_t allocated;                           /* store bytes held */
  uint64_t badblock_errors; /* requests failed by a bad block */
  uint64_t dropped_replies; /* replies dropped (znbd_dev_drop_reply) */
  /* Requests that znbd_dev_request_delay() gave a delay (completion_nsec,
   * mbps, zone operation latency), and the sum of those delays in
   * nanoseconds: what every front-end asked the core for. */
  uint64_t delayed_requests, delay_nsec;
  /* Writes parked ahead of the wp whose thread waited for them
   * (znbd_dev_write, znbd_req_write without DONE), and how many of those
   * threads slept because the wp did not come while they yielded. */
  uint64_t park_waits, park_sleeps;
};

struct znbd_dev;

/* Build a device from finished params (znbd_params_finish() done), with
 * zone_readonly/zone_offline applied.  Returns NULL with errno ENOMEM or
 * EINVAL and a message in ERR. */
struct znbd_dev *znbd_dev_new(const struct znbd_params *p, char *err,
                              size_t errlen);
void znbd_dev_free(struct znbd_dev *d);

const struct znbd_params *znbd_dev_params(const struct znbd_dev *d);
uint64_t znbd_dev_size(const struct znbd_dev *d);
uint32_t znbd_dev_nr_zones(const struct znbd_dev *d); /* 0: not zoned */

/* The geometry as one machine-readable line of key=value pairs (NBD
 * export description), e.g. "znbd model=host-managed size=4294967296
 * zone_size=67108864 zone_capacity=67108864 nr_zones=64 nr_conv=4
 * max_open=0 max_active=0 blocksize=512"; sizes in bytes; model=none
 * for a plain RAM disk.  Writes at most LEN bytes incl. NUL; returns the
 * length it needed (snprintf-style). */
int znbd_dev_describe(const struct znbd_dev *d, char *buf, size_t len);

/* Read flags: how znbd_dev_read() (and znbd_req_read()) give the bytes,
 * and which rule a read follows besides the device's.  At most one of
 * CHECK, SINK and REF. */
/* Check only: the range, ZNBD_READ_ONE_TYPE and the bad blocks (counted,
 * logged, cleared with badblocks_once) as a read would, BUF unused: for a
 * front-end that answers a read without the bytes (holes from
 * znbd_dev_extents). */
#define ZNBD_READ_CHECK 0x1
/* BUF is a const struct znbd_read_sink *: the RAM store's bytes go to its
 * DRAIN in place (one copy, DRAIN's, instead of two), taken under the
 * zone's lock as a read's copy is; other bytes (zeros past the wp, dir=,
 * holes) through SINK->bounce.  DRAIN is called once a run of bytes, in
 * order, and not again after it failed; the read then fails with DRAIN's
 * errno. */
#define ZNBD_READ_SINK 0x2
/* Zero-copy read of a plain RAM disk (zoned=false): BUF is a const void
 * **, which gets a pointer to the LEN bytes at OFF inside the store when
 * all of them are allocated data (see znbd_store_ref() for how long they
 * stay valid), else NULL: a zoned device (reads depend on the wp, under
 * the zone lock), holes, dir=.  With NULL the caller reads by copy, which
 * makes the zoned device's checks. */
#define ZNBD_READ_REF 0x4
/* A ZBC read: one may not touch zones of more than one type (ZBC-2
 * 4.5.3): EIO, reason ZNBD_REFUSAL_READ_MIXED_TYPES.  NBD and the block
 * layer have no such rule. */
#define ZNBD_READ_ONE_TYPE 0x8

/* Read LEN bytes at OFF into BUF, or as FLAGS (ZNBD_READ_* above) say.
 * Reads are not fenced: a read changes nothing a power cut could undo.
 * Errors, each with its reason (znbd/refusal.h, znbd_req_refusal() after
 * znbd_req_read()): EINVAL (range or alignment, OUT_OF_RANGE), EIO
 * (an OFFLINE zone, ZONE_OFFLINE, null_process_zoned_cmd(); past the wp
 * with zone_read_past_wp=error, READ_PAST_WP; a bad sector, BAD_BLOCK,
 * see znbd_dev_badblocks_edit; zone types mixed with ZNBD_READ_ONE_TYPE,
 * READ_MIXED_TYPES), and a store's or DRAIN's errno with no reason. */
int znbd_dev_read(struct znbd_dev *d, void *buf, uint64_t len, uint64_t off,
                  unsigned flags);

/* Where a read's bytes go with ZNBD_READ_SINK, when not into a buffer of
 * the caller's: DRAIN takes LEN bytes of the read from SRC, for its byte
 * AT (0: the first); 0, or -1 with errno (the read then fails with it).
 * BOUNCE: at least the read's length, for bytes the store cannot give in
 * place. */
struct znbd_read_sink {
  int (*drain)(void *opaque, const void *src, uint64_t len, uint64_t at);
  void *opaque;
  void *bounce;
};

/* Write flags. */
#define ZNBD_WRITE_NOWAIT 0x1 /* ahead of wp: fail with EAGAIN, don't wait */
/* With BUF NULL on a non-zoned device: store real zeros so the range
 * stays allocated (NBD WRITE_ZEROES with NO_HOLE).  Zoned devices ignore
 * it: their base:allocation is the write pointer, not the pages. */
#define ZNBD_WRITE_ALLOCATE 0x2
/* NBD FUA: before the write returns, its range is on stable storage as
 * znbd_dev_sync() makes it, and with write_cache=true inside the same
 * hold of the power-cut lock as the write, so a cut comes before both or
 * after both: a FUA write that fails with ESHUTDOWN changed nothing, one
 * that succeeded is durable.  A write znbd_req_write() parks
 * (ZNBD_WRITE_PARKED) is not synced: its DONE must call znbd_req_sync(),
 * which it does inside the write that filled the gap, still under that
 * write's hold of the lock. */
#define ZNBD_WRITE_FUA 0x4
/* BUF is a struct znbd_write_source, not the data: the data is not in
 * memory yet (znbd-ublk: in the kernel's request, read with a system
 * call), and the store copies it straight to where it keeps it (RAM)
 * once the zone rules have taken the write, instead of a front-end
 * copying it to a buffer first and the store copying it again.  Only
 * with ZNBD_WRITE_NOWAIT (a write that waits would outlive the source):
 * else EINVAL.  A write the rules refuse calls no fill() and changes
 * nothing; a failed fill() fails the write with its errno, with no wp,
 * condition or counter changed, but the range's bytes undefined (on a
 * sequential zone they lie past the wp, which no read returns). */
#define ZNBD_WRITE_SOURCE 0x8
/* A ZBC write: one that touches a sequential zone stays inside it (ZBC-2
 * 4.5.3, WRITE BOUNDARY VIOLATION), where NBD and the block layer let a
 * write run on into the next zone.  Refused with EIO and
 * ZNBD_REFUSAL_WRITE_BOUNDARY (znbd/refusal.h). */
#define ZNBD_WRITE_ONE_ZONE 0x10
struct znbd_write_source {
  /* Copy the write's first LEN bytes to DST: 0, or -1 with errno. */
  int (*fill)(void *opaque, void *dst, uint64_t len);
  void *opaque;
  /* At least the write's length in bytes, for a store that cannot take
   * the data in place (dir=): fill() goes there first. */
  void *bounce;
};

/* How a parked write ended: ERR 0, or an errno as znbd_dev_write()'s. */
typedef void (*znbd_write_done_fn)(void *opaque, int err);

/* znbd_req_write() with DONE: the write was parked. */
#define ZNBD_WRITE_PARKED 1

/* For a server that stops: every parked write fails with EIO now (their
 * DONE callbacks run on this thread) and no write is parked any more (one
 * ahead of the wp fails with EIO at once), so no client waits for
 * zone_write_timeout and no callback comes after the front-end is gone. */
void znbd_dev_close_parking(struct znbd_dev *d);

/* The zones a TRIM of [OFF, OFF+LEN) (bytes) resets, by znbd_dev_trim()'s
 * rule: the sequential zones [*FIRST, *END) it covers whole (*FIRST >=
 * *END: none; so for a device without zones or a range not inside it).  For
 * a front-end that must act on those zones' queued writes (znbd's plug,
 * as Linux aborts a zone's plugged writes on a reset).  Never fails. */
void znbd_dev_trim_zones(struct znbd_dev *d, uint64_t len, uint64_t off,
                         uint32_t *first, uint32_t *end);

/* Power cut of a device with write_cache=true (lib/wcache.h): every
 * write not covered by a completed FLUSH or FUA is lost; sequential zones
 * go back to their wp at the last flush (then EMPTY, CLOSED or FULL: open
 * zones close, as after a ZBC/ZNS power cycle), conventional blocks to
 * their flushed contents, and the generation (znbd_dev_generation) moves
 * on: front-ends drop every connection made before.  AFTER 0: now.
 * AFTER N: the next N writes (WRITE, WRITE_ZEROES, append; counted when
 * they start) execute, and the cut happens when the next write, trim,
 * flush or zone operation arrives, which fails with ESHUTDOWN.  Errors:
 * EINVAL (write_cache=false: nothing is cached, nothing to lose), EIO (a
 * store error while rolling back). */
int znbd_dev_power_cut(struct znbd_dev *d, uint64_t after);

/* How many power cuts happened (0 without write_cache). */
uint64_t znbd_dev_generation(struct znbd_dev *d);

/* No fence: requests not tied to a connection (the control socket,
 * tools, tests; see znbd/request.h). */
#define ZNBD_NO_FENCE UINT64_MAX

/* FN(OPAQUE) is called after each power cut, from the thread that made it
 * (a front-end wakes its connections there).  Does nothing without
 * write_cache. */
void znbd_dev_on_power_cut(struct znbd_dev *d, void (*fn)(void *opaque),
                           void *opaque);

/* base:allocation flags: NBD_STATE_HOLE and NBD_STATE_ZERO of NBD's
 * doc/proto.md, same values. */
#define ZNBD_EXTENT_HOLE 0x1u
#define ZNBD_EXTENT_ZERO 0x2u

/* base:allocation: call FN for consecutive extents covering
 * [OFF, OFF+LEN) with ZNBD_EXTENT_* bits in FLAGS.
 * Sequential zones: [start, wp) data (0), [wp, end) HOLE|ZERO;
 * conventional zones and non-zoned devices: store allocation.
 * Stops at FN's first non-zero result and returns it. */
int znbd_dev_extents(struct znbd_dev *d, uint64_t off, uint64_t len,
                     int (*fn)(void *opaque, uint64_t off, uint64_t len,
                               uint32_t flags),
                     void *opaque);

/* One extent of the zone context (znbd/zonectx.h): bytes [OFF, OFF+LEN)
 * of one zone, its condition and type, and whether they lie at or past
 * the zone's wp. */
struct znbd_zone_extent {
  uint64_t off, len;
  enum znbd_zone_cond cond;
  enum znbd_zone_type type;
  bool past_wp;
};
typedef int (*znbd_zone_extent_fn)(void *opaque,
                                   const struct znbd_zone_extent *e);

/* The zone context of [OFF, OFF+LEN): call FN for each zone from the one
 * holding OFF until one starts at or past OFF+LEN, in order, the first
 * clipped to start at OFF and each running to its zone's end (past
 * OFF+LEN: the NBD spec lets the last extent go beyond the request).  A
 * sequential zone with a valid wp that is not FULL is two extents, [start,
 * wp) and [wp, end) with PAST_WP (either left out when empty); any other
 * zone is one.  Each zone's wp is read under its lock, one zone at a
 * time.  Stops at FN's first non-zero result and returns it; -1 with
 * errno EINVAL for a device that is not zoned or a bad range. */
int znbd_dev_zone_extents(struct znbd_dev *d, uint64_t off, uint64_t len,
                          znbd_zone_extent_fn fn, void *opaque);

/* Copy up to NR zones from index FIRST into OUT.  Returns the number
 * copied (0 past the end or when not zoned). */
uint32_t znbd_dev_report(struct znbd_dev *d, uint32_t first, uint32_t nr,
                         struct znbd_zone_info *out);

/* Index of the zone holding byte OFF (OFF < size, zoned device).
 * Power-of-2 zone sizes use a shift. */
uint32_t znbd_dev_zone_index(const struct znbd_dev *d, uint64_t off);

void znbd_dev_stats(struct znbd_dev *d, struct znbd_dev_stats *out);

/* Map a Linux errno from this API to what NBD can carry: ETOOMANYREFS and
 * EOVERFLOW (zone resources) -> ENOSPC, EAGAIN/ETIMEDOUT -> EIO,
 * EIO/EINVAL/ENOMEM/ENOSPC/EPERM/ESHUTDOWN unchanged, else EIO. */
int znbd_dev_wire_errno(int err);

/* Standard names, for logs, reports and the control protocol:
 * "EMPTY", "IMP_OPEN", ... (Linux BLK_ZONE_COND_* numbering; "UNKNOWN"
 * for any other value); "CONVENTIONAL" / "SEQ_WRITE_REQUIRED" (blkzone's
 * words; "UNKNOWN" otherwise); "EIO", "ETOOMANYREFS", ... for the errno
 * values this API returns, NULL for any other. */
const char *znbd_zone_cond_name(unsigned cond);
const char *znbd_zone_type_name(unsigned type);
const char *znbd_errno_name(int err);

/* For a log line about byte offset OFF (bytes): on a zoned device
 * " (zone N at START: COND, wp WP, capacity ends at END)" (no wp part
 * for conventional zones) in BUF (LEN bytes, truncated to fit); an empty
 * string otherwise.  Used by the plugin's and znbd -v's refusal lines. */
void znbd_dev_zone_note(struct znbd_dev *d, uint64_t off, char *buf,
                        size_t len);

/* ---- Fault and timing injection ---------------------------------------
 * null_blk's badblocks / badblocks_once / badblocks_partial_io, its
 * timeout injection (as lost NBD replies) and mbps.  Man pages: PARAMETERS
 * and FAULT INJECTION; control socket: badblocks, drop-reply. */

/* Add or remove (ADD false) bad sectors given as LIST ("100-107,2048":
 * 512-byte sectors, inclusive ranges).  All or nothing.  Returns 0, or -1
 * with errno EINVAL (malformed, a sector past the end; message in ERR) or
 * ENOMEM. */
int znbd_dev_badblocks_edit(struct znbd_dev *d, const char *list, bool add,
                            char *err, size_t errlen);

/* The bad sectors as LIST (merged ranges, "" when none) into BUF (LEN
 * bytes incl. NUL); returns the length needed (snprintf-style). */
size_t znbd_dev_badblocks_list(struct znbd_dev *d, char *buf, size_t len);

/* Kinds of request, for drop-reply and delays (bits). */
#define ZNBD_IO_READ 0x1u
#define ZNBD_IO_WRITE 0x2u /* WRITE and WRITE_ZEROES */
#define ZNBD_IO_FLUSH 0x4u
#define ZNBD_IO_TRIM 0x8u
#define ZNBD_IO_OTHER 0x10u /* block status, cache */
#define ZNBD_IO_ALL 0x1fu

/* Drop the reply of every EVERY-th request of the KINDS (ZNBD_IO_* bits),
 * counting from now; EVERY 0 stops dropping.  The request itself is
 * executed.  Never fails. */
void znbd_dev_drop_reply_set(struct znbd_dev *d, uint32_t every,
                             unsigned kinds);
void znbd_dev_drop_reply_get(struct znbd_dev *d, uint32_t *every,
                             unsigned *kinds);

/* The front-end serving D (one ZNBD_PARAM_FOR_* bit, znbd/params.h),
 * set once before its control socket starts; 0, the default, names none.
 * The control language (znbd/control.h) refuses the requests that this
 * front-end cannot honour, naming both (drop-reply on znbd-ublk, which
 * answers every request).  Never fails. */
void znbd_dev_set_frontend(struct znbd_dev *d, unsigned frontend);
unsigned znbd_dev_frontend(const struct znbd_dev *d);

/* Called by a front-end once per request of kind KIND (one ZNBD_IO_*
 * bit), before sending its reply: true if the reply must never be sent
 * (counted in dropped_replies and logged).  No lock; one atomic load
 * when dropping is off. */
bool znbd_dev_drop_reply(struct znbd_dev *d, unsigned kind);

/* A zone management request (ZBC OUT, the control socket), for
 * znbd_dev_request_delay(); not a drop-reply kind. */
#define ZNBD_IO_ZONE_MGMT 0x20u

/* The injected delay of one request, nanoseconds, the one rule every
 * front-end applies before it replies (they differ only in how they wait):
 *   completion_nsec (null_blk's per-request completion delay, applied in
 *   null_handle_cmd's timer mode)
 * + for KIND ZNBD_IO_READ or ZNBD_IO_WRITE of LEN bytes on the wire: the
 *   mbps bucket, shared by all connections (null_blk's mbps)
 * + for ZNBD_IO_ZONE_MGMT: the latency of OP (zone_open_nsec,
 *   zone_close_nsec, zone_finish_nsec, zone_reset_nsec; 0 for the others);
 *   for ZNBD_IO_TRIM on a zoned device: zone_reset_nsec (a reset).
 * OP is read for ZNBD_IO_ZONE_MGMT only.  0 when nothing is set; never
 * fails. */
uint64_t znbd_dev_request_delay(struct znbd_dev *d, unsigned kind, uint64_t len,
                                enum znbd_zone_op op);

/* The parts of znbd_dev_request_delay() without completion_nsec: the
 * mbps bucket for READ/WRITE of LEN bytes, zone_reset_nsec for a TRIM
 * on a zoned device (nanoseconds).  Front-ends call
 * znbd_dev_request_delay(); this is for tests of the bucket. */
uint64_t znbd_dev_delay_nsec(struct znbd_dev *d, unsigned kind, uint64_t len);

/* Extra latency of zone management operation OP (zone_open_nsec ...),
 * nanoseconds; 0 for the others. */
uint64_t znbd_dev_zone_op_nsec(const struct znbd_dev *d, enum znbd_zone_op op);

#endif
