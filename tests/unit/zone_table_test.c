/* Table-driven test of every zone transition of lib/zone.c.
 *
 * Each row names the rule it checks (its name in doc/zone-rules.md, Linux
 * drivers/block/null_blk/zoned.c), runs a setup script whose steps must
 * all succeed, then one operation, and checks its errno, every zone's
 * condition, the EO/IO/CL counters and (where given) write pointers.
 *
 * Script steps (B = 4096-byte blocks, relative to the zone start):
 *   wZ+N  write N blocks at zone Z's wp     wZ@K+N  write at block K of Z
 *   aZ+N  append N blocks to zone Z         oZ cZ fZ rZ  open/close/finish/
 *   R     reset-all                         reset;  roZ offZ onZ
 *                                           readonly/offline/online
 * Conditions, one letter a zone: n NOT_WP, e EMPTY, i IMP_OPEN,
 * x EXP_OPEN, c CLOSED, f FULL, r READONLY, o OFFLINE.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zone.h"

#define B 4096ULL

static const struct znbd_zone_geometry geoms[] = {
    /* 0: 8 zones of 16 blocks, zone 0 conventional, no limits. */
    {.size = 8 * 16 * B, .zone_size = 16 * B, .nr_conv = 1},
    /* 1: same with max_open 2, max_active 3. */
    {.size = 8 * 16 * B,
     .zone_size = 16 * B,
     .nr_conv = 1,
     .max_open = 2,
     .max_active = 3},
    /* 2: npo2 zones of 12 blocks and a smaller last zone of 5 blocks. */
    {.size = (8 * 12 + 5) * B, .zone_size = 12 * B},
    /* 3: capacity 10 blocks of 16, zone 0 conventional. */
    {.size = 6 * 16 * B,
     .zone_size = 16 * B,
     .zone_capacity = 10 * B,
     .nr_conv = 1},
    /* 4: zone_full. */
    {.size = 4 * 16 * B, .zone_size = 16 * B, .nr_conv = 1, .zone_full = true},
    /* 5: max_open 2, no active limit, no conventional zones. */
    {.size = 6 * 16 * B, .zone_size = 16 * B, .max_open = 2},
};

struct row {
  const char *rule;
  int geom;
  const char *setup, *op;
  int err; /* expected errno of OP, 0 = success */
  const char *conds;
  unsigned io, eo, cl;
  const char *wps; /* blocks from zone start per zone; '-' invalid; '*' any */
};

