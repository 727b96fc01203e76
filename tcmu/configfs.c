/* znbd-tcmu: LIO configuration in configfs (see configfs.h).  The
 * attribute names are those of drivers/target/target_core_user.c
 * (tcmu_set_configfs_dev_params(): dev_config, dev_size, hw_block_size,
 * nl_reply_supported) and drivers/target/loopback/tcm_loop.c (nexus,
 * "NULL" to drop it). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "configfs.h"

#define TARGET "/sys/kernel/config/target"
#define HBA TARGET "/core/user_0"
#define LOOP TARGET "/loopback"

static int
put(const char *path, const char *val, char *err, size_t errlen)
{
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, val, strlen(val)) < 0) {
    snprintf(err, errlen, "%s: writing \"%s\": %s", path, val, strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

static int
mkdir_ok(const char *path, char *err, size_t errlen)
{
  if (mkdir(path, 0755) < 0 && errno != EEXIST) {
    snprintf(err, errlen, "mkdir %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* The tcm_loop WWNs of NAME: target and initiator (nexus), NAA type 5
 * with LIO's IEEE company id 001405 and a hash of NAME, so several
 * devices get distinct targets and a restart finds its own. */
static void
wwns(const char *name, char *tgt, char *ini, size_t len)
{
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const char *p = name; *p; p++)
    h = (h ^ (uint8_t)*p) * 16777619u;
  snprintf(tgt, len, "naa.5001405%09x", h & 0xfffffff);
  snprintf(ini, len, "naa.5001405%09x", (h & 0xfffffff) | 0x10000000);
}

/* /sys/class/uio/uio*: the one whose name is tcm-user/0/NAME/... */
static int
find_uio(const char *name, char *uio, size_t len)
{
  char want[300], path[300], got[512];
  snprintf(want, sizeof want, "tcm-user/0/%s/", name);
  DIR *d = opendir("/sys/class/uio");
  if (!d)
    return -1;
  struct dirent *de;
  int rc = -1;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "uio", 3) != 0)
      continue;
    snprintf(path, sizeof path, "/sys/class/uio/%s/name", de->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    if (fgets(got, sizeof got, f) && strncmp(got, want, strlen(want)) == 0) {
      snprintf(uio, len, "%s", de->d_name);
      rc = 0;
    }
    fclose(f);
    if (rc == 0)
      break;
  }
  closedir(d);
  errno = ENOENT;
  return rc;
}

int
tcmu_backstore_create(const char *name, uint64_t size, uint32_t blocksize,
                      int cmd_time_out, char *uio, size_t uiolen, char *err,
                      size_t errlen)
{
  char dir[256], path[300];
  snprintf(dir, sizeof dir, HBA "/%s", name);
  /* A stale setup of NAME (a killed znbd-tcmu): take it down first. */
  tcmu_loop_remove(name, err, errlen);
  tcmu_backstore_remove(name, err, errlen);
  if (mkdir_ok(TARGET "/core", err, errlen) < 0 ||
      mkdir_ok(HBA, err, errlen) < 0)
    return -1;
  if (mkdir(dir, 0755) < 0) {
    snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s/control", dir);
  const char *vals[4];
  char v0[300], v1[64], v2[64];
  snprintf(v0, sizeof v0, "dev_config=znbd/%s", name);
  snprintf(v1, sizeof v1, "dev_size=%llu", (unsigned long long)size);
  snprintf(v2, sizeof v2, "hw_block_size=%u", blocksize);
  vals[0] = v0, vals[1] = v1, vals[2] = v2;
  vals[3] = "nl_reply_supported=-1"; /* before enable: no netlink wait */
  for (int i = 0; i < 4; i++)
    if (put(path, vals[i], err, errlen) < 0)
      return -1;
  if (cmd_time_out >= 0) {
    /* tcmu_cmd_time_out_store() refuses it once the LUN is exported. */
    char v[32];
    snprintf(path, sizeof path, "%s/attrib/cmd_time_out", dir);
    snprintf(v, sizeof v, "%d", cmd_time_out);
    if (put(path, v, err, errlen) < 0)
      return -1;
  }
  snprintf(path, sizeof path, "%s/enable", dir);
  if (put(path, "1", err, errlen) < 0)
    return -1;
  if (find_uio(name, uio, uiolen) < 0) {
    snprintf(err, errlen, "no /sys/class/uio/uio*/name for tcm-user/0/%s",
             name);
    return -1;
  }
  return 0;
}

int
tcmu_loop_create(const char *name, char *err, size_t errlen)
{
  char tgt[64], ini[64], tpg[256], path[600], src[300];
  wwns(name, tgt, ini, sizeof tgt);
  snprintf(tpg, sizeof tpg, LOOP "/%s/tpgt_1", tgt);
  snprintf(path, sizeof path, LOOP "/%s", tgt);
  if (mkdir_ok(LOOP, err, errlen) < 0 || mkdir_ok(path, err, errlen) < 0 ||
      mkdir_ok(tpg, err, errlen) < 0)
    return -1;
  snprintf(path, sizeof path, "%s/nexus", tpg);
  if (put(path, ini, err, errlen) < 0)
    return -1;
  snprintf(path, sizeof path, "%s/lun/lun_0", tpg);
  if (mkdir_ok(path, err, errlen) < 0)
    return -1;
  snprintf(src, sizeof src, HBA "/%s", name);
  snprintf(path, sizeof path, "%s/lun/lun_0/%s", tpg, name);
  if (symlink(src, path) < 0) {
    snprintf(err, errlen, "ln -s %s %s: %s", src, path, strerror(errno));
    return -1;
  }
  return 0;
}

/* rmdir or unlink PATH; a missing one is fine. */
static int
rm(const char *path, int link, char *err, size_t errlen)
{
  if ((link ? unlink(path) : rmdir(path)) < 0 && errno != ENOENT) {
    snprintf(err, errlen, "%s %s: %s", link ? "rm" : "rmdir", path,
             strerror(errno));
    return -1;
  }
  return 0;
}

int
tcmu_loop_remove(const char *name, char *err, size_t errlen)
{
  char tgt[64], ini[64], tpg[256], path[600];
  wwns(name, tgt, ini, sizeof tgt);
  snprintf(tpg, sizeof tpg, LOOP "/%s/tpgt_1", tgt);
  if (access(tpg, F_OK) < 0)
    return 0;
  int rc = 0;
  snprintf(path, sizeof path, "%s/lun/lun_0/%s", tpg, name);
  rc |= rm(path, 1, err, errlen);
  snprintf(path, sizeof path, "%s/lun/lun_0", tpg);
  rc |= rm(path, 0, err, errlen);
  snprintf(path, sizeof path, "%s/nexus", tpg);
  char ignore[8];
  if (access(path, F_OK) == 0) /* no nexus yet: ENODEV, fine */
    put(path, "NULL", ignore, sizeof ignore);
  rc |= rm(tpg, 0, err, errlen);
  snprintf(path, sizeof path, LOOP "/%s", tgt);
  rc |= rm(path, 0, err, errlen);
  return rc ? -1 : 0;
}

int
tcmu_backstore_remove(const char *name, char *err, size_t errlen)
{
  char dir[256];
  snprintf(dir, sizeof dir, HBA "/%s", name);
  if (rm(dir, 0, err, errlen) < 0)
    return -1;
  rmdir(HBA); /* busy while other devices use it: fine */
  return 0;
}
