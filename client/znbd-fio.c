/* znbd-fio: a fio external ioengine for znbd exports (man/znbd-fio.pod).
 *
 *   fio --ioengine=external:/path/znbd-fio.so --uri=URI [--control=PATH]
 *       --zonemode=zbd ...
 *
 * I/O is asynchronous on libnbd's AIO API (aio_pread/pwrite/trim/flush
 * with completion callbacks, nbd_poll to wait), one NBD connection per
 * job; with --sync_io=1 each request is waited for inside queue, as
 * fio's psync engine does.  The zone hooks of fio's ioengine_ops
 * (FIO_IOOPS_VERSION 31, fio 3.33: get_zoned_model, report_zones, reset_wp,
 * get_max_open_zones) go through libznbdclient (client/znbdclient.h): zone
 * state from x-znbd:zone, the control socket or base:allocation, resets through
 * the control socket or NBD TRIM.  A plain export is reported as ZBD_NONE, so
 * fio emulates zones on it (--zonesize needed) as on a regular file.
 *
 * Built against fio's internal headers from fio's source package
 * (configure --with-fio-source=DIR).  Offsets and lengths are bytes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fio.h"
#include "optgroup.h"
#include "zbd.h"

#include "znbdclient.h"

/* Engine options (--uri=, --control=).  fio wants no option at offset 0. */
struct zf_options {
  void *pad;
  char *uri;
  char *control;
  unsigned int sync_io;
};

static struct fio_option zf_option_table[] = {
    {
        .name = "uri",
        .lname = "NBD URI",
        .help = "NBD URI of the export (any URI libnbd accepts)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_NBD,
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct zf_options, uri),
    },
    {
        .name = "control",
        .lname = "zone control socket",
        .help = "Path of the server's zone control socket (zone_control=): "
                "exact zone state and resets",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_NBD,
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct zf_options, control),
    },
    {
        .name = "sync_io",
        .lname = "synchronous requests",
        .help = "Complete each request before returning it to fio, as fio's "
                "sync engines (psync) do",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_NBD,
        .type = FIO_OPT_BOOL,
        .off1 = offsetof(struct zf_options, sync_io),
        .def = "0",
    },
    {
        .name = NULL,
    },
};

/* Per job.  The handle is opened by whichever process needs it first:
 * fio calls setup and the zone hooks in its main process, then forks the
 * job (unless --thread), which reconnects instead of sharing the socket. */
struct zf_data {
  struct znbdc *h;
  pid_t pid;          /* the process that opened h */
  struct io_u **done; /* completed, not yet handed to fio */
  unsigned nr_done, given, cap;
};

/* log_err() the message FMT, leaving errno as it found it (the failure's,
 * as lib/err.h's fail_err() does); returns -errno, the way fio's zone
 * hooks fail. */
static int __attribute__((format(printf, 1, 2))) fail_log(const char *fmt, ...)
{
  int e = errno;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_err("%s", msg);
  errno = e;
  return -e;
}

static struct znbdc *
zf_handle(struct thread_data *td)
{
  struct zf_options *o = td->eo;
  struct zf_data *d = td->io_ops_data;
  char err[512];

  if (d->h && d->pid != getpid()) {
    znbdc_close(d->h); /* inherited: closed without a disconnect */
    d->h = NULL;
  }
  if (d->h)
    return d->h;
  if (o->uri == NULL) {
    log_err("znbd-fio: the uri= option is required\n");
    errno = EINVAL;
    return NULL;
  }
  d->h = znbdc_open(o->uri, o->control, err, sizeof err);
  if (d->h == NULL) {
    fail_log("znbd-fio: %s\n", err);
    return NULL;
  }
  d->pid = getpid();
  return d->h;
}

/* Without --filename fio names a job's files after the job (JOB.0.0)
 * before the engine is set up, and its zbd layer (zbd_init_zone_info(),
 * called right after the engine's setup hook) shares zone state only
 * between files of the same name: two jobs on one export would each track
 * their own write pointers.  Naming every such file after the URI makes
 * all jobs on an export share one zone state.  0, or -1 if out of memory. */