static const struct row rows[] = {
    /* Writes (doc/zone-rules.md "Writes"; null_zone_write()). */
    {"write-conv: conventional zone takes any offset", 0, "", "w0@5+2", 0,
     "neeeeeee", 0, 0, 0, "- 0 0 0 0 0 0 0"},
    {"write-at-wp: not at the wp -> EIO", 0, "", "w1@1+1", EIO, "neeeeeee", 0,
     0, 0, "- 0 0 0 0 0 0 0"},
    {"implicit-open: EMPTY -> IMP_OPEN, IO+1", 0, "", "w1+1", 0, "nieeeeee", 1,
     0, 0, "- 1 0 0 0 0 0 0"},
    {"write-full: reaching capacity -> FULL, IO-1", 0, "w1+1", "w1+15", 0,
     "nfeeeeee", 0, 0, 0, "- 16 0 0 0 0 0 0"},
    {"write-at-wp: beyond capacity -> EIO, nothing changes", 3, "w1+1",
     "w1@1+10", EIO, "nieeee", 1, 0, 0, "- 1 0 0 0 0"},
    {"write-at-wp: FULL zone -> EIO", 0, "w1+16", "w1@0+1", EIO, "nfeeeeee", 0,
     0, 0, NULL},
    {"write-at-wp: FULL zone, last block -> EIO", 0, "w1+16", "w1@15+1", EIO,
     "nfeeeeee", 0, 0, 0, NULL},
    {"implicit-open: CLOSED -> IMP_OPEN, CL-1 IO+1", 0, "w1+2 c1", "w1+1", 0,
     "nieeeeee", 1, 0, 0, "- 3 0 0 0 0 0 0"},
    {"write-at-wp: failed write on CLOSED keeps it CLOSED", 0, "w1+2 c1",
     "w1@1+1", EIO, "nceeeeee", 0, 0, 1, "- 2 0 0 0 0 0 0"},
    {"implicit-open: EXP_OPEN stays EXP_OPEN", 0, "o1", "w1+1", 0, "nxeeeeee",
     0, 1, 0, "- 1 0 0 0 0 0 0"},
    {"write-full: EXP_OPEN reaching capacity -> FULL, EO-1", 0, "o1", "w1+16",
     0, "nfeeeeee", 0, 0, 0, NULL},
    {"write-full: spanning write fills one zone, opens the next", 0, "w1+14",
     "w1@14+4", 0, "nfieeeee", 1, 0, 0, "- 16 2 0 0 0 0 0"},
    {"write-all-or-nothing: spanning write (2nd piece off wp)", 0, "w1+14 w2+1",
     "w1@14+4", EIO, "niieeeee", 2, 0, 0, "- 14 1 0 0 0 0 0"},
    {"write-conv: conventional + sequential pieces", 0, "", "w0@15+2", 0,
     "nieeeeee", 1, 0, 0, "- 1 0 0 0 0 0 0"},
    {"zone-errno: write beyond the device -> EINVAL", 0, "", "w7@15+2", EINVAL,
     "neeeeeee", 0, 0, 0, NULL},
    /* Append (doc/zone-rules.md "Zone append"). */
    {"zone-append: conventional zone -> EIO", 0, "", "a0+1", EIO, "neeeeeee", 0,
     0, 0, NULL},
    {"zone-append: data goes to the wp", 0, "w1+3", "a1+2", 0, "nieeeeee", 1, 0,
     0, "- 5 0 0 0 0 0 0"},
    {"zone-append: EMPTY -> IMP_OPEN", 0, "", "a2+1", 0, "neieeeee", 1, 0, 0,
     "- 0 1 0 0 0 0 0"},
    {"zone-append: FULL -> EIO", 0, "w1+16", "a1+1", EIO, "nfeeeeee", 0, 0, 0,
     NULL},
    {"zone-append: beyond capacity -> EIO", 0, "w1+15", "a1+2", EIO, "nieeeeee",
     1, 0, 0, "- 15 0 0 0 0 0 0"},
    {"zone-append: to capacity -> FULL", 0, "w1+15", "a1+1", 0, "nfeeeeee", 0,
     0, 0, NULL},
    /* Open (null_open_zone()). */
    {"explicit-open: EMPTY -> EXP_OPEN, EO+1", 0, "", "o1", 0, "nxeeeeee", 0, 1,
     0, "- 0 0 0 0 0 0 0"},
    {"explicit-open: EXP_OPEN is a no-op", 0, "o1", "o1", 0, "nxeeeeee", 0, 1,
     0, NULL},
    {"explicit-open: IMP_OPEN -> EXP_OPEN without checks", 0, "w1+1", "o1", 0,
     "nxeeeeee", 0, 1, 0, NULL},
    {"explicit-open: CLOSED -> EXP_OPEN, CL-1", 0, "w1+1 c1", "o1", 0,
     "nxeeeeee", 0, 1, 0, "- 1 0 0 0 0 0 0"},
    {"explicit-open: FULL -> EIO", 0, "w1+16", "o1", EIO, "nfeeeeee", 0, 0, 0,
     NULL},
    {"mgmt-refused: open conventional -> EIO", 0, "", "o0", EIO, "neeeeeee", 0,
     0, 0, NULL},
    /* Close (null_close_zone()). */
    {"zone-close: EMPTY -> EIO", 0, "", "c1", EIO, "neeeeeee", 0, 0, 0, NULL},
    {"zone-close: FULL -> EIO", 0, "w1+16", "c1", EIO, "nfeeeeee", 0, 0, 0,
     NULL},
    {"zone-close: CLOSED is a no-op", 0, "w1+1 c1", "c1", 0, "nceeeeee", 0, 0,
     1, NULL},
    {"zone-close: IMP_OPEN with data -> CLOSED", 0, "w1+1", "c1", 0, "nceeeeee",
     0, 0, 1, "- 1 0 0 0 0 0 0"},
    {"zone-close: EXP_OPEN with data -> CLOSED", 0, "o1 w1+1", "c1", 0,
     "nceeeeee", 0, 0, 1, NULL},
    {"zone-close: EXP_OPEN at its start -> EMPTY", 0, "o1", "c1", 0, "neeeeeee",
     0, 0, 0, "- 0 0 0 0 0 0 0"},
    {"mgmt-refused: close conventional -> EIO", 0, "", "c0", EIO, "neeeeeee", 0,
     0, 0, NULL},
    /* Finish (null_finish_zone()). */
    {"zone-finish: FULL is a no-op", 0, "w1+16", "f1", 0, "nfeeeeee", 0, 0, 0,
     "- 16 0 0 0 0 0 0"},
    {"zone-finish: EMPTY -> FULL, wp at zone end", 0, "", "f1", 0, "nfeeeeee",
     0, 0, 0, "- 16 0 0 0 0 0 0"},
    {"zone-finish: IMP_OPEN -> FULL, IO-1", 0, "w1+3", "f1", 0, "nfeeeeee", 0,
     0, 0, "- 16 0 0 0 0 0 0"},
    {"zone-finish: EXP_OPEN -> FULL, EO-1", 0, "o1", "f1", 0, "nfeeeeee", 0, 0,
     0, NULL},
    {"zone-finish: CLOSED -> FULL, CL-1", 0, "w1+3 c1", "f1", 0, "nfeeeeee", 0,
     0, 0, NULL},
    {"mgmt-refused: finish conventional -> EIO", 0, "", "f0", EIO, "neeeeeee",
     0, 0, 0, NULL},
    /* Reset (null_reset_zone()) and reset-all (null_zone_mgmt()). */
    {"mgmt-refused: reset conventional -> EIO", 0, "", "r0", EIO, "neeeeeee", 0,
     0, 0, NULL},
    {"zone-reset: EMPTY is fine", 0, "", "r1", 0, "neeeeeee", 0, 0, 0,
     "- 0 0 0 0 0 0 0"},
    {"zone-reset: IMP_OPEN -> EMPTY, IO-1", 0, "w1+3", "r1", 0, "neeeeeee", 0,
     0, 0, "- 0 0 0 0 0 0 0"},
    {"zone-reset: EXP_OPEN -> EMPTY, EO-1", 0, "o1 w1+1", "r1", 0, "neeeeeee",
     0, 0, 0, NULL},
    {"zone-reset: CLOSED -> EMPTY, CL-1", 0, "w1+3 c1", "r1", 0, "neeeeeee", 0,
     0, 0, NULL},
    {"zone-reset: FULL -> EMPTY", 0, "w1+16", "r1", 0, "neeeeeee", 0, 0, 0,
     "- 0 0 0 0 0 0 0"},
    {"reset-all: every non-EMPTY sequential zone reset", 0,
     "w1+3 o2 w3+16 w4+1 c4 w5+2", "R", 0, "neeeeeee", 0, 0, 0,
     "- 0 0 0 0 0 0 0"},
    {"reset-all: skips READONLY and OFFLINE", 0, "w1+2 w2+1 ro2 off3 w4+1", "R",
     0, "neroeeee", 0, 0, 0, "- 0 - - 0 0 0 0"},
    /* Fault injection (configfs zone_readonly/zone_offline,
     * null_set_zone_cond()). */
    {"fault-set: readonly: EMPTY -> READONLY, wp invalid", 0, "", "ro2", 0,
     "nereeeee", 0, 0, 0, "- 0 - 0 0 0 0 0"},
    {"fault-set: readonly: IMP_OPEN -> READONLY, IO released", 0, "w1+1", "ro1",
     0, "nreeeeee", 0, 0, 0, NULL},
    {"fault-set: readonly: EXP_OPEN -> READONLY, EO released", 0, "o1", "ro1",
     0, "nreeeeee", 0, 0, 0, NULL},
    {"fault-set: readonly again -> EMPTY, wp = start", 0, "w1+1 ro1", "ro1", 0,
     "neeeeeee", 0, 0, 0, "- 0 0 0 0 0 0 0"},
    {"fault-set: offline: CLOSED -> OFFLINE, CL released", 0, "w1+1 c1", "off1",
     0, "noeeeeee", 0, 0, 0, "- - 0 0 0 0 0 0"},
    /* At the limits: the finish null_set_zone_cond() runs first. */
    {"fault-set: EMPTY at the open limit: finish closes an IMP_OPEN victim", 5,
     "w0+1 w1+1", "ro2", 0, "cireee", 1, 0, 1, "1 1 - 0 0 0"},
    {"fault-set: CLOSED at the open limit, no IMP_OPEN: finish refused, CL "
     "stays",
     5, "w0+1 c0 o1 o2", "ro0", 0, "rxxeee", 0, 2, 1, "- 0 0 0 0 0"},
    {"fault-set: EMPTY at the active limit: finish refused, nothing counted", 1,
     "w1+1 c1 w2+1 c2 o3", "off4", 0, "nccxoeee", 0, 1, 2, NULL},
    {"fault-set: CLOSED at the active limit: finish passes the open check", 1,
     "w1+1 c1 w2+1 c2 o3", "ro1", 0, "nrcxeeee", 0, 1, 1, NULL},
    {"fault-set: IMP_OPEN at both limits: its slot is freed", 1,
     "w1+1 c1 w2+1 o3", "ro2", 0, "ncrxeeee", 0, 1, 1, NULL},
    {"fault-set: offline: READONLY -> OFFLINE", 0, "ro1", "off1", 0, "noeeeeee",
     0, 0, 0, NULL},
    {"fault-set: offline again -> EMPTY", 0, "off1", "off1", 0, "neeeeeee", 0,
     0, 0, NULL},
    {"fault-conv: readonly on a conventional zone -> EIO", 0, "", "ro0", EIO,
     "neeeeeee", 0, 0, 0, NULL},
    {"fault-online: READONLY -> EMPTY", 0, "w1+2 ro1", "on1", 0, "neeeeeee", 0,
     0, 0, "- 0 0 0 0 0 0 0"},
    {"fault-online: OFFLINE -> EMPTY", 0, "off1", "on1", 0, "neeeeeee", 0, 0, 0,
     NULL},
    {"fault-online: EMPTY -> EIO", 0, "", "on1", EIO, "neeeeeee", 0, 0, 0,
     NULL},
    {"write-at-wp: write to READONLY -> EIO", 0, "ro1", "w1@0+1", EIO,
     "nreeeeee", 0, 0, 0, NULL},
    {"write-at-wp: write to OFFLINE -> EIO", 0, "off1", "w1@0+1", EIO,
     "noeeeeee", 0, 0, 0, NULL},
    {"zone-append: append to READONLY -> EIO", 0, "ro1", "a1+1", EIO,
     "nreeeeee", 0, 0, 0, NULL},
    {"mgmt-refused: open READONLY -> EIO", 0, "ro1", "o1", EIO, "nreeeeee", 0,
     0, 0, NULL},
    {"mgmt-refused: close OFFLINE -> EIO", 0, "off1", "c1", EIO, "noeeeeee", 0,
     0, 0, NULL},
    {"mgmt-refused: finish READONLY -> EIO", 0, "ro1", "f1", EIO, "nreeeeee", 0,
     0, 0, NULL},
    {"mgmt-refused: reset OFFLINE -> EIO", 0, "off1", "r1", EIO, "noeeeeee", 0,
     0, 0, NULL},
    /* Resources (doc/zone-rules.md "Resources"). max_open 2, max_active 3. */
    {"open-check: implicit close of the IMP_OPEN victim", 1, "w1+1 w2+1",
     "w3+1", 0, "nciieeee", 2, 0, 1, "- 1 1 1 0 0 0 0"},
    {"open-check: only EXP_OPEN zones -> ETOOMANYREFS", 1, "o1 o2", "w3+1",
     ETOOMANYREFS, "nxxeeeee", 0, 2, 0, NULL},
    {"open-check: explicit open at the limit closes a victim", 1, "w1+1 w2+1",
     "o3", 0, "ncixeeee", 1, 1, 1, NULL},
    {"active-check: CLOSED zones count against max_active", 1,
     "w1+1 c1 w2+1 c2 w3+1 c3", "w4+1", EOVERFLOW, "ncccEeee", 0, 0, 3, NULL},
    {"active-check: failed write leaves counters untouched", 1,
     "w1+1 c1 w2+1 w3+1", "w4+1", EOVERFLOW, "nciieeee", 2, 0, 1,
     "- 1 1 1 0 0 0 0"},
    {"active-check: open of EMPTY at the active limit -> EOVERFLOW", 1,
     "w1+1 c1 w2+1 w3+1", "o4", EOVERFLOW, "nciieeee", 2, 0, 1, NULL},
    {"reopen-closed: write to CLOSED at the active limit closes a victim", 1,
     "w1+1 c1 w2+1 w3+1", "w1+1", 0, "nicieeee", 2, 0, 1, "- 2 1 1 0 0 0 0"},
    {"reopen-closed: open of CLOSED at the active limit closes a victim", 1,
     "w1+1 c1 w2+1 w3+1", "o1", 0, "nxcieeee", 1, 1, 1, NULL},
    {"zone-finish: EMPTY runs the active check", 1, "w1+1 c1 w2+1 w3+1", "f4",
     EOVERFLOW, "nciieeee", 2, 0, 1, NULL},
    {"zone-finish: CLOSED at open limit, only EXP_OPEN -> ETOOMANYREFS", 1,
     "w1+1 c1 o2 o3", "f1", ETOOMANYREFS, "ncxxeeee", 0, 2, 1, NULL},
    {"write-all-or-nothing: conventional piece + failing sequential piece "
     "changes nothing",
     1, "w2+1 c2 w3+1 c3 w4+1 c4", "w0@15+2", EOVERFLOW, "neccceee", 0, 0, 3,
     "- 0 1 1 1 0 0 0"},
    {"resource-checks: IMP_OPEN -> EXP_OPEN at both limits needs nothing", 1,
     "w1+1 c1 w2+1 w3+1", "o2", 0, "ncxieeee", 1, 1, 1, NULL},
    {"resource-checks: CLOSED at the active limit needs the open check only", 1,
     "w1+1 c1 w2+1 c2 w3+1", "w1+1", 0, "nicieeee", 2, 0, 1, "- 2 1 1 0 0 0 0"},
    {"resource-checks: EMPTY: the active check first, no victim closed", 1,
     "w1+1 w2+1 w3+1", "w4+1", EOVERFLOW, "nciieeee", 2, 0, 1,
     "- 1 1 1 0 0 0 0"},
    /* max_open 2, no active limit, 6 sequential zones. */
    {"implicit-close: round-robin: victims are taken in turn", 5,
     "w0+1 w1+1 w2+1", "w3+1", 0, "cciiee", 2, 0, 2, NULL},
    {"implicit-close: round-robin: the scan wraps and skips CLOSED zones", 5,
     "w0+1 w1+1 w2+1 w3+1 w0+1", "w1+1", 0, "iiccee", 2, 0, 2, NULL},
    {"zone-finish: EMPTY at the open limit closes a victim", 5, "w0+1 w1+1",
     "f2", 0, "cifeee", 1, 0, 1, NULL},
    {"explicit-open: EMPTY at the open limit closes a victim", 5, "w0+1 w1+1",
     "o2", 0, "cixeee", 1, 1, 1, NULL},
    /* Geometry: npo2 sizes, smaller last zone, capacity < size. */
    {"zone-size-any: npo2: write fills zone 1 of 12 blocks", 2, "", "w1+12", 0,
     "efeeeeeee", 0, 0, 0, "0 12 0 0 0 0 0 0 0"},
    {"zone-size-any: npo2: spanning write across the division boundary", 2,
     "w3+10", "w3@10+4", 0, "eeefieeee", 1, 0, 0, "0 0 0 12 2 0 0 0 0"},
    {"zone-layout: smaller last zone: capacity is its length", 2, "", "w8+5", 0,
     "eeeeeeeef", 0, 0, 0, "0 0 0 0 0 0 0 0 5"},
    {"zone-layout: smaller last zone: past the device -> EINVAL", 2, "", "w8+6",
     EINVAL, "eeeeeeeee", 0, 0, 0, NULL},
    {"zone-capacity: capacity < size: writing to capacity -> FULL", 3, "",
     "w1+10", 0, "nfeeee", 0, 0, 0, "- 10 0 0 0 0"},
    {"zone-capacity: capacity < size: beyond capacity -> EIO", 3, "", "w1+11",
     EIO, "neeeee", 0, 0, 0, NULL},
    {"zone-capacity: capacity < size: write in [capacity, len) -> EIO", 3, "",
     "w1@12+1", EIO, "neeeee", 0, 0, 0, NULL},
    {"zone-finish: capacity < size: finish puts wp at start + len", 3, "w1+3",
     "f1", 0, "nfeeee", 0, 0, 0, "- 16 0 0 0 0"},
    {"start-cond: zone_full: sequential zones start FULL", 4, "", "", 0, "nfff",
     0, 0, 0, "- 16 16 16"},
    {"start-cond: zone_full: reset -> EMPTY", 4, "", "r2", 0, "nfef", 0, 0, 0,
     "- 16 0 16"},
};

