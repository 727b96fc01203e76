/* Intent records and the redo of requests a dead server may have done
 * (include/znbd/redo.h, lib/intent.c, lib/redo.c), on dir= devices: a
 * server "dies" by freeing its device without confirming (the records
 * stay in PATH/znbd.redo, as after a kill), a zone file cut short stands
 * for a store the kill interrupted, and the next device on the directory
 * is the recovering server.  Checked: sectors answered, wps, bytes read
 * back, records kept and dropped. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testdev.h"
#include "znbd/redo.h"
#include "znbd/request.h"
#include "dev_unfenced.h"

#define KiB 1024u
#define MiB (1024u * 1024u)
#define ZS (1u * MiB) /* zone size */

static char base[4096];
static char dir[4200];
static int ndirs;

/* A new directory for a test. */
static void
new_dir(void)
{
  snprintf(dir, sizeof dir, "%s/d%d", base, ndirs++);
}

/* The device on DIR: 8 zones of 1 MiB, the first conventional. */
static struct znbd_dev *
open_dev(void)
{
  static const char *kv[] = {"size", "8M",           "zone_size", "1M", "dir",
                             NULL,   "zone_nr_conv", "1",         NULL};
  kv[5] = dir;
  return test_dev_kv(kv);
}

/* The device on DIR with intent records for 4 slots (KEEP: a
 * recovering server); *KEPT gets the records kept. */
static struct znbd_dev *
open_redo(bool keep, int *kept)
{
  struct znbd_dev *d = open_dev();
  char err[256];
  *kept = znbd_dev_redo_open(d, 4, keep, err, sizeof err);
  CHECKF(*kept >= 0, "redo_open: %s", err);
  return d;
}

/* Zone Z's file cut to SIZE bytes (a store cut short by a kill). */
static void
cut_zone_file(uint32_t z, uint64_t size)
{
  char path[4300];
  snprintf(path, sizeof path, "%s/seq-%06u", dir, z);
  CHECK(truncate(path, (off_t)size) == 0);
}

static uint8_t a[256 * KiB], b[256 * KiB], got[256 * KiB];

/* A new directory and its device with records (a new device: none kept),
 * C a context on it, A and B filled from SEED and SEED + 1. */
static struct znbd_dev *
fresh(struct znbd_req_ctx *c, unsigned seed)
{
  int kept;
  new_dir();
  struct znbd_dev *d = open_redo(false, &kept);
  CHECK_EQ(kept, 0);
  znbd_req_ctx_init(c, d);
  test_fill(a, sizeof a, seed);
  test_fill(b, sizeof b, seed + 1);
  return d;
}

/* A RAM device has no records to keep; nor has a plain one. */
static void
test_refused(void)
{
  static const char *const ram[] = {"size", "8M", "zone_size", "1M", NULL};
  struct znbd_dev *d = test_dev_kv(ram);
  char err[256] = "";
  CHECK(znbd_dev_redo_open(d, 4, false, err, sizeof err) == -1 &&
        errno == EINVAL);
  CHECK(strstr(err, "dir=") != NULL);
  CHECK_EQ(znbd_dev_redo_kept(d), 0);
  /* Without records an append redo finds nothing and notes nothing. */
  uint64_t at = 0;
  CHECK_EQ(znbd_dev_redo_append(d, a, 4 * KiB, ZS, 0, &at), 0);
  CHECK(znbd_dev_redo_word(d, 0) == NULL);
  struct znbd_req_ctx c;
  znbd_req_ctx_init(&c, d);
  CHECK_EQ(znbd_req_append_noted(&c, a, 4 * KiB, ZS, 3, &at), 0);
  CHECK_EQ(at, ZS);
  znbd_dev_free(d);

  new_dir();
  d = open_dev();
  CHECK(znbd_dev_redo_open(d, 0, false, err, sizeof err) == -1 &&
        errno == EINVAL);
  CHECK(znbd_dev_redo_open(d, 65537, false, err, sizeof err) == -1 &&
        errno == EINVAL);
  CHECK_EQ(znbd_dev_redo_open(d, 4, false, err, sizeof err), 0);
  znbd_req_ctx_init(&c, d);
  /* A slot past the four: EINVAL, nothing appended. */
  CHECK(znbd_req_append_noted(&c, a, 4 * KiB, ZS, 4, &at) == -1 &&
        errno == EINVAL);
  CHECK_EQ(test_wp(d, 1), ZS);
  znbd_dev_free(d);
}

