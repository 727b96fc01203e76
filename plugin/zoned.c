/* znbd: nbdkit plugin `zoned` — a brd-like sparse RAM disk with null_blk's
 * zone rules, over NBD (man/nbdkit-zoned-plugin.pod).
 *
 *   nbdkit ./zoned.so size=4G zone_size=64M zone_nr_conv=4
 *   nbdkit ./zoned.so size=1G zoned=false
 *
 * All device logic is in lib/ (include/znbd/dev.h); this file only maps
 * nbdkit's callbacks onto it.  Parameters are parsed by lib/params.c, so
 * the plugin and the znbd server accept exactly the same words.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "znbd/control.h"
#include "znbd/dev.h"
#include "znbd/log.h"
#include "znbd/request.h"
#include "znbd/params.h"
#include "znbd/sched.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

/* Largest request we advertise (NBD's interoperable default), bytes. */
#define MAX_REQUEST (32 * 1024 * 1024)

static struct znbd_params params;
static bool params_ready;
static struct znbd_dev *dev;
static struct znbd_control *control; /* zone_control socket, or NULL */

/* Clamps (null_blk's) are worth seeing without -v, but are not errors. */
static void
note(const char *msg)
{
  fprintf(stderr, "nbdkit: zoned: note: %s\n", msg);
}

/* lib/'s messages: errors in nbdkit's error log, warnings and notes on
 * stderr without -v, injected faults in nbdkit's debug log (-v). */
static void
log_sink(void *opaque, enum znbd_log_level level, const char *msg)
{
  (void)opaque;
  switch (level) {
  case ZNBD_LOG_ERROR:
    nbdkit_error("%s", msg);
    break;
  case ZNBD_LOG_WARNING:
    fprintf(stderr, "nbdkit: zoned: warning: %s\n", msg);
    break;
  case ZNBD_LOG_NOTE:
    note(msg);
    break;
  case ZNBD_LOG_FAULT:
    nbdkit_debug("zoned: fault: %s", msg);
    break;
  }
}

static void
zoned_load(void)
{
  znbd_log_set_sink(log_sink, NULL);
  znbd_params_init(&params);
  params_ready = true;
}

static void
zoned_unload(void)
{
  znbd_control_stop(control);
  control = NULL;
  znbd_dev_free(dev);
  dev = NULL;
  if (params_ready)
    znbd_params_free(&params);
}

static int
zoned_config(const char *key, const char *value)
{
  char err[256];
  if (znbd_params_set(&params, key, value, err, sizeof err) < 0) {
    nbdkit_error("%s", err);
    return -1;
  }
  return 0;
}

static int
zoned_config_complete(void)
{
  char err[256];
  /* Every front-end shares one parameter list (lib/params.c says who
   * uses what); one that changes nothing here is refused. */
  if (znbd_params_refuse_unused(&params, ZNBD_PARAM_FOR_PLUGIN, err,
                                sizeof err) < 0) {
    nbdkit_error("%s", err);
    return -1;
  }
  if (znbd_params_finish(&params, err, sizeof err) < 0) {
    nbdkit_error("%s", err);
    return -1;
  }
  return 0;
}

/* Build the device before nbdkit forks so a bad size stops start-up. */
static int
zoned_get_ready(void)
{
  char err[256];
  dev = znbd_dev_new(&params, err, sizeof err);
  if (!dev) {
    nbdkit_error("%s", err);
    return -1;
  }
  /* The control socket refuses what the plugin cannot honour. */
  znbd_dev_set_frontend(dev, ZNBD_PARAM_FOR_PLUGIN);
  /* nbdkit creates its connection and worker threads after this, from
   * this thread: they inherit the policy. */
  if (params.sched_batch && znbd_sched_batch() < 0)
    nbdkit_debug("zoned: SCHED_BATCH: %m");
  return 0;
}

/* The control socket's `stats` ends with the parked writes whose nbdkit
 * thread waited, and how many of those threads slept (the others saw
 * their write run while they yielded the CPU). */
static void
zoned_stats(void *opaque, FILE *out)
{
  struct znbd_dev_stats st;
  znbd_dev_stats(dev, &st);
  fprintf(out, " park_waits=%" PRIu64 " park_sleeps=%" PRIu64, st.park_waits,
          st.park_sleeps);
}

/* The zone control socket runs on a thread of its own: start it after
 * nbdkit's fork (threads do not survive fork). */
static int
zoned_after_fork(void)
{
  if (params.zone_control) {
    char err[256];
    control = znbd_control_start_stats(dev, params.zone_control, zoned_stats,
                                       NULL, err, sizeof err);
    if (!control) {
      nbdkit_error("%s", err);
      return -1;
    }
  }
  return 0;
}

