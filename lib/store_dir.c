/* znbd: the directory store (lib/store_dir.h): one file per zone, as
 * Linux zloop lays them out, so a device survives a restart.
 *
 * Design, and why:
 *
 * - Files stay open for the life of the store (one descriptor per zone),
 *   and I/O is pread/pwrite through the page cache: fast, and a restart
 *   after kill -9 still sees every completed write.  RLIMIT_NOFILE is
 *   raised to its hard limit at open; a device with more zones than that
 *   allows is refused with a message saying so.
 *
 * - buffered_io=false (zloop's default, its buffered_io option off): a
 *   second descriptor per zone opened with O_DIRECT.  A piece of a request
 *   whose file offset and length are multiples of the file's direct-I/O
 *   alignment (statx STATX_DIOALIGN; 4096 when the kernel does not say)
 *   goes through it, from the caller's buffer when that is aligned in
 *   memory too, else through a per-thread aligned bounce buffer (the NBD
 *   server's payloads sit right after a 28-byte header).  Anything else,
 *   and a direct call that fails with EINVAL, uses the buffered
 *   descriptor: the kernel keeps the two coherent (a direct read or write
 *   writes back and invalidates the cached pages of its range first).
 *   FLUSH still fdatasyncs the files written (the disk's cache, and the
 *   file size of a sequential zone).  Measured slower than buffered on
 *   ext4 (bench/README.md): synchronous direct writes wait for the disk
 *   on every request, so buffered stays the default.
 *
 * - A sequential zone's file size IS its write pointer.  Writes come only
 *   at the wp (the zone engine checks before the store is called), so a
 *   write that fails part-way (disk full, I/O error) is undone by
 *   truncating the file back to where the write started: nothing changes.
 *   Conventional zones (and the zoned=false data file) have the range
 *   allocated with fallocate() before the data is written, so a full file
 *   system fails the request before any byte changes.
 *
 * - Reset truncates to 0 (which also frees preallocated space); finish
 *   truncates to the zone capacity (zloop since 2026; the engine's wp goes
 *   to the zone end as null_blk's, and both read as zeros past the data).
 *
 * - zone_prealloc: the first write into a sequential zone since it was
 *   empty (or an explicit open) fallocates its whole capacity with
 *   FALLOC_FL_KEEP_SIZE, so the file size stays the wp while appends never
 *   have to allocate (rublk found buffered appends that allocate slow).
 *   Best effort: a file system without fallocate, or without room for the
 *   whole zone, just writes without it.
 *
 * - Durability: every file written (or truncated) since the last flush is
 *   marked dirty; FLUSH starts writeback of all dirty files, then
 *   fdatasyncs each (the disk gets them together), FUA the files of its
 *   range.  The directory and the metadata are synced when they change.
 *
 * - Early writeback (writeback_mb=N, buffered I/O only): once N MiB have
 *   been written to a zone file since its last kick, the file is queued
 *   for the store's writeback thread, which starts writeback of its dirty
 *   pages (sync_file_range with SYNC_FILE_RANGE_WRITE: queues the I/O,
 *   waits for none of it), as a drive destages its cache while more data
 *   comes in; the FLUSH that follows then finds most pages clean.  A
 *   thread of its own because the call can block while the disk's queue
 *   is full, and submitting the I/O costs CPU the serving thread would
 *   otherwise spend before its next request (measured: inline kicks gave
 *   no gain, bench/README.md).  The thread starts with the first kick, so
 *   a process that forks after opening the store (a daemon) has it.  It
 *   changes no durability promise: FLUSH and FUA still fdatasync, the
 *   zone stays marked dirty, a write-back error is reported by that
 *   fdatasync (sync_file_range without a WAIT flag leaves the file's
 *   error state alone), and the power-cut rollback (lib/wcache.c)
 *   truncates and rewrites files, which does not depend on which pages
 *   happen to be on disk.  A sequential zone's kick stops before the page
 *   the wp is in (the next append would dirty it again).

 * - PATH/znbd.meta is text, key=value lines between a magic line and an
 *   "end" line (so a truncated file is detected); it is replaced
 *   atomically (write a temporary file, fsync, rename, fsync the
 *   directory).  PATH/znbd.lock is held with flock(LOCK_EX | LOCK_NB): a
 *   second server on the same directory stops at start-up.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "store_dir.h"
#include "znbd/dev.h"
#include "err.h"

#define META_NAME "znbd.meta"
#define META_TMP "znbd.meta.tmp"
#define FORMAT_MARK "znbd.formatting" /* a format under way */
#define LOCK_NAME "znbd.lock"
#define JOURNAL_NAME "znbd.wcache"
#define META_MAGIC "znbd-dir 1"
#define META_MAX (16u << 20) /* bytes: a corrupt file is not read whole */

struct dzone {
  int fd;
  int dfd; /* O_DIRECT descriptor (buffered_io=false), else -1 */
  bool seq;
  uint64_t start, len, cap;  /* bytes */
  uint64_t loaded;           /* file size found at open (seq: the wp) */
  _Atomic bool dirty;        /* written or truncated since the last sync */
  pthread_mutex_t sync_lock; /* held across taking dirty and its fdatasync */
  _Atomic bool prealloc;     /* capacity fallocated since the last reset */
  _Atomic uint64_t unkicked; /* bytes written since the last writeback kick */
  _Atomic uint64_t kick_end; /* kick: write back up to here (0: whole file) */
  _Atomic bool kick_queued;  /* in the writeback thread's queue */
  uint8_t fault;             /* 0, ZNBD_ZONE_COND_READONLY or _OFFLINE */
};

/* What PATH/znbd.meta records. */
struct meta {
  bool zoned, write_cache;
  uint64_t size, zone_size, zone_capacity;
  uint32_t blocksize, nr_conv, max_open, max_active;
};

struct dir_store {
  struct znbd_store base;
  char *path;
  int dirfd, lockfd;
  int jfd; /* PATH/znbd.wcache (write_cache's undo journal), or -1 */
  bool prealloc;
  bool direct;            /* buffered_io=false */
  uint64_t wb_bytes;      /* writeback_mb in bytes; 0: no early kick */
  _Atomic uint64_t kicks; /* early writeback kicks, for tests */
  /* The writeback thread and its queue of zone numbers (each zone at most
   * once: kick_queued), under wb_lock. */
  pthread_mutex_t wb_lock;
  pthread_cond_t wb_cond;
  pthread_t wb_th;
  uint32_t *wb_q, wb_n;
  bool wb_started, wb_failed, wb_stop;
  uint32_t mem_align, off_align; /* direct I/O alignment, bytes */
  struct meta m;
  uint32_t nr_zones; /* zoned=false: one "zone", the data file */
  struct dzone *z;
  pthread_mutex_t meta_lock; /* rewriting znbd.meta */
};