static int
zf_name_files(struct thread_data *td, const char *uri)
{
  struct fio_file *f;
  unsigned i;

  for_each_file(td, f, i)
  {
    /* Allocated as add_file() does: shared memory unless the file struct
     * itself is private (fio_file_free() frees both the same way). */
    char *name = fio_file_smalloc(f) ? smalloc_strdup(uri) : strdup(uri);

    if (name == NULL)
      return -1;
    if (fio_file_smalloc(f))
      sfree(f->file_name);
    else
      free(f->file_name);
    f->file_name = name;
  }
  return 0;
}

static int
zf_setup(struct thread_data *td)
{
  struct zf_options *o = td->eo;
  struct zf_data *d = calloc(1, sizeof *d);
  struct znbdc *h;

  if (d == NULL) {
    td_verror(td, ENOMEM, "calloc");
    return 1;
  }
  td->io_ops_data = d;
  /* One pseudo file standing for the export, as fio's nbd engine does,
   * named after the URI: fio shares zone state between jobs by file
   * name, so jobs on different exports must not share a name. */
  if (!td->files_index) {
    add_file(td, o->uri ? o->uri : "znbd", 0, 0);
    td->o.nr_files = td->o.nr_files ?: 1;
    td->o.open_files++;
  } else if (td->o.filename == NULL && o->uri && zf_name_files(td, o->uri)) {
    td_verror(td, ENOMEM, "znbd-fio: file name");
    return 1;
  }
  h = zf_handle(td);
  if (h == NULL) {
    td_verror(td, errno, "znbd-fio: connect");
    return 1;
  }
  for (unsigned i = 0; i < td->files_index; i++) {
    td->files[i]->real_file_size = znbdc_geom(h)->size;
    /* fio emulates zones in anything it takes for a regular file and
     * asks the engine's zone hooks only for devices; a character device
     * also spares the O_DIRECT check fio makes for block devices. */
    if (znbdc_geom(h)->zoned)
      td->files[i]->filetype = FIO_TYPE_CHAR;
  }
  return 0;
}

static int
zf_init(struct thread_data *td)
{
  struct zf_data *d = td->io_ops_data;

  if (zf_handle(td) == NULL) {
    td_verror(td, errno, "znbd-fio: connect");
    return 1;
  }
  /* Up to iodepth handed out by the last getevents plus up to iodepth
   * completing before the next one (callbacks run inside any libnbd
   * call). */
  d->cap = 2 * (td->o.iodepth ? td->o.iodepth : 1) + 1;
  d->done = calloc(d->cap, sizeof *d->done);
  if (d->done == NULL) {
    td_verror(td, ENOMEM, "calloc");
    return 1;
  }
  return 0;
}

static void
zf_cleanup(struct thread_data *td)
{
  struct zf_data *d = td->io_ops_data;

  if (d == NULL)
    return;
  znbdc_close(d->h);
  free(d->done);
  free(d);
  td->io_ops_data = NULL;
}

/* libnbd completion callback: queue the io_u for getevents.  Returning 1
 * retires the command in libnbd. */
static int
zf_completed(void *opaque, int *error)
{
  struct io_u *io_u = opaque;
  struct zf_data *d = io_u->engine_data;

  io_u->error = *error;
  if (d->nr_done < d->cap)
    d->done[d->nr_done++] = io_u;
  return 1;
}

/* sync_io=1: wait until IO_U's reply is in, take it off the completion
 * list and let zf_queue() return it completed.  0, or -1 if the
 * connection failed (IO_U then gets EIO). */
static int
zf_wait(struct zf_data *d, struct nbd_handle *nbd, struct io_u *io_u)
{
  for (;;) {
    for (unsigned i = d->given; i < d->nr_done; i++)
      if (d->done[i] == io_u) {
        memmove(d->done + i, d->done + i + 1,
                (d->nr_done - i - 1) * sizeof *d->done);
        d->nr_done--;
        return 0;
      }
    if (nbd_poll(nbd, -1) == -1) {
      log_err("znbd-fio: nbd_poll: %s\n", nbd_get_error());
      io_u->error = EIO;
      return -1;
    }
  }
}

