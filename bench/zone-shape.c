/* bench/zone-shape: the cost of a non-power-of-2 zone size in the zone
 * engine itself, without NBD, threads or data copies in the way.
 *
 * Devices with memory_backed=false keep no data, so znbd_dev_write() is
 * pure zone arithmetic and state: the zone lookup (a shift for
 * power-of-2 zone sizes, one division otherwise), the write-pointer
 * checks and the condition transitions.  Each round writes every zone of
 * a 64 GiB device sequentially in 4 KiB writes, then resets all, for a
 * po2 (64 MiB) and an npo2 (96 MiB) device in turn; rounds interleave
 * and the table gives the median ns per write with min-max and the
 * npo2/po2 ratio (the target: po2 and npo2 within 2 %).
 *
 * Usage: zone-shape [ROUNDS]   (default 7)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "znbd/dev.h"
#include "znbd/params.h"
#include "dev_unfenced.h"

#define DEV_SIZE "64G"
#define BS 4096

static struct znbd_dev *
make_dev(const char *zone_size)
{
  struct znbd_params p;
  char err[256];
  struct znbd_dev *d;

  znbd_params_init(&p);
  if (znbd_params_set(&p, "size", DEV_SIZE, err, sizeof err) ||
      znbd_params_set(&p, "zone_size", zone_size, err, sizeof err) ||
      znbd_params_set(&p, "memory_backed", "false", err, sizeof err) ||
      znbd_params_finish(&p, err, sizeof err) ||
      !(d = znbd_dev_new(&p, err, sizeof err))) {
    fprintf(stderr, "zone-shape: %s\n", err);
    exit(EXIT_FAILURE);
  }
  znbd_params_free(&p);
  return d;
}

/* One pass: every byte of the device written once, in order; ns/write. */
static double
pass(struct znbd_dev *d)
{
  static char buf[BS];
  uint64_t size = znbd_dev_size(d), n = size / BS;
  struct timespec a, b;

  clock_gettime(CLOCK_MONOTONIC, &a);
  for (uint64_t off = 0; off < size; off += BS)
    if (znbd_dev_write(d, buf, BS, off, 0) < 0) {
      perror("zone-shape: write");
      exit(EXIT_FAILURE);
    }
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (znbd_dev_zone_op(d, ZNBD_ZONE_OP_RESET, ZNBD_ALL_ZONES) < 0) {
    perror("zone-shape: reset-all");
    exit(EXIT_FAILURE);
  }
  return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
}

static int
cmp(const void *x, const void *y)
{
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int
main(int argc, char **argv)
{
  int rounds = argc > 1 ? atoi(argv[1]) : 7;
  if (rounds < 1 || rounds > 100)
    rounds = 7;
  struct znbd_dev *po2 = make_dev("64M"), *npo2 = make_dev("96M");
  double t[2][100];

  pass(po2); /* warm up page tables and caches */
  pass(npo2);
  for (int r = 0; r < rounds; r++) {
    t[0][r] = pass(po2);
    t[1][r] = pass(npo2);
  }
  qsort(t[0], rounds, sizeof(double), cmp);
  qsort(t[1], rounds, sizeof(double), cmp);
  printf("| zone size | ns per 4 KiB write, median (min-max) | x po2 |\n");
  printf("|---|---|---|\n");
  printf("| 64 MiB (po2) | %.1f (%.1f-%.1f) | 1.000 |\n", t[0][rounds / 2],
         t[0][0], t[0][rounds - 1]);
  printf("| 96 MiB (npo2) | %.1f (%.1f-%.1f) | %.3f |\n", t[1][rounds / 2],
         t[1][0], t[1][rounds - 1], t[1][rounds / 2] / t[0][rounds / 2]);
  printf("\n%d interleaved rounds of %s / 4 KiB writes each, "
         "memory_backed=false (zone engine only)\n",
         rounds, DEV_SIZE);
  znbd_dev_free(po2);
  znbd_dev_free(npo2);
  return 0;
}
