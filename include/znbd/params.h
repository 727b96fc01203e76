/* znbd: device parameters, parsed once for every front-end.
 *
 * Every front-end feeds its key=value words to znbd_params_set() and
 * calls znbd_params_finish() once (the plugin as nbdkit hands it the
 * words; znbd, znbd-tcmu and znbd-ublk through znbd_start_device(),
 * znbd/start.h), so they accept exactly the same words and size syntax.
 * Names follow Linux null_blk's
 * configfs attributes (Documentation/block/null_blk.rst).
 *
 * Every parameter is one entry of the table in lib/params.c (name, type,
 * default, range, unit, help, users, null_blk's name): parsing, defaults,
 * the help text and the front-ends' refusals all come from it.  Adding a
 * parameter is a field below plus one table entry; the comment at the top
 * of the table says how.
 */
#ifndef ZNBD_PARAMS_H
#define ZNBD_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "znbd/geometry.h"

/* What a read at or above a sequential zone's write pointer returns
 * (key zone_read_past_wp).  null_blk fills 0xFF; QEMU passes data through;
 * some drives fail the read. */
enum znbd_read_past_wp {
  ZNBD_READ_PAST_WP_ZERO = 0, /* zeros (default) */
  ZNBD_READ_PAST_WP_ONES,     /* 0xFF bytes, as null_blk */
  ZNBD_READ_PAST_WP_ERROR,    /* EIO */
};

struct znbd_params {
  uint64_t size;          /* device size, bytes (key size; required) */
  bool zoned;             /* host-managed zoned device (default true) */
  uint32_t blocksize;     /* logical block, bytes: 512 or 4096 (default 512) */
  bool memory_backed;     /* keep data (default true); false: null_blk-like */
  uint64_t zone_size;     /* bytes, multiple of blocksize (default 256 MiB) */
  uint64_t zone_capacity; /* bytes, <= zone_size; 0 = zone_size */
  uint32_t zone_nr_conv;  /* conventional zones at the start (default 0) */
  uint32_t zone_max_open; /* 0 = no limit */
  uint32_t zone_max_active; /* 0 = no limit */
  bool zone_full;           /* sequential zones start FULL */
  char *zone_readonly;      /* zone list "3,7-9" applied at start, or NULL */
  char *zone_offline;       /* zone list, or NULL */
  enum znbd_read_past_wp zone_read_past_wp;
  uint64_t completion_nsec;    /* delay before each request completes, ns */
  bool pipeline_zoned_writes;  /* writes ahead of the wp wait (default true) */
  uint32_t zone_write_timeout; /* ms a pipelined write may wait (default 500) */
  char *zone_control;          /* path of the zone control socket, or NULL */
  bool sched_batch;   /* serve from SCHED_BATCH threads (default true) */
  char *dir;          /* persistent store directory (zloop layout), or NULL */
  bool zone_prealloc; /* dir=: fallocate a zone's capacity when it opens */
  bool buffered_io;   /* dir=: page cache I/O (false: O_DIRECT as zloop) */
  uint32_t writeback_mb; /* dir=: writeback kick every N MiB a file gets */
  /* A volatile write cache: writes not covered by a FLUSH or FUA are lost
   * on a power cut (control socket power-cut, or kill -9 with dir=). */
  bool write_cache;
  /* RAM store: writes needing pages beyond this many bytes of data fail
   * with ENOSPC; 0: 80 % of the physical memory at start-up. */
  uint64_t max_memory;

  /* Fault and timing injection (null_blk names). */
  char *badblocks;           /* sector list "100-107,2048", or NULL */
  bool badblocks_once;       /* a bad range clears after its first failure */
  bool badblocks_partial_io; /* transfer up to the first bad block */
  uint32_t mbps;             /* bandwidth limit, MiB/s; 0: none */
  bool rotational;           /* advertise a rotational device */
  uint64_t zone_open_nsec;   /* extra latency of zone management, ns */
  uint64_t zone_close_nsec;
  uint64_t zone_finish_nsec;
  uint64_t zone_reset_nsec;