static enum fio_q_status
zf_queue(struct thread_data *td, struct io_u *io_u)
{
  struct zf_data *d = td->io_ops_data;
  struct nbd_handle *nbd = znbdc_nbd(d->h);
  nbd_completion_callback cb = {.callback = zf_completed, .user_data = io_u};
  int64_t r;

  fio_ro_check(td, io_u);
  io_u->engine_data = d;
  io_u->error = 0;
  switch (io_u->ddir) {
  case DDIR_READ:
    r = nbd_aio_pread(nbd, io_u->xfer_buf, io_u->xfer_buflen, io_u->offset, cb,
                      0);
    break;
  case DDIR_WRITE:
    r = nbd_aio_pwrite(nbd, io_u->xfer_buf, io_u->xfer_buflen, io_u->offset, cb,
                       0);
    break;
  case DDIR_TRIM:
    /* With --zonemode=zbd a trim of a sequential zone is fio's own zone
     * reset, as in fio's do_io_u_trim() and its libzbc engine: the reset
     * goes through the reset_wp hook and fio moves the write pointer it
     * tracks back to the zone start.  A bare NBD TRIM would reset the zone
     * on the server behind fio's back.  Conventional zones (0) are
     * trimmed as on any device. */
    if (td->o.zone_mode == ZONE_MODE_ZBD && io_u->file->zbd_info) {
      int z = zbd_do_io_u_trim(td, io_u);

      if (z == io_u_completed)
        return FIO_Q_COMPLETED;
      if (z < 0) {
        io_u->error = -z;
        return FIO_Q_COMPLETED;
      }
    }
    r = nbd_aio_trim(nbd, io_u->xfer_buflen, io_u->offset, cb, 0);
    break;
  case DDIR_SYNC:
  case DDIR_DATASYNC:
    if (nbd_can_flush(nbd) != 1)
      return FIO_Q_COMPLETED; /* nothing to flush: no write cache */
    r = nbd_aio_flush(nbd, cb, 0);
    break;
  default:
    io_u->error = EINVAL;
    return FIO_Q_COMPLETED;
  }
  if (r == -1) {
    io_u->error = nbd_get_errno() ? nbd_get_errno() : EIO;
    return FIO_Q_COMPLETED;
  }
  /* fio treats a request completed inside queue differently from one
   * completed later: only the first counts in its first-I/O error hints
   * (td_io_queue()) and only the second in a pass's issued bytes
   * (do_io()), so a job written for psync needs the former. */
  if (((struct zf_options *)td->eo)->sync_io) {
    zf_wait(d, nbd, io_u);
    return FIO_Q_COMPLETED;
  }
  return FIO_Q_QUEUED;
}

static int
zf_getevents(struct thread_data *td, unsigned int min, unsigned int max,
             const struct timespec *t)
{
  struct zf_data *d = td->io_ops_data;
  struct nbd_handle *nbd = znbdc_nbd(d->h);
  int timeout = t ? (int)(t->tv_sec * 1000 + t->tv_nsec / 1000000) : -1;

  /* Drop what the last call handed out (fio has taken them by now). */
  memmove(d->done, d->done + d->given,
          (d->nr_done - d->given) * sizeof *d->done);
  d->nr_done -= d->given;
  d->given = 0;
  /* libnbd reads one reply per read notification, so this polls once per
   * completion.  Notifying libnbd again without a poll, to read replies
   * already waiting, is not safe: finding the socket empty at the start
   * of a reply, libnbd 1.14 stays in its reply state and holds back the
   * commands queued meanwhile, which hangs once every sent command has
   * been answered (bench/README.md, "fio engine cost"). */
  while (d->nr_done < min) {
    int r = nbd_poll(nbd, timeout);
    if (r == -1) {
      log_err("znbd-fio: nbd_poll: %s\n", nbd_get_error());
      return -1;
    }
    if (r == 0 && timeout >= 0)
      break; /* timed out */
  }
  d->given = d->nr_done < max ? d->nr_done : max;
  return (int)d->given;
}

static struct io_u *
zf_event(struct thread_data *td, int event)
{
  struct zf_data *d = td->io_ops_data;

  return (unsigned)event < d->given ? d->done[event] : NULL;
}

static int
zf_open_file(struct thread_data *td, struct fio_file *f)
{
  return 0;
}

static int
zf_invalidate(struct thread_data *td, struct fio_file *f)
{
  return 0;
}

/* ---- zone hooks ------------------------------------------------------ */

