/* znbd core: libFuzzer harness over the intent record file (znbd.redo of
 * a dir= store, lib/intent.c), parsed on a buffer as znbd_dev_redo_open()
 * parses the file it reads: the input is the whole file.  The zones are
 * 8 of 64 KiB, the last one 40 KiB, the first 2 conventional.
 * The harness decodes the input on its own, plainly (128-bit sums, so no
 * bound can wrap), and aborts unless znbd_intent_parse() agrees: the
 * same result (0 for a file that is not one of this version, -1 with EIO
 * for one shorter than its slot count needs, else the slot count), and
 * exactly the noted records that lie inside a sequential zone, in file
 * order, every other record ignored.  ASan and UBSan catch a read
 * outside the input.  Build and run: make -C lib fuzz-redo (clang,
 * -fsanitize=fuzzer); seeds in fuzz-redo-seeds/ (mkseeds_redo.py).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intent.h"
#include "zone.h"

#define HEAD 64 /* header bytes */
#define REC 32  /* record bytes */
#define MAX_SLOTS 65536u

#define FAIL(...)                                                              \
  do {                                                                         \
    fprintf(stderr, "fuzz-redo: ");                                            \
    fprintf(stderr, __VA_ARGS__);                                              \
    fputc('\n', stderr);                                                       \
    abort();                                                                   \
  } while (0)

static struct znbd_zones zs;

/* The records the parser passed on, checked against the harness's own
 * decoding as they come. */
struct expect {
  const uint8_t *data;
  size_t size;
  uint64_t next; /* the record index to look at next */
  uint64_t total;
  uint32_t calls;
};

static uint32_t
le32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static uint64_t
le64(const uint8_t *p)
{
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Whether record I of the input is one the parser must pass on. */
static int
valid(const struct expect *x, uint64_t i)
{
  const uint8_t *r = x->data + HEAD + i * REC;
  uint32_t zone = le32(r + 4);
  uint64_t off = le64(r + 8), len = le64(r + 16);
  if (le32(r) != 1 || zone >= zs.nr_zones || len == 0)
    return 0;
  const struct znbd_zone *z = &zs.zone[zone];
  return z->type != ZNBD_ZONE_TYPE_CONVENTIONAL && off >= z->start &&
         (unsigned __int128)off + len <= (unsigned __int128)z->start + z->len;
}

static void
got_rec(void *opaque, const struct znbd_intent_rec *rec)
{
  struct expect *x = opaque;
  while (x->next < x->total && !valid(x, x->next))
    x->next++;
  if (x->next == x->total)
    FAIL("record zone %u off %llu len %llu passed on: none is valid",
         (unsigned)rec->zone, (unsigned long long)rec->off,
         (unsigned long long)rec->len);
  const uint8_t *r = x->data + HEAD + x->next * REC;
  if (rec->zone != le32(r + 4) || rec->off != le64(r + 8) ||
      rec->len != le64(r + 16))
    FAIL("record %llu: parsed zone %u off %llu len %llu, file has zone %u "
         "off %llu len %llu",
         (unsigned long long)x->next, (unsigned)rec->zone,
         (unsigned long long)rec->off, (unsigned long long)rec->len,
         (unsigned)le32(r + 4), (unsigned long long)le64(r + 8),
         (unsigned long long)le64(r + 16));
  x->next++;
  x->calls++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
  const struct znbd_zone_geometry g = {
      .size = 7 * 65536 + 40960, .zone_size = 65536, .nr_conv = 2};
  if (znbd_zones_init(&zs, &g) < 0 || zs.nr_zones != 8 ||
      zs.zone[7].len != 40960)
    FAIL("zones: %s", strerror(errno));
  return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* The input as its own buffer of exactly SIZE bytes, so that ASan
   * sees any read past it. */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf)
    return 0;
  memcpy(buf, data, size);
  struct expect x = {.data = buf, .size = size};
  int want = 0;
  uint32_t nslots = size >= HEAD ? le32(buf + 12) : 0;
  if (size >= HEAD && memcmp(buf, "ZNBDREDO", 8) == 0 && le32(buf + 8) == 1 &&
      nslots >= 1 && nslots <= MAX_SLOTS) {
    if (size < HEAD + 2 * (uint64_t)nslots * REC)
      want = -1;
    else {
      want = (int)nslots;
      x.total = 2 * (uint64_t)nslots;
    }
  }
  errno = 0;
  int got = znbd_intent_parse(buf, size, &zs, got_rec, &x);
  if (got != want)
    FAIL("parse returned %d, want %d (%zu bytes)", got, want, size);
  if (got < 0 && errno != EIO)
    FAIL("parse failed with errno %d, want EIO", errno);
  if (got <= 0 && x.calls != 0)
    FAIL("%u records passed on from a file not used", x.calls);
  while (x.next < x.total)
    if (valid(&x, x.next++))
      FAIL("valid record %llu not passed on", (unsigned long long)x.next - 1);
  free(buf);
  return 0;
}