static const struct znbd_store_ops dir_ops;

/* ------------------------------------------------------------ metadata */

/* The fields of struct meta by name, for reading and writing. */
enum mtype { M_BOOL, M_U32, M_U64 };
static const struct {
  const char *key;
  enum mtype type;
  size_t off;
} meta_keys[] = {
    {"zoned", M_BOOL, offsetof(struct meta, zoned)},
    {"size", M_U64, offsetof(struct meta, size)},
    {"blocksize", M_U32, offsetof(struct meta, blocksize)},
    {"zone_size", M_U64, offsetof(struct meta, zone_size)},
    {"zone_capacity", M_U64, offsetof(struct meta, zone_capacity)},
    {"zone_nr_conv", M_U32, offsetof(struct meta, nr_conv)},
    {"zone_max_open", M_U32, offsetof(struct meta, max_open)},
    {"zone_max_active", M_U32, offsetof(struct meta, max_active)},
    {"write_cache", M_BOOL, offsetof(struct meta, write_cache)},
};
#define NR_META_KEYS (sizeof meta_keys / sizeof meta_keys[0])

static uint64_t
meta_get(const struct meta *m, size_t k)
{
  const char *p = (const char *)m + meta_keys[k].off;
  switch (meta_keys[k].type) {
  case M_BOOL:
    return *(const bool *)p;
  case M_U32:
    return *(const uint32_t *)p;
  default:
    return *(const uint64_t *)p;
  }
}

static void
meta_put(struct meta *m, size_t k, uint64_t v)
{
  char *p = (char *)m + meta_keys[k].off;
  switch (meta_keys[k].type) {
  case M_BOOL:
    *(bool *)p = v != 0;
    break;
  case M_U32:
    *(uint32_t *)p = (uint32_t)v;
    break;
  default:
    *(uint64_t *)p = v;
  }
}

/* The first keys, up to zone_size, lay out the files (zoned, size,
 * blocksize first). */
#define NR_LAYOUT_KEYS 4

/* Key K of the recorded REC differs from CUR (given): -1, errno EINVAL and
 * a message naming the key and both values; else 0. */
static int
mismatch(const struct meta *rec, const struct meta *cur, size_t k,
         const char *path, char *err, size_t errlen)
{
  const char *key = meta_keys[k].key;
  uint64_t want = meta_get(rec, k), got = meta_get(cur, k);
  if (want == got)
    return 0;
  set_err(err, errlen,
          "%s: %" PRIu64 " given, but dir=%s was formatted with %s=%" PRIu64
          " (%s/%s)",
          key, got, path, key, want, path, META_NAME);
  errno = EINVAL;
  return -1;
}

static void
meta_from_params(struct meta *m, const struct znbd_params *p)
{
  memset(m, 0, sizeof *m);
  m->zoned = p->zoned;
  m->size = p->size;
  m->blocksize = p->blocksize;
  if (p->zoned) {
    m->zone_size = p->zone_size;
    m->zone_capacity = p->zone_capacity;
    m->nr_conv = p->zone_nr_conv;
    m->max_open = p->zone_max_open;
    m->max_active = p->zone_max_active;
  }
}

/* Zone list of the zones whose fault is COND, "3,7-9" ("" for none),
 * appended to BUF at *LEN (BUF has room: 24 bytes per zone). */
static void
fault_list(const struct dir_store *s, uint8_t cond, char *buf, size_t *len)
{
  bool first = true;
  for (uint32_t i = 0; i < s->nr_zones; i++) {
    if (s->z[i].fault != cond)
      continue;
    uint32_t j = i;
    while (j + 1 < s->nr_zones && s->z[j + 1].fault == cond)
      j++;
    *len += (size_t)sprintf(buf + *len, "%s%" PRIu32, first ? "" : ",", i);
    if (j > i)
      *len += (size_t)sprintf(buf + *len, "-%" PRIu32, j);
    first = false;
    i = j;
  }
}

static int
write_all(int fd, const char *p, size_t n)
{
  while (n) {
    ssize_t r = write(fd, p, n);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Replace PATH/znbd.meta atomically.  Caller holds meta_lock (or is
 * alone). */
static int
meta_save(struct dir_store *s)
{
  size_t cap = 1024 + (size_t)s->nr_zones * 24, len = 0;
  char *buf = malloc(cap);
  int fd = -1, e;

  if (!buf)
    return -1;
  len += (size_t)sprintf(buf + len, "%s\n", META_MAGIC);
  for (size_t k = 0; k < NR_META_KEYS; k++)
    len += (size_t)sprintf(buf + len, "%s=%" PRIu64 "\n", meta_keys[k].key,
                           meta_get(&s->m, k));
  len += (size_t)sprintf(buf + len, "zone_readonly=");
  fault_list(s, ZNBD_ZONE_COND_READONLY, buf, &len);
  len += (size_t)sprintf(buf + len, "\nzone_offline=");
  fault_list(s, ZNBD_ZONE_COND_OFFLINE, buf, &len);
  len += (size_t)sprintf(buf + len, "\nend\n");

  fd = openat(s->dirfd, META_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
              0600);
  if (fd < 0 || write_all(fd, buf, len) < 0 || fsync(fd) < 0)
    goto fail;
  close(fd);
  fd = -1;
  if (renameat(s->dirfd, META_TMP, s->dirfd, META_NAME) < 0 ||
      fsync(s->dirfd) < 0)
    goto fail;
  free(buf);
  return 0;

fail:
  e = errno;
  if (fd >= 0)
    close(fd);
  free(buf);
  errno = e;
  return -1;
}

/* Read the whole of PATH/NAME (at most META_MAX bytes) into a string.
 * NULL with errno (ENOENT: no such file; EFBIG: too large). */
static char *
slurp(int dirfd, const char *name)
{
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat st;
  char *buf = NULL;
  if (fstat(fd, &st) < 0)
    goto fail;
  if (!S_ISREG(st.st_mode) || st.st_size > META_MAX) {
    errno = S_ISREG(st.st_mode) ? EFBIG : EINVAL;
    goto fail;
  }
  buf = malloc((size_t)st.st_size + 1);
  if (!buf)
    goto fail;
  size_t got = 0;
  while (got < (size_t)st.st_size) {
    ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0)
        errno = EIO;
      goto fail;
    }
    got += (size_t)r;
  }
  buf[got] = '\0';
  close(fd);
  return buf;

fail:;
  int e = errno;
  free(buf);
  close(fd);
  errno = e;
  return NULL;
}

/* Parse TEXT (PATH/znbd.meta) into M and, when not NULL, the fault lists
 * into *RO and *OFF (pointers into TEXT, NUL-terminated there).  Every key
 * must appear exactly once, between the magic line and "end".  Returns 0,
 * or -1 with errno EINVAL and the reason in ERR. */
