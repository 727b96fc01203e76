/* znbd: opening a dir= directory as a store (lib/store_dir_impl.h):
 * taking its lock, then reading a formatted directory (its znbd.meta and
 * zone files, checked as Linux zloop checks them when a device is added),
 * formatting a new one, or adopting zone files without znbd.meta (a
 * directory zloop made); and the O_DIRECT descriptors of
 * buffered_io=false.
 *
 * PATH/znbd.lock is held with flock(LOCK_EX | LOCK_NB), and so is the
 * directory itself: a second server on the same directory stops at
 * start-up.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_dir.h"
#include "store_dir_impl.h"
#include "znbd/dev.h"
#include "err.h"

static uint8_t
zone_fault(void *opaque, uint32_t zone)
{
  const struct dir_store *s = opaque;
  return s->z[zone].fault;
}

int
znbd_dir_save(struct dir_store *s)
{
  return znbd_dir_meta_save(s->dirfd, &s->m, s->nr_zones, zone_fault, s);
}

static int open_files(struct dir_store *s, char *err, size_t errlen);

/* Lay out the zones (or the one data file) from the device's geometry
 * (S->geo, which a formatted directory's record matches: check_geometry). */
static int
layout(struct dir_store *s)
{
  s->nr_zones = znbd_geometry_nr_spans(&s->geo);
  s->z = calloc(s->nr_zones, sizeof *s->z);
  if (!s->z)
    return -1;
  for (uint32_t i = 0; i < s->nr_zones; i++) {
    struct dzone *z = &s->z[i];
    struct znbd_geometry_span sp = znbd_geometry_span(&s->geo, i);
    z->fd = z->dfd = -1;
    pthread_mutex_init(&z->sync_lock, NULL);
    z->start = sp.start;
    z->len = sp.len;
    z->seq = sp.seq;
    z->cap = sp.cap;
  }
  return 0;
}

/* One descriptor per zone: raise the soft limit to the hard one. */
static int
enough_fds(const struct dir_store *s, char *err, size_t errlen)
{
  struct rlimit rl;
  rlim_t need = (rlim_t)s->nr_zones * (s->direct ? 2 : 1) + 256;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
    return 0;
  if (rl.rlim_cur >= need)
    return 0;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
    set_err(err, errlen,
            "dir: %" PRIu32 " zones need about %llu open files, "
            "RLIMIT_NOFILE allows %llu (raise it with ulimit -Hn)",
            s->nr_zones, (unsigned long long)need,
            (unsigned long long)rl.rlim_max);
    errno = EMFILE;
    return -1;
  }
  rl.rlim_cur = rl.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &rl);
  return 0;
}

/* What a directory without znbd.meta holds: nothing but our lock (and
 * maybe a stale temporary metadata file), or zone files.  A format that
 * was cut short (its mark FORMAT_MARK is there) left zone files that no
 * server ever served: they are removed and the format is done again, with
 * the geometry given now.  Zone files without that mark (Linux zloop's)
 * are counted in *NFILES: the directory is adopted (adopt()).  Any other
 * file: ERR names it. */
static int
dir_scan(struct dir_store *s, uint32_t *nfiles, char *err, size_t errlen)
{
  int fd = dup(s->dirfd);
  DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *de;
  int r = 0;
  bool redo = faccessat(s->dirfd, FORMAT_MARK, F_OK, 0) == 0;

  *nfiles = 0;
  if (!dp) {
    if (fd >= 0)
      close(fd);
    set_err(err, errlen, "dir: %s: %s", s->path, strerror(errno));
    return -1;
  }
  rewinddir(dp); /* the descriptor's offset is shared */
  while ((de = readdir(dp))) {
    const char *n = de->d_name;
    if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, LOCK_NAME) ||
        !strcmp(n, META_TMP) || !strcmp(n, FORMAT_MARK) ||
        !strcmp(n, REDO_NAME))
      continue;
    if (redo && znbd_dir_zone_file_name(n) && unlinkat(s->dirfd, n, 0) == 0)
      continue;
    if (!redo && znbd_dir_zone_file_name(n)) {
      (*nfiles)++;
      continue;
    }
    set_err(err, errlen,
            "dir: %s has no %s but holds %s: neither a znbd nor a zloop "
            "directory, refusing to format it (use an empty or new "
            "directory)",
            s->path, META_NAME, n);
    errno = EINVAL;
    r = -1;
    break;
  }
  closedir(dp);
  return r;
}

/* Zone file name N (znbd_dir_zone_file_name() true) against the layout: 0, or
 * -1 with errno EINVAL and ERR saying why it does not fit. */
