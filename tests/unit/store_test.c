/* Unit test of lib/store_ram.c: allocate on first write only, zero reads
 * without allocating, exact partial-page zeroing, whole-page freeing (also
 * in RSS), exact accounting, extents runs, memory_backed=false, a 1 TiB
 * store, concurrent writers/zeroers with every byte verified, zone
 * resets that free lazily yet never let old bytes show, and the zone calls
 * of a store without zone hooks. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "check.h"

#define PS ZNBD_STORE_PAGE_SIZE

static int
all_bytes(const uint8_t *b, size_t n, uint8_t v)
{
  for (size_t i = 0; i < n; i++)
    if (b[i] != v)
      return 0;
  return 1;
}

struct run {
  uint64_t off, len;
  bool alloc;
};
struct runs {
  struct run r[64];
  int n;
  int stop_at; /* return 7 from this call index (or -1) */
};

static int
collect(void *opaque, uint64_t off, uint64_t len, bool alloc)
{
  struct runs *rs = opaque;
  if (rs->n == rs->stop_at)
    return 7;
  if (rs->n < 64)
    rs->r[rs->n] = (struct run){off, len, alloc};
  rs->n++;
  return 0;
}

/* AddressSanitizer keeps one shadow byte per 8 bytes of memory that
 * instrumented code touches, and its memcpy interceptor touches the
 * store's pages' shadow: 64 MiB written costs 8 MiB of shadow besides
 * the pages (measured on this test: +73,736 KiB in the sanitizer build,
 * +65,536 KiB without).  The RSS bound counts it where it is there. */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN_SHADOW(bytes) ((bytes) / 8)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_SHADOW(bytes) ((bytes) / 8)
#endif
#endif
#ifndef ASAN_SHADOW
#define ASAN_SHADOW(bytes) 0
#endif

