/* znbd: the directory store (lib/store_dir.c), a device kept in files so
 * it survives a restart (key dir=PATH).
 *
 * Layout (Linux zloop's, Documentation/admin-guide/blockdev/zoned_loop.rst):
 * one regular file per zone, PATH/cnv-NNNNNN for a conventional zone and
 * PATH/seq-NNNNNN for a sequential one (NNNNNN: the zone number, six
 * digits, counted from zone 0 for both kinds; mode 0600).  A conventional
 * zone's file is always the zone's length; a sequential zone's file size
 * is its write pointer (bytes written from the zone start); bytes past the
 * end of a file read as zeros.  A device with zoned=false is one sparse
 * file, PATH/data, of the device size.  znbd adds PATH/znbd.meta (the
 * geometry and the READONLY / OFFLINE zones, text) and PATH/znbd.lock
 * (held with flock while a server uses the directory).
 */
#ifndef ZNBD_STORE_DIR_H
#define ZNBD_STORE_DIR_H

#include <stddef.h>

#include "store.h"
#include "znbd/params.h"

/* Open (or format, when PATH is absent or empty) the directory P->dir for
 * the finished params P.  Zone files without PATH/znbd.meta (a directory
 * Linux zloop made) are adopted with the geometry P gives: checked by
 * zloop's rules (zloop_init_zone()), then znbd.meta is written, no zone
 * file changed.  Takes the directory's lock for the life of the
 * store.  Raises RLIMIT_NOFILE's soft limit to its hard limit (one open
 * file per zone).  Returns NULL with errno and a message naming the
 * parameter or the file in ERR: EEXIST (another server holds the lock),
 * EINVAL (the directory holds other files, a file of the wrong size,
 * metadata that does not match P, buffered_io=false on a file system
 * without O_DIRECT), ENOENT, EACCES, EMFILE, EIO.  With buffered_io=false
 * the zone files are opened a second time with O_DIRECT (two descriptors
 * per zone). */
struct znbd_store *znbd_store_dir_open(const struct znbd_params *p, char *err,
                                       size_t errlen);

/* Early writeback kicks (writeback_mb) store ST, a dir= store, has made
 * since it opened: how tests see that the kick happened. */
uint64_t znbd_store_dir_kicks(const struct znbd_store *st);

#endif