/* An append done but never confirmed, reissued to the next server: the
 * same sector, no space taken again, the record gone once matched. */
static void
test_append_done(void)
{
  int kept;
  uint64_t at = 0, at2 = 0;
  struct znbd_req_ctx c;
  struct znbd_dev *d = fresh(&c, 1);
  /* Zone 1: 64 KiB confirmed, then two appends of 128 KiB in flight,
   * slots 0 and 1, never confirmed. */
  CHECK_EQ(znbd_req_append_noted(&c, b, 64 * KiB, ZS, 2, &at), 0);
  znbd_dev_redo_confirm(d, 2);
  CHECK_EQ(znbd_req_append_noted(&c, a, 128 * KiB, ZS, 0, &at), 0);
  CHECK_EQ(at, ZS + 64 * KiB);
  CHECK_EQ(znbd_req_append_noted(&c, b, 128 * KiB, ZS, 1, &at2), 0);
  CHECK_EQ(at2, ZS + 192 * KiB);
  znbd_dev_free(d); /* killed */

  d = open_redo(true, &kept);
  CHECK_EQ(kept, 2);
  CHECK_EQ(znbd_dev_redo_kept(d), 2);
  CHECK_EQ(test_wp(d, 1), ZS + 320 * KiB);
  /* Reissued in the other order: each gets its own sector back. */
  uint64_t r1 = 0, r2 = 0;
  CHECK_EQ(znbd_dev_redo_append(d, b, 128 * KiB, ZS, 3, &r2), 1);
  CHECK_EQ(r2, ZS + 192 * KiB);
  CHECK_EQ(znbd_dev_redo_append(d, a, 128 * KiB, ZS, 3, &r1), 1);
  CHECK_EQ(r1, ZS + 64 * KiB);
  CHECK_EQ(test_wp(d, 1), ZS + 320 * KiB);
  CHECK_EQ(znbd_dev_redo_kept(d), 0);
  /* Matched once: the same bytes again are a new append. */
  CHECK_EQ(znbd_dev_redo_append(d, a, 128 * KiB, ZS, 3, &r1), 0);
  CHECK_EQ(znbd_dev_read(d, got, 128 * KiB, ZS + 64 * KiB, 0), 0);
  CHECK(memcmp(got, a, 128 * KiB) == 0);
  znbd_dev_free(d);
  /* A matched record moved to the slot of the append that matched it,
   * until that one's completion is confirmed: a server killed before
   * that keeps it again (once, though it is in the file twice, so far
   * as the move got), and zeroing its word confirms it. */
  d = open_redo(true, &kept);
  CHECK_EQ(kept, 1);
  uint32_t *word = znbd_dev_redo_word(d, 2);
  CHECK(word != NULL && znbd_dev_redo_word(d, 4) == NULL);
  CHECK_EQ(znbd_dev_redo_append(d, a, 128 * KiB, ZS, 2, &r1), 1);
  CHECK_EQ(r1, ZS + 64 * KiB);
  CHECK_EQ(*word, 1);
  *word = 0;
  znbd_dev_free(d);
  d = open_redo(true, &kept);
  CHECK_EQ(kept, 0);
  znbd_dev_free(d);
}

/* Records that must not match: other bytes, another length, another
 * zone; a confirmed append; a record cleared by a new device; one whose
 * data never reached the store; one in a zone reset since. */
