/* znbd-tcmu: the TCMU command ring (see ring.h).  The protocol is the one
 * documented at the top of <linux/target_core_user.h>: the kernel puts
 * entries at mailbox->cmd_head; we handle each, write its response in
 * place and move cmd_tail past it, then write 4 bytes to the UIO fd so
 * the kernel reaps the completions (tcmu_handle_completions()). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ring.h"

/* The UAPI header pulls in <linux/uio.h>, whose struct iovec clashes
 * with libc's <sys/uio.h> (same layout): keep libc's. */
#define __LINUX_UIO_H
#include <linux/target_core_user.h>

int
tcmu_ring_open(struct tcmu_ring *r, const char *uio, char *err, size_t errlen)
{
  char path[128], buf[64];
  snprintf(path, sizeof path, "/sys/class/uio/%s/maps/map0/size", uio);
  FILE *f = fopen(path, "r");
  if (!f || !fgets(buf, sizeof buf, f)) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    if (f)
      fclose(f);
    return -1;
  }
  fclose(f);
  r->map_size = strtoull(buf, NULL, 0);
  snprintf(path, sizeof path, "/dev/%s", uio);
  r->fd = open(path, O_RDWR | O_CLOEXEC);
  if (r->fd < 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  r->map =
      mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (r->map == MAP_FAILED) {
    snprintf(err, errlen, "mmap %s (%zu bytes): %s", path, r->map_size,
             strerror(errno));
    close(r->fd);
    return -1;
  }
  struct tcmu_mailbox *mb = r->map;
  /* Whatever a previous handler left unanswered is answered by the
   * kernel's timeout; start at the tail. */
  r->last = __atomic_load_n(&mb->cmd_tail, __ATOMIC_ACQUIRE);
  return 0;
}

/* Handle the command entry E: CDB and data buffers are offsets from the
 * map base.  The request fields share their bytes with the response, so
 * everything is read before anything is written. */
static void
handle(struct tcmu_ring *r, struct znbd_scsi *s, struct tcmu_cmd_entry *e)
{
  uint8_t *base = r->map;
  uint32_t n = e->req.iov_cnt;
  struct iovec *iov = calloc(n ? n : 1, sizeof *iov);
  struct znbd_scsi_cmd c = {0};
  int st;

  if (!iov) {
    st = ZNBD_SCSI_CHECK_CONDITION;
    memset(c.sense, 0, sizeof c.sense);
    c.sense[0] = 0x70, c.sense[2] = 0x04, c.sense[7] = 0x0a; /* HW error */
  } else {
    for (uint32_t i = 0; i < n; i++) {
      iov[i].iov_base = base + (size_t)e->req.iov[i].iov_base;
      iov[i].iov_len = e->req.iov[i].iov_len;
    }
    c.cdb = base + e->req.cdb_off;
    c.cdb_len = 16;
    c.iov = iov;
    c.iovcnt = n;
    st = znbd_scsi_exec(s, &c);
  }
  free(iov);
  e->rsp.scsi_status = st;
  if (st != ZNBD_SCSI_GOOD)
    memcpy(e->rsp.sense_buffer, c.sense, TCMU_SENSE_BUFFERSIZE);
  e->rsp.read_len = c.read_len;
  e->hdr.uflags |= TCMU_UFLAG_READ_LEN;
}

int
tcmu_ring_serve(struct tcmu_ring *r, struct znbd_scsi *s,
                volatile sig_atomic_t *stop)
{
  struct tcmu_mailbox *mb = r->map;
  uint8_t *ring = (uint8_t *)r->map + mb->cmdr_off;

  while (!*stop) {
    struct pollfd pfd = {r->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, 200);
    if (pr < 0 && errno != EINTR)
      return -1;
    if (pr > 0) {
      uint32_t irq;
      if (read(r->fd, &irq, sizeof irq) < 0 && errno != EINTR)
        return -1;
    }
    bool done = false;
    while (r->last != __atomic_load_n(&mb->cmd_head, __ATOMIC_ACQUIRE)) {
      struct tcmu_cmd_entry *e = (void *)(ring + r->last);
      if (tcmu_hdr_get_op(e->hdr.len_op) == TCMU_OP_CMD)
        handle(r, s, e);
      /* PAD and TMR entries are skipped (TMR only with
       * tmr_notification=1, which znbd-tcmu never sets). */
      r->last = (r->last + tcmu_hdr_get_len(e->hdr.len_op)) % mb->cmdr_size;
      __atomic_store_n(&mb->cmd_tail, r->last, __ATOMIC_RELEASE);
      done = true;
    }
    if (done) {
      uint32_t one = 0;
      if (write(r->fd, &one, sizeof one) < 0)
        return -1;
    }
  }
  return 0;
}

void
tcmu_ring_close(struct tcmu_ring *r)
{
  munmap(r->map, r->map_size);
  close(r->fd);
}
