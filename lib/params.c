/* znbd: device parameters (include/znbd/params.h), parsed once for every
 * front-end.  This file: the one parameter table and its lookups; the
 * other steps are lib/params_parse.c (a key=value word into struct
 * znbd_params), lib/params_help.c (the help text, and refusing a
 * parameter a front-end does not use) and lib/params_finish.c (checks
 * across parameters, dir= adoption and the geometry).
 *
 * Names follow Linux null_blk's configfs attributes
 * (Documentation/block/null_blk.rst); sizes use nbdkit's size syntax
 * (nbdkit_parse_size: decimal with one optional suffix).  Clamps follow
 * null_blk (drivers/block/null_blk/zoned.c, null_init_zoned_dev()); see
 * doc/zone-rules.md, rule clamp-limits.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/params.h"
#include "params_impl.h"

/* The parameter table: one entry per key=value word, in the order --help
 * lists them.  Each entry gives
 *   name      the key, and the field of struct znbd_params it sets
 *   type      how the value is parsed (enum znbd_param_type)
 *   meta      the value as --help and the man pages show it; for CHOICE
 *             and ENUM the accepted values, '|'-separated
 *   default   as text, parsed by znbd_params_init() like a user's value
 *             (NULL: none; the field stays 0 / NULL)
 *   min       UINT only: smallest value znbd_params_finish() accepts
 *   unit      of the value, or NULL
 *   users     front-ends and modes it has an effect in (ZNBD_PARAM_FOR_*)
 *   null_blk  the null_blk attribute it mirrors, or NULL (sizes: null_blk
 *             takes MB, znbd bytes)
 *   help      one line for --help; the default and the users are added
 *
 * To add a parameter: add its field to struct znbd_params
 * (include/znbd/params.h), add one entry here with P(), and document it
 * under PARAMETERS in man/nbdkit-zoned-plugin.pod and in man/znbd.pod
 * (tests/unit/params_test checks that both pages name every entry).
 * Checks that involve several parameters go in znbd_params_finish(). */
#define ALL ZNBD_PARAM_FOR_ALL
#define MQ ZNBD_PARAM_FOR_MQ
/* The NBD front-ends: their requests may wait (parked writes) and their
 * threads are znbd's own; znbd-tcmu and znbd-ublk take the kernel's
 * requests with NOWAIT writes from queue threads of their own. */