static uint64_t
rss_bytes(void)
{
  long pages_total, pages_res;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  if (fscanf(f, "%ld %ld", &pages_total, &pages_res) != 2)
    pages_res = 0;
  fclose(f);
  return (uint64_t)pages_res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void
test_basic(void)
{
  errno = 0;
  CHECK(znbd_store_new(0, true) == NULL && errno == EINVAL);

  struct znbd_store *s = znbd_store_new(64 * PS, true);
  CHECK(s != NULL);
  CHECK_EQ(znbd_store_allocated(s), 0);

  /* Reads of never-written pages: zeros, nothing allocated. */
  uint8_t *buf = malloc(64 * PS);
  memset(buf, 0x5a, 64 * PS);
  znbd_store_read(s, buf, 64 * PS, 0);
  CHECK(all_bytes(buf, 64 * PS, 0));
  CHECK_EQ(znbd_store_allocated(s), 0);

  /* A 10-byte write straddling pages 0 and 1 allocates exactly both. */
  CHECK_EQ(znbd_store_write(s, "0123456789", 10, PS - 5), 0);
  CHECK_EQ(znbd_store_allocated(s), 2 * PS);
  znbd_store_read(s, buf, 2 * PS, 0);
  CHECK(all_bytes(buf, PS - 5, 0));
  CHECK(memcmp(buf + PS - 5, "0123456789", 10) == 0);
  CHECK(all_bytes(buf + PS + 5, PS - 5, 0));

  /* Rewriting allocated pages allocates nothing more. */
  CHECK_EQ(znbd_store_write(s, "abc", 3, 100), 0);
  CHECK_EQ(znbd_store_allocated(s), 2 * PS);

  /* Pages 2..4 full of 0xAA; a partial zero inside page 2 zeroes exactly
   * those bytes and frees nothing. */
  memset(buf, 0xaa, 3 * PS);
  CHECK_EQ(znbd_store_write(s, buf, 3 * PS, 2 * PS), 0);
  CHECK_EQ(znbd_store_allocated(s), 5 * PS);
  znbd_store_zero(s, 50, 2 * PS + 100, 0);
  CHECK_EQ(znbd_store_allocated(s), 5 * PS);
  znbd_store_read(s, buf, 3 * PS, 2 * PS);
  CHECK(all_bytes(buf, 100, 0xaa));
  CHECK(all_bytes(buf + 100, 50, 0));
  CHECK(all_bytes(buf + 150, 3 * PS - 150, 0xaa));

  /* Zero [page2+4000, page4+10): page 3 freed whole, the partial ends
   * zeroed, the neighbour bytes intact. */
  znbd_store_zero(s, 2 * PS + 10 - 4000, 2 * PS + 4000, 0);
  CHECK_EQ(znbd_store_allocated(s), 4 * PS);
  znbd_store_read(s, buf, 3 * PS, 2 * PS);
  CHECK(all_bytes(buf, 100, 0xaa));
  CHECK(all_bytes(buf + 150, 4000 - 150, 0xaa));
  CHECK(all_bytes(buf + 4000, PS - 4000 + PS + 10, 0));
  CHECK(all_bytes(buf + 2 * PS + 10, PS - 10, 0xaa));

  /* A partial zero of a never-written page allocates nothing. */
  znbd_store_zero(s, 100, 10 * PS + 8, 0);
  CHECK_EQ(znbd_store_allocated(s), 4 * PS);

  /* Zeroes spanning two partial pages and no whole one. */
  znbd_store_zero(s, 20, PS - 10, 0);
  znbd_store_read(s, buf, 2 * PS, 0);
  CHECK(memcmp(buf + 100, "abc", 3) == 0);
  CHECK(all_bytes(buf + PS - 10, 20, 0));
  CHECK_EQ(znbd_store_allocated(s), 4 * PS);

  /* Zeroing everything frees everything. */
  znbd_store_zero(s, 64 * PS, 0, 0);
  CHECK_EQ(znbd_store_allocated(s), 0);
  memset(buf, 1, 64 * PS);
  znbd_store_read(s, buf, 64 * PS, 0);
  CHECK(all_bytes(buf, 64 * PS, 0));
  free(buf);
  znbd_store_free(s);
  znbd_store_free(NULL);
  printf("basic: first-write allocation, zero reads, partial/whole zero\n");
}

static void
test_extents(void)
{
  struct znbd_store *s = znbd_store_new(200 * PS, true);
  uint8_t page[PS];
  memset(page, 1, PS);
  znbd_store_write(s, page, PS, 1 * PS);
  znbd_store_write(s, page, PS, 2 * PS);
  znbd_store_write(s, page, PS, 5 * PS);
  /* A run crossing a bitmap word boundary (pages 63..65). */
  for (int p = 63; p <= 65; p++)
    znbd_store_write(s, page, PS, (uint64_t)p * PS);

  struct runs rs = {.n = 0, .stop_at = -1};
  CHECK_EQ(znbd_store_extents(s, 0, 8 * PS, collect, &rs), 0);
  CHECK_EQ(rs.n, 5);
  struct run want[] = {{0, PS, false},
                       {PS, 2 * PS, true},
                       {3 * PS, 2 * PS, false},
                       {5 * PS, PS, true},
                       {6 * PS, 2 * PS, false}};
  for (int i = 0; i < 5 && i < rs.n; i++) {
    CHECK_EQ(rs.r[i].off, want[i].off);
    CHECK_EQ(rs.r[i].len, want[i].len);
    CHECK_EQ(rs.r[i].alloc, want[i].alloc);
  }

  /* Clipped to an unaligned range. */
  rs = (struct runs){.n = 0, .stop_at = -1};
  znbd_store_extents(s, 100, 5000, collect, &rs);
  CHECK_EQ(rs.n, 2);
  CHECK(rs.r[0].off == 100 && rs.r[0].len == PS - 100 && !rs.r[0].alloc);
  CHECK(rs.r[1].off == PS && rs.r[1].len == 1004 && rs.r[1].alloc);

  /* Word boundaries and the tail of the store. */
  rs = (struct runs){.n = 0, .stop_at = -1};
  znbd_store_extents(s, 60 * PS, 140 * PS, collect, &rs);
  CHECK_EQ(rs.n, 3);
  CHECK(rs.r[0].off == 60 * PS && rs.r[0].len == 3 * PS && !rs.r[0].alloc);
  CHECK(rs.r[1].off == 63 * PS && rs.r[1].len == 3 * PS && rs.r[1].alloc);
  CHECK(rs.r[2].off == 66 * PS && rs.r[2].len == 134 * PS && !rs.r[2].alloc);

  /* The callback's first non-zero result stops the walk. */
  rs = (struct runs){.n = 0, .stop_at = 1};
  CHECK_EQ(znbd_store_extents(s, 0, 8 * PS, collect, &rs), 7);
  CHECK_EQ(rs.n, 1);
  znbd_store_free(s);
  printf("extents: runs, clipping, word boundaries, early stop\n");
}

static void
test_short_last_page(void)
{
  uint64_t size = 3 * PS + 512;
  struct znbd_store *s = znbd_store_new(size, true);
  uint8_t b[512];
  memset(b, 0x77, sizeof b);
  CHECK_EQ(znbd_store_write(s, b, 512, 3 * PS), 0);
  CHECK_EQ(znbd_store_allocated(s), PS);
  memset(b, 0, sizeof b);
  znbd_store_read(s, b, 512, 3 * PS);
  CHECK(all_bytes(b, 512, 0x77));
  /* Reaching the end of the store covers the short last page whole. */
  znbd_store_zero(s, 512, 3 * PS, 0);
  CHECK_EQ(znbd_store_allocated(s), 0);
  znbd_store_read(s, b, 512, 3 * PS);
  CHECK(all_bytes(b, 512, 0));
  znbd_store_free(s);
  printf("short last page: allocated and freed whole\n");
}

static void
test_not_backed(void)
{
  struct znbd_store *s = znbd_store_new(1 << 20, false);
  CHECK(s != NULL);
  uint8_t b[PS];
  memset(b, 0x33, PS);
  CHECK_EQ(znbd_store_write(s, b, PS, 0), 0);
  CHECK_EQ(znbd_store_allocated(s), 0);
  znbd_store_read(s, b, PS, 0);
  CHECK(all_bytes(b, PS, 0));
  struct runs rs = {.n = 0, .stop_at = -1};
  znbd_store_extents(s, 0, 1 << 20, collect, &rs);
  CHECK(rs.n == 1 && rs.r[0].len == (1 << 20) && !rs.r[0].alloc);
  znbd_store_zero(s, PS, 0, 0);
  znbd_store_free(s);
  printf("memory_backed=false: writes dropped, reads zero\n");
}

static void
test_huge_and_rss(void)
{
  /* 1 TiB starts instantly with tiny RSS. */
  uint64_t rss0 = rss_bytes();
  uint64_t tib = UINT64_C(1) << 40;
  struct znbd_store *s = znbd_store_new(tib, true);
  CHECK(s != NULL);
  if (!s)
    return;
  CHECK_EQ(znbd_store_write(s, "end", 3, tib - 3), 0);
  CHECK_EQ(znbd_store_allocated(s), PS);
  char b[3] = {0};
  znbd_store_read(s, b, 3, tib - 3);
  CHECK(memcmp(b, "end", 3) == 0);
  struct runs rs = {.n = 0, .stop_at = -1};
  znbd_store_extents(s, 0, tib, collect, &rs);
  CHECK_EQ(rs.n, 2);
  CHECK(rs.r[0].len == tib - PS && !rs.r[0].alloc && rs.r[1].alloc);

  /* RSS follows the data: +64 MiB written, back down when zeroed. */
  size_t chunk = 1 << 20;
  uint8_t *buf = malloc(chunk);
  memset(buf, 0xc3, chunk);
  uint64_t before = rss_bytes();
  for (uint64_t off = 0; off < (64u << 20); off += chunk)
    znbd_store_write(s, buf, chunk, (UINT64_C(1) << 30) + off);
  uint64_t after = rss_bytes();
  CHECK_EQ(znbd_store_allocated(s), PS + (64u << 20));
  /* 64 MiB of pages, 8 MiB of margin (page tables, the allocator), and
   * the sanitizer's shadow of what was written. */
  uint64_t bound = (72u << 20) + ASAN_SHADOW(64u << 20);
  CHECKF(after - before >= (60u << 20) && after - before <= bound,
         "RSS +%" PRIu64 " KiB after 64 MiB written, bound %" PRIu64 " KiB",
         (after - before) >> 10, bound >> 10);
  znbd_store_zero(s, tib, 0, 0);
  uint64_t trimmed = rss_bytes();
  CHECK_EQ(znbd_store_allocated(s), 0);
  CHECK(after - trimmed >= (60u << 20));
  printf("1 TiB store: RSS at start +%" PRIu64 " KiB, +%" PRIu64
         " KiB after 64 MiB written, -%" PRIu64 " KiB after zeroing\n",
         (before - rss0) >> 10, (after - before) >> 10,
         (after - trimmed) >> 10);
  free(buf);
  znbd_store_free(s);
}

/* Concurrent writers.  NT threads; region A: page p belongs to thread
 * p % NT (interleaved pages); region B: 512-byte sector q of every page
 * belongs to thread q % NT (threads share pages and bitmap words).  Each
 * thread then zeroes half of its region-A pages whole.  Afterwards every
 * byte is verified and the allocation count must be exact. */
#define NT 6
#define PAGES_A 3000
#define PAGES_B 200
struct worker {
  struct znbd_store *s;
  int t;
};

static uint8_t
pattern(uint64_t off, int t)
{
  return (uint8_t)((off >> 9) * 31 + (unsigned)t * 7 + 1);
}

static void *
writer(void *arg)
{
  struct worker *w = arg;
  uint8_t page[PS];
  for (int round = 0; round < 2; round++) {
    for (uint64_t p = (uint64_t)w->t; p < PAGES_A; p += NT) {
      uint64_t off = p * PS;
      for (int i = 0; i < PS; i++)
        page[i] = pattern(off + (uint64_t)i, w->t);
      znbd_store_write(w->s, page, PS, off);
    }
    for (uint64_t q = (uint64_t)w->t; q < PAGES_B * (PS / 512); q += NT) {
      uint64_t off = PAGES_A * PS + q * 512;
      for (int i = 0; i < 512; i++)
        page[i] = pattern(off + (uint64_t)i, w->t);
      znbd_store_write(w->s, page, 512, off);
    }
  }
  /* Free every other own page of region A. */
  for (uint64_t p = (uint64_t)w->t; p < PAGES_A; p += 2 * NT)
    znbd_store_zero(w->s, PS, p * PS, 0);
  return NULL;
}

static void
test_concurrent(void)
{
  uint64_t size = (PAGES_A + PAGES_B) * (uint64_t)PS;
  struct znbd_store *s = znbd_store_new(size, true);
  pthread_t th[NT];
  struct worker w[NT];
  for (int t = 0; t < NT; t++) {
    w[t] = (struct worker){s, t};
    pthread_create(&th[t], NULL, writer, &w[t]);
  }
  for (int t = 0; t < NT; t++)
    pthread_join(th[t], NULL);

  uint8_t *buf = malloc(size);
  znbd_store_read(s, buf, size, 0);
  uint64_t bad = 0, freed = 0;
  for (uint64_t p = 0; p < PAGES_A; p++) {
    int t = (int)(p % NT);
    bool is_freed = (p / NT) % 2 == 0;
    freed += is_freed;
    for (uint64_t i = 0; i < PS; i++) {
      uint64_t off = p * PS + i;
      uint8_t want = is_freed ? 0 : pattern(off, t);
      bad += buf[off] != want;
    }
  }
  for (uint64_t q = 0; q < PAGES_B * (PS / 512); q++) {
    uint64_t off = PAGES_A * PS + q * 512;
    for (uint64_t i = 0; i < 512; i++)
      bad += buf[off + i] != pattern(off + i, (int)(q % NT));
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(znbd_store_allocated(s), (PAGES_A - freed + PAGES_B) * PS);
  printf("concurrent: %d threads, %d pages interleaved (%" PRIu64
         " freed), %d pages shared by sector, every byte verified\n",
         NT, PAGES_A, freed, PAGES_B);
  free(buf);
  znbd_store_free(s);
}

/* znbd_store_ref: in-place bytes only for wholly allocated ranges; holes,
 * partly allocated ranges, length 0 and memory_backed=false give NULL;
 * the bytes follow later writes and trims (what a zero-copy send sees). */
static void
test_ref(void)
{
  struct znbd_store *s = znbd_store_new(16 * PS, true);
  static uint8_t buf[4 * PS];
  const uint8_t *p;

  CHECK(znbd_store_ref(s, PS, 0) == NULL); /* hole */
  memset(buf, 0x5a, sizeof buf);
  CHECK_EQ(znbd_store_write(s, buf, 2 * PS, PS), 0);
  p = znbd_store_ref(s, 2 * PS, PS);
  CHECK(p != NULL && all_bytes(p, 2 * PS, 0x5a));
  p = znbd_store_ref(s, 100, PS + 4000); /* inside, across a page edge */
  CHECK(p != NULL && all_bytes(p, 100, 0x5a));
  CHECK(znbd_store_ref(s, 3 * PS, PS) == NULL); /* runs into a hole */
  CHECK(znbd_store_ref(s, 2 * PS, 0) == NULL);  /* starts in a hole */
  CHECK(znbd_store_ref(s, 0, PS) == NULL);      /* nothing asked */
  CHECK_EQ(znbd_store_allocated(s), 2 * PS);    /* refs allocate nothing */
  p = znbd_store_ref(s, PS, PS);
  CHECK_EQ(znbd_store_write(s, "xyz", 3, PS + 10), 0);
  CHECK(memcmp(p + 10, "xyz", 3) == 0);
  znbd_store_zero(s, PS, PS, 0); /* the page goes: its bytes read zeros */
  CHECK(all_bytes(p, PS, 0));
  CHECK(znbd_store_ref(s, PS, PS) == NULL);
  znbd_store_free(s);

  s = znbd_store_new(16 * PS, false);
  CHECK_EQ(znbd_store_write(s, buf, PS, 0), 0);
  CHECK(znbd_store_ref(s, PS, 0) == NULL);
  znbd_store_free(s);
  printf("ref: in-place only for allocated ranges, follows writes and trims\n");
}

/* znbd_store_ram_limit: a write needing pages beyond the limit fails
 * with ENOSPC and changes nothing; the count stays exact; freeing makes
 * room; an allocating zero is refused whole. */
static void
test_limit(void)
{
  struct znbd_store *s = znbd_store_new(16 * PS, true);
  uint8_t a[2 * PS], b[2 * PS];
  memset(a, 0xa5, sizeof a);
  CHECK(!znbd_store_write_may_fail(s));
  znbd_store_ram_limit(s, 4 * PS + 100); /* whole pages: 4 */
  CHECK(znbd_store_write_may_fail(s));
  CHECK(znbd_store_write(s, a, 2 * PS, 0) == 0);
  CHECK(znbd_store_write(s, a, 2 * PS, 4 * PS) == 0);
  CHECK_EQ(znbd_store_allocated(s), 4 * PS);
  errno = 0;
  CHECK(znbd_store_write(s, a, 2 * PS, PS) == -1 && errno == ENOSPC);
  CHECK(znbd_store_read(s, b, 2 * PS, PS) == 0);
  CHECK(memcmp(b, a, PS) == 0); /* page 1 held, page 2 untouched */
  CHECK(b[PS] == 0 && b[2 * PS - 1] == 0);
  errno = 0;
  CHECK(znbd_store_zero(s, 2 * PS, 8 * PS, ZNBD_STORE_ZERO_ALLOCATE) == -1 &&
        errno == ENOSPC);
  CHECK_EQ(znbd_store_allocated(s), 4 * PS);
  CHECK(znbd_store_write(s, a, PS, 0) == 0); /* overwrite: no new page */
  CHECK(znbd_store_zero(s, 2 * PS, 4 * PS, 0) == 0);
  CHECK_EQ(znbd_store_allocated(s), 2 * PS);
  CHECK(znbd_store_write(s, a, 2 * PS, PS) == 0); /* room again */
  CHECK_EQ(znbd_store_allocated(s), 3 * PS);
  znbd_store_free(s);
}

/* Zone reset frees lazily (MADV_FREE, lib/store_ram.c): the old bytes may
 * stay in the mapping, so every way of writing into a reset page must
 * still read back as zeros plus exactly what was written.  Whole-page
 * rewrites, a sector into a page, sectors written by threads racing on
 * one page, a write straddling two reset pages, WRITE_ZEROES keeping
 * allocation, and pages outside the zone untouched. */
#define LZ_PAGES 16
#define LZ_THREADS 8
struct sector_writer {
  struct znbd_store *s;
  uint64_t page;
  int t;
};

static void *
sector_writer(void *arg)
{
  struct sector_writer *w = arg;
  uint8_t b[512];
  memset(b, 0x40 + w->t, sizeof b);
  znbd_store_write(w->s, b, sizeof b, w->page * PS + (uint64_t)w->t * 512);
  return NULL;
}

static void
test_lazy_reset(void)
{
  struct znbd_store *s = znbd_store_new(LZ_PAGES * PS, true);
  CHECK(s != NULL);
  if (!s)
    return;
  static uint8_t full[LZ_PAGES * PS], buf[LZ_PAGES * PS];
  uint64_t zone = 8 * PS; /* "zone" 0: pages 0-7 */
  uint64_t bad = 0;

  for (int round = 0; round < 50; round++) {
    memset(full, 0xab, sizeof full);
    CHECK_EQ(znbd_store_write(s, full, sizeof full, 0), 0);
    CHECK_EQ(znbd_store_zone_reset(s, 0, 0, zone, false), 0);
    CHECK_EQ(znbd_store_allocated(s), (LZ_PAGES - 8) * PS);

    /* Page 0 rewritten whole; page 1 gets one sector at 1 KiB; pages
     * 2 and 3 get 1 KiB straddling their boundary; page 4 its sectors
     * from LZ_THREADS threads at once; page 5 WRITE_ZEROES (allocated)
     * over its second half; pages 6 and 7 stay reset. */
    uint8_t p0[PS], sec[1024];
    memset(p0, 0x5a, sizeof p0);
    memset(sec, 0x11, sizeof sec);
    CHECK_EQ(znbd_store_write(s, p0, PS, 0), 0);
    CHECK_EQ(znbd_store_write(s, sec, 512, PS + 1024), 0);
    CHECK_EQ(znbd_store_write(s, sec, 1024, 3 * PS - 512), 0);
    pthread_t th[LZ_THREADS];
    struct sector_writer w[LZ_THREADS];
    for (int t = 0; t < LZ_THREADS; t++) {
      w[t] = (struct sector_writer){s, 4, t};
      pthread_create(&th[t], NULL, sector_writer, &w[t]);
    }
    for (int t = 0; t < LZ_THREADS; t++)
      pthread_join(th[t], NULL);
    CHECK_EQ(
        znbd_store_zero(s, PS / 2, 5 * PS + PS / 2, ZNBD_STORE_ZERO_ALLOCATE),
        0);

    memset(full, 0, 8 * PS); /* what the zone must read as */
    memset(full, 0x5a, PS);
    memset(full + PS + 1024, 0x11, 512);
    memset(full + 3 * PS - 512, 0x11, 1024);
    for (int t = 0; t < LZ_THREADS; t++)
      memset(full + 4 * PS + t * 512, 0x40 + t, 512);
    CHECK_EQ(znbd_store_read(s, buf, sizeof buf, 0), 0);
    for (size_t i = 0; i < sizeof buf; i++)
      bad += buf[i] != full[i];
    /* Pages 0-5 written, 6-7 not, 8-15 never reset. */
    CHECK_EQ(znbd_store_allocated(s), (LZ_PAGES - 2) * PS);
  }
  CHECK_EQ(bad, 0);
  printf("lazy zone reset: 50 rounds of 8 reset pages rewritten whole, by a "
         "sector, across a page end, by %d racing threads and by "
         "WRITE_ZEROES; every byte verified\n",
         LZ_THREADS);
  znbd_store_free(s);
}

/* The RAM store has no zone or persistence hooks: the zone calls fall
 * back to zero() over the bytes they name (finish: from the old wp to the
 * zone end; truncate: past SIZE; reset: all), opening and faulting a zone
 * do nothing. */
static void
test_zone_calls(void)
{
  struct znbd_store *s = znbd_store_new(8 * PS, true);
  CHECK(s != NULL);
  if (!s)
    return;
  CHECK(s->ops->zones == NULL);
  CHECK(s->ops->persist == NULL);
  static uint8_t full[8 * PS], buf[8 * PS];
  memset(full, 0xcd, sizeof full);
  CHECK_EQ(znbd_store_write(s, full, sizeof full, 0), 0);

  CHECK_EQ(znbd_store_zone_finish(s, 1, 2 * PS + 100, 4 * PS), 0);
  memset(full + 2 * PS + 100, 0, 2 * PS - 100);
  CHECK_EQ(znbd_store_allocated(s), 7 * PS); /* page 3 freed whole */
  CHECK_EQ(znbd_store_zone_truncate(s, 2, 4 * PS, 4 * PS, 4 * PS), 0);
  CHECK_EQ(znbd_store_zone_truncate(s, 2, 4 * PS, 4 * PS, PS + 512), 0);
  memset(full + 5 * PS + 512, 0, 3 * PS - 512);
  CHECK_EQ(znbd_store_allocated(s), 5 * PS); /* pages 6, 7 too */
  CHECK_EQ(znbd_store_zone_reset(s, 0, 0, 2 * PS, true), 0);
  memset(full, 0, 2 * PS);
  CHECK_EQ(znbd_store_allocated(s), 3 * PS);
  znbd_store_zone_open(s, 0);
  CHECK_EQ(znbd_store_zone_fault(s, 0, 4), 0);
  CHECK_EQ(znbd_store_read(s, buf, sizeof buf, 0), 0);
  CHECK(memcmp(buf, full, sizeof buf) == 0);
  znbd_store_free(s);
}

int
main(void)
{
  test_basic();
  test_extents();
  test_short_last_page();
  test_not_backed();
  test_ref();
  test_huge_and_rss();
  test_concurrent();
  test_limit();
  test_lazy_reset();
  test_zone_calls();
  return check_done("store_test");
}
