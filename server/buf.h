/* znbd server: a growable byte buffer for replies.
 *
 * buf_try_reserve() returns a pointer to N writable bytes at the end, or
 * NULL when they cannot be allocated (the buffer is unchanged): used for
 * data-sized reservations (READ replies up to 64 MiB), whose failure
 * fails that one request with ENOMEM.  buf_reserve() is for the small,
 * bounded parts of a reply (headers, error chunks, option replies); if
 * even those cannot be allocated the process aborts, because a partial
 * reply would desynchronise the stream.  buf_commit() appends them.
 */
#ifndef ZNBD_SERVER_BUF_H
#define ZNBD_SERVER_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

struct buf {
  uint8_t *p;
  size_t len, cap;
};

static inline uint8_t *
buf_try_reserve(struct buf *b, size_t n)
{
  if (b->cap - b->len < n) {
    /* Double for runs of small appends, but a large reservation gets
     * what it needs (4 KiB rounded), not twice that. */
    size_t want = (b->len + n + 4095) & ~(size_t)4095;
    size_t cap = b->cap ? 2 * b->cap : 4096;
    if (cap < want)
      cap = want;
    uint8_t *p = realloc(b->p, cap);
    if (p == NULL)
      return NULL;
    b->p = p;
    b->cap = cap;
  }
  return b->p + b->len;
}

static inline uint8_t *
buf_reserve(struct buf *b, size_t n)
{
  uint8_t *p = buf_try_reserve(b, n);
  if (p == NULL) {
    perror("znbd: realloc");
    abort();
  }
  return p;
}

static inline void
buf_commit(struct buf *b, size_t n)
{
  b->len += n;
}

static inline void
buf_append(struct buf *b, const void *data, size_t n)
{
  memcpy(buf_reserve(b, n), data, n);
  buf_commit(b, n);
}

static inline void
buf_free(struct buf *b)
{
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

#endif
