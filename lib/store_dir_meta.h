/* znbd lib-internal: what a dir= directory records and is named
 * (lib/store_dir_meta.c): the PATH/znbd.meta format, the names of the
 * files a directory holds, and what a directory says before it is opened
 * as a store.  Depends on no parameter code: lib/params_finish.c reads a
 * directory's record through it, the directory store (lib/store_dir*.c)
 * reads and writes it.  Sizes are bytes.
 */
#ifndef ZNBD_STORE_DIR_META_H
#define ZNBD_STORE_DIR_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_NAME "znbd.meta"
#define META_TMP "znbd.meta.tmp"
#define FORMAT_MARK "znbd.formatting" /* a format under way */
#define LOCK_NAME "znbd.lock"
#define JOURNAL_NAME "znbd.wcache"
#define REDO_NAME "znbd.redo" /* intent records (lib/intent.c) */

/* What PATH/znbd.meta records. */
struct znbd_dir_meta {
  bool zoned, write_cache;
  uint64_t size, zone_size, zone_capacity;
  uint32_t blocksize, nr_conv, max_open, max_active;
};

/* The keys of PATH/znbd.meta, in file order: zoned, size, blocksize,
 * zone_size, zone_capacity, zone_nr_conv, zone_max_open,
 * zone_max_active, write_cache (the names of the parameters they record).
 * The first ZNBD_DIR_META_LAYOUT_KEYS lay out the files. */
#define ZNBD_DIR_META_NKEYS 9
#define ZNBD_DIR_META_LAYOUT_KEYS 4

/* The name of key K (K < ZNBD_DIR_META_NKEYS).  Never fails. */
const char *znbd_dir_meta_key(size_t k);

/* The value of key K of M, and setting it (a bool key takes V != 0, a
 * 32-bit key the low 32 bits).  Never fail. */
uint64_t znbd_dir_meta_get(const struct znbd_dir_meta *m, size_t k);
void znbd_dir_meta_put(struct znbd_dir_meta *m, size_t k, uint64_t v);

/* Key K of the recorded REC differs from CUR (given) for directory PATH:
 * -1, errno EINVAL and a message naming the key and both values in ERR;
 * else 0. */
int znbd_dir_meta_mismatch(const struct znbd_dir_meta *rec,
                           const struct znbd_dir_meta *cur, size_t k,
                           const char *path, char *err, size_t errlen);

/* Replace DIRFD/znbd.meta atomically with M and the fault lists of its
 * NR_ZONES zones, FAULT(OPAQUE, I) giving zone I's fault (0,
 * ZNBD_ZONE_COND_READONLY or ZNBD_ZONE_COND_OFFLINE): write a temporary
 * file, fsync, rename, fsync the directory.  Returns 0, or -1 with errno
 * (ENOMEM, or the failing call's: EIO, ENOSPC...). */
int znbd_dir_meta_save(int dirfd, const struct znbd_dir_meta *m,
                       uint32_t nr_zones,
                       uint8_t (*fault)(void *opaque, uint32_t zone),
                       void *opaque);

/* Read and parse DIRFD/znbd.meta of directory PATH into M.  Returns 1
 * (read, M filled), 0 (no such file), or -1 with errno (EINVAL: corrupt
 * or too large; else the failing call's, EIO, EACCES...) and a message
 * naming the file in ERR.  With TEXT not NULL, *TEXT keeps the text
 * (the caller frees it) that *RO and *OFF (when not NULL) point into: the
 * zone lists of the READONLY and OFFLINE zones, "3,7-9" or "". */
int znbd_dir_meta_load(int dirfd, const char *path, struct znbd_dir_meta *m,
                       char **text, char **ro, char **off, char *err,
                       size_t errlen);

/* NAME is one a zone file can have: "data" (zoned=false), cnv-NNNNNN or
 * seq-NNNNNN (six digits; Linux zloop's names). */
bool znbd_dir_zone_file_name(const char *name);

/* The file name of zone I (LEN bytes at BUF): "data" when not ZONED,
 * else cnv-NNNNNN or seq-NNNNNN (SEQ) as Linux zloop names them. */
void znbd_dir_zone_name(bool zoned, bool seq, uint32_t i, char *buf,
                        size_t len);

/* What directory PATH holds before a store opens it. */
enum znbd_dir_state {
  ZNBD_DIR_NEW,       /* absent, empty, or a format cut short */
  ZNBD_DIR_FORMATTED, /* PATH/znbd.meta: a znbd directory */
  ZNBD_DIR_ZLOOP,     /* zone files but no znbd.meta: a Linux zloop one? */
};

/* Look at directory PATH without changing it: its state, and for
 * ZNBD_DIR_FORMATTED its record in M.  Returns the state, or -1 with
 * errno (EINVAL: corrupt PATH/znbd.meta; else the failing call's: EACCES,
 * ENOTDIR, EIO...) and a message naming the file in ERR. */
int znbd_dir_probe(const char *path, struct znbd_dir_meta *m, char *err,
                   size_t errlen);

/* The block size, bytes, Linux zloop gives a device whose zone files live
 * on the file system of PATH (or of its parent directory, PATH not made
 * yet): zloop_get_block_size() (drivers/block/zloop.c) takes the file
 * system's block size when it is at most 4096 bytes.  0 when larger
 * (zloop then takes the direct-I/O alignment, which is not known before a
 * file exists) or unknown. */
uint32_t znbd_dir_zloop_block_size(const char *path);

#endif
