/* znbd-tcmu's checks of what the kernel writes into the TCMU ring
 * (tcmu_ring_check_entry(), tcmu/ring.c), on a map built in memory: a
 * well-formed entry passes, and an entry whose buffer list, CDB or data
 * buffers reach outside the map (or into the command ring) is refused. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ring.h"

#define __LINUX_UIO_H
#include <linux/target_core_user.h>

enum { MAP = 1 << 20, CMDR_OFF = 4096, CMDR_SIZE = 65536 };
enum { DATA = CMDR_OFF + CMDR_SIZE };

static struct tcmu_ring r;

/* A command entry at OFF in the ring: one buffer of LEN bytes at map
 * offset BUF, the CDB (opcode OP) at map offset CDB. */
static struct tcmu_cmd_entry *
entry(uint32_t off, uint64_t buf, uint64_t len, uint64_t cdb, uint8_t op)
{
  uint8_t *base = r.map;
  struct tcmu_cmd_entry *e = (void *)(base + CMDR_OFF + off);
  memset(e, 0, sizeof *e + sizeof(struct iovec));
  e->hdr.len_op = 128 | TCMU_OP_CMD; /* length: a multiple of 8 */
  e->req.iov_cnt = 1;
  e->req.iov[0].iov_base = (void *)(uintptr_t)buf;
  e->req.iov[0].iov_len = len;
  e->req.cdb_off = cdb;
  if (cdb < MAP)
    base[cdb] = op;
  return e;
}

int
main(void)
{
  r.map = calloc(1, MAP);
  r.map_size = MAP;
  struct tcmu_mailbox *mb = r.map;
  mb->cmdr_off = CMDR_OFF;
  mb->cmdr_size = CMDR_SIZE;
  size_t cdb_len = 0;

  entry(0, DATA, 4096, CMDR_OFF + 64, 0x88);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) == NULL);
  CHECK_EQ(cdb_len, 16);
  entry(0, MAP - 4096, 4096, CMDR_OFF + 64, 0x28);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) == NULL);
  CHECK_EQ(cdb_len, 10);

  /* Data buffers past the map, wrapping, or in the command ring. */
  entry(0, MAP - 4096, 4097, CMDR_OFF + 64, 0x88);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) != NULL);
  entry(0, DATA, UINT64_MAX - DATA + 2, CMDR_OFF + 64, 0x88);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) != NULL);
  entry(0, MAP + 8, 0, CMDR_OFF + 64, 0x88);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) != NULL);
  entry(0, CMDR_OFF, 512, CMDR_OFF + 64, 0x88);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) != NULL);

  /* A CDB past the map, or whose group's length runs past it. */
  entry(0, DATA, 512, MAP, 0x00);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) != NULL);
  entry(0, DATA, 512, MAP - 10, 0x88);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) != NULL);
  entry(0, DATA, 512, MAP - 10, 0x28);
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) == NULL);

  /* A buffer list longer than its entry, an entry past the ring. */
  struct tcmu_cmd_entry *e = entry(0, DATA, 512, CMDR_OFF + 64, 0x88);
  e->req.iov_cnt = 1000;
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) != NULL);
  CHECK(tcmu_ring_check_entry(&r, CMDR_SIZE, &cdb_len) != NULL);
  CHECK(tcmu_ring_check_entry(&r, CMDR_SIZE - 4, &cdb_len) != NULL);
  e = entry(CMDR_SIZE - 64, DATA, 512, CMDR_OFF + 64, 0x88);
  CHECK(tcmu_ring_check_entry(&r, CMDR_SIZE - 64, &cdb_len) != NULL);

  /* A mailbox whose ring runs past the map. */
  entry(0, DATA, 512, CMDR_OFF + 64, 0x88);
  mb->cmdr_size = MAP;
  CHECK(tcmu_ring_check_entry(&r, 0, &cdb_len) != NULL);
  free(r.map);
  return check_done("ring_test");
}