static int
meta_parse(char *text, struct meta *m, char **ro, char **off, char *err,
           size_t errlen)
{
  unsigned seen = 0, nline = 0;
  bool end = false;
  char *save = NULL, *line;
  char *lists[2] = {NULL, NULL};

  memset(m, 0, sizeof *m);
  for (line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    nline++;
    if (nline == 1) {
      if (strcmp(line, META_MAGIC) != 0) {
        set_err(err, errlen, "line 1 is not \"%s\"", META_MAGIC);
        goto bad;
      }
      continue;
    }
    if (end) {
      set_err(err, errlen, "line %u: text after \"end\"", nline);
      goto bad;
    }
    if (strcmp(line, "end") == 0) {
      end = true;
      continue;
    }
    char *eq = strchr(line, '=');
    if (!eq) {
      set_err(err, errlen, "line %u: not key=value", nline);
      goto bad;
    }
    *eq = '\0';
    const char *v = eq + 1;
    if (strcmp(line, "zone_readonly") == 0 ||
        strcmp(line, "zone_offline") == 0) {
      int i = line[5] == 'o';
      if (lists[i]) {
        set_err(err, errlen, "line %u: %s twice", nline, line);
        goto bad;
      }
      lists[i] = eq + 1;
      continue;
    }
    size_t k;
    for (k = 0; k < NR_META_KEYS; k++)
      if (strcmp(line, meta_keys[k].key) == 0)
        break;
    if (k == NR_META_KEYS || (seen >> k & 1)) {
      set_err(err, errlen, "line %u: %s key %s", nline,
              k == NR_META_KEYS ? "unknown" : "repeated", line);
      goto bad;
    }
    char *q;
    errno = 0;
    unsigned long long n = strtoull(v, &q, 10);
    if (errno || q == v || *q || *v < '0' || *v > '9' ||
        (meta_keys[k].type == M_U32 && n > UINT32_MAX) ||
        (meta_keys[k].type == M_BOOL && n > 1)) {
      set_err(err, errlen, "line %u: bad value for %s", nline, line);
      goto bad;
    }
    meta_put(m, k, n);
    seen |= 1u << k;
  }
  if (nline == 0 || !end || seen != (1u << NR_META_KEYS) - 1 || !lists[0] ||
      !lists[1]) {
    set_err(err, errlen, "truncated (no \"end\" line or a key missing)");
    goto bad;
  }
  if (m->size == 0 || (m->blocksize != 512 && m->blocksize != 4096) ||
      (m->zoned && (m->zone_size == 0 || m->zone_capacity == 0 ||
                    m->zone_capacity > m->zone_size))) {
    set_err(err, errlen, "impossible geometry");
    goto bad;
  }
  if (ro)
    *ro = lists[0];
  if (off)
    *off = lists[1];
  return 0;
bad:
  errno = EINVAL;
  return -1;
}

/* Read and parse DIRFD/znbd.meta for PATH.  Returns 1 (read, M filled), 0
 * (no such file), or -1 with errno and a message naming the file.  *TEXT
 * (when not NULL) keeps the text the fault lists point into. */
static int
meta_load(int dirfd, const char *path, struct meta *m, char **text, char **ro,
          char **off, char *err, size_t errlen)
{
  char why[160];
  char *t = slurp(dirfd, META_NAME);
  if (!t) {
    if (errno == ENOENT)
      return 0;
    int e = errno;
    set_err(err, errlen, "dir: %s/%s: %s", path, META_NAME, strerror(e));
    errno = e == EFBIG ? EINVAL : e;
    return -1;
  }
  if (meta_parse(t, m, ro, off, why, sizeof why) < 0) {
    set_err(err, errlen, "dir: %s/%s is corrupt: %s", path, META_NAME, why);
    free(t);
    errno = EINVAL;
    return -1;
  }
  if (text)
    *text = t;
  else
    free(t);
  return 1;
}

/* The block size Linux zloop gives a device whose zone files live on the
 * file system of PATH (or of its parent directory, PATH not made yet):
 * zloop_get_block_size() takes the file system's block size when it is at
 * most 4096 bytes.  0 when larger (zloop then takes the direct-I/O
 * alignment, which is not known before a file exists) or unknown. */
static uint32_t
zloop_block_size(const char *path)
{
  struct statvfs sv;
  char *parent = NULL;
  int r = statvfs(path, &sv);
  if (r < 0 && errno == ENOENT) {
    parent = strdup(path);
    char *slash = parent ? strrchr(parent, '/') : NULL;
    if (slash == parent && slash)
      slash[1] = '\0'; /* "/x": the root */
    else if (slash)
      *slash = '\0';
    r = parent ? statvfs(slash ? parent : ".", &sv) : -1;
    free(parent);
  }
  if (r < 0 || sv.f_bsize == 0 || sv.f_bsize > 4096)
    return 0;
  return (uint32_t)sv.f_bsize;
}

/* The blocksize of a directory formatted now (zoned): zloop's block size
 * of the file system (512 up to 512 bytes, 4096 for 1024 to 4096: the
 * sequential files' sizes are then multiples of it, as zloop requires),
 * 4096 when zloop's is not known.  A given blocksize smaller than zloop's
 * is kept, with a NOTE that zloop may refuse the files. */
static void
default_blocksize(struct znbd_params *p, void (*note)(const char *msg))
{
  uint32_t zbs = zloop_block_size(p->dir);
  if (!znbd_params_given(p, "blocksize")) {
    p->blocksize = zbs && zbs <= 512 ? 512 : 4096;
    return;
  }
  if (note && zbs && p->blocksize < zbs) {
    char msg[512];
    snprintf(msg, sizeof msg,
             "blocksize: %" PRIu32 " is smaller than the file system's "
             "block size %" PRIu32 " under dir=%s: Linux zloop refuses a "
             "sequential zone file whose size is not a multiple of %" PRIu32,
             p->blocksize, zbs, p->dir, zbs);
    note(msg);
  }
}

/* DIRFD holds a zone file (cnv-NNNNNN, seq-NNNNNN): 1, else 0. */
static bool zone_file_name(const char *n);
static int
has_zone_files(int dirfd)
{
  int fd = dup(dirfd);
  DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
  struct dirent *de;
  int r = 0;
  if (!dp) {
    if (fd >= 0)
      close(fd);
    return 0;
  }
  while (!r && (de = readdir(dp)))
    r = zone_file_name(de->d_name) && strcmp(de->d_name, "data");
  closedir(dp);
  return r;
}

