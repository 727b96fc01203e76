/* Unit test of the device geometry derived once (include/znbd/geometry.h):
 * zone count and a shorter last zone, capacity 0 -> zone_size and gap
 * zones, null_blk's clamps (null_init_zoned_dev()), the conventional
 * space, each span's start, length and capacity, a device without
 * zones, and the refusals (EINVAL, the geometry left unchanged). */
#include <errno.h>
#include <stdio.h>

#include "znbd/geometry.h"
#include "check.h"

#define M (1ull << 20)

static void
test_zoned(void)
{
  struct znbd_geometry g;
  /* npo2 zones, a shorter last one: ceil(1000M / 96M) = 11. */
  struct znbd_geometry_request r = {.size = 1000 * M,
                                    .blocksize = 4096,
                                    .zoned = true,
                                    .zone_size = 96 * M,
                                    .zone_capacity = 80 * M,
                                    .nr_conv = 2};
  CHECK_EQ(znbd_geometry_derive(&g, &r), 0);
  CHECK_EQ(g.nr_zones, 11);
  CHECK_EQ(g.nr_conv, 2);
  CHECK_EQ(g.last_zone_len, 1000 * M - 10 * 96 * M);
  CHECK(g.has_gaps);
  CHECK_EQ(g.conv_end, 2 * 96 * M);
  CHECK_EQ(g.blocksize, 4096);
  CHECK_EQ(znbd_geometry_nr_spans(&g), 11);
  struct znbd_geometry_span s = znbd_geometry_span(&g, 1);
  CHECK(!s.seq);
  CHECK_EQ(s.start, 96 * M);
  CHECK_EQ(s.cap, 96 * M); /* conventional: the whole zone */
  s = znbd_geometry_span(&g, 2);
  CHECK(s.seq);
  CHECK_EQ(s.cap, 80 * M);
  s = znbd_geometry_span(&g, 10); /* 40M long: capacity is its length */
  CHECK_EQ(s.start, 960 * M);
  CHECK_EQ(s.len, 40 * M);
  CHECK_EQ(s.cap, 40 * M);

  /* Capacity 0: the zone size, no gaps. */
  r = (struct znbd_geometry_request){
      .size = 64 * M, .zoned = true, .zone_size = 16 * M};
  CHECK_EQ(znbd_geometry_derive(&g, &r), 0);
  CHECK_EQ(g.zone_capacity, 16 * M);
  CHECK(!g.has_gaps);
  CHECK_EQ(g.last_zone_len, 16 * M);
  CHECK_EQ(g.conv_end, 0);
  printf("zoned: count, last zone, capacity, gaps, spans\n");
}

static void
test_clamps(void)
{
  struct znbd_geometry g;
  struct znbd_geometry_request r = {
      .size = 16 * M, .zoned = true, .zone_size = M, .nr_conv = 100};
  CHECK_EQ(znbd_geometry_derive(&g, &r), 0);
  CHECK_EQ(g.nr_conv, 15); /* nr_conv >= nr_zones: nr_zones - 1 */
  CHECK_EQ(g.conv_end, 15 * M);

  r.nr_conv = 4; /* 12 sequential zones */
  r.max_active = 12;
  r.max_open = 3;
  CHECK_EQ(znbd_geometry_derive(&g, &r), 0);
  CHECK_EQ(g.max_active, 0); /* >= sequential zones: no limit */
  CHECK_EQ(g.max_open, 3);

  r.max_active = 5;
  r.max_open = 8;
  CHECK_EQ(znbd_geometry_derive(&g, &r), 0);
  CHECK_EQ(g.max_active, 5);
  CHECK_EQ(g.max_open, 5); /* > max_active: max_active */

  r.max_active = 0;
  r.max_open = 12;
  CHECK_EQ(znbd_geometry_derive(&g, &r), 0);
  CHECK_EQ(g.max_open, 0); /* >= sequential zones: no limit */
  printf("clamps: nr_conv, max_active, max_open (null_blk's)\n");
}

static void
test_plain_and_refusals(void)
{
  struct znbd_geometry g;
  struct znbd_geometry_request r = {
      .size = 10 * M, .blocksize = 512, .zone_size = 3};
  CHECK_EQ(znbd_geometry_derive(&g, &r), 0);
  CHECK(!g.zoned);
  CHECK_EQ(g.nr_zones, 0);
  CHECK_EQ(g.conv_end, 10 * M);
  CHECK_EQ(znbd_geometry_nr_spans(&g), 1);
  struct znbd_geometry_span s = znbd_geometry_span(&g, 0);
  CHECK(!s.seq);
  CHECK_EQ(s.start, 0);
  CHECK_EQ(s.len, 10 * M);
  CHECK_EQ(s.cap, 10 * M);

  struct znbd_geometry keep = g;
  const struct znbd_geometry_request bad[] = {
      {.size = 0},
      {.size = M, .zoned = true, .zone_size = 0},
      {.size = M, .zoned = true, .zone_size = 4096, .zone_capacity = 8192},
      {.size = UINT64_MAX, .zoned = true, .zone_size = 512},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    errno = 0;
    CHECK_EQ(znbd_geometry_derive(&g, &bad[i]), -1);
    CHECK_EQ(errno, EINVAL);
    CHECK(g.zoned == keep.zoned && g.size == keep.size &&
          g.nr_zones == keep.nr_zones && g.conv_end == keep.conv_end);
  }
  printf("zoned=false: one span; refusals: EINVAL, unchanged\n");
}

int
main(void)
{
  test_zoned();
  test_clamps();
  test_plain_and_refusals();
  return check_done("geometry_test");
}