static char
cond_char(enum znbd_zone_cond c)
{
  switch (c) {
  case ZNBD_ZONE_COND_NOT_WP:
    return 'n';
  case ZNBD_ZONE_COND_EMPTY:
    return 'e';
  case ZNBD_ZONE_COND_IMP_OPEN:
    return 'i';
  case ZNBD_ZONE_COND_EXP_OPEN:
    return 'x';
  case ZNBD_ZONE_COND_CLOSED:
    return 'c';
  case ZNBD_ZONE_COND_FULL:
    return 'f';
  case ZNBD_ZONE_COND_READONLY:
    return 'r';
  case ZNBD_ZONE_COND_OFFLINE:
    return 'o';
  }
  return '?';
}

/* Run one script step; returns 0 or the errno. */
static int
step(struct znbd_zones *zs, const char *tok)
{
  struct znbd_zone_txn t;
  unsigned zno, k, n;
  enum znbd_zone_op op;
  const char *arg;

  if (tok[0] == 'w') {
    uint64_t off;
    if (sscanf(tok, "w%u@%u+%u", &zno, &k, &n) == 3)
      off = zs->zone[zno].start + k * B;
    else if (sscanf(tok, "w%u+%u", &zno, &n) == 2)
      off = zs->zone[zno].wp;
    else
      abort();
    if (off >= zs->size || n * B > zs->size - off) /* refused unlocked */
      return znbd_zones_write_prepare(zs, &t, off, n * B) ? errno : 0;
    uint32_t first = znbd_zones_zone_no(zs, off);
    uint32_t last = znbd_zones_zone_no(zs, off + n * B - 1);
    int r, e = 0;
    znbd_zones_lock_range(zs, first, last);
    r = znbd_zones_write_prepare(zs, &t, off, n * B);
    if (r == 0)
      znbd_zones_write_commit(&t);
    else
      e = errno;
    znbd_zones_unlock_range(zs, first, last);
    return e;
  }
  if (tok[0] == 'a') {
    uint64_t off = 0, wp;
    int r, e = 0;
    if (sscanf(tok, "a%u+%u", &zno, &n) != 2)
      abort();
    pthread_mutex_lock(&zs->zone[zno].lock);
    wp = zs->zone[zno].wp;
    r = znbd_zones_append_prepare(zs, &t, zno, n * B, &off);
    if (r == 0) {
      if (off != wp) {
        fprintf(stderr, "append returned offset %llu, wp was %llu\n",
                (unsigned long long)off, (unsigned long long)wp);
        exit(1);
      }
      znbd_zones_write_commit(&t);
    } else
      e = errno;
    pthread_mutex_unlock(&zs->zone[zno].lock);
    return e;
  }
  if (strcmp(tok, "R") == 0)
    return znbd_zones_mgmt(zs, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES, NULL, NULL)
               ? errno
               : 0;
  if (strncmp(tok, "off", 3) == 0)
    op = ZNBD_ZONE_OP_SET_OFFLINE, arg = tok + 3;
  else if (strncmp(tok, "on", 2) == 0)
    op = ZNBD_ZONE_OP_ONLINE, arg = tok + 2;
  else if (strncmp(tok, "ro", 2) == 0)
    op = ZNBD_ZONE_OP_SET_READONLY, arg = tok + 2;
  else if (tok[0] == 'o')
    op = ZNBD_ZONE_OP_OPEN, arg = tok + 1;
  else if (tok[0] == 'c')
    op = ZNBD_ZONE_OP_CLOSE, arg = tok + 1;
  else if (tok[0] == 'f')
    op = ZNBD_ZONE_OP_FINISH, arg = tok + 1;
  else if (tok[0] == 'r')
    op = ZNBD_ZONE_OP_RESET, arg = tok + 1;
  else
    abort();
  zno = (unsigned)atoi(arg);
  return znbd_zones_mgmt(zs, op, zno, NULL, NULL) ? errno : 0;
}