int
znbd_store_dir_params(struct znbd_params *p, void (*note)(const char *msg),
                      char *err, size_t errlen)
{
  struct meta m;
  int dirfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int r = 0;
  if (dirfd < 0 && errno != ENOENT) {
    int e = errno;
    set_err(err, errlen, "dir: %s: %s", p->dir, strerror(e));
    errno = e;
    return -1;
  }
  bool zloop = false;
  if (dirfd >= 0) {
    r = meta_load(dirfd, p->dir, &m, NULL, NULL, NULL, err, errlen);
    zloop = r == 0 && faccessat(dirfd, FORMAT_MARK, F_OK, 0) < 0 &&
            has_zone_files(dirfd);
    close(dirfd);
  }
  if (r < 0)
    return r;
  if (r == 0) { /* formatted when the device is made: the geometry first */
    if (p->size == 0 && zloop) {
      set_err(err, errlen,
              "size: required: dir=%s holds zone files but no %s (a Linux "
              "zloop directory?): give the geometry it was made with, "
              "size= (zloop's capacity_mb), zone_size= (zone_size_mb, "
              "zloop's default 256M), zone_capacity= (zone_capacity_mb) and "
              "zone_nr_conv= (conv_zones, zloop's default 8)",
              p->dir, META_NAME);
      errno = EINVAL;
      return -1;
    }
    if (p->zoned)
      default_blocksize(p, note);
    if (p->size == 0) {
      set_err(err, errlen,
              "size: required: dir=%s has no %s yet (a new directory is "
              "formatted with the geometry given: size=, and zone_size=, "
              "zone_nr_conv=, ... when not the defaults)",
              p->dir, META_NAME);
      errno = EINVAL;
      return -1;
    }
    return 0;
  }
  /* Not given: the recorded value.  Given and different: the layout keys
   * are refused now (before other checks complain about a consequence),
   * the others when the store opens (znbd_store_dir_open compares them
   * after the clamps, which may change a given value). */
  struct meta cur;
  meta_from_params(&cur, p);
  for (size_t k = 0; k < NR_META_KEYS; k++) {
    const char *key = meta_keys[k].key;
    if (!znbd_params_given(p, key))
      meta_put(&cur, k, meta_get(&m, k));
    else if (k < NR_LAYOUT_KEYS && (k < 3 || m.zoned) &&
             mismatch(&m, &cur, k, p->dir, err, errlen) < 0)
      return -1;
  }
  p->zoned = cur.zoned;
  p->size = cur.size;
  p->blocksize = cur.blocksize;
  if (p->zoned) {
    p->zone_size = cur.zone_size;
    p->zone_capacity = cur.zone_capacity;
    p->zone_nr_conv = cur.nr_conv;
    p->zone_max_open = cur.max_open;
    p->zone_max_active = cur.max_active;
  }
  if (p->zone_full && note) {
    char msg[512];
    snprintf(msg, sizeof msg,
             "zone_full: ignored, dir=%s is formatted already (its files "
             "give each zone's write pointer)",
             p->dir);
    note(msg);
  }
  return 0;
}

/* ------------------------------------------------------------- opening */

static int open_files(struct dir_store *s, char *err, size_t errlen);

static void
zone_name(const struct dir_store *s, uint32_t i, char *buf, size_t len)
{
  if (!s->m.zoned)
    snprintf(buf, len, "data");
  else
    snprintf(buf, len, "%s-%06" PRIu32, s->z[i].seq ? "seq" : "cnv", i);
}