#define NBD (ZNBD_PARAM_FOR_PLUGIN | ZNBD_PARAM_FOR_BIO | ZNBD_PARAM_FOR_MQ)
#define P(name, type, meta, def, min, unit, users, null_blk, help)             \
  {                                                                            \
    {#name, ZNBD_PARAM_T_##type, meta, def, min, unit, users, null_blk, help}, \
        offsetof(struct znbd_params, name),                                    \
        sizeof(((struct znbd_params *)0)->name)                                \
  }

const struct param znbd_param_table[] = {
    P(size, SIZE, "SIZE", NULL, 0, "bytes", ALL, "size",
      "Device size in bytes (required; nbdkit size syntax, e.g. 4G)"),
    P(zoned, BOOL, "BOOL", "true", 0, NULL, ALL, "zoned",
      "Host-managed zoned device"),
    P(blocksize, CHOICE, "512|4096", "512", 0, "bytes", ALL, "blocksize",
      "Logical block size in bytes (new zoned dir=: the file system's)"),
    P(memory_backed, BOOL, "BOOL", "true", 0, NULL, ALL, "memory_backed",
      "Keep written data"),
    P(zone_size, SIZE, "SIZE", "256M", 0, "bytes", ALL, "zone_size",
      "Zone size in bytes"),
    P(zone_capacity, SIZE, "SIZE", "0", 0, "bytes", ALL, "zone_capacity",
      "Zone capacity in bytes, <= zone_size; 0 means zone_size"),
    P(zone_nr_conv, UINT, "N", "0", 0, "zones", ALL, "zone_nr_conv",
      "Conventional zones at the start"),
    P(zone_max_open, UINT, "N", "0", 0, "zones", ALL, "zone_max_open",
      "Max open zones; 0 means no limit"),
    P(zone_max_active, UINT, "N", "0", 0, "zones", ALL, "zone_max_active",
      "Max active zones; 0 means no limit"),
    P(zone_full, BOOL, "BOOL", "false", 0, NULL, ALL, "zone_full",
      "Sequential zones start FULL"),
    P(zone_readonly, ZONE_LIST, "LIST", NULL, 0, "zones", ALL, "zone_readonly",
      "Zones made READONLY at start, e.g. 3,7-9"),
    P(zone_offline, ZONE_LIST, "LIST", NULL, 0, "zones", ALL, "zone_offline",
      "Zones made OFFLINE at start, e.g. 3,7-9"),
    P(zone_read_past_wp, ENUM, "zero|ones|error", "zero", 0, NULL, ALL, NULL,
      "Reads at or above the wp"),
    P(completion_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL,
      "completion_nsec", "Delay before each request completes, in ns"),
    /* pipeline_zoned_writes and no_zone_write_lock: names from the
     * null_blk patches that proposed them (not in mainline Linux). */
    P(pipeline_zoned_writes, BOOL, "BOOL", "true", 0, NULL, NBD,
      "pipeline_zoned_writes", "Writes ahead of the wp wait for it"),
    P(zone_write_timeout, UINT, "MS", "500", 0, "milliseconds", NBD, NULL,
      "Longest such wait, in ms"),
    P(zone_control, PATH, "PATH", NULL, 0, NULL, ALL, NULL,
      "Unix socket for zone management (report/open/close/finish/reset...)"),
    P(sched_batch, BOOL, "BOOL", "true", 0, NULL, NBD, NULL,
      "Serve from SCHED_BATCH threads"),
    P(dir, PATH, "PATH", NULL, 0, NULL, ALL, NULL,
      "Keep the device in this directory (zloop's file per zone layout)"),
    P(zone_prealloc, BOOL, "BOOL", "true", 0, NULL, ALL, NULL,
      "dir=: preallocate a zone's capacity when it opens"),
    P(buffered_io, BOOL, "BOOL", "true", 0, NULL, ALL, NULL,
      "dir=: page cache I/O (false: O_DIRECT, zloop's default)"),
    P(writeback_mb, UINT, "N", "8", 0, "MiB", ALL, NULL,
      "dir=: start writeback of a zone file every N MiB written; 0 means "
      "only at FLUSH"),
    P(badblocks, SECTOR_LIST, "LIST", NULL, 0, "512-byte sectors", ALL,
      "badblocks",
      "Bad sectors at start, e.g. 100-107,2048 (reads and writes "
      "touching one fail)"),
    P(badblocks_once, BOOL, "BOOL", "false", 0, NULL, ALL, "badblocks_once",
      "A bad range clears after its first failure"),
    P(badblocks_partial_io, BOOL, "BOOL", "false", 0, NULL, ALL,
      "badblocks_partial_io", "Writes are done up to the first bad block"),
    P(mbps, UINT, "N", "0", 0, "MiB/s", ALL, "mbps",
      "Bandwidth limit over all connections, MiB/s; 0 means none"),
    P(rotational, BOOL, "BOOL", "false", 0, NULL, ALL, "rotational",
      "Advertise a rotational device (NBD_FLAG_ROTATIONAL)"),
    P(zone_open_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL, NULL,
      "Extra latency of a zone open, in ns"),
    P(zone_close_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL, NULL,
      "Extra latency of a zone close, in ns"),
    P(zone_finish_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL, NULL,
      "Extra latency of a zone finish, in ns"),
    P(zone_reset_nsec, UINT64, "NS", "0", 0, "nanoseconds", ALL, NULL,
      "Extra latency of a zone reset (and a TRIM resetting zones), in ns"),
    P(max_memory, SIZE, "SIZE", "0", 0, "bytes", ALL, NULL,
      "RAM store: most bytes of data held; 0 means 80% of physical memory"),
    P(write_cache, BOOL, "BOOL", "false", 0, NULL, ALL, NULL,
      "Volatile write cache: unflushed writes are lost on power-cut"),
    P(hw_queue_depth, UINT, "N", "64", 1, "tags", MQ, "hw_queue_depth",
      "Tags per tag set"),
    P(submit_queues, UINT, "N", "1", 1, "queues", MQ, "submit_queues",
      "Hardware queues"),
    P(no_zone_write_lock, BOOL, "BOOL", "false", 0, NULL, MQ,
      "no_zone_write_lock", "mq scheduler without zone write locking"),
    P(zone_write_plugging, BOOL, "BOOL", "false", 0, NULL, MQ, NULL,
      "mq: order zoned writes by zone write plugging (Linux 6.10+)"),
};

#undef P
#undef NBD
#undef MQ
#undef ALL

#define NR_PARAMS (sizeof znbd_param_table / sizeof znbd_param_table[0])
_Static_assert(NR_PARAMS <= 64, "struct znbd_params.given has 64 bits");
const size_t znbd_param_nr = NR_PARAMS;

const struct znbd_param_info *
znbd_param_info(size_t i)
{
  return i < znbd_param_nr ? &znbd_param_table[i].i : NULL;
}

const struct param *
znbd_param_entry(const char *key)
{
  size_t n = strcspn(key, "=");
  for (size_t k = 0; k < znbd_param_nr; k++)
    if (strncmp(znbd_param_table[k].i.name, key, n) == 0 &&
        znbd_param_table[k].i.name[n] == '\0')
      return &znbd_param_table[k];
  return NULL;
}

const struct znbd_param_info *
znbd_param_find(const char *key)
{
  const struct param *e = key ? znbd_param_entry(key) : NULL;
  return e ? &e->i : NULL;
}

bool
znbd_param_used_by(const char *key, unsigned users)
{
  const struct znbd_param_info *i = znbd_param_find(key);
  return i && (i->users & users);
}

void
znbd_params_free(struct znbd_params *p)
{
  free(p->zone_readonly);
  free(p->zone_offline);
  free(p->zone_control);
  free(p->dir);
  free(p->badblocks);
  p->zone_readonly = p->zone_offline = p->zone_control = p->dir = NULL;
  p->badblocks = NULL;
}

bool
znbd_params_given(const struct znbd_params *p, const char *name)
{
  const struct param *e =
      name && !strchr(name, '=') ? znbd_param_entry(name) : NULL;
  return e && (p->given >> (e - znbd_param_table) & 1);
}