static int
run_script(struct znbd_zones *zs, const char *script, bool must_pass,
           const char *rule)
{
  char buf[256], *save = NULL, *tok;
  int e = 0;

  snprintf(buf, sizeof buf, "%s", script);
  for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    e = step(zs, tok);
    if (e && must_pass) {
      fprintf(stderr, "FAIL [%s]: setup step %s: %s\n", rule, tok, strerror(e));
      exit(1);
    }
  }
  return e;
}

static int
check_row(const struct row *r)
{
  struct znbd_zones zs;
  char got[64];
  unsigned io, eo, cl, i, ok = 1;
  unsigned cnt[3] = {0, 0, 0};
  int e;

  if (znbd_zones_init(&zs, &geoms[r->geom]) < 0) {
    perror("znbd_zones_init");
    exit(1);
  }
  run_script(&zs, r->setup, true, r->rule);
  e = run_script(&zs, r->op, false, r->rule);

  for (i = 0; i < zs.nr_zones; i++) {
    got[i] = cond_char(zs.zone[i].cond);
    cnt[0] += zs.zone[i].cond == ZNBD_ZONE_COND_IMP_OPEN;
    cnt[1] += zs.zone[i].cond == ZNBD_ZONE_COND_EXP_OPEN;
    cnt[2] += zs.zone[i].cond == ZNBD_ZONE_COND_CLOSED;
  }
  got[i] = 0;
  znbd_zones_counters(&zs, &io, &eo, &cl);

  char want[64];
  snprintf(want, sizeof want, "%s", r->conds);
  for (i = 0; want[i]; i++) /* 'E' marks the zone the op touched */
    if (want[i] == 'E')
      want[i] = 'e';
  if (e != r->err) {
    fprintf(stderr, "FAIL [%s]: errno %d (%s), want %d (%s)\n", r->rule, e,
            strerror(e), r->err, strerror(r->err));
    ok = 0;
  }
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "FAIL [%s]: conditions %s, want %s\n", r->rule, got, want);
    ok = 0;
  }
  if (io != r->io || eo != r->eo || cl != r->cl) {
    fprintf(stderr, "FAIL [%s]: IO/EO/CL %u/%u/%u, want %u/%u/%u\n", r->rule,
            io, eo, cl, r->io, r->eo, r->cl);
    ok = 0;
  }
  /* A CLOSED zone made READONLY/OFFLINE whose finish failed stays
   * counted (null_blk): the one way the counters exceed the zones. */
  if (io != cnt[0] || eo != cnt[1] || cl != cnt[2] + zs.nr_fault_stuck) {
    fprintf(stderr, "FAIL [%s]: counters %u/%u/%u disagree with conditions\n",
            r->rule, io, eo, cl);
    ok = 0;
  }
  if (r->wps) {
    const char *p = r->wps;
    for (i = 0; i < zs.nr_zones && *p; i++) {
      const struct znbd_zone *z = &zs.zone[i];
      while (*p == ' ')
        p++;
      if (*p == '-') {
        if (z->wp != ZNBD_WP_INVALID) {
          fprintf(stderr, "FAIL [%s]: zone %u wp valid, want invalid\n",
                  r->rule, i);
          ok = 0;
        }
        p++;
      } else if (*p == '*')
        p++;
      else {
        char *end;
        unsigned long long blk = strtoull(p, &end, 10);
        if (z->wp != z->start + blk * B) {
          fprintf(stderr, "FAIL [%s]: zone %u wp block %lld, want %llu\n",
                  r->rule, i,
                  z->wp == ZNBD_WP_INVALID
                      ? -1LL
                      : (long long)((z->wp - z->start) / B),
                  blk);
          ok = 0;
        }
        p = end;
      }
    }
  }
  znbd_zones_destroy(&zs);
  if (ok)
    printf("ok   [%s]\n", r->rule);
  return ok;
}

