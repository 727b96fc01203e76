/* znbd: the intent records of appends (include/znbd/redo.h): the file
 * that says which appends a dead server executed without the kernel
 * having seen their completion.  lib/redo.c redoes requests with them.
 *
 * The records live in PATH/znbd.redo of a dir= store, mapped shared, so
 * that what a server wrote there is in the page cache the moment it
 * wrote it and outlives the process (SIGKILL included: a process that
 * dies loses no store it made to a shared mapping; a power loss may,
 * and then nothing is reissued anyway).  Layout, little-endian as the
 * host writes it:
 *   - a header of 64 bytes: "ZNBDREDO", version 1, the number of slots N;
 *   - N live records, one per slot, written by the slot's appends;
 *   - N kept records: those a recovering server found and has not
 *     matched yet, so that a recovery that dies in turn loses none.
 * A record is 32 bytes: state (0 free, 1 noted), zone, sector (bytes),
 * length (bytes).  A noted record's fields are written first and its
 * state last (a release store), so a record that reads as noted is
 * whole.
 *
 * A front-end confirms a slot's record in the very system call that
 * hands the append's completion to the kernel (znbd_dev_redo_word()):
 * the mapping is locked in memory, so that zeroing it there takes no page
 * fault that a pending SIGKILL could cut short.  A record left noted is
 * then exactly an append the kernel never saw completed, and will send
 * again.
 *
 * At open with keep, every noted record (live or kept) is checked
 * against its zone as restored: one whose sector is at or past the wp
 * was noted but never stored (its append runs again where it would have
 * gone); one the wp cuts (the server was killed while it stored the
 * append, the last store of its zone) has those bytes cut off again, its
 * zone's wp back at its sector, where it runs again (kept, a new append
 * of other bytes would land inside its range and leave the rest of it
 * unused, space the file system never counted); one below the wp is
 * kept.  The same record found twice (a server killed while moving a
 * matched record to its slot) is kept once.  A kept record also goes
 * when its zone is reset or finished (its data is gone).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "znbd/log.h"
#include "znbd/redo.h"
#include "dev_impl.h"
#include "intent.h"
#include "err.h"

#define REDO_MAGIC "ZNBDREDO"
#define REDO_VERSION 1u
#define REDO_MAX_SLOTS 65536u
#define NOTED 1u

struct redo_head {
  char magic[8];
  uint32_t version, nslots;
  uint8_t pad[48];
};

struct redo_rec {
  _Atomic uint32_t state; /* 0 or NOTED */
  uint32_t zone;
  uint64_t off, len; /* bytes */
  uint64_t pad;
};

_Static_assert(sizeof(struct redo_head) == 64, "redo header layout");
_Static_assert(sizeof(struct redo_rec) == 32, "redo record layout");

struct znbd_redo {
  int fd;
  void *map;
  size_t maplen;
  uint32_t nslots;
  struct redo_rec *live, *kept; /* nslots each, in the mapping */
  pthread_mutex_t lock;         /* claims of kept records */
  bool *claimed;                /* a kept record being matched */
  _Atomic uint32_t nkept;
};

static size_t
redo_bytes(uint32_t nslots)
{
  return sizeof(struct redo_head) +
         2 * (size_t)nslots * sizeof(struct redo_rec);
}

/* znbd_zone_cut_fn: the store drops zone Z's bytes past KEEP. */
static int
cut_zone(void *opaque, uint32_t zno, const struct znbd_zone *z, uint64_t keep)
{
  return znbd_store_zone_truncate(opaque, zno, z->start, z->len, keep);
}

/* Whether the noted record REC of D's zones (inside its zone, as
 * znbd_intent_parse() passes it on) is an append that reached the store
 * whole: its bytes lie below its zone's wp.  One the wp cuts
 * (stored in part when the server died) has its bytes cut off: the
 * zone's wp goes back to its sector (as after a power cycle, CLOSED or
 * EMPTY), and it is not. */
