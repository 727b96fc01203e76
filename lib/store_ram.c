/* znbd: the sparse RAM store (lib/store.h, znbd_store_new).
 *
 * Design, and why:
 *
 * - The data lives in ONE anonymous mapping of the whole device size,
 *   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE.  Nothing is allocated up
 *   front: the kernel allocates a (zeroed) page in the page fault of the
 *   first write that touches it.  This is brd's allocate-on-first-write,
 *   except that the kernel's page-fault path does the allocation, so we
 *   take no lock of our own: writers on different pages never contend
 *   (nbdkit's memory plugin serialises allocation behind one mutex; the
 *   bench's RAM-disk rows compare the two).  NORESERVE lets a store larger
 *   than RAM + swap start (like brd, the memory is only needed when written).
 *
 * - madvise(MADV_NOHUGEPAGE) on the data: with transparent huge pages a
 *   single 4 KiB write could fault in a 2 MiB page, so RSS would no longer
 *   follow the data actually written.
 *
 * - An allocation bitmap, 1 bit per 4 KiB page, in its own NORESERVE
 *   mapping, so a 1 TiB store (32 MiB of bitmap) starts instantly and only
 *   the bitmap words actually used become resident.  Bits are set and
 *   cleared with atomic fetch_or / fetch_and on 64-bit words, and the old
 *   values they return keep an exact atomic count of allocated pages.
 *
 * - Invariant: a page whose bit is clear reads as zeros and its bytes in
 *   the mapping are zero (or not present).  Reads check the bitmap per page
 *   and memset zeros for clear pages WITHOUT touching the mapping, so reads
 *   never allocate.  Writes copy the data first and set the bit after
 *   (release), so a reader never sees a set bit before the data.
 *
 * - Zero/trim: pages covered whole get their bits cleared, then the run is
 *   given back with madvise(MADV_DONTNEED), which really drops RSS and
 *   makes the pages read as zeros again (anonymous private memory).  Only
 *   runs that had a bit set are madvised, so trimming an empty 1 TiB device
 *   is cheap.  Partial pages have exactly the requested bytes zeroed, and
 *   only if the page is allocated (a clear page is already zero).
 *
 * - Zone reset is the exception: its pages are given back LAZILY, with
 *   madvise(MADV_FREE), and marked in a second bitmap, "lazy".  The RAM
 *   store has no zone hooks (lib/store.h): a zone reset reaches it as a
 *   zero with ZNBD_STORE_ZERO_LAZY (znbd_store_zone_reset), as a finish
 *   or a power cut's truncation reaches it as a plain zero.  A zoned
 *   workload rewrites a zone right after resetting it; with MADV_DONTNEED
 *   every first write to a page after the reset took a page fault that
 *   allocated and zeroed a fresh page (bench/page-floor measures both:
 *   a 4 KiB write after a trim costs a first write, after a zone reset
 *   about a rewrite), while a lazily freed page that is written again before
 * the kernel takes it back costs nothing.  The kernel reclaims such pages when
 * it needs memory, without swap; until then they still count in RSS (LazyFree
 * in /proc/PID/smaps).  The allocation count drops at once. The price: a page
 * whose bit is clear but whose lazy bit is set may still hold old bytes.  Reads
 * never look (a clear bit reads zeros), and a write that covers such a page
 * whole overwrites it; a write that covers it in part first zeroes the page
 * (settle_page), under a lock so that two writers into different sectors of one
 * page cannot zero each other's data.  Only zone management resets do this (ZBC
 * RESET WRITE POINTER, the NBD and control-socket resets): the zone engine runs
 * them with no write to the zone in flight (lib/zone.c, wait_copies).  NBD
 * TRIM, a reset included, and WRITE_ZEROES keep MADV_DONTNEED: whoever trims
 * wants the memory back, and RSS follows.
 *
 * - Requests that overlap and run concurrently have no defined order (as
 *   in NBD); the store stays consistent (bit clear => zeros) except that a
 *   write racing a whole-page zero of the same page may leave its bit set
 *   over a dropped (zero) page: it then reads zero and is counted as
 *   allocated until it is written or zeroed again.
 *
 * - Allocation failure: with NORESERVE the kernel cannot refuse a page
 *   fault with an error; when memory runs out the OOM killer acts instead.
 *   So the store keeps its own limit (max_memory, znbd_store_ram_limit):
 *   a write first reserves the pages it will allocate (those whose bit is
 *   clear) against the limit, fails with ENOSPC before touching anything
 *   when they do not fit, and drops the reservation once its bits are
 *   set.  The count of allocated pages stays exact; the reservation only
 *   makes concurrent writes near the limit conservative.
 *
 * - memory_backed=false: no mapping at all; writes are dropped, reads give
 *   zeros, nothing is ever allocated.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "store.h"

#define PAGE ((uint64_t)ZNBD_STORE_PAGE_SIZE)
#define WORD_BITS 64

struct ram_store {
  struct znbd_store base;
  uint64_t size;   /* bytes */
  uint64_t npages; /* ceil(size / PAGE) */
  bool memory_backed;
  uint8_t *data;             /* npages * PAGE bytes, or NULL */
  size_t data_len;           /* bytes mapped at data */
  _Atomic uint64_t *bits;    /* npages bits, or NULL */
  size_t bits_len;           /* bytes mapped at bits */
  _Atomic uint64_t nalloc;   /* pages whose bit is set */
  uint64_t limit;            /* pages at most (znbd_store_ram_limit) */
  _Atomic uint64_t reserved; /* pages of writes under way, when limited */
  _Atomic uint64_t *lazy;    /* npages bits: lazily freed (see above) */
  pthread_mutex_t lazy_lock; /* serialises settle_page's zeroing */
};