/* Geometry checks that are not transitions. */
static int
check_geometry(void)
{
  struct znbd_zones zs;
  int ok = 1;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "FAIL geometry: %s (line %d)\n", #cond, __LINE__);       \
      ok = 0;                                                                  \
    }                                                                          \
  } while (0)

  /* npo2 zones, smaller last zone (rules zone-layout, zone-size-any). */
  CHECK(znbd_zones_init(&zs, &geoms[2]) == 0);
  CHECK(zs.nr_zones == 9 && !zs.zone_size_po2);
  CHECK(zs.zone[8].start == 96 * B && zs.zone[8].len == 5 * B);
  CHECK(zs.zone[8].capacity == 5 * B && zs.zone[7].capacity == 12 * B);
  CHECK(znbd_zones_zone_no(&zs, 12 * B - 1) == 0);
  CHECK(znbd_zones_zone_no(&zs, 12 * B) == 1);
  CHECK(znbd_zones_zone_no(&zs, 101 * B - 1) == 8);
  znbd_zones_destroy(&zs);

  /* po2 zones use the shift. */
  CHECK(znbd_zones_init(&zs, &geoms[0]) == 0);
  CHECK(zs.zone_size_po2 && zs.zone_shift == 16);
  CHECK(znbd_zones_zone_no(&zs, 16 * B) == 1);
  CHECK(zs.zone[0].type == ZNBD_ZONE_TYPE_CONVENTIONAL &&
        zs.zone[0].wp == ZNBD_WP_INVALID);
  CHECK(zs.zone[1].type == ZNBD_ZONE_TYPE_SEQWRITE_REQ &&
        zs.zone[1].wp == zs.zone[1].start);
  znbd_zones_destroy(&zs);

  /* capacity < size; last zone shorter than the capacity. */
  struct znbd_zone_geometry g = {
      .size = 40 * B, .zone_size = 16 * B, .zone_capacity = 10 * B};
  CHECK(znbd_zones_init(&zs, &g) == 0);
  CHECK(zs.nr_zones == 3 && zs.zone[2].len == 8 * B &&
        zs.zone[2].capacity == 8 * B && zs.zone[1].capacity == 10 * B);
  znbd_zones_destroy(&zs);

  /* Clamps of null_init_zoned_dev() (rule `clamp-limits`). */
  g = (struct znbd_zone_geometry){.size = 4 * 16 * B,
                                  .zone_size = 16 * B,
                                  .nr_conv = 9,
                                  .max_open = 5,
                                  .max_active = 7};
  CHECK(znbd_zones_init(&zs, &g) == 0);
  CHECK(zs.nr_conv == 3 && zs.max_active == 0 && zs.max_open == 0);
  znbd_zones_destroy(&zs);
  g = (struct znbd_zone_geometry){
      .size = 8 * 16 * B, .zone_size = 16 * B, .max_open = 5, .max_active = 3};
  CHECK(znbd_zones_init(&zs, &g) == 0);
  CHECK(zs.max_active == 3 && zs.max_open == 3);
  znbd_zones_destroy(&zs);

  /* Refusals. */
  g = (struct znbd_zone_geometry){
      .size = 8 * B, .zone_size = 4 * B, .zone_capacity = 5 * B};
  errno = 0;
  CHECK(znbd_zones_init(&zs, &g) == -1 && errno == EINVAL);
  g = (struct znbd_zone_geometry){.size = 8 * B, .zone_size = 0};
  CHECK(znbd_zones_init(&zs, &g) == -1 && errno == EINVAL);
  if (ok)
    printf("ok   [geometry: npo2, smaller last zone, capacity, clamps]\n");
  return ok;
}