/* Lay out the zones (or the one data file) from M. */
static int
layout(struct dir_store *s)
{
  const struct meta *m = &s->m;
  uint64_t zsize = m->zoned ? m->zone_size : m->size;
  uint64_t n = m->size / zsize + (m->size % zsize != 0);
  uint32_t nr_conv = m->nr_conv;

  if (m->zoned && nr_conv >= n)
    nr_conv = (uint32_t)n - 1;
  s->nr_zones = (uint32_t)n;
  s->z = calloc(n, sizeof *s->z);
  if (!s->z)
    return -1;
  for (uint32_t i = 0; i < s->nr_zones; i++) {
    struct dzone *z = &s->z[i];
    z->fd = z->dfd = -1;
    pthread_mutex_init(&z->sync_lock, NULL);
    z->start = (uint64_t)i * zsize;
    z->len = m->size - z->start < zsize ? m->size - z->start : zsize;
    z->seq = m->zoned && i >= nr_conv;
    z->cap = z->seq && m->zone_capacity < z->len ? m->zone_capacity : z->len;
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

/* NAME is one a zone file of ours can have. */
static bool
zone_file_name(const char *n)
{
  if (!strcmp(n, "data"))
    return true;
  if (strlen(n) != 10 || (strncmp(n, "cnv-", 4) && strncmp(n, "seq-", 4)))
    return false;
  for (int i = 4; i < 10; i++)
    if (n[i] < '0' || n[i] > '9')
      return false;
  return true;
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
        !strcmp(n, META_TMP) || !strcmp(n, FORMAT_MARK))
      continue;
    if (redo && zone_file_name(n) && unlinkat(s->dirfd, n, 0) == 0)
      continue;
    if (!redo && zone_file_name(n)) {
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

/* Zone file name N (zone_file_name() true) against the layout: 0, or -1
 * with errno EINVAL and ERR saying why it does not fit. */
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
    if (zone_file_name(de->d_name))
      r = fits_layout(s, de->d_name, err, errlen);
  closedir(dp);
  if (r < 0)
    return -1;
  if (open_files(s, err, errlen) < 0)
    return -1;
  if (meta_save(s) < 0) {
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
    zone_name(s, i, name, sizeof name);
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
  if (fsync(s->dirfd) < 0 || meta_save(s) < 0) {
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
      zone_name(s, ids[i - 1].zone, a, sizeof a);
      zone_name(s, ids[i].zone, b, sizeof b);
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
    zone_name(s, i, name, sizeof name);
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

/* The recorded geometry must be what P says (unset parameters were
 * filled from it by znbd_store_dir_params). */
static int
check_geometry(struct dir_store *s, const struct znbd_params *p, char *err,
               size_t errlen)
{
  struct meta cur;
  meta_from_params(&cur, p);
  for (size_t k = 0; k < NR_META_KEYS; k++) {
    if (strcmp(meta_keys[k].key, "write_cache") && (k < 3 || s->m.zoned) &&
        mismatch(&s->m, &cur, k, s->path, err, errlen) < 0)
      return -1;
  }
  return 0;
}

/* A formatted directory: metadata, geometry, fault lists, files. */
static int
open_formatted(struct dir_store *s, const struct znbd_params *p, char *err,
               size_t errlen)
{
  char *text = NULL, *ro = NULL, *off = NULL;
  int r = meta_load(s->dirfd, s->path, &s->m, &text, &ro, &off, err, errlen);
  if (r <= 0)
    return -1;
  if (check_geometry(s, p, err, errlen) < 0 || layout(s) < 0)
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
    zone_name(s, i, name, sizeof name);
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

static void
dir_free(struct znbd_store *base)
{
  struct dir_store *s = (struct dir_store *)base;
  pthread_mutex_lock(&s->wb_lock);
  s->wb_stop = true;
  pthread_cond_signal(&s->wb_cond);
  pthread_mutex_unlock(&s->wb_lock);
  if (s->wb_started)
    pthread_join(s->wb_th, NULL);
  free(s->wb_q);
  pthread_cond_destroy(&s->wb_cond);
  pthread_mutex_destroy(&s->wb_lock);
  if (s->z)
    for (uint32_t i = 0; i < s->nr_zones; i++) {
      if (s->z[i].fd >= 0)
        close(s->z[i].fd);
      if (s->z[i].dfd >= 0)
        close(s->z[i].dfd);
      pthread_mutex_destroy(&s->z[i].sync_lock);
    }
  free(s->z);
  if (s->jfd >= 0)
    close(s->jfd);
  if (s->lockfd >= 0)
    close(s->lockfd); /* drops the flock */
  if (s->dirfd >= 0)
    close(s->dirfd);
  pthread_mutex_destroy(&s->meta_lock);
  free(s->path);
  free(s);
}

struct znbd_store *
znbd_store_dir_open(const struct znbd_params *p, char *err, size_t errlen)
{
  struct dir_store *s = calloc(1, sizeof *s);
  int e;

  if (!s) {
    set_err(err, errlen, "dir: out of memory");
    return NULL;
  }
  s->base.ops = &dir_ops;
  s->dirfd = s->lockfd = s->jfd = -1;
  s->prealloc = p->zone_prealloc;
  s->direct = !p->buffered_io;
  s->wb_bytes = s->direct ? 0 : (uint64_t)p->writeback_mb << 20;
  pthread_mutex_init(&s->wb_lock, NULL);
  pthread_cond_init(&s->wb_cond, NULL);
  pthread_mutex_init(&s->meta_lock, NULL);
  s->path = strdup(p->dir);
  if (!s->path) {
    set_err(err, errlen, "dir: out of memory");
    goto fail;
  }
  if (mkdir(s->path, 0700) < 0 && errno != EEXIST) {
    set_err(err, errlen, "dir: cannot create %s: %s", s->path, strerror(errno));
    goto fail;
  }
  s->dirfd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (s->dirfd < 0) {
    set_err(err, errlen, "dir: %s: %s", s->path, strerror(errno));
    goto fail;
  }
  /* The lock is held on the directory itself, which cannot be removed
   * from under the server while it holds files (a lock on znbd.lock alone
   * was lost when someone deleted that file, and a second server then
   * wrote the same zones); znbd.lock is still locked too, for servers
   * that only know that one. */
  if (flock(s->dirfd, LOCK_EX | LOCK_NB) < 0) {
    e = errno;
    set_err(err, errlen,
            "dir: %s is in use by another server (the directory and its "
            "%s are locked)%s%s",
            s->path, LOCK_NAME, e == EWOULDBLOCK ? "" : ": ",
            e == EWOULDBLOCK ? "" : strerror(e));
    errno = e == EWOULDBLOCK ? EEXIST : e;
    goto fail;
  }
  s->lockfd = openat(s->dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (s->lockfd < 0) {
    set_err(err, errlen, "dir: %s/%s: %s", s->path, LOCK_NAME, strerror(errno));
    goto fail;
  }
  if (flock(s->lockfd, LOCK_EX | LOCK_NB) < 0) {
    e = errno;
    set_err(err, errlen,
            "dir: %s is in use by another server (%s/%s is locked)%s%s",
            s->path, s->path, LOCK_NAME, e == EWOULDBLOCK ? "" : ": ",
            e == EWOULDBLOCK ? "" : strerror(e));
    errno = e == EWOULDBLOCK ? EEXIST : e;
    goto fail;
  }
  if (faccessat(s->dirfd, META_NAME, F_OK, 0) == 0) {
    if (open_formatted(s, p, err, errlen) < 0)
      goto fail;
    (void)unlinkat(s->dirfd, FORMAT_MARK, 0); /* its format did finish */
  } else {
    if (errno != ENOENT) {
      set_err(err, errlen, "dir: %s/%s: %s", s->path, META_NAME,
              strerror(errno));
      goto fail;
    }
    uint32_t nfiles;
    meta_from_params(&s->m, p);
    if (dir_scan(s, &nfiles, err, errlen) < 0 || layout(s) < 0 ||
        enough_fds(s, err, errlen) < 0 ||
        (nfiles ? adopt(s, err, errlen)
                : format(s, p->zone_full, err, errlen)) < 0)
      goto fail;
  }
  if (open_direct(s, err, errlen) < 0)
    goto fail;
  return &s->base;

fail:
  e = errno ? errno : EIO;
  if (err && errlen && !err[0])
    set_err(err, errlen, "dir: %s: %s", p->dir, strerror(e));
  dir_free(&s->base);
  errno = e;
  return NULL;
}

/* ----------------------------------------------------------------- I/O */

/* The zone holding byte OFF, and in *PLEN how much of [OFF, END) is in
 * it. */
static struct dzone *
piece(struct dir_store *s, uint64_t off, uint64_t end, uint64_t *plen)
{
  uint64_t zsize = s->m.zoned ? s->m.zone_size : s->m.size;
  struct dzone *z = &s->z[off / zsize];
  uint64_t zend = z->start + z->len;
  *plen = (zend < end ? zend : end) - off;
  return z;
}

#define FOR_EACH_PIECE(s, off0, len0, z, off, plen)                            \
  for (uint64_t off = (off0), plen = 0, end_ = (off0) + (len0);                \
       off < end_ && ((z) = piece((s), off, end_, &plen)); off += plen)

/* Bounce buffers of buffered_io=false, one per thread (freed when the
 * thread ends). */
#define BOUNCE_SIZE (1u << 20) /* bytes */
#define BOUNCE_ALIGN 4096u     /* bytes; larger mem_align: no bounce */
static pthread_key_t bounce_key;
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;

static void
bounce_init(void)
{
  (void)pthread_key_create(&bounce_key, free);
}

/* This thread's bounce buffer, or NULL (out of memory). */
static uint8_t *
bounce(void)
{
  void *p;
  pthread_once(&bounce_once, bounce_init);
  p = pthread_getspecific(bounce_key);
  if (!p) {
    if (posix_memalign(&p, BOUNCE_ALIGN, BOUNCE_SIZE))
      return NULL;
    if (pthread_setspecific(bounce_key, p)) {
      free(p);
      return NULL;
    }
  }
  return p;
}

/* One pread (WR false) or pwrite of up to N bytes at file offset OFF of
 * zone Z, direct when buffered_io=false and OFF and N are aligned (see
 * the top of this file), else buffered.  Returns the bytes done (0: end
 * of file), or -1 with errno. */
static ssize_t
zone_io(struct dir_store *s, struct dzone *z, uint8_t *buf, uint64_t n,
        uint64_t off, bool wr)
{
  if (z->dfd >= 0 && off % s->off_align == 0 && n % s->off_align == 0) {
    uint8_t *b = buf;
    ssize_t r;
    if ((uintptr_t)buf % s->mem_align) {
      b = s->mem_align <= BOUNCE_ALIGN ? bounce() : NULL;
      if (n > BOUNCE_SIZE)
        n = BOUNCE_SIZE;
      if (b && wr)
        memcpy(b, buf, n);
    }
    if (b) {
      r = wr ? pwrite(z->dfd, b, n, (off_t)off)
             : pread(z->dfd, b, n, (off_t)off);
      if (r > 0 && b != buf && !wr)
        memcpy(buf, b, (size_t)r);
      if (r >= 0 || errno != EINVAL)
        return r;
    }
  }
  return wr ? pwrite(z->fd, buf, n, (off_t)off)
            : pread(z->fd, buf, n, (off_t)off);
}

static int
dir_read(struct znbd_store *base, void *buf, uint64_t len, uint64_t off0)
{
  struct dir_store *s = (struct dir_store *)base;
  struct dzone *z;
  uint8_t *out = buf;

  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    uint64_t zoff = off - z->start, got = 0;
    while (got < plen) {
      ssize_t r = zone_io(s, z, out + got, plen - got, zoff + got, false);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0) {
        errno = EIO;
        return -1;
      }
      if (r == 0) { /* past the end of the file: zeros */
        memset(out + got, 0, plen - got);
        break;
      }
      got += (uint64_t)r;
    }
    out += plen;
  }
  return 0;
}

/* Write N bytes from P at OFF of zone Z's file (S, Z NULL: of FD). */
static int
pwrite_all(struct dir_store *s, struct dzone *z, int fd, const uint8_t *p,
           uint64_t n, uint64_t off)
{
  while (n) {
    if (s)
      znbd_store_before_change(&s->base);
    ssize_t r = z ? zone_io(s, z, (uint8_t *)(uintptr_t)p, n, off, true)
                  : pwrite(fd, p, n, (off_t)off);
    if (s)
      znbd_store_before_change(&s->base); /* and after: see store.h */
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -1;
    p += r;
    n -= (uint64_t)r;
    off += (uint64_t)r;
  }
  return 0;
}

/* Real zeros over [OFF, OFF+LEN) of FD: NBD's NO_HOLE wants the range
 * provisioned, and file systems report fallocated (unwritten) extents as
 * holes to SEEK_DATA. */
static int
write_zeros(struct dir_store *s, int fd, uint64_t len, uint64_t off)
{
  static const uint8_t zeros[64 * 1024];
  for (uint64_t pos = 0; pos < len;) {
    uint64_t n = len - pos < sizeof zeros ? len - pos : sizeof zeros;
    if (pwrite_all(s, NULL, fd, zeros, n, off + pos) < 0)
      return -1;
    pos += n;
  }
  return 0;
}

/* Not supported by this file system: not an error for best-effort
 * allocation. */
static bool
unsupported(int e)
{
  return e == EOPNOTSUPP || e == ENOSYS;
}

/* The holes a write allocated, to give them back when it is refused. */
struct hole {
  int fd;
  uint64_t off, len;
};
struct holes {
  struct hole *v;
  size_t n, cap;
};

static int
holes_add(struct holes *h, int fd, uint64_t off, uint64_t len)
{
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 8;
    struct hole *v = realloc(h->v, cap * sizeof *v);
    if (!v)
      return -1;
    h->v = v;
    h->cap = cap;
  }
  h->v[h->n++] = (struct hole){fd, off, len};
  return 0;
}

/* Punch the holes in H again and free H. */
static void
unallocate(struct holes *h)
{
  int e = errno;
  for (size_t i = 0; i < h->n; i++)
    (void)fallocate(h->v[i].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    (off_t)h->v[i].off, (off_t)h->v[i].len);
  free(h->v);
  h->v = NULL;
  h->n = h->cap = 0;
  errno = e;
}

/* Allocate [OFF, OFF+LEN) of conventional file FD before a write, so the
 * write cannot fail half done: only its holes (SEEK_HOLE / SEEK_DATA),
 * each recorded in H first.  A refused fallocate (ENOSPC) can leave part
 * of its range allocated (ext4 does): the caller's unallocate punches
 * the recorded holes again, which were holes before, so no data is
 * touched.  Without SEEK_HOLE the whole range is allocated and nothing
 * recorded.  A file system without fallocate is no error (0). */
static int
allocate(struct holes *h, int fd, uint64_t off, uint64_t len)
{
  uint64_t pos = off, end = off + len;
  while (pos < end) {
    off_t a = lseek(fd, (off_t)pos, SEEK_HOLE);
    if (a < 0 && errno != ENXIO) { /* no SEEK_HOLE: the whole range */
      if (fallocate(fd, 0, (off_t)off, (off_t)len) < 0 && !unsupported(errno))
        return -1;
      return 0;
    }
    if (a < 0 || (uint64_t)a >= end)
      return 0;
    off_t b = lseek(fd, a, SEEK_DATA);
    uint64_t hend = b < 0 || (uint64_t)b > end ? end : (uint64_t)b;
    if (hend <= (uint64_t)a) {
      /* A write racing this one filled the hole between the two lseeks
       * (SEEK_DATA found data at A): nothing to allocate there, and a
       * zero-length fallocate would fail with EINVAL.  Go on after it. */
      off_t n = lseek(fd, a, SEEK_HOLE);
      if (n < 0 || n <= a)
        return 0;
      pos = (uint64_t)n;
      continue;
    }
    if (holes_add(h, fd, (uint64_t)a, hend - (uint64_t)a) < 0) {
      errno = ENOMEM;
      return -1;
    }
    if (fallocate(fd, 0, a, (off_t)(hend - (uint64_t)a)) < 0) {
      if (unsupported(errno)) {
        h->n--; /* nothing to give back */
        return 0;
      }
      return -1;
    }
    pos = hend;
  }
  return 0;
}

/* zone_prealloc: the capacity of sequential zone Z allocated beyond its
 * end of file (KEEP_SIZE: the size stays the wp).  Best effort. */
static void
prealloc(struct dir_store *s, struct dzone *z)
{
  if (!s->prealloc || !z->seq || atomic_load(&z->prealloc))
    return;
  atomic_store(&z->prealloc, true);
  znbd_store_before_change(&s->base);
  (void)fallocate(z->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)z->cap);
  znbd_store_before_change(&s->base);
}

/* The writeback thread: takes the queued zones and starts the
 * writeback of each (see the top of this file). */
static void *
wb_main(void *arg)
{
  struct dir_store *s = arg;
  pthread_mutex_lock(&s->wb_lock);
  while (!s->wb_stop) {
    if (!s->wb_n) {
      pthread_cond_wait(&s->wb_cond, &s->wb_lock);
      continue;
    }
    struct dzone *z = &s->z[s->wb_q[--s->wb_n]];
    pthread_mutex_unlock(&s->wb_lock);
    atomic_store(&z->kick_queued, false);
    uint64_t end = atomic_load(&z->kick_end);
    (void)sync_file_range(z->fd, 0, (off_t)end, SYNC_FILE_RANGE_WRITE);
    pthread_mutex_lock(&s->wb_lock);
  }
  pthread_mutex_unlock(&s->wb_lock);
  return NULL;
}

/* Queue zone Z for the writeback thread, starting the thread the first
 * time.  Caller holds wb_lock.  Out of memory or threads: no early
 * writeback from then on (FLUSH still writes everything). */
static void
wb_queue(struct dir_store *s, struct dzone *z)
{
  if (!s->wb_started && !s->wb_failed) {
    s->wb_q = malloc(s->nr_zones * sizeof *s->wb_q);
    s->wb_started = s->wb_q && pthread_create(&s->wb_th, NULL, wb_main, s) == 0;
    s->wb_failed = !s->wb_started;
  }
  if (s->wb_started) {
    s->wb_q[s->wb_n++] = (uint32_t)(z - s->z);
    pthread_cond_signal(&s->wb_cond);
  }
}

/* writeback_mb: N more bytes went into the page cache of zone Z's file,
 * up to file offset END; each writeback_mb of them queues the file for
 * the writeback thread (sequential zones: the pages before END's page;
 * others: the whole file).  Best effort: an error of the write-back
 * (ENOSPC, EIO) is the next fdatasync's to report, and the pages stay in
 * the cache until then. */
static void
kick(struct dir_store *s, struct dzone *z, uint64_t n, uint64_t end)
{
  if (!s->wb_bytes || atomic_fetch_add(&z->unkicked, n) + n < s->wb_bytes)
    return;
  atomic_store(&z->unkicked, 0);
  end &= ~(uint64_t)(ZNBD_STORE_PAGE_SIZE - 1);
  if (z->seq && !end)
    return;
  atomic_fetch_add(&s->kicks, 1);
  atomic_store(&z->kick_end, z->seq ? end : 0);
  if (atomic_exchange(&z->kick_queued, true))
    return; /* still queued: the thread reads the new end */
  pthread_mutex_lock(&s->wb_lock);
  wb_queue(s, z);
  pthread_mutex_unlock(&s->wb_lock);
}

/* Write (BUF) or zero (BUF NULL; FLAGS of zero()) [OFF0, OFF0+LEN).
 * First every conventional piece gets its blocks (fallocate), so a full
 * file system fails here before a byte changes; then the data goes in;
 * if that fails, sequential pieces are truncated back to where they
 * started (their file size is their wp: the write was at the wp). */
static int
put(struct dir_store *s, const uint8_t *buf, uint64_t len, uint64_t off0,
    unsigned flags)
{
  struct dzone *z;
  int e = 0;

  struct holes h = {0};
  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    uint64_t zoff = off - z->start;
    znbd_store_before_change(&s->base);
    if (z->seq) {
      prealloc(s, z);
    } else if ((buf || (flags & ZNBD_STORE_ZERO_ALLOCATE)) &&
               allocate(&h, z->fd, zoff, plen) < 0) {
      e = errno == EDQUOT ? ENOSPC : errno;
      unallocate(&h); /* ENOSPC: nothing written yet, nothing left */
      errno = e;
      return -1;
    }
  }
  free(h.v);
  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    uint64_t zoff = off - z->start;
    int r;
    znbd_store_before_change(&s->base);
    if (buf)
      r = pwrite_all(s, z, -1, buf + (off - off0), plen, zoff);
    else if (z->seq) /* zeros at the wp: the file grows */
      r = ftruncate(z->fd, (off_t)(zoff + plen));
    else if (flags & ZNBD_STORE_ZERO_ALLOCATE)
      r = write_zeros(s, z->fd, plen, zoff);
    else
      r = fallocate(z->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    (off_t)zoff, (off_t)plen);
    atomic_store(&z->dirty, true);
    if (r == 0 && (buf || (!z->seq && (flags & ZNBD_STORE_ZERO_ALLOCATE))))
      kick(s, z, plen, zoff + plen);
    if (r < 0) {
      e = errno == ENOSPC || errno == EDQUOT ? ENOSPC : EIO;
      /* Undo the sequential pieces written so far, this one included. */
      struct dzone *u;
      FOR_EACH_PIECE(s, off0, off + plen - off0, u, uoff, ulen)
      {
        (void)ulen;
        if (u->seq)
          (void)ftruncate(u->fd, (off_t)(uoff - u->start));
      }
      znbd_store_before_change(&s->base); /* and after: see store.h */
      errno = e;
      return -1;
    }
  }
  znbd_store_before_change(&s->base);
  return 0;
}

static int
dir_write(struct znbd_store *base, const void *buf, uint64_t len, uint64_t off)
{
  return put((struct dir_store *)base, buf, len, off, 0);
}

static int
dir_zero(struct znbd_store *base, uint64_t len, uint64_t off, unsigned flags)
{
  return put((struct dir_store *)base, NULL, len, off, flags);
}

/* Allocated runs of a conventional zone's file (or the data file), from
 * SEEK_DATA / SEEK_HOLE; sequential zones: data up to the end of file. */
static int
dir_extents(struct znbd_store *base, uint64_t off0, uint64_t len,
            znbd_store_extent_fn fn, void *opaque)
{
  struct dir_store *s = (struct dir_store *)base;
  struct dzone *z;
  int r;

  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    uint64_t pos = off - z->start, end = pos + plen;
    while (pos < end) {
      off_t d = lseek(z->fd, (off_t)pos, SEEK_DATA);
      uint64_t next;
      bool data = d >= 0 && (uint64_t)d == pos;
      if (d < 0 && errno != ENXIO) { /* no SEEK_DATA: all data */
        data = true;
        next = end;
      } else if (data) {
        off_t h = lseek(z->fd, (off_t)pos, SEEK_HOLE);
        next = h < 0 ? end : (uint64_t)h;
      } else {
        next = d < 0 ? end : (uint64_t)d;
      }
      if (next > end)
        next = end;
      if ((r = fn(opaque, z->start + pos, next - pos, data)))
        return r;
      pos = next;
    }
  }
  return 0;
}