static void
test_append_no_match(void)
{
  int kept;
  uint64_t at = 0, r = 0;
  struct znbd_req_ctx c;
  struct znbd_dev *d = fresh(&c, 3);
  CHECK_EQ(znbd_req_append_noted(&c, a, 64 * KiB, 2 * ZS, 0, &at), 0);
  CHECK_EQ(znbd_req_append_noted(&c, a, 64 * KiB, 3 * ZS, 1, &at), 0);
  znbd_dev_redo_confirm(d, 1);
  /* Slot 2's record is written, its data never stored: the zone file
   * is cut back to where it started. */
  CHECK_EQ(znbd_req_append_noted(&c, a, 64 * KiB, 4 * ZS, 2, &at), 0);
  znbd_dev_free(d);
  cut_zone_file(4, 0);

  d = open_redo(true, &kept);
  CHECK_EQ(kept, 1); /* zone 2's; zone 3's confirmed; zone 4's not stored */
  CHECK_EQ(znbd_dev_redo_append(d, b, 64 * KiB, 2 * ZS, 3, &r), 0);
  CHECK_EQ(znbd_dev_redo_append(d, a, 32 * KiB, 2 * ZS, 3, &r), 0);
  CHECK_EQ(znbd_dev_redo_append(d, a, 64 * KiB, 5 * ZS, 3, &r), 0);
  CHECK_EQ(znbd_dev_redo_append(d, a, 64 * KiB, 3 * ZS, 3, &r), 0);
  /* Zone 4's append runs again, where it would have gone. */
  CHECK_EQ(znbd_dev_redo_append(d, a, 64 * KiB, 4 * ZS, 3, &r), 0);
  znbd_req_ctx_init(&c, d);
  CHECK_EQ(znbd_req_append_noted(&c, a, 64 * KiB, 4 * ZS, 0, &at), 0);
  CHECK_EQ(at, 4 * ZS);
  znbd_dev_redo_confirm(d, 0);
  CHECK_EQ(znbd_dev_redo_kept(d), 1);
  /* A server that dies before the reissue came keeps the record. */
  znbd_dev_free(d);
  d = open_redo(true, &kept);
  CHECK_EQ(kept, 1);
  /* A reset takes the zone's data, and its records with it. */
  CHECK_EQ(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 2), 0);
  CHECK_EQ(znbd_dev_redo_kept(d), 0);
  CHECK_EQ(znbd_dev_redo_append(d, a, 64 * KiB, 2 * ZS, 3, &r), 0);
  znbd_dev_free(d);

  /* A new device (no keep) clears whatever the file held. */
  new_dir();
  d = open_redo(false, &kept);
  znbd_req_ctx_init(&c, d);
  CHECK_EQ(znbd_req_append_noted(&c, a, 64 * KiB, 2 * ZS, 3, &at), 0);
  znbd_dev_free(d);
  d = open_redo(false, &kept);
  CHECK_EQ(kept, 0);
  znbd_dev_free(d);
  d = open_redo(true, &kept);
  CHECK_EQ(kept, 0);
  znbd_dev_free(d);
}

/* An append whose store the kill cut short (the last store of its
 * zone): its bytes are cut off at the open, the zone's wp back at its
 * sector, so that no other append lands inside its range; it runs
 * again there.  One stored whole before it is kept. */