/* Every row's rule (the words before its first ':') is one of
 * doc/zone-rules.md, where a rule is defined as a line starting with
 * `name`.  Reads the doc from the source tree (ZNBD_TOP_SRCDIR). */
static int
check_rule_names(void)
{
  char path[4096], *doc;
  size_t n = 0, cap = 1 << 16, r, i, bad = 0;
  FILE *f;

  snprintf(path, sizeof path, "%s/doc/zone-rules.md", ZNBD_TOP_SRCDIR);
  f = fopen(path, "r");
  doc = malloc(cap + 2);
  if (!f || !doc) {
    fprintf(stderr, "FAIL rule names: cannot read %s: %s\n", path,
            strerror(errno));
    if (f)
      fclose(f);
    free(doc);
    return 0;
  }
  doc[0] = '\n'; /* so the first line also starts after a newline */
  while ((r = fread(doc + 1 + n, 1, cap - n, f)) > 0)
    n += r;
  fclose(f);
  doc[n + 1] = '\0';
  for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    char want[96];
    int len = (int)strcspn(rows[i].rule, ":");
    snprintf(want, sizeof want, "\n`%.*s`", len, rows[i].rule);
    if (!strstr(doc, want)) {
      fprintf(stderr, "FAIL [%s]: no rule %.*s in doc/zone-rules.md\n",
              rows[i].rule, len, rows[i].rule);
      bad++;
    }
  }
  free(doc);
  if (bad == 0)
    printf("ok   [every row names a rule of doc/zone-rules.md]\n");
  return bad == 0;
}