static void *
map_noreserve(size_t len)
{
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  /* Keep RSS proportional to what is written (see above).  Best effort:
   * kernels without THP refuse this with EINVAL, which is harmless. */
  (void)madvise(p, len, MADV_NOHUGEPAGE);
  return p;
}

static const struct znbd_store_ops ram_ops;

/* The store's free op; also a failure path's cleanup: leaves errno as it
 * found it (lib/err.h). */
static void
ram_free(struct znbd_store *base)
{
  struct ram_store *s = (struct ram_store *)base;
  int e = errno;
  if (s->data)
    munmap(s->data, s->data_len);
  if (s->bits)
    munmap((void *)s->bits, s->bits_len);
  if (s->lazy)
    munmap((void *)s->lazy, s->bits_len);
  pthread_mutex_destroy(&s->lazy_lock);
  free(s);
  errno = e;
}

struct znbd_store *
znbd_store_new(uint64_t size, bool memory_backed)
{
  if (size == 0) {
    errno = EINVAL;
    return NULL;
  }
  struct ram_store *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->base.ops = &ram_ops;
  s->size = size;
  s->npages = size / PAGE + (size % PAGE != 0);
  s->memory_backed = memory_backed;
  s->limit = UINT64_MAX;
  atomic_init(&s->nalloc, 0);
  atomic_init(&s->reserved, 0);
  pthread_mutex_init(&s->lazy_lock, NULL);
  if (!memory_backed)
    return &s->base;

  uint64_t nwords = (s->npages + WORD_BITS - 1) / WORD_BITS;
  if (s->npages > SIZE_MAX / PAGE || nwords > SIZE_MAX / 8) {
    free(s);
    errno = ENOMEM;
    return NULL;
  }
  s->data_len = (size_t)(s->npages * PAGE);
  s->bits_len = (size_t)(nwords * 8);
  s->data = map_noreserve(s->data_len);
  if (!s->data)
    goto fail;
  s->bits = map_noreserve(s->bits_len);
  if (!s->bits)
    goto fail;
  s->lazy = map_noreserve(s->bits_len);
  if (!s->lazy)
    goto fail;
  return &s->base;

fail:
  ram_free(&s->base);
  return NULL;
}

static inline bool
page_allocated(const struct ram_store *s, uint64_t page)
{
  uint64_t w =
      atomic_load_explicit(&s->bits[page / WORD_BITS], memory_order_acquire);
  return (w >> (page % WORD_BITS)) & 1;
}

/* Mask of bits [lo, hi) within one word, 0 <= lo < hi <= 64. */
static inline uint64_t
bit_mask(unsigned lo, unsigned hi)
{
  uint64_t m = hi == WORD_BITS ? ~UINT64_C(0) : (UINT64_C(1) << hi) - 1;
  return m & ~((UINT64_C(1) << lo) - 1);
}

/* First page in [page, end) whose allocation state differs from ALLOC,
 * or END.  Skips whole words at a time. */
static uint64_t
scan_run(const struct ram_store *s, uint64_t page, uint64_t end, bool alloc)
{
  while (page < end) {
    uint64_t wi = page / WORD_BITS;
    unsigned lo = page % WORD_BITS;
    uint64_t w = atomic_load_explicit(&s->bits[wi], memory_order_acquire);
    if (alloc)
      w = ~w;
    /* Bits set in w now mark pages in the other state. */
    w &= bit_mask(lo, WORD_BITS);
    if (w) {
      uint64_t p = wi * WORD_BITS + (unsigned)__builtin_ctzll(w);
      return p < end ? p : end;
    }
    page = (wi + 1) * WORD_BITS;
  }
  return end;
}

