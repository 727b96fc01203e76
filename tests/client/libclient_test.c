/* libznbdclient against a live server (run by libclient.sh, which starts
 * the front-end).  Usage:
 *   libclient_test zoned URI CONTROL   the start_zoned geometry: 16 zones
 *       of 1 MiB, capacity 768 KiB, zones 0-1 conventional, last zone
 *       512 KiB, zone_max_open=4, zone_max_active=6, all EMPTY
 *   libclient_test plain URI           a 1 MiB RAM disk
 * Every check compares real values: geometry, conditions and write
 * pointers, bytes read back, errno.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "znbdclient.h"

#define M (1024 * 1024)
#define K 1024

static struct znbdc *
open_or_die(const char *uri, const char *ctl)
{
  char err[512];
  struct znbdc *h = znbdc_open(uri, ctl, err, sizeof err);

  if (h == NULL) {
    fprintf(stderr, "znbdc_open %s: %s\n", uri, err);
    exit(1);
  }
  return h;
}

/* Zone I's state from H: condition and wp (ZNBD_WP_INVALID if none). */
static struct znbd_zone_info
zone(struct znbdc *h, uint32_t i)
{
  struct znbd_zone_info z = {0};
  int r = znbdc_report(h, i, 1, &z);

  CHECKF(r == 1, "report zone %" PRIu32 ": %d %s", i, r, znbdc_error(h));
  return z;
}

static void
expect_zone(struct znbdc *h, uint32_t i, unsigned cond, uint64_t wp,
            const char *what)
{
  struct znbd_zone_info z = zone(h, i);

  CHECKF(z.cond == cond && z.wp == wp,
         "%s (source %s): zone %" PRIu32 " cond %s wp %" PRIu64
         ", expected %s wp %" PRIu64,
         what, znbdc_source_name(znbdc_source(h)), i,
         znbd_zone_cond_name(z.cond), z.wp, znbd_zone_cond_name(cond), wp);
}

static void
fill(struct znbdc *h, uint64_t off, uint64_t len, int byte)
{
  char *buf = malloc(len);

  memset(buf, byte, len);
  CHECKF(nbd_pwrite(znbdc_nbd(h), buf, len, off, 0) == 0,
         "write %" PRIu64 "@%" PRIu64 ": %s", len, off, nbd_get_error());
  free(buf);
}

static void
test_geometry(struct znbdc *h)
{
  const struct znbdc_geom *g = znbdc_geom(h);
  struct znbd_zone_info z;

  CHECKF(g->zoned && g->size == 15872 * K && g->zone_size == M &&
             g->zone_capacity == 768 * K && g->nr_zones == 16 &&
             g->nr_conv == 2 && g->max_open == 4 && g->max_active == 6 &&
             g->blocksize == 512,
         "geometry: zoned %d size %" PRIu64 " zone %" PRIu64 " cap %" PRIu64
         " nr %" PRIu32 " conv %" PRIu32 " open %" PRIu32 " active %" PRIu32
         " bs %" PRIu32,
         g->zoned, g->size, g->zone_size, g->zone_capacity, g->nr_zones,
         g->nr_conv, g->max_open, g->max_active, g->blocksize);
  znbdc_zone_geom(g, 15, &z);
  CHECKF(z.start == 15 * M && z.len == 512 * K && z.capacity == 512 * K &&
             z.type == ZNBD_ZONE_TYPE_SEQWRITE_REQ,
         "last zone: start %" PRIu64 " len %" PRIu64 " cap %" PRIu64, z.start,
         z.len, z.capacity);
  znbdc_zone_geom(g, 1, &z);
  CHECKF(z.type == ZNBD_ZONE_TYPE_CONVENTIONAL && z.capacity == M,
         "zone 1 conventional, capacity %" PRIu64, z.capacity);
  CHECKF(znbdc_zone_of(g, 3 * M + 5) == 3 &&
             znbdc_zone_of(g, g->size) == UINT32_MAX,
         "zone_of");
}