/* Rule `busy-victim`: an IMP_OPEN zone whose lock another request holds
 * is passed by the victim scan; with every IMP_OPEN zone held, the open
 * check fails with ETOOMANYREFS as if there were none, changing nothing.
 * max_open 2 (geometry 5); zones 0 and 1 IMP_OPEN. */
static int
check_busy_victim(void)
{
  struct znbd_zones zs;
  int ok = 1, e;
  char got[8];

  if (znbd_zones_init(&zs, &geoms[5]) < 0 || step(&zs, "w0+1") ||
      step(&zs, "w1+1")) {
    fprintf(stderr, "FAIL busy-victim: setup\n");
    return 0;
  }
  pthread_mutex_lock(&zs.zone[0].lock);
  pthread_mutex_lock(&zs.zone[1].lock);
  e = step(&zs, "w2+1");
  pthread_mutex_unlock(&zs.zone[1].lock);
  for (unsigned i = 0; i < 6; i++)
    got[i] = cond_char(zs.zone[i].cond);
  got[6] = 0;
  if (e != ETOOMANYREFS || strcmp(got, "iieeee") != 0 ||
      zs.zone[2].wp != zs.zone[2].start) {
    fprintf(stderr, "FAIL busy-victim: all held: errno %d, conditions %s\n", e,
            got);
    ok = 0;
  }
  /* Zone 0 still held: zone 1, free now, is the victim. */
  e = step(&zs, "w2+1");
  pthread_mutex_unlock(&zs.zone[0].lock);
  for (unsigned i = 0; i < 6; i++)
    got[i] = cond_char(zs.zone[i].cond);
  if (e != 0 || strcmp(got, "icieee") != 0 ||
      zs.zone[2].wp != zs.zone[2].start + B) {
    fprintf(stderr, "FAIL busy-victim: one held: errno %d, conditions %s\n", e,
            got);
    ok = 0;
  }
  znbd_zones_destroy(&zs);
  if (ok)
    printf("ok   [busy-victim: a held IMP_OPEN zone is passed by]\n");
  return ok;
}

