/* znbd server: the headers of NBD replies on a buffer — simple replies
 * and structured reply chunks (doc/proto.md of the NBD project, "Simple
 * reply message", "Structured reply chunk message").  Inline: every
 * request's reply starts with one (proto.c's error replies, exec.c's).
 */
#ifndef ZNBD_SERVER_REPLY_H
#define ZNBD_SERVER_REPLY_H

#include <stdint.h>

#include "buf.h"
#include "wire.h"

/* Append a simple reply to COOKIE with NBD errno ERR (0: success) to
 * OUT; a READ's data follows it.  Aborts without memory (buf_reserve). */
static inline void
nbd_simple_reply(struct buf *out, uint64_t cookie, uint32_t err)
{
  uint8_t *p = buf_reserve(out, NBD_SIMPLE_REPLY_SIZE);
  put32(p, NBD_SIMPLE_REPLY_MAGIC);
  put32(p + 4, err);
  put64(p + 8, cookie);
  buf_commit(out, NBD_SIMPLE_REPLY_SIZE);
}

/* Reserve a structured reply chunk header (FLAGS, TYPE, COOKIE, LEN
 * bytes of payload) and LEN bytes after it in OUT, write the header and
 * return where the payload goes; the caller fills it and commits
 * NBD_CHUNK_HEADER_SIZE + LEN bytes.  Aborts without memory. */
static inline uint8_t *
nbd_chunk(struct buf *out, uint16_t flags, uint16_t type, uint64_t cookie,
          uint32_t len)
{
  uint8_t *p = buf_reserve(out, NBD_CHUNK_HEADER_SIZE + (size_t)len);
  put32(p, NBD_STRUCTURED_REPLY_MAGIC);
  put16(p + 4, flags);
  put16(p + 6, type);
  put64(p + 8, cookie);
  put32(p + 16, len);
  return p + NBD_CHUNK_HEADER_SIZE;
}

#endif