static int
zf_get_zoned_model(struct thread_data *td, struct fio_file *f,
                   enum zbd_zoned_model *model)
{
  struct znbdc *h = zf_handle(td);

  if (h == NULL)
    return -errno;
  *model = znbdc_geom(h)->zoned ? ZBD_HOST_MANAGED : ZBD_NONE;
  return 0;
}

/* Up to NR_ZONES zones from the one holding OFFSET: the number reported,
 * or -errno. */
static int
zf_report_zones(struct thread_data *td, struct fio_file *f, uint64_t offset,
                struct zbd_zone *zones, unsigned int nr_zones)
{
  struct znbdc *h = zf_handle(td);
  const struct znbdc_geom *g;
  struct znbd_zone_info *info;
  uint32_t first, count;

  if (h == NULL)
    return -errno;
  g = znbdc_geom(h);
  first = znbdc_zone_of(g, offset);
  if (first == UINT32_MAX)
    return 0;
  count = g->nr_zones - first < nr_zones ? g->nr_zones - first : nr_zones;
  info = calloc(count, sizeof *info);
  if (info == NULL)
    return -ENOMEM;
  if (znbdc_report(h, first, count, info) == -1) {
    int r = fail_log("znbd-fio: report zones: %s\n", znbdc_error(h));
    free(info);
    return r;
  }
  for (uint32_t i = 0; i < count; i++) {
    const struct znbd_zone_info *z = &info[i];

    zones[i].start = z->start;
    zones[i].len = z->len;
    zones[i].capacity = z->capacity;
    zones[i].type = z->type == ZNBD_ZONE_TYPE_CONVENTIONAL ? ZBD_ZONE_TYPE_CNV
                                                           : ZBD_ZONE_TYPE_SWR;
    /* The values of both enums are Linux's (blkzoned.h). */
    zones[i].cond = (enum zbd_zone_cond)z->cond;
    /* fio wants a wp inside the zone for every sequential zone: none
     * for READONLY (no writes: as if full) and OFFLINE (fio skips it). */
    if (z->wp != ZNBD_WP_INVALID)
      zones[i].wp = z->wp;
    else if (z->cond == ZNBD_ZONE_COND_OFFLINE)
      zones[i].wp = z->start;
    else
      zones[i].wp = z->start + z->capacity;
  }
  free(info);
  return (int)count;
}

/* Reset the zones in [OFFSET, OFFSET + LENGTH): 0 or -errno (errno set). */
static int
zf_reset_wp(struct thread_data *td, struct fio_file *f, uint64_t offset,
            uint64_t length)
{
  struct znbdc *h = zf_handle(td);
  const struct znbdc_geom *g;
  uint32_t first;
  uint64_t end;

  if (h == NULL)
    return -errno;
  g = znbdc_geom(h);
  first = znbdc_zone_of(g, offset);
  end = offset + length < g->size ? offset + length : g->size;
  if (first == UINT32_MAX || length == 0) {
    errno = EINVAL;
    return -EINVAL;
  }
  if (znbdc_reset_zones(
          h, first, (uint32_t)((end - 1) / g->zone_size - first + 1)) == -1) {
    return fail_log("znbd-fio: reset: %s\n", znbdc_error(h));
  }
  return 0;
}

static int
zf_get_max_open_zones(struct thread_data *td, struct fio_file *f,
                      unsigned int *max_open_zones)
{
  struct znbdc *h = zf_handle(td);

  if (h == NULL)
    return -errno;
  *max_open_zones = znbdc_geom(h)->max_open; /* 0: no limit */
  return 0;
}

/* fio looks the engine up by this symbol name. */
struct ioengine_ops ioengine = {
    .name = "znbd",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO | FIO_NOEXTEND | FIO_NODISKUTIL,
    .setup = zf_setup,
    .init = zf_init,
    .cleanup = zf_cleanup,
    .queue = zf_queue,
    .getevents = zf_getevents,
    .event = zf_event,
    .open_file = zf_open_file,
    .invalidate = zf_invalidate,
    .get_zoned_model = zf_get_zoned_model,
    .report_zones = zf_report_zones,
    .reset_wp = zf_reset_wp,
    .get_max_open_zones = zf_get_max_open_zones,
    .options = zf_option_table,
    .option_struct_size = sizeof(struct zf_options),
};
