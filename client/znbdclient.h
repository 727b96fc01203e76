/* libznbdclient: the zones of a znbd export (nbdkit-zoned-plugin or znbd)
 * seen from a client, on libnbd.  Used by nbdzone and the fio engine.
 *
 * No NBD protocol code of its own: NBD goes through libnbd, zone
 * operations and append through the zone control socket
 * (man/znbd-zone-control.pod).  Zone state comes, best first, from the
 * x-znbd:zone metadata context (include/znbd/zonectx.h), the control
 * socket, or base:allocation (the first hole in a sequential zone is its
 * write pointer; the condition is then inferred as after a power cycle:
 * EMPTY, FULL, else CLOSED).  The geometry comes from the export
 * description (znbd_dev_describe()).
 *
 * Units: every offset and length is bytes; zones are indexes from 0.
 * Errors: functions returning int give 0 (or a count) on success and -1
 * with errno set; znbdc_error() then has a message naming the URI or the
 * socket and the reason.  A handle is used by one thread at a time.
 */
#ifndef ZNBDCLIENT_H
#define ZNBDCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libnbd.h>

#include "znbd/dev.h"

/* Largest length one NBD request carries here (32 bits, 4 KiB aligned). */
#define ZNBDC_MAX_REQUEST 0xfffff000u

/* The geometry from the export description.  Bytes.  zoned false: a plain
 * export (no description, one from another server, or model=none); then
 * only size and blocksize are set.  max_open/max_active 0: no limit. */
struct znbdc_geom {
  bool zoned;
  uint64_t size, zone_size, zone_capacity;
  uint32_t nr_zones, nr_conv, max_open, max_active, blocksize;
};

/* Where zone state comes from. */
enum znbdc_source {
  ZNBDC_SRC_ZONECTX,    /* x-znbd:zone: exact */
  ZNBDC_SRC_CONTROL,    /* control socket: exact */
  ZNBDC_SRC_ALLOCATION, /* base:allocation: write pointers, inferred cond */
  ZNBDC_SRC_NONE,       /* not zoned, or nothing offered */
};

struct znbdc;

/* Connect to URI (any libnbd URI) and, when CONTROL is not NULL, to the
 * zone control socket at that path.  Asks for x-znbd:zone and
 * base:allocation.  Returns NULL with errno and a message in ERR (at
 * most ERRLEN bytes): ECONNREFUSED/ENOENT/... (connection, from libnbd or
 * connect(2)), EPROTO (the description's geometry is inconsistent),
 * ENOMEM, ENAMETOOLONG (CONTROL path). */
struct znbdc *znbdc_open(const char *uri, const char *control, char *err,
                         size_t errlen);

/* Disconnect (NBD_CMD_DISC when this process opened the handle; a handle
 * inherited through fork() is only closed) and free H.  H may be NULL.
 * Leaves errno as it found it, so a failure path can close a handle and
 * still return its own errno. */
void znbdc_close(struct znbdc *h);

/* The message of the last failure on H ("" if none). */
const char *znbdc_error(const struct znbdc *h);

const struct znbdc_geom *znbdc_geom(const struct znbdc *h);
enum znbdc_source znbdc_source(const struct znbdc *h);
const char *znbdc_source_name(enum znbdc_source src); /* "x-znbd:zone"... */
bool znbdc_has_control(const struct znbdc *h);
const char *znbdc_uri(const struct znbdc *h);

/* The libnbd handle, for I/O (it stays owned by H). */
struct nbd_handle *znbdc_nbd(struct znbdc *h);

/* Zone I as the geometry alone says (start, len, capacity, type; cond
 * EMPTY or NOT_WP, wp ZNBD_WP_INVALID).  The last zone may be short. */
void znbdc_zone_geom(const struct znbdc_geom *g, uint32_t i,
                     struct znbd_zone_info *z);

/* The zone holding byte OFF, or UINT32_MAX past the end / not zoned. */
uint32_t znbdc_zone_of(const struct znbdc_geom *g, uint64_t off);

/* Read the state of zones FIRST..FIRST+COUNT-1 into ZONES from the best
 * source.  wp is ZNBD_WP_INVALID for conventional, FULL, READONLY and
 * OFFLINE zones, as blkzone shows them.  Returns COUNT, or -1: EINVAL
 * (not zoned, range beyond nr_zones, COUNT 0), ENOTSUP (the server offers
 * no source), EPROTO (malformed server answer), or the errno of the NBD
 * request / socket. */
int znbdc_report(struct znbdc *h, uint32_t first, uint32_t count,
                 struct znbd_zone_info *zones);

/* Zone management through the control socket on zone ZONE, or every zone
 * with ZNBD_ALL_ZONES (open/close/finish/reset only; man
 * znbd-zone-control "all").  null_blk's result on every condition.
 * Returns 0, or -1: ENOTSUP (no control socket), and the server's refusal
 * as its errno name says (EINVAL, EIO for the condition or type,
 * ETOOMANYREFS, EOVERFLOW, ENOMEM); znbdc_error() then holds the server's
 * reply.  znbdc_reply() has the last "ok ..." line. */
int znbdc_zone_op(struct znbdc *h, enum znbd_zone_op op, uint32_t zone);

/* One request line REQ (no newline; man/znbd-zone-control.pod, e.g.
 * "stats", "badblocks add 100-107") on the control socket, for requests
 * that carry no data and whose reply is one line.  Returns 0 with the
 * "ok ..." line in znbdc_reply(), or -1: ENOTSUP (no control socket), the
 * refusal's errno (EINVAL, EIO, ...) with the server's "error ENAME
 * reason" line in znbdc_error(), EPROTO or ECONNRESET. */
int znbdc_control(struct znbdc *h, const char *req);

/* The last reply line from the control socket (no newline). */
const char *znbdc_reply(const struct znbdc *h);

/* Reset the COUNT zones from FIRST (sequential ones; conventional zones
 * in the range are refused with EIO by the control socket, skipped by
 * TRIM).  Through the control socket when there is one (one request per
 * zone, stopping at the first refusal), else one NBD TRIM per run of
 * zones (the servers reset whole zones a TRIM covers: doc/zone-rules.md
 * trim-reset; TRIM is advisory, so a READONLY zone stays so silently).
 * Returns 0 or -1: EINVAL (range), ENOTSUP (no control socket and no
 * TRIM), the control refusal's errno, or the TRIM's errno. */
int znbdc_reset_zones(struct znbdc *h, uint32_t first, uint32_t count);

/* Zone append of LEN bytes from BUF to zone ZONE through the control
 * socket; *OFF gets the absolute byte offset the server wrote them at.
 * LEN: 1 to ZNBD_CONTROL_APPEND_MAX (32 MiB), a multiple of the block
 * size.  Returns 0 or -1: ENOTSUP (no control socket), EINVAL (LEN, zone),
 * EIO (conventional, FULL, READONLY, OFFLINE, or no room below the
 * capacity: null_zone_write() with append), ETOOMANYREFS, EOVERFLOW,
 * ENOMEM, EPIPE/ECONNRESET (socket gone).  A refused append changes
 * nothing on the server. */
int znbdc_append(struct znbdc *h, uint32_t zone, const void *buf, uint64_t len,
                 uint64_t *off);

#endif