static int
fits_layout(const struct dir_store *s, const char *n, char *err, size_t errlen)
{
  errno = EINVAL;
  if (!strcmp(n, "data")) {
    set_err(err, errlen,
            "dir: %s/%s is the file of a zoned=false device, the directory "
            "also holds zone files",
            s->path, n);
    return -1;
  }
  uint32_t zno = (uint32_t)strtoul(n + 4, NULL, 10);
  bool seq = n[0] == 's';
  if (zno >= s->nr_zones) {
    set_err(err, errlen,
            "dir: %s/%s is zone %" PRIu32 ", but size=%" PRIu64
            " and zone_size=%" PRIu64 " give %" PRIu32 " zones",
            s->path, n, zno, s->m.size, s->m.zone_size, s->nr_zones);
    return -1;
  }
  if (seq != s->z[zno].seq) {
    set_err(err, errlen,
            "dir: %s/%s: zone %" PRIu32 " is %s with zone_nr_conv=%" PRIu32
            " (zloop's conv_zones)",
            s->path, n, zno, seq ? "conventional" : "sequential", s->m.nr_conv);
    return -1;
  }
  return 0;
}

/* A directory of zone files without znbd.meta (one Linux zloop made, or
 * a znbd directory whose znbd.meta was lost), with the geometry given:
 * every file must be one of that geometry's, and every zone's file must
 * be there and pass zloop's own checks of a device it adds again
 * (zloop_init_zone(), zloop_update_seq_zone(); open_files() here).  Then
 * znbd.meta is written; no zone file is changed.  Errors name the file:
 * EINVAL, ENOENT (a zone's file is missing), ELOOP, EIO. */
static int
adopt(struct dir_store *s, char *err, size_t errlen)
{
  if (!s->m.zoned) {
    set_err(err, errlen,
            "zoned: false, but dir=%s holds zone files and no %s (a zloop "
            "directory?); they can only be served zoned",
            s->path, META_NAME);
    errno = EINVAL;
    return -1;
  }
  int fd = dup(s->dirfd);
  DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *de;
  if (!dp) {
    if (fd >= 0)
      close(fd);
    set_err(err, errlen, "dir: %s: %s", s->path, strerror(errno));
    return -1;
  }
  rewinddir(dp); /* the descriptor's offset is shared with dir_scan's */
  int r = 0;
  while (r == 0 && (de = readdir(dp)))
    if (znbd_dir_zone_file_name(de->d_name))
      r = fits_layout(s, de->d_name, err, errlen);
  closedir(dp);
  if (r < 0)
    return -1;
  if (open_files(s, err, errlen) < 0)
    return -1;
  if (znbd_dir_save(s) < 0) {
    set_err(err, errlen, "dir: %s/%s: %s", s->path, META_NAME, strerror(errno));
    return -1;
  }
  return 0;
}

/* Create every zone file: conventional files the zone's length (sparse),
 * sequential ones empty, or full with zone_full.  Then the metadata.
 *
 * Cost: one openat per zone (and an ftruncate and fsync only for the
 * files that are not empty), then one fsync of the directory, which
 * makes the new names and empty files durable, before the metadata that
 * says the directory is formatted.  Not syncfs(): that also waits for
 * every other dirty file of the file system, seconds on a busy one. */