static int
ram_read(struct znbd_store *base, void *buf, uint64_t len, uint64_t off)
{
  struct ram_store *s = (struct ram_store *)base;
  uint8_t *out = buf;
  if (!s->memory_backed) {
    memset(out, 0, len);
    return 0;
  }
  uint64_t end = off + len;
  while (off < end) {
    uint64_t page = off / PAGE;
    bool alloc = page_allocated(s, page);
    /* Extend over following pages in the same state. */
    uint64_t last_page = (end - 1) / PAGE + 1;
    uint64_t run_end = scan_run(s, page + 1, last_page, alloc) * PAGE;
    if (run_end > end)
      run_end = end;
    uint64_t n = run_end - off;
    if (alloc)
      memcpy(out, s->data + off, n);
    else
      memset(out, 0, n); /* never touch the mapping: no allocation */
    out += n;
    off += n;
  }
  return 0;
}

static const void *
ram_ref(struct znbd_store *base, uint64_t len, uint64_t off)
{
  struct ram_store *s = (struct ram_store *)base;
  if (!s->memory_backed || len == 0)
    return NULL;
  uint64_t first = off / PAGE, last = (off + len - 1) / PAGE + 1;
  if (scan_run(s, first, last, true) < last) /* a hole in the range */
    return NULL;
  return s->data + off;
}

/* The bitmap word *WI holding page FIRST, and in *M the bits of pages
 * [FIRST, LAST) in it; returns the first page past them. */
static inline uint64_t
word_part(uint64_t first, uint64_t last, uint64_t *wi, uint64_t *m)
{
  *wi = first / WORD_BITS;
  unsigned lo = first % WORD_BITS;
  uint64_t hi64 = last - *wi * WORD_BITS;
  unsigned hi = hi64 > WORD_BITS ? WORD_BITS : (unsigned)hi64;
  *m = bit_mask(lo, hi);
  return *wi * WORD_BITS + hi;
}

/* Set the bits of pages [first, last) and count the newly set ones. */
static void
set_bits(struct ram_store *s, uint64_t first, uint64_t last)
{
  uint64_t added = 0, wi, m;
  while (first < last) {
    first = word_part(first, last, &wi, &m);
    /* Skip the atomic RMW when all bits are already set (rewrites). */
    uint64_t cur = atomic_load_explicit(&s->bits[wi], memory_order_relaxed);
    if ((cur & m) != m) {
      uint64_t old =
          atomic_fetch_or_explicit(&s->bits[wi], m, memory_order_release);
      added += (uint64_t)__builtin_popcountll(~old & m);
    }
  }
  if (added)
    atomic_fetch_add_explicit(&s->nalloc, added, memory_order_relaxed);
}

/* Before a write covers PAGE only in part: if it was lazily freed and not
 * written since, zero it, so the bytes the write leaves alone read as the
 * zeros they read as before.  Once per page: the first writer zeroes and
 * clears the lazy bit under the lock, later ones see it clear (acquire)
 * after the zeroing. */
static void
settle_page(struct ram_store *s, uint64_t page)
{
  _Atomic uint64_t *w = &s->lazy[page / WORD_BITS];
  uint64_t bit = UINT64_C(1) << (page % WORD_BITS);
  if (!(atomic_load_explicit(w, memory_order_acquire) & bit))
    return;
  pthread_mutex_lock(&s->lazy_lock);
  if (atomic_load_explicit(w, memory_order_relaxed) & bit) {
    if (!page_allocated(s, page))
      memset(s->data + page * PAGE, 0, PAGE);
    atomic_fetch_and_explicit(w, ~bit, memory_order_release);
  }
  pthread_mutex_unlock(&s->lazy_lock);
}

/* Store without checking the limit: BUF's bytes, or FILL's (BUF NULL). */
static int
put(struct ram_store *s, const void *buf, znbd_store_fill_fn fill, void *opaque,
    uint64_t len, uint64_t off)
{
  uint64_t end = off + len;
  if (off % PAGE)
    settle_page(s, off / PAGE);
  if (end % PAGE)
    settle_page(s, (end - 1) / PAGE);
  /* Data first, then the bits (release): a reader that sees the bit sees
   * the data.  The page fault of the first touch allocates the page.  A
   * failed FILL sets no bit: pages it allocated still read as zeros. */
  if (buf)
    memcpy(s->data + off, buf, len);
  else if (fill(opaque, s->data + off, len) < 0)
    return -1;
  set_bits(s, off / PAGE, (off + len - 1) / PAGE + 1);
  return 0;
}

