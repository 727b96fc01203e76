/* znbd server: NBD wire constants and big-endian helpers.
 *
 * Values are from the NBD protocol (doc/proto.md of the NBD project);
 * every multi-byte field on the wire is big-endian.
 */
#ifndef ZNBD_SERVER_WIRE_H
#define ZNBD_SERVER_WIRE_H

#include <stdint.h>
#include <string.h>
#include <endian.h>

/* Handshake. */
#define NBD_MAGIC 0x4e42444d41474943ULL     /* "NBDMAGIC" */
#define NBD_IHAVEOPT 0x49484156454F5054ULL  /* "IHAVEOPT" */
#define NBD_REP_MAGIC 0x0003e889045565a9ULL /* option reply magic */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)

/* Options. */
#define NBD_OPT_EXPORT_NAME 1
#define NBD_OPT_ABORT 2
#define NBD_OPT_LIST 3
#define NBD_OPT_STARTTLS 5
#define NBD_OPT_INFO 6
#define NBD_OPT_GO 7
#define NBD_OPT_STRUCTURED_REPLY 8
#define NBD_OPT_LIST_META_CONTEXT 9
#define NBD_OPT_SET_META_CONTEXT 10

/* Option replies. */
#define NBD_REP_ACK 1
#define NBD_REP_SERVER 2
#define NBD_REP_INFO 3
#define NBD_REP_META_CONTEXT 4
#define NBD_REP_ERR(n) (0x80000000u | (n))
#define NBD_REP_ERR_UNSUP NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID NBD_REP_ERR(3)
#define NBD_REP_ERR_PLATFORM NBD_REP_ERR(4)
#define NBD_REP_ERR_TLS_REQD NBD_REP_ERR(5)
#define NBD_REP_ERR_UNKNOWN NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN NBD_REP_ERR(7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD NBD_REP_ERR(8)
#define NBD_REP_ERR_TOO_BIG NBD_REP_ERR(9)

/* NBD_REP_INFO types. */
#define NBD_INFO_EXPORT 0
#define NBD_INFO_NAME 1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE 3

/* Transmission flags. */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_ROTATIONAL (1u << 4)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)
#define NBD_FLAG_SEND_CACHE (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO (1u << 11)

/* Transmission. */
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu
#define NBD_REQUEST_SIZE 28
#define NBD_SIMPLE_REPLY_SIZE 16
#define NBD_CHUNK_HEADER_SIZE 20

#define NBD_CMD_READ 0
#define NBD_CMD_WRITE 1
#define NBD_CMD_DISC 2
#define NBD_CMD_FLUSH 3
#define NBD_CMD_TRIM 4
#define NBD_CMD_CACHE 5
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_BLOCK_STATUS 7

#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_DF (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)

#define NBD_REPLY_FLAG_DONE (1u << 0)
#define NBD_REPLY_TYPE_NONE 0
#define NBD_REPLY_TYPE_OFFSET_DATA 1
#define NBD_REPLY_TYPE_OFFSET_HOLE 2
#define NBD_REPLY_TYPE_BLOCK_STATUS 5
#define NBD_REPLY_TYPE_ERROR 0x8001
#define NBD_REPLY_TYPE_ERROR_OFFSET 0x8002

/* Wire errors (Linux values). */
#define NBD_EPERM 1
#define NBD_EIO 5
#define NBD_ENOMEM 12
#define NBD_EINVAL 22
#define NBD_ENOSPC 28
#define NBD_EOVERFLOW 75
#define NBD_ENOTSUP 95
#define NBD_ESHUTDOWN 108

/* The maximum payload advertised in NBD_INFO_BLOCK_SIZE: the
 * interoperable 32 MiB of doc/proto.md ("Block size constraints"), which
 * clients that honour it (libnbd, qemu) split their requests at. */
#define NBD_MAX_PAYLOAD (32u * 1024 * 1024)
/* The largest READ or WRITE served: 64 MiB, what nbdkit accepts
 * (MAX_REQUEST_SIZE of its server/protocol.c) whatever a plugin
 * advertises, so that clients which ignore the advertised maximum
 * (nbd-tester-client's integrityhuge test) work as against
 * nbdkit-zoned-plugin.  Larger ones get EINVAL. */
#define NBD_MAX_REQUEST (64u * 1024 * 1024)
/* doc/proto.md: strings (export names, queries) are at most 4096 bytes. */
#define NBD_MAX_STRING 4096u

static inline uint16_t
get16(const uint8_t *p)
{
  uint16_t v;
  memcpy(&v, p, 2);
  return be16toh(v);
}
static inline uint32_t
get32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return be32toh(v);
}
static inline uint64_t
get64(const uint8_t *p)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return be64toh(v);
}
static inline void
put16(uint8_t *p, uint16_t v)
{
  v = htobe16(v);
  memcpy(p, &v, 2);
}
static inline void
put32(uint8_t *p, uint32_t v)
{
  v = htobe32(v);
  memcpy(p, &v, 4);
}
static inline void
put64(uint8_t *p, uint64_t v)
{
  v = htobe64(v);
  memcpy(p, &v, 8);
}

#endif
