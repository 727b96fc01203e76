/* znbd: what a dir= directory records and is named (lib/store_dir_meta.h).
 *
 * PATH/znbd.meta is text, key=value lines between a magic line and an
 * "end" line (so a truncated file is detected); it is replaced atomically
 * (write a temporary file, fsync, rename, fsync the directory).  The zone
 * files are named as Linux zloop names them (lib/store_dir.h).  Nothing
 * here opens a store or reads a parameter: lib/params_finish.c adopts a
 * directory's record through this file, the directory store writes it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "store_dir_meta.h"
#include "znbd/dev.h"
#include "err.h"

#define META_MAGIC "znbd-dir 1"
#define META_MAX (16u << 20) /* bytes: a corrupt file is not read whole */

/* The fields of struct znbd_dir_meta by name, for reading and writing. */
enum mtype { M_BOOL, M_U32, M_U64 };
static const struct {
  const char *key;
  enum mtype type;
  size_t off;
} meta_keys[] = {
    {"zoned", M_BOOL, offsetof(struct znbd_dir_meta, zoned)},
    {"size", M_U64, offsetof(struct znbd_dir_meta, size)},
    {"blocksize", M_U32, offsetof(struct znbd_dir_meta, blocksize)},
    {"zone_size", M_U64, offsetof(struct znbd_dir_meta, zone_size)},
    {"zone_capacity", M_U64, offsetof(struct znbd_dir_meta, zone_capacity)},
    {"zone_nr_conv", M_U32, offsetof(struct znbd_dir_meta, nr_conv)},
    {"zone_max_open", M_U32, offsetof(struct znbd_dir_meta, max_open)},
    {"zone_max_active", M_U32, offsetof(struct znbd_dir_meta, max_active)},
    {"write_cache", M_BOOL, offsetof(struct znbd_dir_meta, write_cache)},
};
#define NR_META_KEYS (sizeof meta_keys / sizeof meta_keys[0])
_Static_assert(NR_META_KEYS == ZNBD_DIR_META_NKEYS, "store_dir_meta.h");

const char *
znbd_dir_meta_key(size_t k)
{
  return meta_keys[k].key;
}

uint64_t
znbd_dir_meta_get(const struct znbd_dir_meta *m, size_t k)
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

void
znbd_dir_meta_put(struct znbd_dir_meta *m, size_t k, uint64_t v)
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

int
znbd_dir_meta_mismatch(const struct znbd_dir_meta *rec,
                       const struct znbd_dir_meta *cur, size_t k,
                       const char *path, char *err, size_t errlen)
{
  const char *key = meta_keys[k].key;
  uint64_t want = znbd_dir_meta_get(rec, k), got = znbd_dir_meta_get(cur, k);
  if (want == got)
    return 0;
  set_err(err, errlen,
          "%s: %" PRIu64 " given, but dir=%s was formatted with %s=%" PRIu64
          " (%s/%s)",
          key, got, path, key, want, path, META_NAME);
  errno = EINVAL;
  return -1;
}

/* Zone list of the zones whose fault is COND, "3,7-9" ("" for none),
 * appended to BUF at *LEN (BUF has room: 24 bytes per zone). */