/* Every zoned_* key printed here is listed in the plugin's man page
 * (DUMP-PLUGIN OUTPUT; tests/nbd/params-help.sh checks it). */
static void
zoned_dump_plugin(void)
{
  const struct znbd_param_info *i;

  printf("zoned_parameters=");
  for (size_t k = 0; (i = znbd_param_info(k)) != NULL; k++)
    printf("%s%s", k ? "," : "", i->name);
  printf("\n");
  printf("zoned_size_syntax=nbdkit\n");
  printf("zoned_blocksizes=");
  for (const char *c = znbd_param_find("blocksize")->meta; *c; c++)
    putchar(*c == '|' ? ',' : *c);
  printf("\n");
  printf("zoned_max_request=%d\n", MAX_REQUEST);
  printf("zoned_page_size=4096\n");
  printf("zoned_zone_control=yes\n");
}

/* nbdkit 1.32 has no asynchronous completion: a pipelined write ahead of
 * the wp parks and its nbdkit thread waits for it (znbd_dev_write).  If
 * every thread of a connection waited, none would be left to read the
 * write that fills the gap, and the connection would stall until
 * zone_write_timeout.  So at most WAIT_MAX threads of a connection wait;
 * a write ahead of the wp beyond that fails at once (EIO on the wire),
 * leaving 1 of nbdkit's default 16 threads (per connection) free to read
 * the write that fills the gap (qemu's client sends at most 16 at once:
 * with 16 of them parked it could not send that write anyway).
 * man/nbdkit-zoned-plugin.pod, PIPELINED WRITES, gives the client depths
 * that work. */
#define WAIT_MAX 15

struct handle {
  /* The connection's request context (znbd/request.h): its power-cut
   * fence and its bound of WAIT_MAX threads counted in WAITING. */
  struct znbd_req_ctx rq;
  _Atomic unsigned waiting;
};

static void *
zoned_open(int readonly)
{
  struct handle *h = calloc(1, sizeof *h);
  if (!h)
    nbdkit_error("open: out of memory");
  else {
    znbd_req_ctx_init(&h->rq, dev);
    znbd_req_ctx_bound(&h->rq, &h->waiting, WAIT_MAX);
  }
  return h;
}

/* After a power cut (write_cache=true) a connection made before it is
 * dead: nbdkit 1.32 cannot drop one connection from a plugin, so every
 * request on it fails with ESHUTDOWN (NBD_ESHUTDOWN) until the client
 * disconnects. */
static int
cut_off(void *handle, const char *op)
{
  struct handle *h = handle;
  /* The device checks the fence again under its cut lock, where a cut
   * cannot come in between (znbd_req_write() and the others). */
  if (!znbd_req_cut(&h->rq))
    return 0;
  nbdkit_error("%s: the device lost power since this connection began "
               "(power-cut): reconnect",
               op);
  errno = ESHUTDOWN;
  return -1;
}

static void
zoned_close(void *handle)
{
  free(handle);
}

/* A write through handle H's context: fenced, and bounded to WAIT_MAX
 * waiting threads. */
static int
bounded_write(struct handle *h, const void *buf, uint32_t count,
              uint64_t offset, unsigned wflags)
{
  return znbd_req_write(&h->rq, buf, count, offset, wflags, NULL, NULL);
}

static int64_t
zoned_get_size(void *handle)
{
  return (int64_t)znbd_dev_size(dev);
}

static int
zoned_block_size(void *handle, uint32_t *minimum, uint32_t *preferred,
                 uint32_t *maximum)
{
  *minimum = params.blocksize;
  *preferred = params.blocksize > 4096 ? params.blocksize : 4096;
  *maximum = MAX_REQUEST;
  return 0;
}

static const char *
zoned_export_description(void *handle)
{
  char buf[512];
  znbd_dev_describe(dev, buf, sizeof buf);
  return nbdkit_strdup_intern(buf);
}

static int
zoned_can_write(void *handle)
{
  return 1;
}

static int
zoned_can_flush(void *handle)
{
  return 1;
}

static int
zoned_can_trim(void *handle)
{
  return 1;
}

static int
zoned_can_zero(void *handle)
{
  return 1;
}

static int
zoned_can_fast_zero(void *handle)
{
  return 1;
}

static int
zoned_can_extents(void *handle)
{
  return 1;
}

