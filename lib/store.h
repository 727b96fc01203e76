/* znbd: the sparse RAM store (brd-like), bytes in, bytes out.
 *
 * Pages (ZNBD_STORE_PAGE_SIZE bytes) are allocated on their first write
 * and freed when a trim or zero covers them whole; never-written and
 * trimmed ranges read back as zeros without allocating.  Requests on
 * different pages never share a lock.  No zone, NBD or nbdkit knowledge.
 * All offsets and lengths are in bytes; callers check ranges.
 */
#ifndef ZNBD_STORE_H
#define ZNBD_STORE_H

#include <stdbool.h>
#include <stdint.h>

#define ZNBD_STORE_PAGE_SIZE 4096

struct znbd_store;

/* A store of SIZE bytes.  MEMORY_BACKED false keeps no data: writes are
 * discarded and reads return zeros (null_blk memory_backed=0).
 * Returns NULL with errno ENOMEM or EINVAL (SIZE is 0). */
struct znbd_store *znbd_store_new(uint64_t size, bool memory_backed);

/* Free S and all its pages.  S may be NULL. */
void znbd_store_free(struct znbd_store *s);

/* Copy LEN bytes at OFF into BUF; unallocated bytes read as zeros. */
void znbd_store_read(struct znbd_store *s, void *buf, uint64_t len,
                     uint64_t off);

/* The LEN bytes at OFF (bytes) in place, for a caller that hands them
 * straight to the kernel (a send from the store, no copy): a pointer
 * into the store if every page of the range is allocated, else NULL (the
 * caller copies with znbd_store_read(), which gives zeros for holes
 * without touching the mapping).  The bytes stay mapped until
 * znbd_store_free(); a write or trim that overlaps them changes what they
 * read (a trimmed page reads zeros), as for any overlapping requests. */
const void *znbd_store_ref(struct znbd_store *s, uint64_t len, uint64_t off);

/* Store LEN bytes from BUF at OFF (bytes), allocating pages as needed.
 * Returns 0: pages come from the kernel's page faults on a NORESERVE
 * mapping, which cannot fail with an error (out of memory is the OOM
 * killer's business), so callers may rely on a write never failing. */
int znbd_store_write(struct znbd_store *s, const void *buf, uint64_t len,
                     uint64_t off);

/* Make LEN bytes at OFF read as zeros: pages covered whole are freed,
 * partial pages have exactly those bytes zeroed (neighbours untouched),
 * nothing is allocated.  This is both NBD TRIM and WRITE_ZEROES. */
void znbd_store_zero(struct znbd_store *s, uint64_t len, uint64_t off);

/* Call FN for consecutive runs covering [OFF, OFF+LEN), each run either
 * wholly allocated or wholly unallocated, in ascending order; runs are
 * clipped to the range.  Stops at and returns FN's first non-zero result,
 * else 0. */
int znbd_store_extents(struct znbd_store *s, uint64_t off, uint64_t len,
                       int (*fn)(void *opaque, uint64_t off, uint64_t len,
                                 bool allocated),
                       void *opaque);

/* Bytes of data the store holds now (allocated pages × page size). */
uint64_t znbd_store_allocated(const struct znbd_store *s);

#endif
