/* znbd: the write cache's journal read back after a crash
 * (znbd_wcache_replay, lib/wcache.h): check every entry against the
 * device's geometry and the zone files against the journal's lease, then
 * roll the files back to their durable state.  The journal's format is
 * lib/wcache_journal.h; lib/wcache.c writes it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wcache.h"
#include "wcache_journal.h"

/* The journal's geometry and the checks of one pass over it. */
struct jgeo {
  const struct znbd_geometry *geo;
  uint64_t size;
  uint64_t nr, undo_end; /* FLUSHED entries; conventional bytes */
};

static void why_set(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
why_set(char *why, size_t whylen, const char *fmt, ...)
{
  va_list ap;
  if (!why || !whylen)
    return;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
}

/* "2026-12-02 17:30:58 UTC" for T (ns since the epoch) in BUF. */
static const char *
utc(int64_t t, char *buf, size_t len)
{
  time_t sec = (time_t)(t / 1000000000);
  struct tm tm;
  if (!gmtime_r(&sec, &tm) ||
      strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
    snprintf(buf, len, "%" PRId64 " ns", t);
  return buf;
}

/* Before the check pass changes nothing: no zone file of ST may have
 * changed after the lease LEASE of the server that wrote the journal
 * (its status change time later: a file changed since that server
 * stopped, by zloop or by hand; rolling it back would undo that change).
 * -1 with errno ESTALE and WHY naming the file; EIO. */
static int
files_unchanged(struct znbd_store *st, const struct jgeo *g, int64_t lease,
                char *why, size_t whylen)
{
  if (!st->ops->zones)
    return 0;
  for (uint64_t i = 0; i < g->nr; i++) {
    char name[64], t1[64], t2[64];
    int64_t ct;
    if (st->ops->zones->file(st, (uint32_t)i, name, sizeof name, &ct) < 0) {
      why_set(why, whylen, "reading its zone files' status failed");
      errno = EIO;
      return -1;
    }
    if (ct > lease) {
      why_set(why, whylen,
              "%s was changed at %s, after the server that wrote the "
              "journal stopped (it could change no file after %s): rolling the "
              "directory back would undo a change made since",
              name, utc(ct, t1, sizeof t1), utc(lease, t2, sizeof t2));
      errno = ESTALE;
      return -1;
    }
  }
  return 0;
}

/* Apply pass: the replay changes files too, so it renews the lease in
 * the journal FD (header for NR zones) first, as the server did: a replay
 * cut short is checked against its own lease next time. */
static int
replay_lease(int fd, uint64_t nr, int64_t *lease)
{
  int64_t now = now_ns();
  if (now + LEASE_MARGIN_NS < *lease)
    return 0;
  int64_t l = now + LEASE_NS;
  if (pwrite_full(fd, &l, 8, lease_off(nr)) < 0)
    return -1;
  *lease = l;
  return 0;
}

/* One pass over journal FD (FLEN bytes).  APPLY false: only check that
 * every entry is one this server could have written for geometry G:
 * FLUSHED is "not sequential" exactly for the conventional zones (and a
 * device without zones), at most the zone capacity for sequential ones;
 * each record names a page of the conventional space with its exact
 * length and is whole in the file.  APPLY true (only after a check that
 * passed): truncate sequential files to FLUSHED and write the pages
 * back.  Both steps only ever restore recorded durable state, so a pass
 * interrupted by a crash is simply done again. */
static int
replay_pass(struct znbd_store *st, int fd, uint64_t flen, const struct jgeo *g,
            bool apply, uint8_t *data, char *why, size_t whylen)
{
  uint64_t hl = hdr_len((uint32_t)g->nr);
  int64_t lease;
  if (flen < hl) {
    why_set(why, whylen,
            "its header is cut short (%" PRIu64 " of %" PRIu64 " bytes)", flen,
            hl);
    errno = EINVAL;
    return -1;
  }
  if (pread_full(fd, &lease, 8, lease_off(g->nr)) < 0)
    goto io;
  for (uint64_t i = 0; i < g->nr; i++) {
    uint64_t f;
    if (pread_full(fd, &f, 8, MAGIC_LEN + 8 + 8 * i) < 0)
      goto io;
    struct znbd_geometry_span sp = znbd_geometry_span(g->geo, (uint32_t)i);
    bool seq = sp.seq;
    uint64_t start = sp.start, len = sp.len, cap = sp.cap;
    if (!seq && f != NONE) {
      why_set(why, whylen,
              "it gives conventional zone %" PRIu64 " (or the device) a write "
              "pointer (%" PRIu64 ")",
              i, f);
      errno = EINVAL;
      return -1;
    }
    if (seq && f > cap) {
      why_set(why, whylen,
              "it gives sequential zone %" PRIu64 " %" PRIu64 " durable bytes, "
              "more than its capacity %" PRIu64,
              i, f, cap);
      errno = EINVAL;
      return -1;
    }
    if (apply && seq &&
        (replay_lease(fd, g->nr, &lease) < 0 ||
         znbd_store_zone_truncate(st, (uint32_t)i, start, len, f) < 0))
      goto io;
  }
  uint64_t step = sizeof(struct rec_hdr) + PAGE;
  /* A record's header is written last (a page's data before it): a
   * zeroed or missing header is a record not made yet. */
  for (uint64_t pos = hl; pos + sizeof(struct rec_hdr) <= flen; pos += step) {
    struct rec_hdr h;
    if (pread_full(fd, &h, sizeof h, pos) < 0)
      goto io;
    if (h.kind == K_VOID)
      continue;
    uint64_t off = h.page * PAGE, want = 0;
    if (h.page < g->undo_end / PAGE + 1 && off < g->undo_end)
      want = g->size - off < PAGE ? g->size - off : PAGE;
    if ((h.kind != K_DATA && h.kind != K_HOLE) || !want || h.len != want ||
        (h.kind == K_DATA && pos + sizeof h + h.len > flen)) {
      why_set(why, whylen,
              "its record at byte %" PRIu64 " (page %" PRIu64 ", kind %" PRIu64
              ", %" PRIu64 " bytes) is not a whole record of a conventional "
              "page",
              pos, h.page, h.kind, h.len);
      errno = EINVAL;
      return -1;
    }
    if (!apply)
      continue;
    if (replay_lease(fd, g->nr, &lease) < 0)
      goto io;
    if (h.kind == K_DATA && (pread_full(fd, data, h.len, pos + sizeof h) < 0 ||
                             znbd_store_write(st, data, h.len, off) < 0))
      goto io;
    if (h.kind == K_HOLE && znbd_store_zero(st, h.len, off, 0) < 0)
      goto io;
  }
  if (!apply)
    return files_unchanged(st, g, lease, why, whylen);
  return 0;
io:
  why_set(why, whylen, "%s",
          apply ? "applying it failed" : "reading it failed");
  errno = EIO;
  return -1;
}

int
znbd_wcache_replay(struct znbd_store *st, int fd,
                   const struct znbd_geometry *geo, char *why, size_t whylen)
{
  char magic[MAGIC_LEN];
  uint64_t nr;
  struct jgeo g = {geo, geo->size, znbd_geometry_nr_spans(geo), geo->conv_end};
  off_t flen = lseek(fd, 0, SEEK_END);

  if (flen < 0) {
    why_set(why, whylen, "reading it failed");
    errno = EIO;
    return -1;
  }
  if (flen == 0)
    return 0;
  if (pread_full(fd, magic, MAGIC_LEN, 0) < 0 ||
      memcmp(magic, MAGIC, strlen(MAGIC)) != 0) {
    why_set(why, whylen, "it does not start with the journal's magic");
    errno = EINVAL;
    return -1;
  }
  if (pread_full(fd, &nr, 8, MAGIC_LEN) < 0 || nr != g.nr) {
    why_set(why, whylen,
            "its header is for another number of zones (%" PRIu64
            ", the device has %" PRIu64 ")",
            flen < MAGIC_LEN + 8 ? 0 : nr, g.nr);
    errno = EINVAL;
    return -1;
  }
  uint8_t *data = malloc(PAGE);
  if (!data) {
    why_set(why, whylen, "out of memory");
    errno = ENOMEM;
    return -1;
  }
  int r = replay_pass(st, fd, (uint64_t)flen, &g, false, data, why, whylen);
  if (r == 0)
    r = replay_pass(st, fd, (uint64_t)flen, &g, true, data, why, whylen);
  free(data);
  if (r < 0)
    return -1;
  if (znbd_store_flush(st) < 0 || ftruncate(fd, 0) < 0 || fdatasync(fd) < 0) {
    why_set(why, whylen, "flushing the restored files failed");
    errno = EIO;
    return -1;
  }
  return 0;
}