static bool
stored(struct znbd_dev *d, const struct redo_rec *rec)
{
  uint64_t written;
  if (rec->zone >= d->zs.nr_zones || rec->len == 0 ||
      !znbd_zones_written(&d->zs, rec->zone, &written))
    return false;
  const struct znbd_zone *z = &d->zs.zone[rec->zone];
  uint64_t at = rec->off - z->start;
  if (at + rec->len <= written)
    return true;
  if (at < written) {
    znbd_log(ZNBD_LOG_NOTE,
             "dir=%s: zone %u: an append of %llu bytes at %llu was stored "
             "in part when its server died: cut off, to run again",
             d->p.dir, (unsigned)rec->zone, (unsigned long long)rec->len,
             (unsigned long long)rec->off);
    if (znbd_zones_power_cycle(&d->zs, rec->zone, &at, cut_zone, d->store) < 0)
      znbd_log(ZNBD_LOG_ERROR, "dir=%s: zone %u: cutting it: %s", d->p.dir,
               (unsigned)rec->zone, strerror(errno));
  }
  return false;
}

/* Whether REC is among the N records of OUT (the same zone, sector and
 * length). */
static bool
seen(const struct redo_rec *out, uint32_t n, const struct redo_rec *rec)
{
  for (uint32_t i = 0; i < n; i++)
    if (out[i].zone == rec->zone && out[i].off == rec->off &&
        out[i].len == rec->len)
      return true;
  return false;
}

int
znbd_intent_parse(const void *buf, size_t len, const struct znbd_zones *zs,
                  znbd_intent_rec_fn *fn, void *opaque)
{
  const unsigned char *b = buf;
  struct redo_head h;
  if (len < sizeof h)
    return 0;
  memcpy(&h, b, sizeof h);
  if (memcmp(h.magic, REDO_MAGIC, 8) != 0 || h.version != REDO_VERSION ||
      h.nslots == 0 || h.nslots > REDO_MAX_SLOTS)
    return 0;
  if (len < redo_bytes(h.nslots)) {
    errno = EIO;
    return -1;
  }
  for (uint64_t i = 0; i < 2 * (uint64_t)h.nslots; i++) {
    const unsigned char *at = b + sizeof h + i * sizeof(struct redo_rec);
    uint32_t state;
    struct znbd_intent_rec rec;
    memcpy(&state, at + offsetof(struct redo_rec, state), sizeof state);
    memcpy(&rec.zone, at + offsetof(struct redo_rec, zone), sizeof rec.zone);
    memcpy(&rec.off, at + offsetof(struct redo_rec, off), sizeof rec.off);
    memcpy(&rec.len, at + offsetof(struct redo_rec, len), sizeof rec.len);
    if (state != NOTED || rec.zone >= zs->nr_zones || rec.len == 0)
      continue;
    const struct znbd_zone *z = &zs->zone[rec.zone];
    /* Inside a sequential zone, without overflow: off - start + len <=
     * zone length. */
    if (z->type == ZNBD_ZONE_TYPE_CONVENTIONAL || rec.off < z->start ||
        rec.len > z->len || rec.off - z->start > z->len - rec.len)
      continue;
    fn(opaque, &rec);
  }
  return (int)h.nslots;
}

/* read_noted()'s collection of the records to keep. */
struct noted {
  struct znbd_dev *d;
  struct redo_rec *out;
  uint32_t max, found, dropped;
};

/* znbd_intent_rec_fn: REC goes into the kept records if its append
 * reached the store and is not there already. */
static void
note_found(void *opaque, const struct znbd_intent_rec *r)
{
  struct noted *n = opaque;
  struct redo_rec rec = {.zone = r->zone, .off = r->off, .len = r->len};
  atomic_init(&rec.state, NOTED);
  if (!stored(n->d, &rec) || seen(n->out, n->found, &rec))
    return;
  if (n->found == n->max)
    n->dropped++;
  else
    n->out[n->found++] = rec;
}

