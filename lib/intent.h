/* znbd lib-internal: the intent records of appends (lib/intent.c), as
 * lib/dev.c notes them and lib/redo.c matches reissued appends against
 * them.  Offsets and lengths are bytes.  A NULL R (no records) is
 * nothing to every call.
 */
#ifndef ZNBD_INTENT_H
#define ZNBD_INTENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct znbd_redo;
struct znbd_zones;

/* A noted record of a znbd.redo file: an append of LEN bytes at byte
 * OFF (from the device start) of zone ZONE. */
struct znbd_intent_rec {
  uint32_t zone;
  uint64_t off, len;
};

typedef void znbd_intent_rec_fn(void *opaque,
                                const struct znbd_intent_rec *rec);

/* Parse the LEN bytes at BUF as a whole znbd.redo file (lib/intent.c
 * gives the layout), with no I/O: FN(OPAQUE, REC) is called for each
 * noted record, live ones then kept ones, whose zone is a sequential
 * zone of ZS and whose range lies inside that zone; every other record
 * is ignored.  Returns the header's slot count (1 to 65536); 0 when BUF
 * is not a file of this version (shorter than the 64-byte header, magic,
 * version or slot count wrong), which is not an error: its records are
 * not used; -1 with errno EIO when BUF is shorter than its slot count
 * needs.  Bytes past the records are ignored. */
int znbd_intent_parse(const void *buf, size_t len, const struct znbd_zones *zs,
                      znbd_intent_rec_fn *fn, void *opaque);

/* SLOT's intent record of an append of LEN bytes at OFF in zone ZNO,
 * written before its data is stored (under the zone's lock).  Nothing
 * for ZNBD_NO_SLOT or a slot out of range.  Never fails. */
void znbd_intent_note(struct znbd_redo *r, uint32_t slot, uint32_t zno,
                      uint64_t off, uint64_t len);

/* Zone ZNO was reset or finished (its lock held): the kept records of
 * its appends go with its data.  Never fails. */
void znbd_intent_zone_gone(struct znbd_redo *r, uint32_t zno);

/* The number of slots (0: no records). */
uint32_t znbd_intent_slots(const struct znbd_redo *r);

/* The kept records not matched yet (one atomic load). */
uint32_t znbd_intent_kept(const struct znbd_redo *r);

/* Claim for this thread the next kept record from index *I (from 0) of
 * zone ZNO and LEN bytes: true with *I its index and *OFF its sector
 * (bytes); false when none is left.  A claimed record is released by
 * znbd_intent_release(). */
bool znbd_intent_claim(struct znbd_redo *r, uint32_t zno, uint64_t len,
                       uint32_t *i, uint64_t *off);

/* Release kept record I, which a redo matched or not (MATCHED): a
 * matched one moves to SLOT's live record, where the completion that
 * goes to the kernel confirms it, as a new append's would be (noted
 * there first: a server killed in between leaves it twice, which the
 * next open keeps once). */
void znbd_intent_release(struct znbd_redo *r, uint32_t i, bool matched,
                         uint32_t slot);

/* Release R; the file keeps the records. */
void znbd_intent_free(struct znbd_redo *r);

#endif
