/* Unit test of lib/dev.c on a non-zoned device (zoned=false): range and
 * alignment checks, read/write/write-zeroes/trim through the store,
 * extents flags, the export description, stats and the wire errno map. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/dev.h"
#include "check.h"
#include "testdev.h"
#include "dev_unfenced.h"

static struct znbd_dev *
make(const char *size, const char *bs, const char *backed)
{
  const char *const kv[] = {"size",          size,        "zoned",
                            "false",         "blocksize", bs,
                            "memory_backed", backed,      NULL};
  struct znbd_params p;

  test_params(&p, kv);
  return test_dev(&p);
}

/* The read flags on D, a plain RAM disk with 0x42 at [512, 1536). */
static void
read_flags(struct znbd_dev *d)
{
  /* Zero-copy reads: the page written before, in place; a hole gives NULL
   * (the caller copies); a bad range or misalignment is refused. */
  const void *ref = NULL;
  CHECK_EQ(znbd_dev_read(d, &ref, 1024, 512, ZNBD_READ_REF), 0);
  const uint8_t *rb = ref;
  CHECK(rb != NULL && rb[0] == 0x42 && rb[1023] == 0x42);
  ref = rb;
  CHECK(znbd_dev_read(d, &ref, 4096, 4096, ZNBD_READ_REF) == 0 && !ref);
  ref = rb;
  CHECK(znbd_dev_read(d, &ref, 512, 1 << 20, ZNBD_READ_REF) == -1 &&
        errno == EINVAL && !ref);
  CHECK(znbd_dev_read(d, &ref, 100, 512, ZNBD_READ_REF) == -1 &&
        errno == EINVAL);
  /* Check only: the range, BUF unused. */
  CHECK_EQ(znbd_dev_read(d, NULL, 4096, 4096, ZNBD_READ_CHECK), 0);
  CHECK(znbd_dev_read(d, NULL, 100, 512, ZNBD_READ_CHECK) == -1 &&
        errno == EINVAL);
}

static void
test_ramdisk(void)
{
  struct znbd_dev *d = make("1M", "512", "true");
  CHECK(d != NULL);
  if (!d)
    return;
  CHECK_EQ(znbd_dev_size(d), 1 << 20);
  CHECK_EQ(znbd_dev_nr_zones(d), 0);
  CHECK(!znbd_dev_params(d)->zoned);

  char desc[128];
  int n = znbd_dev_describe(d, desc, sizeof desc);
  CHECK(strcmp(desc, "znbd model=none size=1048576 blocksize=512") == 0);
  CHECK_EQ(n, strlen(desc));
  CHECK_EQ(znbd_dev_describe(d, desc, 5), n); /* snprintf-style */

  uint8_t buf[8192], got[8192];
  memset(buf, 0x42, sizeof buf);
  CHECK_EQ(znbd_dev_write(d, buf, 1024, 512, 0), 0);
  memset(got, 0xff, sizeof got);
  CHECK_EQ(znbd_dev_read(d, got, 2048, 0, 0), 0);
  CHECK(got[0] == 0 && got[511] == 0 && got[512] == 0x42 && got[1535] == 0x42 &&
        got[1536] == 0);

  read_flags(d);

  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.allocated, 4096);
  CHECK(st.nr_imp_open == 0 && st.nr_exp_open == 0 && st.nr_closed == 0);

  /* Range and alignment: EINVAL, nothing changed. */
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 100, 0, 0) == -1 && errno == EINVAL);
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 512, 100, 0) == -1 && errno == EINVAL);
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 1024, (1 << 20) - 512, 0) == -1 &&
        errno == EINVAL);
  errno = 0;
  CHECK(znbd_dev_read(d, got, 512, 1 << 20, 0) == -1 && errno == EINVAL);
  errno = 0;
  CHECK(znbd_dev_read(d, got, 512, UINT64_MAX - 511, 0) == -1 &&
        errno == EINVAL);
  errno = 0;
  CHECK(znbd_dev_trim(d, 512, 3) == -1 && errno == EINVAL);
  struct ext e = {.n = 0};
  errno = 0;
  CHECK(znbd_dev_extents(d, 0, (1 << 20) + 512, ext_add, &e) == -1 &&
        errno == EINVAL && e.n == 0);
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.allocated, 4096);

  /* The last block is writable. */
  CHECK_EQ(znbd_dev_write(d, buf, 512, (1 << 20) - 512, 0), 0);

  /* WRITE_ZEROES (buf NULL) of the partly written first page: exact bytes
   * only, since the page is not covered whole. */
  CHECK_EQ(znbd_dev_write(d, NULL, 512, 1024, 0), 0);
  CHECK_EQ(znbd_dev_read(d, got, 2048, 0, 0), 0);
  CHECK(got[1023] == 0x42 && got[1024] == 0 && got[1535] == 0);
  CHECK(got[512] == 0x42);

  /* Extents: page 0 and the last page allocated. */
  e.n = 0;
  CHECK_EQ(znbd_dev_extents(d, 0, 1 << 20, ext_add, &e), 0);
  CHECK_EQ(e.n, 3);
  CHECK(e.off[0] == 0 && e.len[0] == 4096 && e.flags[0] == 0);
  CHECK(e.off[1] == 4096 && e.len[1] == (1 << 20) - 8192 && e.flags[1] == 3);
  CHECK(e.off[2] == (1 << 20) - 4096 && e.flags[2] == 0);

  /* Trim of whole pages frees them. */
  CHECK_EQ(znbd_dev_trim(d, 1 << 20, 0), 0);
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.allocated, 0);
  CHECK_EQ(znbd_dev_read(d, got, 8192, 0, 0), 0);
  int zero = 1;
  for (int i = 0; i < 8192; i++)
    zero &= got[i] == 0;
  CHECK(zero);

  /* No zones on a RAM disk. */
  errno = 0;
  CHECK(znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, 0) == -1 && errno == EINVAL);
  uint64_t w = 7;
  errno = 0;
  CHECK(znbd_dev_append(d, buf, 512, 0, &w) == -1 && errno == EINVAL);
  struct znbd_zone_info zi;
  CHECK_EQ(znbd_dev_report(d, 0, 1, &zi), 0);
  znbd_dev_free(d);
  znbd_dev_free(NULL);
  printf("ramdisk: read/write/zeroes/trim/extents, EINVAL on bad ranges\n");
}