static void
test_append_partial(void)
{
  int kept;
  uint64_t at = 0, r = 0;
  struct znbd_req_ctx c;
  struct znbd_dev *d = fresh(&c, 5);
  CHECK_EQ(znbd_req_append_noted(&c, b, 64 * KiB, 5 * ZS, 2, &at), 0);
  CHECK_EQ(znbd_req_append_noted(&c, a, 256 * KiB, 5 * ZS, 3, &at), 0);
  CHECK_EQ(at, 5 * ZS + 64 * KiB);
  znbd_dev_free(d);
  cut_zone_file(5, 164 * KiB);

  d = open_redo(true, &kept);
  CHECK_EQ(kept, 1); /* slot 2's, stored whole */
  CHECK_EQ(test_wp(d, 5), 5 * ZS + 64 * KiB);
  CHECK_EQ(test_zone(d, 5).cond, ZNBD_ZONE_COND_CLOSED);
  /* Another append comes first: at the cut append's sector, not inside
   * its range. */
  znbd_req_ctx_init(&c, d);
  CHECK_EQ(znbd_dev_redo_append(d, a + 4096, 4 * KiB, 5 * ZS, 1, &r), 0);
  CHECK_EQ(znbd_req_append_noted(&c, a + 4096, 4 * KiB, 5 * ZS, 1, &at), 0);
  CHECK_EQ(at, 5 * ZS + 64 * KiB);
  /* The cut one, reissued: a new append now, after it. */
  CHECK_EQ(znbd_dev_redo_append(d, a, 256 * KiB, 5 * ZS, 3, &r), 0);
  CHECK_EQ(znbd_req_append_noted(&c, a, 256 * KiB, 5 * ZS, 3, &at), 0);
  CHECK_EQ(at, 5 * ZS + 68 * KiB);
  CHECK_EQ(test_wp(d, 5), 5 * ZS + 324 * KiB);
  memset(got, 0, sizeof got);
  CHECK_EQ(znbd_dev_read(d, got, 256 * KiB, 5 * ZS + 68 * KiB, 0), 0);
  CHECK(memcmp(got, a, 256 * KiB) == 0);
  /* The whole one matches its reissue. */
  CHECK_EQ(znbd_dev_redo_append(d, b, 64 * KiB, 5 * ZS, 2, &r), 1);
  CHECK_EQ(r, 5 * ZS);
  znbd_dev_free(d);
}

/* Writes: recognised by position, all of one done or its first part. */
static void
test_write(void)
{
  int kept;
  struct znbd_req_ctx c;
  struct znbd_dev *d = fresh(&c, 7);
  CHECK_EQ(znbd_dev_write(d, a, 64 * KiB, 6 * ZS, 0), 0);
  CHECK_EQ(znbd_dev_write(d, a + 64 * KiB, 192 * KiB, 6 * ZS + 64 * KiB, 0), 0);
  znbd_dev_free(d);
  cut_zone_file(6, 160 * KiB);

  d = open_redo(true, &kept);
  CHECK_EQ(kept, 0);
  /* The first write ends below the wp: not the zone's last, not a redo. */
  CHECK_EQ(znbd_dev_redo_write(d, a, 64 * KiB, 6 * ZS), 0);
  /* The second, cut at 160 KiB: its first part is there, the rest goes
   * in now. */
  CHECK_EQ(znbd_dev_redo_write(d, a + 64 * KiB, 192 * KiB, 6 * ZS + 64 * KiB),
           1);
  CHECK_EQ(test_wp(d, 6), 6 * ZS + 256 * KiB);
  CHECK_EQ(znbd_dev_read(d, got, 256 * KiB, 6 * ZS, 0), 0);
  CHECK(memcmp(got, a, 256 * KiB) == 0);
  /* Done wholly: taken as done again, nothing changes. */
  CHECK_EQ(znbd_dev_redo_write(d, a + 64 * KiB, 192 * KiB, 6 * ZS + 64 * KiB),
           1);
  CHECK_EQ(test_wp(d, 6), 6 * ZS + 256 * KiB);
  /* Other bytes: not a redo. */
  CHECK_EQ(znbd_dev_redo_write(d, b, 192 * KiB, 6 * ZS + 64 * KiB), 0);
  /* At or past the wp, in a conventional zone, past the end: never. */
  CHECK_EQ(znbd_dev_redo_write(d, a, 4 * KiB, 6 * ZS + 256 * KiB), 0);
  CHECK_EQ(znbd_dev_redo_write(d, a, 4 * KiB, 0), 0);
  CHECK_EQ(znbd_dev_redo_write(d, a, 4 * KiB, 8 * ZS), 0);
  CHECK_EQ(test_wp(d, 6), 6 * ZS + 256 * KiB);
  znbd_dev_free(d);
}

int
main(void)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(base, sizeof base, "%s/redo_test.XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  test_refused();
  test_append_done();
  test_append_no_match();
  test_append_partial();
  test_write();
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", base);
  return check_done("redo_test");
}