/* Report, zone operations and append with the control socket. */
static void
test_control(const char *uri, const char *ctl)
{
  struct znbdc *h = open_or_die(uri, ctl);
  struct znbd_zone_info zs[16];
  uint64_t off = 0;
  char buf[8192];

  test_geometry(h);
  CHECKF(znbdc_has_control(h), "has control");
  CHECKF(znbdc_source(h) == ZNBDC_SRC_ZONECTX ||
             znbdc_source(h) == ZNBDC_SRC_CONTROL,
         "exact source with a control socket: %s",
         znbdc_source_name(znbdc_source(h)));

  CHECKF(znbdc_report(h, 0, 16, zs) == 16, "report all: %s", znbdc_error(h));
  CHECKF(zs[0].cond == ZNBD_ZONE_COND_NOT_WP && zs[0].wp == ZNBD_WP_INVALID &&
             zs[2].cond == ZNBD_ZONE_COND_EMPTY && zs[2].wp == 2 * M &&
             zs[15].capacity == 512 * K,
         "fresh report: %u %" PRIu64 " %u %" PRIu64, zs[0].cond, zs[0].wp,
         zs[2].cond, zs[2].wp);

  fill(h, 2 * M, 4096, 0xab);
  expect_zone(h, 2, ZNBD_ZONE_COND_IMP_OPEN, 2 * M + 4096, "after a write");
  CHECKF(znbdc_zone_op(h, ZNBD_ZONE_OP_CLOSE, 2) == 0, "close 2: %s",
         znbdc_error(h));
  CHECKF(strncmp(znbdc_reply(h), "ok zone=2 ", 10) == 0, "close reply '%s'",
         znbdc_reply(h));
  expect_zone(h, 2, ZNBD_ZONE_COND_CLOSED, 2 * M + 4096, "close");
  CHECKF(znbdc_zone_op(h, ZNBD_ZONE_OP_OPEN, 3) == 0, "open 3: %s",
         znbdc_error(h));
  expect_zone(h, 3, ZNBD_ZONE_COND_EXP_OPEN, 3 * M, "open");
  CHECKF(znbdc_zone_op(h, ZNBD_ZONE_OP_FINISH, 2) == 0, "finish 2: %s",
         znbdc_error(h));
  expect_zone(h, 2, ZNBD_ZONE_COND_FULL, ZNBD_WP_INVALID, "finish");
  CHECKF(znbdc_zone_op(h, ZNBD_ZONE_OP_RESET, 2) == 0, "reset 2: %s",
         znbdc_error(h));
  expect_zone(h, 2, ZNBD_ZONE_COND_EMPTY, 2 * M, "reset");

  /* Refusals carry the server's errno and reply. */
  errno = 0;
  CHECKF(znbdc_zone_op(h, ZNBD_ZONE_OP_CLOSE, 4) == -1 && errno == EIO &&
             strstr(znbdc_error(h), "error EIO zone 4") != NULL,
         "close of EMPTY zone 4: errno %d '%s'", errno, znbdc_error(h));
  errno = 0;
  CHECKF(znbdc_zone_op(h, ZNBD_ZONE_OP_RESET, 0) == -1 && errno == EIO,
         "reset of conventional zone 0: errno %d '%s'", errno, znbdc_error(h));
  errno = 0;
  CHECKF(znbdc_report(h, 15, 2, zs) == -1 && errno == EINVAL,
         "report past the end: errno %d", errno);

  /* Append: offsets follow the wp, data lands there; a misfit changes
   * nothing. */
  memset(buf, 0x5a, sizeof buf);
  CHECKF(znbdc_append(h, 4, buf, 4096, &off) == 0 && off == 4 * M,
         "append 1: %" PRIu64 " %s", off, znbdc_error(h));
  CHECKF(znbdc_append(h, 4, buf, 8192, &off) == 0 && off == 4 * M + 4096,
         "append 2: %" PRIu64 " %s", off, znbdc_error(h));
  memset(buf, 0, sizeof buf);
  CHECKF(nbd_pread(znbdc_nbd(h), buf, 8192, 4 * M + 4096, 0) == 0 &&
             buf[0] == 0x5a && buf[8191] == 0x5a,
         "appended data read back");
  expect_zone(h, 4, ZNBD_ZONE_COND_IMP_OPEN, 4 * M + 12288, "appends");
  {
    uint64_t big = 768 * K - 12288 + 4096;
    char *b = calloc(1, big);
    errno = 0;
    CHECKF(znbdc_append(h, 4, b, big, &off) == -1 && errno == EIO &&
               strstr(znbdc_error(h), "does not fit") != NULL,
           "append beyond capacity: errno %d '%s'", errno, znbdc_error(h));
    expect_zone(h, 4, ZNBD_ZONE_COND_IMP_OPEN, 4 * M + 12288, "refused append");
    CHECKF(znbdc_append(h, 4, b, big - 4096, &off) == 0 && off == 4 * M + 12288,
           "append to capacity: %s", znbdc_error(h));
    expect_zone(h, 4, ZNBD_ZONE_COND_FULL, ZNBD_WP_INVALID, "append to cap");
    free(b);
  }
  errno = 0;
  CHECKF(znbdc_append(h, 1, buf, 4096, &off) == -1 && errno == EIO,
         "append to conventional: errno %d", errno);
  errno = 0;
  CHECKF(znbdc_append(h, 5, buf, 100, &off) == -1 && errno == EINVAL,
         "unaligned append: errno %d", errno);

  /* reset of a range through the control socket. */
  fill(h, 5 * M, 4096, 1);
  fill(h, 6 * M, 4096, 1);
  CHECKF(znbdc_reset_zones(h, 4, 3) == 0, "reset 4-6: %s", znbdc_error(h));
  for (uint32_t i = 4; i <= 6; i++)
    expect_zone(h, i, ZNBD_ZONE_COND_EMPTY, i * (uint64_t)M, "reset range");
  CHECKF(znbdc_zone_op(h, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES) == 0 &&
             strncmp(znbdc_reply(h), "ok all count=", 13) == 0,
         "reset all: '%s'", znbdc_reply(h));
  expect_zone(h, 3, ZNBD_ZONE_COND_EMPTY, 3 * M, "reset all");
  znbdc_close(h);
}