/* Pages of [first, last) whose bit is clear. */
static uint64_t
count_clear(const struct ram_store *s, uint64_t first, uint64_t last)
{
  uint64_t n = 0, wi, m;
  while (first < last) {
    first = word_part(first, last, &wi, &m);
    uint64_t w = atomic_load_explicit(&s->bits[wi], memory_order_relaxed);
    n += (uint64_t)__builtin_popcountll(~w & m);
  }
  return n;
}

/* With a limit: reserve the new pages [OFF, OFF+LEN) needs (their count
 * in *NEED), or fail with ENOSPC. */
static int
reserve(struct ram_store *s, uint64_t len, uint64_t off, uint64_t *need)
{
  *need = 0;
  if (s->limit == UINT64_MAX)
    return 0;
  uint64_t n = count_clear(s, off / PAGE, (off + len - 1) / PAGE + 1);
  uint64_t r = atomic_fetch_add(&s->reserved, n) + n;
  if (atomic_load(&s->nalloc) + r > s->limit) {
    atomic_fetch_sub(&s->reserved, n);
    errno = ENOSPC;
    return -1;
  }
  *need = n;
  return 0;
}

/* write() (BUF) and write_from() (FILL, BUF NULL).  Inlined into both:
 * a call of its own cost every RAM write 11 instructions (callgrind). */
static inline __attribute__((always_inline)) int
write_data(struct znbd_store *base, const void *buf, znbd_store_fill_fn fill,
           void *opaque, uint64_t len, uint64_t off)
{
  struct ram_store *s = (struct ram_store *)base;
  uint64_t need;
  if (!s->memory_backed || len == 0)
    return 0;
  if (reserve(s, len, off, &need) < 0)
    return -1;
  int r = put(s, buf, fill, opaque, len, off);
  if (need) /* keeps FILL's errno: no atomic sets one */
    atomic_fetch_sub(&s->reserved, need);
  return r;
}

static int
ram_write(struct znbd_store *base, const void *buf, uint64_t len, uint64_t off)
{
  return write_data(base, buf, NULL, NULL, len, off);
}

static int
ram_write_from(struct znbd_store *base, znbd_store_fill_fn fill, void *opaque,
               uint64_t len, uint64_t off)
{
  return write_data(base, NULL, fill, opaque, len, off);
}

void
znbd_store_ram_limit(struct znbd_store *base, uint64_t bytes)
{
  if (base->ops != &ram_ops)
    return;
  struct ram_store *s = (struct ram_store *)base;
  if (!s->memory_backed)
    return;
  s->limit = bytes / PAGE;
  base->may_fail = s->limit < s->npages;
}

/* Give pages [START, END) back: MADV_DONTNEED, or when LAZY MADV_FREE
 * (kernels before 4.5 refuse it with EINVAL: then at once after all). */
static void
give_back(struct ram_store *s, uint64_t start, uint64_t end, bool lazy)
{
  void *p = s->data + start * PAGE;
  size_t n = (size_t)((end - start) * PAGE);
  if (!lazy || madvise(p, n, MADV_FREE) < 0)
    madvise(p, n, MADV_DONTNEED);
}

/* Clear the bits of pages [first, last), give back the pages that were
 * allocated (when LAZY, lazily: their lazy bits are set first), and
 * uncount them. */
static void
free_pages(struct ram_store *s, uint64_t first, uint64_t last, bool lazy)
{
  uint64_t removed = 0;
  uint64_t run_start = 0, run_end = 0; /* pending madvise run, pages */
  while (first < last) {
    uint64_t wi = first / WORD_BITS;
    unsigned lo = first % WORD_BITS;
    uint64_t hi64 = last - wi * WORD_BITS;
    unsigned hi = hi64 > WORD_BITS ? WORD_BITS : (unsigned)hi64;
    uint64_t m = bit_mask(lo, hi);
    uint64_t cur = atomic_load_explicit(&s->bits[wi], memory_order_relaxed);
    uint64_t old = 0;
    if (cur & m) {
      if (lazy) /* before the bits clear: see settle_page */
        atomic_fetch_or_explicit(&s->lazy[wi], cur & m, memory_order_release);
      old = atomic_fetch_and_explicit(&s->bits[wi], ~m, memory_order_acq_rel);
    }
    if (old & m) {
      removed += (uint64_t)__builtin_popcountll(old & m);
      /* Only pages inside the request: neighbours may be in use. */
      uint64_t a = wi * WORD_BITS + lo, b = wi * WORD_BITS + hi;
      if (run_end == a) {
        run_end = b;
      } else {
        if (run_end > run_start)
          give_back(s, run_start, run_end, lazy);
        run_start = a;
        run_end = b;
      }
    }
    first = wi * WORD_BITS + hi;
  }
  if (run_end > run_start)
    give_back(s, run_start, run_end, lazy);
  if (removed)
    atomic_fetch_sub_explicit(&s->nalloc, removed, memory_order_relaxed);
}

