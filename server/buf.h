/* znbd server: a growable byte buffer for replies.
 *
 * buf_reserve() returns a pointer to N writable bytes at the end;
 * buf_commit() appends them.  Allocation failure aborts the process: the
 * server cannot answer a request without its reply buffer, and a partial
 * reply would desynchronise the stream.
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
buf_reserve(struct buf *b, size_t n)
{
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n)
      cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (p == NULL) {
      perror("znbd: realloc");
      abort();
    }
    b->p = p;
    b->cap = cap;
  }
  return b->p + b->len;
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
