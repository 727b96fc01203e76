/* znbd: device parameters, parsed once for every front-end.
 *
 * The plugin (nbdkit ./zoned.so key=value ...) and the server
 * (znbd key=value ...) both feed their key=value words to
 * znbd_params_set() and call znbd_params_finish() once, so they accept
 * exactly the same words and size syntax.  Names follow Linux null_blk's
 * configfs attributes (Documentation/block/null_blk.rst).
 */
#ifndef ZNBD_PARAMS_H
#define ZNBD_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
  bool sched_batch; /* serve from SCHED_BATCH threads (default true) */

  /* Only the server's mq queue model uses these (null_blk names). */
  uint32_t hw_queue_depth; /* tags per tag set (default 64) */
  uint32_t submit_queues;  /* hardware queues (default 1) */
  bool no_zone_write_lock; /* mq-deadline without zone write locking */

  /* Derived by znbd_params_finish(); read-only afterwards. */
  uint32_t nr_zones; /* ceil(size / zone_size) when zoned, else 0 */
};

/* Fill P with the defaults above.  Never fails. */
void znbd_params_init(struct znbd_params *p);

/* Apply one key=value word.  KEY is a null_blk-style name (see
 * znbd_params_help).  Returns 0, or -1 with errno EINVAL (bad value) or
 * ENOENT (unknown key) and a message naming the parameter in ERR (always
 * NUL-terminated when ERRLEN > 0). */
int znbd_params_set(struct znbd_params *p, const char *key, const char *value,
                    char *err, size_t errlen);

/* Check the combination and derive nr_zones, after all keys are set.
 * When zoned, a zone_capacity of 0 is replaced by zone_size.
 * Clamps as null_blk does (zone_nr_conv, zone_max_open, zone_max_active;
 * doc/zone-rules.md, rule clamp-limits) and reports each clamp through
 * NOTE (may be NULL).  Returns 0, or -1 with errno EINVAL and a message naming
 * the parameters in ERR. */
int znbd_params_finish(struct znbd_params *p, void (*note)(const char *msg),
                       char *err, size_t errlen);

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

/* Help text, one line per key, for nbdkit's config_help and znbd --help. */
extern const char znbd_params_help[];

#endif
