/* znbd-ublk: libFuzzer harness over the request handler (io.c): what the
 * kernel hands a ublk server in its descriptor area, on buffers, against
 * a small device.  Input layout:
 *   byte 0   bit 0: zoned device (else a RAM disk); bit 1: a recovered
 *            server's handler (redo_writes, io.h); bit 2: every copy
 *            fails with EFAULT (the kernel refusing pread/pwrite on
 *            /dev/ublkcN), which the request's result must then be
 *   rest     24-byte struct ublksrv_io_desc records, each executed in
 *            turn; the request buffer the copy callbacks move data
 *            through is the bytes after the last whole record.
 * Every result must be bytes done (never more than the request asked or
 * the buffer holds), 0 or a negative errno; a copy outside the request
 * buffer aborts.  Build and run: make -C ublk fuzz (clang,
 * -fsanitize=fuzzer).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/fuzz_dev.h"
#include "io.h"

#define BUF_LEN (64u * 1024) /* the handler's bounce buffer */

/* The request buffer: what /dev/ublkcN would hold for one tag. */
struct reqbuf {
  const uint8_t *in; /* a WRITE's data */
  size_t in_len;
  bool fail;   /* copies fail with EFAULT */
  bool failed; /* one did */
  uint8_t out[BUF_LEN];
};

static int
copy_in(void *opaque, void *buf, size_t len, uint64_t off)
{
  struct reqbuf *r = opaque;
  if (off > BUF_LEN || len > BUF_LEN - off)
    abort(); /* the handler asked past the request's buffer */
  if (r->fail)
    return r->failed = true, -EFAULT;
  memset(buf, 0, len);
  if (off < r->in_len)
    memcpy(buf, r->in + off, len < r->in_len - off ? len : r->in_len - off);
  return 0;
}

static int
copy_out(void *opaque, const void *buf, size_t len, uint64_t off)
{
  struct reqbuf *r = opaque;
  if (off > BUF_LEN || len > BUF_LEN - off)
    abort();
  if (r->fail)
    return r->failed = true, -EFAULT;
  memcpy(r->out + off, buf, len);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  struct znbd_params p;
  struct znbd_dev *dev = fuzz_dev_new(&p, data[0] & 1);
  if (!dev)
    abort();
  static uint8_t bounce[BUF_LEN];
  static struct reqbuf rb;
  struct znbd_ublk_io h;
  znbd_ublk_io_init(&h, dev, bounce, sizeof bounce);
  h.redo_writes = data[0] & 2;
  rb.fail = data[0] & 4;
  size_t nrec = (size - 1) / sizeof(struct znbd_ublksrv_io_desc);
  rb.in = data + 1 + nrec * sizeof(struct znbd_ublksrv_io_desc);
  rb.in_len = size - 1 - nrec * sizeof(struct znbd_ublksrv_io_desc);
  struct znbd_ublk_copy copy = {copy_in, copy_out, &rb};
  for (size_t i = 0; i < nrec; i++) {
    struct znbd_ublksrv_io_desc iod;
    memcpy(&iod, data + 1 + i * sizeof iod, sizeof iod);
    struct znbd_ublk_done done;
    rb.failed = false;
    int32_t r = znbd_ublk_io_exec(&h, &iod, ZNBD_NO_SLOT, &copy, NULL, &done);
    if (r > 0 && (uint32_t)r > BUF_LEN)
      abort(); /* more bytes done than any request can hold */
    if (rb.failed && r != -EFAULT && !h.redo_writes)
      abort(); /* a failed copy reported as done, or as another error */
  }
  znbd_dev_free(dev);
  znbd_params_free(&p);
  return 0;
}
