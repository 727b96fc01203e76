/* znbd server: libFuzzer harness over the NBD handshake (handshake.c),
 * the request parser (proto.c) and the executor (exec.c), on buffers,
 * with the bio model's inline execution.  Input layout:
 *   byte 0   bit 0: zoned device (else a RAM disk), bit 1: read-only,
 *            bit 2: export name "x" set (-e x), bits 3-4: --tls
 *            (0 off, 1 on, 2 and 3 require)
 *   byte 1   chunk size for feeding (1..256; 0 = all at once), so
 *            messages split across receives are covered
 *   rest     what a client sends, from the client flags on.
 * Build and run: make -C server fuzz (clang, -fsanitize=fuzzer).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "znbd/params.h"
#include "exec.h"
#include "handshake.h"
#include "proto.h"
#include "../lib/fuzz_dev.h"

static int
submit(void *opaque, struct nbdc *c, const struct nbd_req *r)
{
  nbd_exec(c, r, EXEC_NOWAIT, opaque);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 2)
    return 0;
  struct znbd_params p;
  struct znbd_dev *dev = fuzz_dev_new(&p, data[0] & 1);
  if (!dev) { /* zoned device not available: fall back to a RAM disk */
    znbd_params_free(&p);
    dev = fuzz_dev_new(&p, false);
    if (!dev)
      abort();
  }
  struct srv_cfg cfg = {
      .dev = dev,
      .params = &p,
      .export_name = (data[0] & 4) ? "x" : "",
      .export_name_set = data[0] & 4,
      .readonly = data[0] & 2,
      .size = znbd_dev_size(dev),
      .blocksize = p.blocksize,
      .holes_ok = true,
      .tls = (data[0] >> 3 & 3) > TLS_REQUIRE
                 ? TLS_REQUIRE
                 : (enum tls_mode)(data[0] >> 3 & 3),
  };
  char desc[512];
  znbd_dev_describe(dev, desc, sizeof desc);
  cfg.description = desc;
  size_t step = data[1] ? data[1] : SIZE_MAX;
  data += 2;
  size -= 2;

  struct nbdc c;
  struct buf out = {0};
  nbdc_init(&c, &cfg, &out);
  /* Deliver the input in chunks of STEP bytes into a receive buffer, as
   * the worker does, keeping unconsumed bytes. */
  uint8_t *in = malloc(1);
  if (!in)
    abort();
  size_t have = 0, pos = 0;
  while (c.phase != PH_CLOSED) {
    size_t need;
    size_t n = nbdc_feed(&c, in, have, &out, 1 << 20, submit, &out, &need);
    memmove(in, in + n, have - n);
    have -= n;
    /* STARTTLS acknowledged: the server's handshake would run here; the
     * bytes that follow stand for what it decrypts. */
    if (c.starttls)
      nbdc_tls_up(&c);
    out.len = 0;
    if (pos == size)
      break;
    size_t add = size - pos < step ? size - pos : step;
    uint8_t *q = realloc(in, have + add);
    if (!q)
      abort();
    in = q;
    memcpy(in + have, data + pos, add);
    have += add;
    pos += add;
  }
  free(in);
  buf_free(&out);
  znbd_dev_free(dev);
  znbd_params_free(&p);
  return 0;
}