/* The records of an existing file FD (its own slot count): every noted
 * one whose append reached the store goes into OUT (at most MAX);
 * returns how many, or -1 with errno (EIO: a short file; ENOMEM). */
static int
read_noted(struct znbd_dev *d, int fd, struct redo_rec *out, uint32_t max)
{
  struct stat sb;
  if (fstat(fd, &sb) < 0)
    return -1;
  if (sb.st_size == 0)
    return 0; /* a new file */
  size_t len = (size_t)sb.st_size, got = 0;
  if (len > redo_bytes(REDO_MAX_SLOTS))
    len = redo_bytes(REDO_MAX_SLOTS);
  unsigned char *buf = malloc(len);
  if (!buf)
    return -1;
  while (got < len) {
    ssize_t n = pread(fd, buf + got, len - got, (off_t)got);
    if (n < 0) {
      free(buf); /* keeps errno */
      return -1;
    }
    if (n == 0)
      break;
    got += (size_t)n;
  }
  struct noted n = {.d = d, .out = out, .max = max};
  int r = znbd_intent_parse(buf, got, &d->zs, note_found, &n);
  free(buf);
  if (r < 0)
    return -1;
  if (r == 0) {
    znbd_log(ZNBD_LOG_WARNING,
             "dir=%s: %s is not an intent record file of this version: "
             "its records are not used",
             d->p.dir, "znbd.redo");
    return 0;
  }
  if (n.dropped)
    znbd_log(ZNBD_LOG_WARNING,
             "dir=%s: %" PRIu32 " appends' intent records did not fit "
             "%" PRIu32 " slots and were dropped",
             d->p.dir, n.dropped, max);
  return (int)n.found;
}