static void
fault_list(uint32_t nr_zones, uint8_t (*fault)(void *opaque, uint32_t zone),
           void *opaque, uint8_t cond, char *buf, size_t *len)
{
  bool first = true;
  for (uint32_t i = 0; i < nr_zones; i++) {
    if (fault(opaque, i) != cond)
      continue;
    uint32_t j = i;
    while (j + 1 < nr_zones && fault(opaque, j + 1) == cond)
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

int
znbd_dir_meta_save(int dirfd, const struct znbd_dir_meta *m, uint32_t nr_zones,
                   uint8_t (*fault)(void *opaque, uint32_t zone), void *opaque)
{
  size_t cap = 1024 + (size_t)nr_zones * 24, len = 0;
  char *buf = malloc(cap);
  int fd = -1;

  if (!buf)
    return -1;
  len += (size_t)sprintf(buf + len, "%s\n", META_MAGIC);
  for (size_t k = 0; k < NR_META_KEYS; k++)
    len += (size_t)sprintf(buf + len, "%s=%" PRIu64 "\n", meta_keys[k].key,
                           znbd_dir_meta_get(m, k));
  len += (size_t)sprintf(buf + len, "zone_readonly=");
  fault_list(nr_zones, fault, opaque, ZNBD_ZONE_COND_READONLY, buf, &len);
  len += (size_t)sprintf(buf + len, "\nzone_offline=");
  fault_list(nr_zones, fault, opaque, ZNBD_ZONE_COND_OFFLINE, buf, &len);
  len += (size_t)sprintf(buf + len, "\nend\n");

  fd = openat(dirfd, META_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || write_all(fd, buf, len) < 0 || fsync(fd) < 0)
    goto fail;
  close(fd);
  fd = -1;
  if (renameat(dirfd, META_TMP, dirfd, META_NAME) < 0 || fsync(dirfd) < 0)
    goto fail;
  free(buf);
  return 0;

fail:
  if (fd >= 0)
    keep_errno_close(fd);
  free(buf);
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

fail:
  free(buf);
  keep_errno_close(fd);
  return NULL;
}

/* Parse TEXT (PATH/znbd.meta) into M and, when not NULL, the fault lists
 * into *RO and *OFF (pointers into TEXT, NUL-terminated there).  Every key
 * must appear exactly once, between the magic line and "end".  Returns 0,
 * or -1 with errno EINVAL and the reason in ERR. */
static int
meta_parse(char *text, struct znbd_dir_meta *m, char **ro, char **off,
           char *err, size_t errlen)
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
    znbd_dir_meta_put(m, k, n);
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

int
znbd_dir_meta_load(int dirfd, const char *path, struct znbd_dir_meta *m,
                   char **text, char **ro, char **off, char *err, size_t errlen)
{
  char why[160];
  char *t = slurp(dirfd, META_NAME);
  if (!t) {
    if (errno == ENOENT)
      return 0;
    return fail_err(err, errlen, errno == EFBIG ? EINVAL : errno,
                    "dir: %s/%s: %s", path, META_NAME, strerror(errno));
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

uint32_t
znbd_dir_zloop_block_size(const char *path)
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

/* Whether DIRFD holds a zone file (cnv-NNNNNN, seq-NNNNNN).  False also
 * when the directory cannot be read. */
static bool
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
    r = znbd_dir_zone_file_name(de->d_name) && strcmp(de->d_name, "data");
  closedir(dp);
  return r;
}

bool
znbd_dir_zone_file_name(const char *n)
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

void
znbd_dir_zone_name(bool zoned, bool seq, uint32_t i, char *buf, size_t len)
{
  if (!zoned)
    snprintf(buf, len, "data");
  else
    snprintf(buf, len, "%s-%06" PRIu32, seq ? "seq" : "cnv", i);
}

int
znbd_dir_probe(const char *path, struct znbd_dir_meta *m, char *err,
               size_t errlen)
{
  int dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int r = 0;
  if (dirfd < 0 && errno != ENOENT)
    return fail_err(err, errlen, errno, "dir: %s: %s", path, strerror(errno));
  bool zloop = false;
  if (dirfd >= 0) {
    r = znbd_dir_meta_load(dirfd, path, m, NULL, NULL, NULL, err, errlen);
    zloop = r == 0 && faccessat(dirfd, FORMAT_MARK, F_OK, 0) < 0 &&
            has_zone_files(dirfd);
    close(dirfd);
  }
  if (r < 0)
    return r;
  return r ? ZNBD_DIR_FORMATTED : zloop ? ZNBD_DIR_ZLOOP : ZNBD_DIR_NEW;
}