  /* Only the server's mq queue model uses these (null_blk names). */
  uint32_t hw_queue_depth;  /* tags per tag set (default 64) */
  uint32_t submit_queues;   /* hardware queues (default 1) */
  bool no_zone_write_lock;  /* mq-deadline without zone write locking */
  bool zone_write_plugging; /* per-zone write plugs ahead of the tags */

  /* Derived by znbd_params_finish(), once (lib/geometry.c); read-only
   * afterwards: every user of the zone count, the clamped limits or the
   * zones' lengths reads it here. */
  struct znbd_geometry geo;

  /* Bit I set: table entry I (znbd_param_info(I)) was given by
   * znbd_params_set(), not left at its default. */
  uint64_t given;
};

/* Whether NAME was given by znbd_params_set() (false for an unknown
 * name).  Sets no errno. */
bool znbd_params_given(const struct znbd_params *p, const char *name);

/* Fill P with the defaults above.  Never fails. */
void znbd_params_init(struct znbd_params *p);

/* Apply one key=value word.  KEY is a null_blk-style name (see
 * znbd_params_help).  Returns 0, or -1 with errno EINVAL (bad value) or
 * ENOENT (unknown key) and a message naming the parameter in ERR (always
 * NUL-terminated when ERRLEN > 0). */
int znbd_params_set(struct znbd_params *p, const char *key, const char *value,
                    char *err, size_t errlen);

/* Check the combination and derive the geometry (geo, by
 * znbd_geometry_derive()), after all keys are set.  With dir=, the
 * directory's recorded geometry first fills the keys not given (see
 * lib/params_finish.c, adopt_dir).  When zoned, a zone_capacity of 0 is
 * replaced by zone_size.  Clamps as null_blk does (zone_nr_conv, zone_max_open,
 * zone_max_active; doc/zone-rules.md, rule clamp-limits), writes the
 * clamped values back to those keys and reports each clamp as a
 * ZNBD_LOG_NOTE (include/znbd/log.h).  Returns 0, or -1 with errno
 * EINVAL (EIO: dir='s PATH/znbd.meta cannot be read) and a message naming
 * the parameters in ERR. */
int znbd_params_finish(struct znbd_params *p, char *err, size_t errlen);

/* Release strings owned by P. */
void znbd_params_free(struct znbd_params *p);

/* Parse a size as nbdkit does: decimal digits with at most one suffix,
 * b (bytes), s (512-byte sectors), k m g t p e (powers of 1024), either
 * case.  Returns 0 and *OUT in bytes, or -1 with errno EINVAL (malformed,
 * e.g. "64MiB", "1.5M") or ERANGE (overflow). */
int znbd_parse_size(const char *s, uint64_t *out);

/* Parse a boolean: 1/true/yes/on or 0/false/no/off (any case).
 * Returns 0, or -1 with errno EINVAL. */
int znbd_parse_bool(const char *s, bool *out);

/* Parse a zone list "3,7-9" and call FN for every zone number in it, in
 * order given.  Zone numbers must be < NR_ZONES.  Returns 0, the first
 * non-zero FN result, or -1 with errno EINVAL (malformed or out of range). */
int znbd_parse_zone_list(const char *s, uint32_t nr_zones,
                         int (*fn)(void *opaque, uint32_t zone), void *opaque);

/* Parse a bad-block list "100-107,2048": decimal 512-byte sectors and
 * inclusive ranges, comma-separated, every sector < NR_SECTORS, and call
 * FN(OPAQUE, FIRST, LAST) for each range in order (after checking the
 * whole list).  Returns 0, the first non-zero FN result, or -1 with errno
 * EINVAL (malformed, empty, out of range). */
int znbd_parse_sector_list(const char *s, uint64_t nr_sectors,
                           int (*fn)(void *opaque, uint64_t first,
                                     uint64_t last),
                           void *opaque);

/* What a parameter's value is (lib/params_parse.c parses each kind one way). */
enum znbd_param_type {
  ZNBD_PARAM_T_SIZE,   /* uint64_t bytes, nbdkit size syntax */
  ZNBD_PARAM_T_BOOL,   /* bool, znbd_parse_bool() */
  ZNBD_PARAM_T_UINT,   /* uint32_t, decimal */
  ZNBD_PARAM_T_UINT64, /* uint64_t, decimal */
  ZNBD_PARAM_T_CHOICE, /* uint32_t, one of the numbers of META ("512|4096") */
  ZNBD_PARAM_T_ENUM,   /* enum: index of the word in META ("zero|ones") */
  ZNBD_PARAM_T_ZONE_LIST,   /* char *, znbd_parse_zone_list() syntax */
  ZNBD_PARAM_T_PATH,        /* char *, non-empty */
  ZNBD_PARAM_T_SECTOR_LIST, /* char *, znbd_parse_sector_list() syntax */
};