/* fdatasync Z if it was written since its last sync.  Under the zone's
 * sync_lock: a second FLUSH (another thread) that finds the flag already
 * taken waits for the fdatasync in progress instead of answering before
 * the data it must cover is on disk. */
static int
sync_zone(struct dzone *z)
{
  int r = 0;
  pthread_mutex_lock(&z->sync_lock);
  if (atomic_exchange(&z->dirty, false) && fdatasync(z->fd) < 0) {
    atomic_store(&z->dirty, true);
    errno = EIO;
    r = -1;
  }
  pthread_mutex_unlock(&z->sync_lock);
  return r;
}

static int
dir_flush(struct znbd_store *base)
{
  struct dir_store *s = (struct dir_store *)base;
  int r = 0;
  /* Start the writeback of every dirty file first, then wait for each:
   * the disk gets all of them at once instead of one file per
   * fdatasync's round trip (a FLUSH after writes to many zones). */
  for (uint32_t i = 0; i < s->nr_zones; i++)
    if (atomic_load(&s->z[i].dirty))
      (void)sync_file_range(s->z[i].fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  for (uint32_t i = 0; i < s->nr_zones; i++)
    if (sync_zone(&s->z[i]) < 0)
      r = -1;
  return r;
}

static int
dir_sync(struct znbd_store *base, uint64_t len, uint64_t off0)
{
  struct dir_store *s = (struct dir_store *)base;
  struct dzone *z;
  int r = 0;
  FOR_EACH_PIECE(s, off0, len, z, off, plen)
  {
    (void)off;
    (void)plen;
    if (sync_zone(z) < 0)
      r = -1;
  }
  return r;
}

/* Truncate sequential zone ZNO to SIZE bytes. */
static int
truncate_zone(struct dir_store *s, uint32_t zno, uint64_t size)
{
  struct dzone *z = &s->z[zno];
  atomic_store(&z->dirty, true);
  znbd_store_before_change(&s->base);
  int r = ftruncate(z->fd, (off_t)size);
  znbd_store_before_change(&s->base);
  if (r < 0)
    return -1;
  return 0;
}

/* Reset: the file is emptied, preallocation included (zloop). */
static int
dir_zone_reset(struct znbd_store *base, uint32_t zno, uint64_t start,
               uint64_t len, bool release)
{
  struct dir_store *s = (struct dir_store *)base;
  (void)start;
  (void)len;
  (void)release; /* the page cache is the kernel's */
  atomic_store(&s->z[zno].prealloc, false);
  return truncate_zone(s, zno, 0);
}

/* Finish: the file grows to the zone capacity (zloop's current rule). */
static int
dir_zone_finish(struct znbd_store *base, uint32_t zno, uint64_t from,
                uint64_t end)
{
  struct dir_store *s = (struct dir_store *)base;
  (void)from;
  (void)end;
  return truncate_zone(s, zno, s->z[zno].cap);
}

/* Power cut: the file keeps its first SIZE bytes (zloop's
 * discard_write_cache truncates to the size at the last flush). */
static int
dir_zone_truncate(struct znbd_store *base, uint32_t zno, uint64_t start,
                  uint64_t len, uint64_t size)
{
  struct dir_store *s = (struct dir_store *)base;
  struct stat st;
  (void)start;
  (void)len;
  if (fstat(s->z[zno].fd, &st) < 0 ||
      ((uint64_t)st.st_size > size && truncate_zone(s, zno, size) < 0)) {
    errno = EIO;
    return -1;
  }
  if (size < (uint64_t)st.st_size)
    atomic_store(&s->z[zno].prealloc, false); /* truncate dropped it */
  if (s->z[zno].loaded > size)
    s->z[zno].loaded = size;
  return 0;
}

static int
dir_journal(struct znbd_store *base, bool create)
{
  struct dir_store *s = (struct dir_store *)base;
  if (s->jfd < 0) {
    s->jfd = openat(s->dirfd, JOURNAL_NAME,
                    O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (s->jfd >= 0 && create)
      (void)fsync(s->dirfd);
  }
  return s->jfd;
}

static void
dir_zone_open(struct znbd_store *base, uint32_t zno)
{
  struct dir_store *s = (struct dir_store *)base;
  prealloc(s, &s->z[zno]);
}

static int
dir_zone_fault(struct znbd_store *base, uint32_t zno, unsigned cond)
{
  struct dir_store *s = (struct dir_store *)base;
  uint8_t f = cond == ZNBD_ZONE_COND_READONLY || cond == ZNBD_ZONE_COND_OFFLINE
                  ? (uint8_t)cond
                  : 0;
  int r = 0;
  pthread_mutex_lock(&s->meta_lock);
  if (s->z[zno].fault != f) {
    uint8_t old = s->z[zno].fault;
    s->z[zno].fault = f;
    r = meta_save(s);
    if (r < 0) {
      s->z[zno].fault = old;
      errno = EIO;
    }
  }
  pthread_mutex_unlock(&s->meta_lock);
  return r;
}

static int
dir_zone_load(struct znbd_store *base, uint32_t zno, uint64_t *written,
              unsigned *fault)
{
  struct dir_store *s = (struct dir_store *)base;
  *written = s->z[zno].loaded;
  *fault = s->z[zno].fault;
  return 0;
}

static int
dir_zone_file(struct znbd_store *base, uint32_t zno, char *name, size_t namelen,
              int64_t *ctime_ns)
{
  struct dir_store *s = (struct dir_store *)base;
  struct stat st;
  zone_name(s, zno, name, namelen);
  if (fstat(s->z[zno].fd, &st) < 0) {
    errno = EIO;
    return -1;
  }
  *ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
  return 0;
}

/* Blocks the files hold (st_blocks), in bytes. */
static uint64_t
dir_allocated(struct znbd_store *base)
{
  struct dir_store *s = (struct dir_store *)base;
  uint64_t sum = 0;
  struct stat st;
  for (uint32_t i = 0; i < s->nr_zones; i++)
    if (fstat(s->z[i].fd, &st) == 0)
      sum += (uint64_t)st.st_blocks * 512;
  return sum;
}

uint64_t
znbd_store_dir_kicks(const struct znbd_store *st)
{
  return atomic_load(&((const struct dir_store *)st)->kicks);
}

static const struct znbd_store_zone_ops dir_zone_ops = {
    .reset = dir_zone_reset,
    .finish = dir_zone_finish,
    .open = dir_zone_open,
    .fault = dir_zone_fault,
    .load = dir_zone_load,
    .truncate = dir_zone_truncate,
    .file = dir_zone_file,
};

static const struct znbd_store_persist_ops dir_persist_ops = {
    .journal = dir_journal,
};

static const struct znbd_store_ops dir_ops = {
    .name = "dir",
    .write_may_fail = true,
    .free = dir_free,
    .read = dir_read,
    .write = dir_write,
    .zero = dir_zero,
    .extents = dir_extents,
    .flush = dir_flush,
    .sync = dir_sync,
    .allocated = dir_allocated,
    .zones = &dir_zone_ops,
    .persist = &dir_persist_ops,
};
