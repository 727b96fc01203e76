/* znbd: fault and timing injection state (lib/faults.h).
 *
 * Bad blocks follow null_blk (drivers/block/null_blk/main.c,
 * null_handle_badblocks(), and block/badblocks.c): a list of bad 512-byte
 * sectors edited at run time; a request touching one fails.  The list is
 * a sorted array of disjoint ranges under a mutex, and an atomic count so
 * that the I/O path takes no lock while the list is empty.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "faults.h"
#include "znbd/params.h"
#include "err.h"

void
znbd_faults_init(struct znbd_faults *f, uint64_t nr_sectors, uint64_t mbps)
{
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->lock, NULL);
  f->nr_sectors = nr_sectors;
  f->mbps = mbps;
}

void
znbd_faults_destroy(struct znbd_faults *f)
{
  free(f->bb);
  f->bb = NULL;
  pthread_mutex_destroy(&f->lock);
}

/* Parse one "A" or "A-B" (decimal sectors, A <= B) ending at ',' or NUL. */
static int
parse_range(const char **sp, uint64_t *a, uint64_t *b)
{
  const char *s = *sp;
  char *end;
  if (*s < '0' || *s > '9')
    return -1;
  errno = 0;
  *a = strtoull(s, &end, 10);
  if (errno)
    return -1;
  *b = *a;
  if (*end == '-') {
    s = end + 1;
    if (*s < '0' || *s > '9')
      return -1;
    *b = strtoull(s, &end, 10);
    if (errno || *b < *a)
      return -1;
  }
  if (*end != ',' && *end != '\0')
    return -1;
  *sp = *end == ',' ? end + 1 : end;
  return 0;
}

int
znbd_parse_sector_list(const char *s, uint64_t nr_sectors,
                       int (*fn)(void *opaque, uint64_t first, uint64_t last),
                       void *opaque)
{
  uint64_t a, b;
  if (!s || !*s) {
    errno = EINVAL;
    return -1;
  }
  /* The whole list is checked before FN is called once. */
  for (int pass = 0; pass < 2; pass++) {
    for (const char *q = s; *q;) {
      if (parse_range(&q, &a, &b) < 0 || b >= nr_sectors) {
        errno = EINVAL;
        return -1;
      }
      int r = pass == 1 && fn ? fn(opaque, a, b) : 0;
      if (r)
        return r;
    }
  }
  return 0;
}

/* Add [A, B) to the sorted array R (N ranges, CAP room; grown as
 * needed), merging neighbours.  -1 ENOMEM. */
static int
range_add(struct znbd_bb_range **r, uint32_t *n, uint32_t *cap, uint64_t a,
          uint64_t b)
{
  uint32_t i = 0, j;
  while (i < *n && (*r)[i].end < a)
    i++;
  j = i;
  while (j < *n && (*r)[j].start <= b) {
    if ((*r)[j].start < a)
      a = (*r)[j].start;
    if ((*r)[j].end > b)
      b = (*r)[j].end;
    j++;
  }
  /* [i, j) merge into one. */
  if (i == j) {
    if (*n == *cap) {
      uint32_t c = *cap ? 2 * *cap : 8;
      struct znbd_bb_range *p = realloc(*r, c * sizeof *p);
      if (!p) {
        errno = ENOMEM;
        return -1;
      }
      *r = p;
      *cap = c;
    }
    memmove(&(*r)[i + 1], &(*r)[i], (*n - i) * sizeof **r);
    (*n)++;
  } else {
    memmove(&(*r)[i + 1], &(*r)[j], (*n - j) * sizeof **r);
    *n -= j - i - 1;
  }
  (*r)[i] = (struct znbd_bb_range){a, b};
  return 0;
}

/* Remove [A, B) from R; a range may split in two (-1 ENOMEM then). */
static int
range_del(struct znbd_bb_range **r, uint32_t *n, uint32_t *cap, uint64_t a,
          uint64_t b)
{
  for (uint32_t i = 0; i < *n; i++) {
    struct znbd_bb_range x = (*r)[i];
    if (x.end <= a || x.start >= b)
      continue;
    if (x.start < a && x.end > b) { /* split */
      (*r)[i].end = a;
      return range_add(r, n, cap, b, x.end);
    }
    if (x.start < a) {
      (*r)[i].end = a;
    } else if (x.end > b) {
      (*r)[i].start = b;
    } else {
      memmove(&(*r)[i], &(*r)[i + 1], (*n - i - 1) * sizeof **r);
      (*n)--;
      i--;
    }
  }
  return 0;
}

