/* Why the core refused a request: decided by the rule that refused it, at
 * the point of decision (for a zone rule, under the zone's lock), and
 * handed to the front-end beside the errno, so that a protocol that says
 * more than an errno (SCSI sense, doc/zone-rules.md's rules) maps the
 * reason and never checks a rule itself.  Names as ZBC-2 and Linux spell
 * the conditions (ZBC-2 4.5.3 and its additional sense codes; Linux
 * include/linux/blk_types.h, BLK_STS_ZONE_*_RESOURCE). */
#ifndef ZNBD_REFUSAL_H
#define ZNBD_REFUSAL_H

enum znbd_refusal {
  ZNBD_REFUSAL_NONE = 0, /* no rule refused: the errno says all there is */
  /* A write not at the zone's wp (EIO), or ahead of it with NOWAIT
   * (EAGAIN): ZBC UNALIGNED WRITE COMMAND. */
  ZNBD_REFUSAL_UNALIGNED_WRITE,
  /* A write or append past the zone's capacity, into the zone's gap (EIO):
   * ZBC ATTEMPT TO ACCESS GAP ZONE. */
  ZNBD_REFUSAL_PAST_CAPACITY,
  /* A write with ZNBD_WRITE_ONE_ZONE across a sequential zone's end
   * (EIO): ZBC WRITE BOUNDARY VIOLATION. */
  ZNBD_REFUSAL_WRITE_BOUNDARY,
  ZNBD_REFUSAL_ZONE_FULL,     /* write or open of a FULL zone (EIO) */
  ZNBD_REFUSAL_ZONE_READONLY, /* write or op on a READONLY zone (EIO) */
  ZNBD_REFUSAL_ZONE_OFFLINE,  /* any access to an OFFLINE zone (EIO) */
  /* zone_max_open reached and no IMP_OPEN zone to close (ETOOMANYREFS):
   * BLK_STS_ZONE_OPEN_RESOURCE. */
  ZNBD_REFUSAL_ZONE_OPEN_RESOURCE,
  /* zone_max_active reached (EOVERFLOW): BLK_STS_ZONE_ACTIVE_RESOURCE. */
  ZNBD_REFUSAL_ZONE_ACTIVE_RESOURCE,
  /* A zone operation or append on a conventional zone (EIO). */
  ZNBD_REFUSAL_CONVENTIONAL_ZONE,
  /* A zone operation the zone's condition does not take (EIO): close of a
   * zone not open, online of a zone not READONLY or OFFLINE. */
  ZNBD_REFUSAL_ZONE_COND,
  ZNBD_REFUSAL_BAD_BLOCK,    /* touches a bad block (EIO) */
  ZNBD_REFUSAL_FENCED,       /* a power cut since the context (ESHUTDOWN) */
  ZNBD_REFUSAL_OUT_OF_RANGE, /* past the device's end or unaligned (EINVAL) */
  /* A ZBC read (ZNBD_READ_ONE_TYPE) touching zones of two types (EIO):
   * ZBC-2 4.5.3, ATTEMPT TO READ INVALID DATA. */
  ZNBD_REFUSAL_READ_MIXED_TYPES,
  /* A read of bytes past a zone's wp with zone_read_past_wp=error (EIO). */
  ZNBD_REFUSAL_READ_PAST_WP,
  ZNBD_REFUSAL_COUNT
};

/* REASON's name as above without the prefix ("UNALIGNED_WRITE"), or
 * "UNKNOWN".  Never fails. */
const char *znbd_refusal_name(enum znbd_refusal reason);

/* The errno each REASON comes with (EIO, ETOOMANYREFS, EOVERFLOW,
 * ESHUTDOWN, EINVAL; UNALIGNED_WRITE: EIO, or EAGAIN for a NOWAIT write
 * ahead of the wp), 0 for NONE.  Never fails. */
int znbd_refusal_errno(enum znbd_refusal reason);

#endif