/* Without the control socket: report from NBD, reset by TRIM, and
 * operations refused with ENOTSUP. */
static void
test_nbd_only(const char *uri)
{
  struct znbdc *h = open_or_die(uri, NULL);
  enum znbdc_source src = znbdc_source(h);
  uint64_t off;
  char buf[512] = {0};

  test_geometry(h);
  CHECKF(!znbdc_has_control(h), "no control");
  CHECKF(src == ZNBDC_SRC_ZONECTX || src == ZNBDC_SRC_ALLOCATION,
         "source without control: %s", znbdc_source_name(src));
  fill(h, 7 * M, 8192, 7);
  expect_zone(h, 7,
              src == ZNBDC_SRC_ZONECTX ? ZNBD_ZONE_COND_IMP_OPEN
                                       : ZNBD_ZONE_COND_CLOSED,
              7 * M + 8192, "written, no control");
  fill(h, 8 * M, 768 * K, 8);
  expect_zone(h, 8, ZNBD_ZONE_COND_FULL, ZNBD_WP_INVALID, "written to cap");
  CHECKF(znbdc_reset_zones(h, 0, 16) == 0, "reset by TRIM: %s", znbdc_error(h));
  expect_zone(h, 7, ZNBD_ZONE_COND_EMPTY, 7 * M, "after TRIM reset");
  expect_zone(h, 8, ZNBD_ZONE_COND_EMPTY, 8 * M, "after TRIM reset");
  errno = 0;
  CHECKF(znbdc_zone_op(h, ZNBD_ZONE_OP_OPEN, 3) == -1 && errno == ENOTSUP,
         "open without control: errno %d", errno);
  errno = 0;
  CHECKF(znbdc_append(h, 3, buf, 512, &off) == -1 && errno == ENOTSUP,
         "append without control: errno %d", errno);
  znbdc_close(h);
}

static void
test_plain(const char *uri)
{
  struct znbdc *h = open_or_die(uri, NULL);
  struct znbd_zone_info z;

  CHECKF(!znbdc_geom(h)->zoned && znbdc_geom(h)->size == M,
         "plain: zoned %d size %" PRIu64, znbdc_geom(h)->zoned,
         znbdc_geom(h)->size);
  CHECKF(znbdc_source(h) == ZNBDC_SRC_NONE, "plain source %s",
         znbdc_source_name(znbdc_source(h)));
  errno = 0;
  CHECKF(znbdc_report(h, 0, 1, &z) == -1 && errno == EINVAL &&
             strstr(znbdc_error(h), "not a zoned export"),
         "report on plain: errno %d '%s'", errno, znbdc_error(h));
  znbdc_close(h);
}

int
main(int argc, char **argv)
{
  char err[512];

  if (argc == 4 && strcmp(argv[1], "zoned") == 0) {
    test_control(argv[2], argv[3]);
    test_nbd_only(argv[2]);
    /* A control socket that is not there: ENOENT naming it. */
    errno = 0;
    CHECKF(znbdc_open(argv[2], "/nonexistent/ctl", err, sizeof err) == NULL &&
               errno == ENOENT && strstr(err, "/nonexistent/ctl"),
           "missing control socket: errno %d '%s'", errno, err);
  } else if (argc == 3 && strcmp(argv[1], "plain") == 0)
    test_plain(argv[2]);
  else {
    fprintf(stderr, "usage: libclient_test zoned URI CONTROL | plain URI\n");
    return 2;
  }
  return check_done(argv[1]);
}