struct edit {
  struct znbd_bb_range *r;
  uint32_t n, cap;
  bool add;
};

static int
edit_one(void *opaque, uint64_t first, uint64_t last)
{
  struct edit *e = opaque;
  return e->add ? range_add(&e->r, &e->n, &e->cap, first, last + 1)
                : range_del(&e->r, &e->n, &e->cap, first, last + 1);
}

int
znbd_faults_bb_edit(struct znbd_faults *f, const char *list, bool add,
                    char *err, size_t errlen)
{
  if (znbd_parse_sector_list(list, f->nr_sectors, NULL, NULL) < 0) {
    set_err(err, errlen,
            "badblocks: '%s' is not a list of sectors below %" PRIu64
            " (512-byte sectors and inclusive ranges, e.g. 100-107,2048)",
            list, f->nr_sectors);
    errno = EINVAL;
    return -1;
  }
  pthread_mutex_lock(&f->lock);
  /* Work on a copy so that running out of memory half-way loses
   * nothing. */
  struct edit e = {.n = (uint32_t)atomic_load(&f->nr_bb), .add = add};
  e.cap = e.n + 8;
  e.r = malloc(e.cap * sizeof *e.r);
  int rc = -1;
  if (e.r) {
    if (e.n) /* f->bb is NULL while the list is empty */
      memcpy(e.r, f->bb, e.n * sizeof *e.r);
    rc = znbd_parse_sector_list(list, f->nr_sectors, edit_one, &e);
  }
  if (rc == 0) {
    free(f->bb);
    f->bb = e.r;
    f->bb_cap = e.cap;
    atomic_store(&f->nr_bb, e.n);
  } else {
    free(e.r);
    set_err(err, errlen, "badblocks: out of memory");
    errno = ENOMEM;
  }
  pthread_mutex_unlock(&f->lock);
  return rc;
}

bool
znbd_faults_bb_hit_slow(struct znbd_faults *f, uint64_t sector, uint64_t n,
                        bool once, uint64_t *first_bad)
{
  bool hit = false;
  pthread_mutex_lock(&f->lock);
  uint32_t nr = (uint32_t)atomic_load(&f->nr_bb);
  for (uint32_t i = 0; i < nr; i++) {
    struct znbd_bb_range x = f->bb[i];
    if (x.start >= sector + n)
      break;
    if (x.end <= sector)
      continue;
    hit = true;
    *first_bad = x.start;
    /* Counted under the lock: once a `badblocks del` returns, every
     * request that hit the old list is in bb_errors already. */
    atomic_fetch_add(&f->bb_errors, 1);
    if (once) { /* badblocks_clear() of the range found */
      memmove(&f->bb[i], &f->bb[i + 1], (nr - i - 1) * sizeof *f->bb);
      atomic_store(&f->nr_bb, nr - 1);
    }
    break;
  }
  pthread_mutex_unlock(&f->lock);
  return hit;
}

size_t
znbd_faults_bb_format(struct znbd_faults *f, char *buf, size_t len)
{
  size_t used = 0;
  if (len)
    buf[0] = '\0';
  pthread_mutex_lock(&f->lock);
  uint32_t nr = (uint32_t)atomic_load(&f->nr_bb);
  for (uint32_t i = 0; i < nr; i++) {
    char one[48];
    const struct znbd_bb_range *x = &f->bb[i];
    int k =
        x->end - x->start == 1
            ? snprintf(one, sizeof one, "%s%" PRIu64, i ? "," : "", x->start)
            : snprintf(one, sizeof one, "%s%" PRIu64 "-%" PRIu64, i ? "," : "",
                       x->start, x->end - 1);
    if (used + (size_t)k < len)
      memcpy(buf + used, one, (size_t)k + 1);
    used += (size_t)k;
  }
  pthread_mutex_unlock(&f->lock);
  return used;
}

uint64_t
znbd_faults_throttle(struct znbd_faults *f, uint64_t bytes)
{
  if (!f->mbps || !bytes)
    return 0;
  /* BYTES take bytes / (mbps MiB/s) on the link; they start when the
   * link is free (or now, whichever is later) and the request completes
   * when they have passed. */
  uint64_t cost =
      (uint64_t)((double)bytes * 1e9 / ((double)f->mbps * 1048576.0));
  uint64_t now = znbd_mono_ns();
  pthread_mutex_lock(&f->lock);
  uint64_t start = f->next_free > now ? f->next_free : now;
  f->next_free = start + cost;
  pthread_mutex_unlock(&f->lock);
  return start + cost - now;
}