/* Who uses a parameter (bits of znbd_param_info.users), and the
 * front-end a caller is (znbd_params_refuse_unused). */
#define ZNBD_PARAM_FOR_PLUGIN 0x1u /* nbdkit-zoned-plugin */
#define ZNBD_PARAM_FOR_BIO 0x2u    /* znbd --queue-mode=bio */
#define ZNBD_PARAM_FOR_MQ 0x4u     /* znbd --queue-mode=mq */
#define ZNBD_PARAM_FOR_TCMU 0x8u   /* znbd-tcmu */
#define ZNBD_PARAM_FOR_UBLK 0x10u  /* znbd-ublk */
#define ZNBD_PARAM_FOR_ALL                                                     \
  (ZNBD_PARAM_FOR_PLUGIN | ZNBD_PARAM_FOR_BIO | ZNBD_PARAM_FOR_MQ |            \
   ZNBD_PARAM_FOR_TCMU | ZNBD_PARAM_FOR_UBLK)

/* One entry of the parameter table, as front-ends and tests see it. */
struct znbd_param_info {
  const char *name; /* the key, e.g. "zone_size" */
  enum znbd_param_type type;
  const char *meta; /* the value in help and man pages: "SIZE", "512|4096" */
  const char *def;  /* default, as text znbd_params_set() accepts; NULL:
                       none (required, or unset) */
  uint32_t min;     /* UINT: smallest value znbd_params_finish() accepts */
  const char *unit; /* "bytes", "nanoseconds"... or NULL */
  unsigned users;   /* ZNBD_PARAM_FOR_* bits */
  const char *null_blk; /* null_blk's attribute name, or NULL if it has none */
  const char *help;     /* one line for --help, without the default */
};

/* The I-th entry of the parameter table (0-based), or NULL past its end.
 * Entries are static: never freed.  Sets no errno. */
const struct znbd_param_info *znbd_param_info(size_t i);

/* The entry of KEY, or NULL if there is none (KEY NULL included).  KEY
 * may be a whole key=value word: it is compared up to its first '='.
 * Sets no errno. */
const struct znbd_param_info *znbd_param_find(const char *key);

/* Whether KEY (as in znbd_param_find) has an effect for any of USERS
 * (ZNBD_PARAM_FOR_* bits).  False for an unknown key.  Sets no errno. */
bool znbd_param_used_by(const char *key, unsigned users);

/* The name of front-end FRONTEND (one ZNBD_PARAM_FOR_* bit), as its
 * messages give it: "znbd-ublk", "znbd --queue-mode=bio"...; "znbd" for
 * anything else.  Sets no errno. */
const char *znbd_param_frontend_name(unsigned frontend);

/* Refuse the parameters given to P (znbd_params_set(), P->given) that
 * have no effect in front-end FRONTEND (one ZNBD_PARAM_FOR_* bit; the
 * users of each entry in lib/params.c), so that a knob a front-end
 * ignores is not taken silently.  Call it after the last
 * znbd_params_set(), before anything needs the kernel or a socket.
 * Returns 0, or -1 with errno EINVAL and, for the first such parameter
 * in table order, "FRONT-END: NAME has no effect here: REASON" in ERR
 * (always NUL-terminated when ERRLEN > 0). */
int znbd_params_refuse_unused(const struct znbd_params *p, unsigned frontend,
                              char *err, size_t errlen);

/* Help text, one line per key ("key=META  help (default ...)."), built
 * from the table on the first call (thread-safe) and kept for the life of
 * the process; for nbdkit's config_help and znbd --help.  Never NULL:
 * without memory it is a one-line apology. */
const char *znbd_params_help_text(void);
/* The name front-ends used when the text was a constant. */
#define znbd_params_help (znbd_params_help_text())

#endif