/* The counter asserts of lib/zone.c (rule `counters`) are compiled in: a
 * child process corrupts the IMP_OPEN count of a zones table, closes the
 * zone, and must die of the assert (SIGABRT).  Fails if the library was
 * built with NDEBUG, so a test run always has the asserts on. */
static int
check_asserts_live(void)
{
  pid_t pid;
  int status;

  fflush(NULL);
  pid = fork();
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    struct znbd_zones zs;
    setrlimit(RLIMIT_CORE, &no_core); /* the abort is expected */
    if (znbd_zones_init(&zs, &geoms[0]) < 0 || step(&zs, "w1+1") != 0)
      _exit(2);
    fprintf(stderr, "(an assertion failure on the next line is expected)\n");
    zs.nr_imp_open = 0; /* zone 1 is IMP_OPEN: IO must be 1 */
    step(&zs, "c1");
    _exit(3); /* the underflow went unnoticed */
  }
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    fprintf(stderr, "FAIL asserts: fork/wait: %s\n", strerror(errno));
    return 0;
  }
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) {
    fprintf(stderr,
            "FAIL asserts: a counter underflow was not caught (child %s %d);"
            " build without -DNDEBUG\n",
            WIFSIGNALED(status) ? "signal" : "exit",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return 0;
  }
  printf("ok   [counters: an underflow aborts (asserts are on)]\n");
  return 1;
}

static int
store_nothing(void *opaque, const void *data, uint64_t len, uint64_t off)
{
  return 0;
}

/* znbd_zones_write_wait()'s bound on parked writes counts only writes
 * really ahead of the wp: with the bound full, a write in order still
 * runs (a thread whose write was ahead a moment ago, until the write
 * before it landed, must not be refused), and one ahead is refused with
 * EAGAIN, changing nothing. */
static int
check_wait_bound(void)
{
  struct znbd_zones zs;
  _Atomic unsigned waiting = 2;
  int ok = 1;

  if (znbd_zones_init(&zs, &geoms[0]) < 0)
    return 0;
  struct znbd_zone_write w = {.off = zs.zone[1].start,
                              .len = B,
                              .store = store_nothing,
                              .pipeline = true,
                              .timeout_ms = 60000};
  if (znbd_zones_write_wait(&zs, &w, &waiting, 2) != 0 ||
      zs.zone[1].wp != zs.zone[1].start + B || waiting != 2) {
    fprintf(stderr, "FAIL wait bound: a write in order was refused\n");
    ok = 0;
  }
  w.off = zs.zone[1].start + 3 * B;
  errno = 0;
  if (znbd_zones_write_wait(&zs, &w, &waiting, 2) != -1 || errno != EAGAIN ||
      zs.zone[1].wp != zs.zone[1].start + B || waiting != 2 ||
      zs.nparked != 0 || zs.park_waits != 0) {
    fprintf(stderr, "FAIL wait bound: a write ahead was not refused\n");
    ok = 0;
  }
  znbd_zones_destroy(&zs);
  return ok;
}

int
main(void)
{
  size_t i, pass = 0, n = sizeof rows / sizeof rows[0];

  for (i = 0; i < n; i++)
    pass += check_row(&rows[i]);
  pass += check_geometry();
  pass += check_rule_names();
  pass += check_asserts_live();
  pass += check_wait_bound();
  pass += check_busy_victim();
  printf("%zu of %zu checks passed\n", pass, n + 5);
  return pass == n + 5 ? 0 : 1;
}