/* Zero bytes [off, off+len) inside one page, if that page is allocated. */
static void
zero_partial(struct ram_store *s, uint64_t off, uint64_t len)
{
  if (page_allocated(s, off / PAGE))
    memset(s->data + off, 0, len);
}

/* NBD WRITE_ZEROES with NO_HOLE: the range must stay provisioned
 * (doc/proto.md, NBD_CMD_FLAG_NO_HOLE), so store real zeros, a block at a
 * time. */
static int
write_zeros_allocated(struct ram_store *s, uint64_t len, uint64_t off)
{
  static const uint8_t zeros[64 * 1024];
  uint64_t need;

  if (reserve(s, len, off, &need) < 0) /* the whole range, or nothing */
    return -1;
  for (uint64_t pos = 0; pos < len;) {
    uint64_t n = len - pos < sizeof zeros ? len - pos : sizeof zeros;
    put(s, zeros, NULL, NULL, n, off + pos);
    pos += n;
  }
  if (need)
    atomic_fetch_sub(&s->reserved, need);
  return 0;
}

/* Zero [OFF, OFF+LEN): partial pages byte by byte, whole pages freed
 * (lazily when LAZY). */
static void
zero_range(struct ram_store *s, uint64_t len, uint64_t off, bool lazy)
{
  uint64_t end = off + len;
  /* A page counts as covered whole when the range reaches its end or the
   * end of the store (the last page may be short). */
  uint64_t first = (off + PAGE - 1) / PAGE;                /* first whole */
  uint64_t last = end == s->size ? s->npages : end / PAGE; /* past whole */
  if (first >= last) {
    /* No whole page: one or two partial pages. */
    uint64_t pend = (off / PAGE + 1) * PAGE;
    if (end <= pend) {
      zero_partial(s, off, len);
    } else {
      zero_partial(s, off, pend - off);
      zero_partial(s, pend, end - pend);
    }
    return;
  }
  if (off < first * PAGE)
    zero_partial(s, off, first * PAGE - off);
  if (last * PAGE < end)
    zero_partial(s, last * PAGE, end - last * PAGE);
  free_pages(s, first, last, lazy);
}

static int
ram_zero(struct znbd_store *base, uint64_t len, uint64_t off, unsigned flags)
{
  struct ram_store *s = (struct ram_store *)base;
  if (!s->memory_backed || len == 0)
    return 0;
  if (flags & ZNBD_STORE_ZERO_ALLOCATE)
    return write_zeros_allocated(s, len, off);
  zero_range(s, len, off, (flags & ZNBD_STORE_ZERO_LAZY) != 0);
  return 0;
}

static int
ram_extents(struct znbd_store *base, uint64_t off, uint64_t len,
            znbd_store_extent_fn fn, void *opaque)
{
  struct ram_store *s = (struct ram_store *)base;
  if (len == 0)
    return 0;
  if (!s->memory_backed)
    return fn(opaque, off, len, false);
  uint64_t end = off + len;
  uint64_t last_page = (end - 1) / PAGE + 1;
  while (off < end) {
    uint64_t page = off / PAGE;
    bool alloc = page_allocated(s, page);
    uint64_t run_end = scan_run(s, page + 1, last_page, alloc) * PAGE;
    if (run_end > end)
      run_end = end;
    int r = fn(opaque, off, run_end - off, alloc);
    if (r)
      return r;
    off = run_end;
  }
  return 0;
}

static uint64_t
ram_allocated(struct znbd_store *base)
{
  struct ram_store *s = (struct ram_store *)base;
  return atomic_load_explicit(&s->nalloc, memory_order_relaxed) * PAGE;
}

static const struct znbd_store_ops ram_ops = {
    .name = "ram",
    .write_may_fail = false,
    .free = ram_free,
    .read = ram_read,
    .write = ram_write,
    .zero = ram_zero,
    .extents = ram_extents,
    .allocated = ram_allocated,
    .ref = ram_ref,
    .write_from = ram_write_from,
};
