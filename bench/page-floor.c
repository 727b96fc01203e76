/* bench/page-floor: what a first write to a RAM-store page costs the
 * kernel, measured through the store itself (lib/store_ram.c), one thread,
 * no NBD in the way.
 *
 * Each round makes a fresh 1 GiB store, writes 4 KiB to 65536 distinct
 * pages in a random order (every write touches a never-written page: the
 * page fault allocates, clears and charges it), then writes the same
 * pages again in the same order (rewrite: the page is there).  The
 * difference is the per-page price of allocation on the hot path, which
 * no NBD server that keeps the data can avoid on a fresh disk.  run.sh
 * records it next to the fresh-write rows of part ram and report.py turns
 * it into a bound for those rows.  Then the store's zone-reset call over
 * the whole store, as zone management makes it (pages freed lazily,
 * lib/store_ram.c), and the same writes again; then the reset as NBD TRIM
 * makes it (pages freed at once), and the writes again: the first should
 * cost a rewrite, the second a first write.
 *
 * Prints one line per round and then, medians in ns per 4 KiB,
 *   page_floor_first_ns=N page_floor_rewrite_ns=N page_floor_reset_ns=N
 *   page_floor_trim_ns=N
 *
 * Usage: page-floor [ROUNDS]   (default 5)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "store.h"

#define STORE_SIZE (UINT64_C(1) << 30)
#define PAGES 65536
#define BS 4096

static double
now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

/* ns per write of BS bytes at each of the PAGES offsets in OFF. */
static double
pass(struct znbd_store *s, const uint64_t *off, const void *buf)
{
  double t0 = now_ns();
  for (unsigned i = 0; i < PAGES; i++)
    znbd_store_write(s, buf, BS, off[i]);
  return (now_ns() - t0) / PAGES;
}

static int
cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (rounds < 1 || rounds > 99) {
    fprintf(stderr, "usage: page-floor [ROUNDS 1-99]\n");
    return EXIT_FAILURE;
  }
  static uint64_t off[PAGES];
  static char buf[BS];
  double first[99], rewrite[99], reset[99], trim[99];
  uint64_t npages = STORE_SIZE / BS, x = 88172645463325252ULL;

  for (unsigned i = 0; i < BS; i++)
    buf[i] = (char)i;
  /* Distinct pages in a random order: a random permutation's prefix. */
  uint32_t *perm = malloc(npages * sizeof *perm);
  if (!perm) {
    perror("page-floor");
    return EXIT_FAILURE;
  }
  for (uint64_t i = 0; i < npages; i++)
    perm[i] = (uint32_t)i;
  for (unsigned i = 0; i < PAGES; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
    uint64_t j = i + x % (npages - i);
    uint32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
    off[i] = (uint64_t)perm[i] * BS;
  }
  free(perm);

  for (int r = 0; r < rounds; r++) {
    struct znbd_store *s = znbd_store_new(STORE_SIZE, true);
    if (!s) {
      perror("page-floor: store");
      return EXIT_FAILURE;
    }
    first[r] = pass(s, off, buf);
    rewrite[r] = pass(s, off, buf);
    znbd_store_zone_reset(s, 0, 0, STORE_SIZE, false);
    reset[r] = pass(s, off, buf);
    znbd_store_zone_reset(s, 0, 0, STORE_SIZE, true);
    trim[r] = pass(s, off, buf);
    znbd_store_free(s);
    printf("page-floor: round %d: first write %.0f ns, rewrite %.0f ns, "
           "after a zone reset %.0f ns, after a trim %.0f ns per 4 KiB page\n",
           r + 1, first[r], rewrite[r], reset[r], trim[r]);
  }
  qsort(first, (size_t)rounds, sizeof *first, cmp);
  qsort(rewrite, (size_t)rounds, sizeof *rewrite, cmp);
  qsort(reset, (size_t)rounds, sizeof *reset, cmp);
  qsort(trim, (size_t)rounds, sizeof *trim, cmp);
  printf("page_floor_first_ns=%.0f page_floor_rewrite_ns=%.0f "
         "page_floor_reset_ns=%.0f page_floor_trim_ns=%.0f\n",
         first[rounds / 2], rewrite[rounds / 2], reset[rounds / 2],
         trim[rounds / 2]);
  return 0;
}