static void
test_4k_and_unbacked(void)
{
  struct znbd_dev *d = make("64k", "4096", "false");
  CHECK(d != NULL);
  if (!d)
    return;
  uint8_t buf[4096];
  memset(buf, 9, sizeof buf);
  errno = 0;
  CHECK(znbd_dev_write(d, buf, 512, 0, 0) == -1 && errno == EINVAL);
  CHECK_EQ(znbd_dev_write(d, buf, 4096, 4096, 0), 0);
  CHECK_EQ(znbd_dev_read(d, buf, 4096, 4096, 0), 0);
  CHECK(buf[0] == 0 && buf[4095] == 0);
  struct znbd_dev_stats st;
  znbd_dev_stats(d, &st);
  CHECK_EQ(st.allocated, 0);
  char desc[128];
  znbd_dev_describe(d, desc, sizeof desc);
  CHECK(strcmp(desc, "znbd model=none size=65536 blocksize=4096") == 0);
  znbd_dev_free(d);
  printf("blocksize 4096 enforced; memory_backed=false keeps nothing\n");
}

static void
test_wire_errno(void)
{
  CHECK_EQ(znbd_dev_wire_errno(ETOOMANYREFS), ENOSPC);
  CHECK_EQ(znbd_dev_wire_errno(EOVERFLOW), ENOSPC);
  CHECK_EQ(znbd_dev_wire_errno(EAGAIN), EIO);
  CHECK_EQ(znbd_dev_wire_errno(ETIMEDOUT), EIO);
  CHECK_EQ(znbd_dev_wire_errno(EIO), EIO);
  CHECK_EQ(znbd_dev_wire_errno(EINVAL), EINVAL);
  CHECK_EQ(znbd_dev_wire_errno(ENOMEM), ENOMEM);
  CHECK_EQ(znbd_dev_wire_errno(ENOSPC), ENOSPC);
  CHECK_EQ(znbd_dev_wire_errno(EPERM), EPERM);
  CHECK_EQ(znbd_dev_wire_errno(EBADF), EIO);
  printf("wire errno: 10 mappings\n");
}

int
main(void)
{
  test_ramdisk();
  test_4k_and_unbacked();
  test_wire_errno();
  return check_done("dev_test");
}