int
znbd_dev_redo_open(struct znbd_dev *d, uint32_t nslots, bool keep, char *err,
                   size_t errlen)
{
  struct znbd_store *st = d->store;
  if (!st->ops->persist || !st->ops->persist->redo || !d->p.zoned ||
      nslots == 0 || nslots > REDO_MAX_SLOTS || d->redo) {
    set_err(err, errlen,
            "intent records need a zoned dir= store and 1 to %u slots",
            REDO_MAX_SLOTS);
    errno = EINVAL;
    return -1;
  }
  struct znbd_redo *r = calloc(1, sizeof *r);
  struct redo_rec *found = calloc(nslots, sizeof *found);
  int nfound = 0;
  if (r) {
    r->fd = -1;
    r->claimed = calloc(nslots, sizeof *r->claimed);
  }
  if (!r || !found || !r->claimed) {
    set_err(err, errlen, "intent records: out of memory");
    errno = ENOMEM;
    goto fail;
  }
  r->nslots = nslots;
  r->maplen = redo_bytes(nslots);
  r->fd = st->ops->persist->redo(st);
  if (r->fd < 0)
    goto fail_file;
  if (keep && (nfound = read_noted(d, r->fd, found, nslots)) < 0)
    goto fail_file;
  /* Laid out anew: the header, no live record, the kept ones. */
  if (ftruncate(r->fd, 0) < 0 || ftruncate(r->fd, (off_t)r->maplen) < 0)
    goto fail_file;
  r->map = mmap(NULL, r->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (r->map == MAP_FAILED) {
    r->map = NULL;
    goto fail_file;
  }
  /* No page fault when a front-end zeroes a record inside the system
   * call of a commit (znbd_dev_redo_word()).  Without the right to lock
   * (RLIMIT_MEMLOCK), the pages stay resident as long as they are used. */
  if (mlock(r->map, r->maplen) < 0)
    znbd_log(ZNBD_LOG_NOTE,
             "dir=%s: the intent records could not be locked in memory: %s",
             d->p.dir, strerror(errno));
  struct redo_head *h = r->map;
  r->live = (struct redo_rec *)(h + 1);
  r->kept = r->live + nslots;
  memcpy(r->kept, found, (size_t)nfound * sizeof *found);
  h->version = REDO_VERSION;
  h->nslots = nslots;
  memcpy(h->magic, REDO_MAGIC, 8);
  pthread_mutex_init(&r->lock, NULL);
  atomic_init(&r->nkept, (uint32_t)nfound);
  free(found);
  d->redo = r;
  return nfound;

fail_file:
  set_err(err, errlen, "dir=%s: znbd.redo (intent records): %s", d->p.dir,
          strerror(errno));
fail:
  if (r && r->fd >= 0)
    keep_errno_close(r->fd);
  if (r)
    free(r->claimed);
  free(r);
  free(found);
  return -1;
}

void
znbd_intent_free(struct znbd_redo *r)
{
  if (!r)
    return;
  munmap(r->map, r->maplen);
  close(r->fd);
  pthread_mutex_destroy(&r->lock);
  free(r->claimed);
  free(r);
}

uint32_t
znbd_dev_redo_kept(struct znbd_dev *d)
{
  return d->redo ? atomic_load_explicit(&d->redo->nkept, memory_order_relaxed)
                 : 0;
}

void
znbd_intent_note(struct znbd_redo *r, uint32_t slot, uint32_t zno, uint64_t off,
                 uint64_t len)
{
  if (slot >= r->nslots)
    return;
  struct redo_rec *rec = &r->live[slot];
  atomic_store_explicit(&rec->state, 0, memory_order_relaxed);
  rec->zone = zno;
  rec->off = off;
  rec->len = len;
  atomic_store_explicit(&rec->state, NOTED, memory_order_release);
}

void
znbd_dev_redo_confirm(struct znbd_dev *d, uint32_t slot)
{
  struct znbd_redo *r = d->redo;
  if (r && slot < r->nslots)
    atomic_store_explicit(&r->live[slot].state, 0, memory_order_release);
}

void *
znbd_dev_redo_word(struct znbd_dev *d, uint32_t slot)
{
  struct znbd_redo *r = d->redo;
  return r && slot < r->nslots ? (void *)&r->live[slot].state : NULL;
}

uint32_t
znbd_intent_slots(const struct znbd_redo *r)
{
  return r ? r->nslots : 0;
}

uint32_t
znbd_intent_kept(const struct znbd_redo *r)
{
  return r ? atomic_load_explicit(&r->nkept, memory_order_relaxed) : 0;
}

bool
znbd_intent_claim(struct znbd_redo *r, uint32_t zno, uint64_t len, uint32_t *i,
                  uint64_t *off)
{
  bool got = false;
  pthread_mutex_lock(&r->lock);
  for (; *i < r->nslots && !got; ++*i) {
    struct redo_rec *k = &r->kept[*i];
    got = atomic_load(&k->state) == NOTED && !r->claimed[*i] &&
          k->zone == zno && k->len == len;
    if (got)
      r->claimed[*i] = true;
  }
  --*i;
  if (got)
    *off = r->kept[*i].off;
  pthread_mutex_unlock(&r->lock);
  return got;
}

void
znbd_intent_release(struct znbd_redo *r, uint32_t i, bool matched,
                    uint32_t slot)
{
  struct redo_rec *k = &r->kept[i];
  if (matched)
    znbd_intent_note(r, slot, k->zone, k->off, k->len);
  pthread_mutex_lock(&r->lock);
  r->claimed[i] = false;
  if (matched) {
    atomic_store(&k->state, 0);
    atomic_fetch_sub(&r->nkept, 1);
  }
  pthread_mutex_unlock(&r->lock);
}

void
znbd_intent_zone_gone(struct znbd_redo *r, uint32_t zno)
{
  if (!r || atomic_load(&r->nkept) == 0)
    return;
  pthread_mutex_lock(&r->lock);
  for (uint32_t i = 0; i < r->nslots; i++) {
    struct redo_rec *k = &r->kept[i];
    if (atomic_load(&k->state) == NOTED && k->zone == zno && !r->claimed[i]) {
      atomic_store(&k->state, 0);
      atomic_fetch_sub(&r->nkept, 1);
    }
  }
  pthread_mutex_unlock(&r->lock);
}