static int
zoned_can_fua(void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
zoned_can_cache(void *handle)
{
  return NBDKIT_CACHE_NATIVE;
}

/* Any connection sees every completed write: it is all one RAM store. */
static int
zoned_is_rotational(void *handle)
{
  return params.rotational; /* null_blk's rotational */
}

static int
zoned_can_multi_conn(void *handle)
{
  return 1;
}

/* Linux errno names for the log (strerror is vague for zone errors). */
static const char *
errno_name(int e)
{
  switch (e) {
  case ETOOMANYREFS:
    return "ETOOMANYREFS (too many open zones)";
  case EOVERFLOW:
    return "EOVERFLOW (too many active zones)";
  }
  const char *n = znbd_errno_name(e);
  return n ? n : "?";
}

/* Log the exact reason, then set errno to what NBD can carry.  On a zoned
 * device the zone holding OFFSET is described too (condition, wp, end of
 * its capacity), so a write-pointer refusal says where the wp was. */
static int
fail(const char *op, uint32_t count, uint64_t offset, int e)
{
  char zone[160];
  znbd_dev_zone_note(dev, offset, zone, sizeof zone);
  nbdkit_error("%s: %" PRIu32 " bytes at %" PRIu64 ": %s: %s%s", op, count,
               offset, errno_name(e), strerror(e), zone);
  errno = znbd_dev_wire_errno(e);
  return -1;
}

/* nbdkit 1.32 advertises .block_size but does not enforce it. */
static int
check_aligned(void *handle, const char *op, uint32_t count, uint64_t offset)
{
  if (cut_off(handle, op) < 0)
    return -1;
  if ((offset | count) % params.blocksize) {
    nbdkit_error("%s: %" PRIu32 " bytes at %" PRIu64
                 ": not aligned to blocksize %" PRIu32,
                 op, count, offset, params.blocksize);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

/* How long a dropped reply is held back: nbdkit has no way to leave a
 * request unanswered, so the thread sleeps in nbdkit_nanosleep, which
 * returns early when the client disconnects (its timeout fired) or
 * nbdkit shuts down.  A client that waits longer than this gets the
 * reply after all. */
#define DROP_SECONDS (24u * 3600u)

/* The request's injected delay (znbd_req_delay: completion_nsec, the
 * mbps bucket, zone_reset_nsec) for a request of KIND moving LEN bytes
 * on HANDLE's connection; then drop-reply, as far as nbdkit allows.
 * Leaves errno as it found it: the request's result (lib/err.h's idiom). */
static void
complete_delay_io(void *handle, unsigned kind, uint64_t len)
{
  struct handle *h = handle;
  int e = errno;
  uint64_t ns = znbd_req_delay(&h->rq, kind, len, 0);
  if (ns)
    nbdkit_nanosleep((unsigned)(ns / 1000000000), (unsigned)(ns % 1000000000));
  if (znbd_req_drop_reply(&h->rq, kind))
    nbdkit_nanosleep(DROP_SECONDS, 0);
  errno = e;
}

static int
zoned_pread(void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  if (check_aligned(handle, "pread", count, offset) < 0)
    return -1;
  struct handle *h = handle;
  int r = znbd_req_read(&h->rq, buf, count, offset, 0);
  complete_delay_io(handle, ZNBD_IO_READ, count);
  return r < 0 ? fail("pread", count, offset, errno) : 0;
}

/* The device write flag for nbdkit's FUA flag. */
static unsigned
fua_flag(uint32_t flags)
{
  return (flags & NBDKIT_FLAG_FUA) ? ZNBD_WRITE_FUA : 0;
}

static int
zoned_pwrite(void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  if (check_aligned(handle, "pwrite", count, offset) < 0)
    return -1;
  /* FUA inside the write (ZNBD_WRITE_FUA; trim and zero too): a power
   * cut cannot come between the two, so ESHUTDOWN means the request
   * changed nothing. */
  int r = bounded_write(handle, buf, count, offset, fua_flag(flags));
  complete_delay_io(handle, ZNBD_IO_WRITE, count);
  return r < 0 ? fail("pwrite", count, offset, errno) : 0;
}

static int
zoned_zero(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (check_aligned(handle, "zero", count, offset) < 0)
    return -1;
  /* Zeroing is always fast, so FAST_ZERO needs nothing special.  With
   * MAY_TRIM the pages are freed (they read back as zeros); without it
   * (the client sent NO_HOLE) the range must stay allocated. */
  unsigned wflags = (flags & NBDKIT_FLAG_MAY_TRIM) ? 0 : ZNBD_WRITE_ALLOCATE;
  int r = bounded_write(handle, NULL, count, offset, wflags | fua_flag(flags));
  complete_delay_io(handle, ZNBD_IO_WRITE, 0);
  return r < 0 ? fail("zero", count, offset, errno) : 0;
}

static int
zoned_trim(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (check_aligned(handle, "trim", count, offset) < 0)
    return -1;
  struct handle *h = handle;
  int r = znbd_req_trim(&h->rq, count, offset, fua_flag(flags));
  complete_delay_io(handle, ZNBD_IO_TRIM, count);
  return r < 0 ? fail("trim", count, offset, errno) : 0;
}

/* FLUSH: RAM is as durable as it gets once a write has returned; dir=
 * fdatasyncs the files written since the last flush (on nbdkit's worker
 * thread, which may block). */
static int
zoned_flush(void *handle, uint32_t flags)
{
  if (cut_off(handle, "flush") < 0)
    return -1;
  struct handle *h = handle;
  int r = znbd_req_flush(&h->rq);
  complete_delay_io(handle, ZNBD_IO_FLUSH, 0);
  if (r < 0) { /* nbdkit_error() keeps errno */
    nbdkit_error("flush: %s", strerror(errno));
    errno = znbd_dev_wire_errno(errno);
  }
  return r;
}

/* CACHE: everything is in RAM already; completion_nsec and drop-reply
 * (kind "other") apply as to any request. */
static int
zoned_cache(void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  if (check_aligned(handle, "cache", count, offset) < 0)
    return -1;
  complete_delay_io(handle, ZNBD_IO_OTHER, 0);
  return 0;
}

static int
add_extent(void *opaque, uint64_t off, uint64_t len, uint32_t flags)
{
  uint32_t type = 0;
  if (flags & ZNBD_EXTENT_HOLE)
    type |= NBDKIT_EXTENT_HOLE;
  if (flags & ZNBD_EXTENT_ZERO)
    type |= NBDKIT_EXTENT_ZERO;
  return nbdkit_add_extent(opaque, off, len, type) < 0 ? -1 : 0;
}

static int
zoned_extents(void *handle, uint32_t count, uint64_t offset, uint32_t flags,
              struct nbdkit_extents *extents)
{
  if (check_aligned(handle, "extents", count, offset) < 0)
    return -1;
  /* With REQ_ONE nbdkit keeps only the first extent; we still report all
   * of [offset, offset+count) as it is cheap (a bitmap scan). */
  int r = znbd_dev_extents(dev, offset, count, add_extent, extents);
  /* completion_nsec and drop-reply (kind "other"), as for any request. */
  complete_delay_io(handle, ZNBD_IO_OTHER, 0);
  if (r < 0)
    return fail("extents", count, offset, errno ? errno : EIO);
  return 0;
}

static struct nbdkit_plugin plugin = {
    .name = "zoned",
    .longname = "znbd zoned RAM disk (null_blk zone semantics)",
    .version = PACKAGE_VERSION,
    .description = "Sparse RAM disk with optional null_blk-faithful zones",
    .load = zoned_load,
    .unload = zoned_unload,
    .config = zoned_config,
    .config_complete = zoned_config_complete,
    .config_help = NULL, /* set by zoned_help_init() */
    .magic_config_key = "size",
    .get_ready = zoned_get_ready,
    .after_fork = zoned_after_fork,
    .dump_plugin = zoned_dump_plugin,
    .open = zoned_open,
    .close = zoned_close,
    .get_size = zoned_get_size,
    .block_size = zoned_block_size,
    .export_description = zoned_export_description,
    .can_write = zoned_can_write,
    .can_flush = zoned_can_flush,
    .can_trim = zoned_can_trim,
    .can_zero = zoned_can_zero,
    .can_fast_zero = zoned_can_fast_zero,
    .can_extents = zoned_can_extents,
    .can_fua = zoned_can_fua,
    .can_cache = zoned_can_cache,
    .can_multi_conn = zoned_can_multi_conn,
    .is_rotational = zoned_is_rotational,
    .pread = zoned_pread,
    .pwrite = zoned_pwrite,
    .flush = zoned_flush,
    .trim = zoned_trim,
    .zero = zoned_zero,
    .cache = zoned_cache,
    .extents = zoned_extents,
    .errno_is_preserved = 1,
};

/* The help text is built from lib/params.c's table at run time, so it
 * cannot be a constant initializer; nbdkit copies the plugin struct only
 * when it calls plugin_init(), after the library's constructors ran. */
static void __attribute__((constructor)) zoned_help_init(void)
{
  plugin.config_help = znbd_params_help_text();
}

NBDKIT_REGISTER_PLUGIN(plugin)