static int
format(struct dir_store *s, bool zone_full, char *err, size_t errlen)
{
  char name[32];
  /* The mark first (durable before any zone file): a crash before
   * znbd.meta leaves a directory the next start formats again. */
  int mfd = openat(s->dirfd, FORMAT_MARK,
                   O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (mfd < 0 || fsync(s->dirfd) < 0) {
    set_err(err, errlen, "dir: %s/%s: %s", s->path, FORMAT_MARK,
            strerror(errno));
    if (mfd >= 0)
      close(mfd);
    return -1;
  }
  close(mfd);
  for (uint32_t i = 0; i < s->nr_zones; i++) {
    struct dzone *z = &s->z[i];
    dir_zone_name(s, i, name, sizeof name);
    z->fd = openat(s->dirfd, name,
                   O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    uint64_t sz = !z->seq ? z->len : zone_full ? z->cap : 0;
    if (z->fd < 0 ||
        (sz && (ftruncate(z->fd, (off_t)sz) < 0 || fsync(z->fd) < 0))) {
      set_err(err, errlen, "dir: %s/%s: %s", s->path, name, strerror(errno));
      return -1;
    }
    z->loaded = sz;
  }
  if (fsync(s->dirfd) < 0 || znbd_dir_save(s) < 0) {
    set_err(err, errlen, "dir: %s/%s: %s", s->path, META_NAME, strerror(errno));
    return -1;
  }
  (void)unlinkat(s->dirfd, FORMAT_MARK, 0); /* a stale one is harmless */
  return 0;
}

/* Mark the zones of zone list LIST (from the metadata) with FAULT. */
struct fault_mark {
  struct dir_store *s;
  uint8_t fault;
};

static int
mark_fault(void *opaque, uint32_t zone)
{
  struct fault_mark *f = opaque;
  if (!f->s->z[zone].seq)
    return 1;
  f->s->z[zone].fault = f->fault;
  return 0;
}

/* A zone file's identity, to find two zones sharing one inode. */
struct file_id {
  dev_t dev;
  ino_t ino;
  uint32_t zone;
};

static int
cmp_file_id(const void *pa, const void *pb)
{
  const struct file_id *a = pa, *b = pb;
  if (a->dev != b->dev)
    return a->dev < b->dev ? -1 : 1;
  if (a->ino != b->ino)
    return a->ino < b->ino ? -1 : 1;
  return a->zone < b->zone ? -1 : a->zone > b->zone;
}

/* Two zones whose files are one inode (a hard link): EINVAL, naming both
 * (sorted, so n log n for many zones). */
static int
distinct_files(const struct dir_store *s, struct file_id *ids, char *err,
               size_t errlen)
{
  qsort(ids, s->nr_zones, sizeof *ids, cmp_file_id);
  for (uint32_t i = 1; i < s->nr_zones; i++)
    if (ids[i].dev == ids[i - 1].dev && ids[i].ino == ids[i - 1].ino) {
      char a[32], b[32];
      dir_zone_name(s, ids[i - 1].zone, a, sizeof a);
      dir_zone_name(s, ids[i].zone, b, sizeof b);
      set_err(err, errlen,
              "dir: %s/%s and %s are the same file (a hard link); every "
              "zone needs a file of its own",
              s->path, a, b);
      errno = EINVAL;
      return -1;
    }
  return 0;
}

/* Sequential zone Z's file (NAME) is the zone's whole length, more than
 * its capacity: Linux zloop as merged (6.16) truncates a finished zone's file
 * to the zone size (zloop_finish_zone()), later versions to the capacity, as
 * znbd does.  The zone is FULL (Z->loaded becomes the capacity; the file
 * stays as it is) when the bytes past the capacity are zeros, as a finish
 * leaves them; data there means the zone_capacity given is not the one
 * the zone was written with: -1, EINVAL, ERR names the file. */
static int
full_at_len(const struct dir_store *s, struct dzone *z, const char *name,
            char *err, size_t errlen)
{
  uint8_t buf[4096];
  uint64_t pos = z->cap;
  while (pos < z->len) {
    off_t d = lseek(z->fd, (off_t)pos, SEEK_DATA);
    if (d < 0 && errno == ENXIO)
      break; /* a hole up to the end */
    if (d >= 0)
      pos = (uint64_t)d;
    if (pos >= z->len)
      break;
    uint64_t n = z->len - pos < sizeof buf ? z->len - pos : sizeof buf;
    ssize_t r = pread(z->fd, buf, n, (off_t)pos);
    if (r <= 0) {
      set_err(err, errlen, "dir: %s/%s: %s", s->path, name,
              r < 0 ? strerror(errno) : "cut short while read");
      errno = EIO;
      return -1;
    }
    for (ssize_t i = 0; i < r; i++)
      if (buf[i]) {
        set_err(err, errlen,
                "dir: %s/%s holds data at byte %" PRIu64 ", past the zone "
                "capacity %" PRIu64 " (was the zone written with another "
                "zone_capacity?)",
                s->path, name, pos + (uint64_t)i, z->cap);
        errno = EINVAL;
        return -1;
      }
    pos += (uint64_t)r;
  }
  z->loaded = z->cap;
  return 0;
}

/* Open the zone files of a formatted directory and check them: each a
 * regular file of its own, not reached through a symbolic link
 * (O_NOFOLLOW: two zones sharing one file would each overwrite the
 * other), of a size the zone can have: a conventional zone's length, a
 * sequential zone's write pointer, so a multiple of the block size and at
 * most the capacity (zloop refuses the same files when a device is
 * added).  Errors name the file; EINVAL for a file of the wrong kind or
 * size, ELOOP for a symbolic link. */
static int
open_files(struct dir_store *s, char *err, size_t errlen)
{
  char name[32];
  struct file_id *ids = malloc(s->nr_zones * sizeof *ids);
  int r = -1;
  if (!ids) {
    set_err(err, errlen, "dir: out of memory");
    errno = ENOMEM;
    goto out;
  }
  for (uint32_t i = 0; i < s->nr_zones; i++) {
    struct dzone *z = &s->z[i];
    struct stat st;
    dir_zone_name(s, i, name, sizeof name);
    z->fd = openat(s->dirfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (z->fd < 0 && errno == ELOOP) {
      set_err(err, errlen,
              "dir: %s/%s is a symbolic link; zone files must be regular "
              "files in the directory itself",
              s->path, name);
      errno = ELOOP;
      goto out;
    }
    if (z->fd < 0 || fstat(z->fd, &st) < 0) {
      set_err(err, errlen, "dir: %s/%s: %s", s->path, name, strerror(errno));
      goto out;
    }
    if (!S_ISREG(st.st_mode)) {
      set_err(err, errlen, "dir: %s/%s is not a regular file", s->path, name);
      errno = EINVAL;
      goto out;
    }
    ids[i] = (struct file_id){st.st_dev, st.st_ino, i};
    z->loaded = (uint64_t)st.st_size;
    if (!z->seq && z->loaded != z->len) {
      set_err(err, errlen,
              "dir: %s/%s holds %" PRIu64 " bytes, a conventional zone's "
              "file must hold %" PRIu64,
              s->path, name, z->loaded, z->len);
      errno = EINVAL;
      goto out;
    }
    if (z->seq && z->cap < z->len && z->loaded == z->len &&
        full_at_len(s, z, name, err, errlen) < 0)
      goto out;
    if (z->seq && z->loaded > z->cap) {
      set_err(err, errlen,
              "dir: %s/%s holds %" PRIu64 " bytes, more than the zone "
              "capacity %" PRIu64,
              s->path, name, z->loaded, z->cap);
      errno = EINVAL;
      goto out;
    }
    if (z->seq && z->loaded % s->m.blocksize) {
      set_err(err, errlen,
              "dir: %s/%s holds %" PRIu64 " bytes, not a multiple of the "
              "block size %" PRIu32 " (a sequential zone's file size is its "
              "write pointer)",
              s->path, name, z->loaded, s->m.blocksize);
      errno = EINVAL;
      goto out;
    }
  }
  r = distinct_files(s, ids, err, errlen);
out:
  free(ids);
  return r;
}

/* The record of geometry G (what a directory formatted for it holds). */
static void
meta_from_geometry(struct znbd_dir_meta *m, const struct znbd_geometry *g)
{
  memset(m, 0, sizeof *m);
  m->zoned = g->zoned;
  m->size = g->size;
  m->blocksize = g->blocksize;
  if (g->zoned) {
    m->zone_size = g->zone_size;
    m->zone_capacity = g->zone_capacity;
    m->nr_conv = g->nr_conv;
    m->max_open = g->max_open;
    m->max_active = g->max_active;
  }
}

/* The recorded geometry must be the device's, S->geo (unset parameters
 * were filled from it by znbd_params_finish). */
static int
check_geometry(struct dir_store *s, char *err, size_t errlen)
{
  struct znbd_dir_meta cur;
  meta_from_geometry(&cur, &s->geo);
  for (size_t k = 0; k < ZNBD_DIR_META_NKEYS; k++) {
    if (strcmp(znbd_dir_meta_key(k), "write_cache") && (k < 3 || s->m.zoned) &&
        znbd_dir_meta_mismatch(&s->m, &cur, k, s->path, err, errlen) < 0)
      return -1;
  }
  return 0;
}

/* A formatted directory: metadata, geometry, fault lists, files. */
static int
open_formatted(struct dir_store *s, char *err, size_t errlen)
{
  char *text = NULL, *ro = NULL, *off = NULL;
  int r = znbd_dir_meta_load(s->dirfd, s->path, &s->m, &text, &ro, &off, err,
                             errlen);
  if (r <= 0)
    return -1;
  if (check_geometry(s, err, errlen) < 0 || layout(s) < 0)
    goto fail;
  const char *lists[2] = {ro, off};
  for (int i = 0; i < 2; i++) {
    struct fault_mark f = {s, i ? ZNBD_ZONE_COND_OFFLINE
                                : ZNBD_ZONE_COND_READONLY};
    if (*lists[i] &&
        znbd_parse_zone_list(lists[i], s->nr_zones, mark_fault, &f) != 0) {
      set_err(err, errlen, "dir: %s/%s is corrupt: bad %s list", s->path,
              META_NAME, i ? "zone_offline" : "zone_readonly");
      errno = EINVAL;
      goto fail;
    }
  }
  free(text);
  text = NULL;
  if (enough_fds(s, err, errlen) < 0 || open_files(s, err, errlen) < 0)
    goto fail;
  return 0;
fail:
  free(text);
  return -1;
}

/* buffered_io=false: the O_DIRECT descriptors, and the alignment direct
 * I/O needs (statx STATX_DIOALIGN, Linux 6.1; 4096 when the kernel does
 * not say, and a call that fails with EINVAL falls back to the buffered
 * descriptor).  A file system without O_DIRECT stops start-up with a
 * message naming buffered_io (errno EINVAL). */
static int
open_direct(struct dir_store *s, char *err, size_t errlen)
{
  char name[32];
  if (!s->direct)
    return 0;
  s->mem_align = s->off_align = 4096;
  for (uint32_t i = 0; i < s->nr_zones; i++) {
    struct dzone *z = &s->z[i];
    dir_zone_name(s, i, name, sizeof name);
#ifdef STATX_DIOALIGN
    struct statx stx;
    if (i == 0 && statx(s->dirfd, name, 0, STATX_DIOALIGN, &stx) == 0 &&
        (stx.stx_mask & STATX_DIOALIGN)) {
      if (!stx.stx_dio_offset_align) {
        errno = EINVAL;
        goto fail;
      }
      s->mem_align = stx.stx_dio_mem_align ? stx.stx_dio_mem_align : 1;
      s->off_align = stx.stx_dio_offset_align;
    }
#endif
    z->dfd = openat(s->dirfd, name, O_RDWR | O_DIRECT | O_CLOEXEC | O_NOFOLLOW);
    if (z->dfd < 0)
      goto fail;
  }
  return 0;
fail:
  set_err(err, errlen,
          "buffered_io=false: %s/%s cannot be opened for direct I/O "
          "(O_DIRECT): %s",
          s->path, name, strerror(errno));
  errno = EINVAL;
  return -1;
}

int
znbd_dir_open(struct dir_store *s, const struct znbd_params *p, char *err,
              size_t errlen)
{

  s->path = strdup(p->dir);
  if (!s->path) {
    set_err(err, errlen, "dir: out of memory");
    return -1;
  }
  if (mkdir(s->path, 0700) < 0 && errno != EEXIST) {
    set_err(err, errlen, "dir: cannot create %s: %s", s->path, strerror(errno));
    return -1;
  }
  s->dirfd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (s->dirfd < 0) {
    set_err(err, errlen, "dir: %s: %s", s->path, strerror(errno));
    return -1;
  }
  /* The lock is held on the directory itself, which cannot be removed
   * from under the server while it holds files (a lock on znbd.lock alone
   * was lost when someone deleted that file, and a second server then
   * wrote the same zones); znbd.lock is still locked too, for servers
   * that only know that one. */
  if (flock(s->dirfd, LOCK_EX | LOCK_NB) < 0) {
    bool busy = errno == EWOULDBLOCK;
    return fail_err(err, errlen, busy ? EEXIST : errno,
                    "dir: %s is in use by another server (the directory and "
                    "its %s are locked)%s%s",
                    s->path, LOCK_NAME, busy ? "" : ": ",
                    busy ? "" : strerror(errno));
  }
  s->lockfd = openat(s->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (s->lockfd < 0) {
    set_err(err, errlen, "dir: %s/%s: %s", s->path, LOCK_NAME, strerror(errno));
    return -1;
  }
  if (flock(s->lockfd, LOCK_EX | LOCK_NB) < 0) {
    bool busy = errno == EWOULDBLOCK;
    return fail_err(err, errlen, busy ? EEXIST : errno,
                    "dir: %s is in use by another server (%s/%s is locked)%s%s",
                    s->path, s->path, LOCK_NAME, busy ? "" : ": ",
                    busy ? "" : strerror(errno));
  }
  if (faccessat(s->dirfd, META_NAME, F_OK, 0) == 0) {
    if (open_formatted(s, err, errlen) < 0)
      return -1;
    (void)unlinkat(s->dirfd, FORMAT_MARK, 0); /* its format did finish */
  } else {
    if (errno != ENOENT) {
      set_err(err, errlen, "dir: %s/%s: %s", s->path, META_NAME,
              strerror(errno));
      return -1;
    }
    uint32_t nfiles;
    meta_from_geometry(&s->m, &s->geo);
    if (dir_scan(s, &nfiles, err, errlen) < 0 || layout(s) < 0 ||
        enough_fds(s, err, errlen) < 0 ||
        (nfiles ? adopt(s, err, errlen)
                : format(s, p->zone_full, err, errlen)) < 0)
      return -1;
  }
  if (open_direct(s, err, errlen) < 0)
    return -1;
  return 0;
}
