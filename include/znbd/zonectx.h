/* znbd: the x-znbd:zone NBD metadata context (server and nbdzone).
 *
 * The NBD spec lets a server offer private contexts in the "x-" namespace
 * (doc/proto.md, "Metadata querying").  znbd offers "x-znbd:zone": each
 * BLOCK_STATUS extent lies within one zone and its 32-bit status is
 *
 *   bits 0-3  zone condition, Linux numbering (enum znbd_zone_cond)
 *   bits 4-5  zone type (enum znbd_zone_type)
 *   bit  8    ZNBD_ZONECTX_PAST_WP: the extent is at or above the wp
 *
 * A sequential zone with a valid wp is described as [start, wp) without
 * and [wp, start + len) with ZNBD_ZONECTX_PAST_WP (either may be empty and
 * is then left out), so one BLOCK_STATUS gives every zone's condition and
 * wp.  Conventional, READONLY and OFFLINE zones are one extent without the
 * bit; FULL zones one extent without it.  Zone boundaries and capacity come
 * from the export description (see znbd_dev_describe()).
 */
#ifndef ZNBD_ZONECTX_H
#define ZNBD_ZONECTX_H

#define ZNBD_ZONECTX_NAME "x-znbd:zone"
#define ZNBD_ZONECTX_COND_MASK 0x0fu
#define ZNBD_ZONECTX_TYPE_SHIFT 4
#define ZNBD_ZONECTX_TYPE_MASK 0x30u
#define ZNBD_ZONECTX_PAST_WP 0x100u

#endif
