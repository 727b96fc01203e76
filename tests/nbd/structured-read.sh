#!/usr/bin/env bash
# Structured-reply reads on a plain RAM disk (zoned=false): for reads over
# mixes of written pages and holes, at page and sector offsets, the chunks
# (OFFSET_DATA / OFFSET_HOLE) tile the range exactly once, data chunks
# carry the written bytes and holes only cover bytes that are zero; with
# DF the reply is one data chunk.  znbd (bio, mq) must answer a read of a
# never-written range with a hole chunk (man/znbd.pod, PROTOCOL); nbdkit
# may send data.
. "$(dirname "$0")/../functions.sh"

start_frontend size=4M zoned=false
page=$(frontend_page_size) nbd_py <<'EOF'
from znbdtest import *
P = int(os.environ["page"])
fe = os.environ["ZNBD_FRONTEND"]
h = connect()
check(h.get_structured_replies_negotiated(), "structured replies negotiated")
want = bytearray(4 * MiB)
for pg, seed in ((1, 1), (2, 2), (5, 3), (9, 4)):
    d = pattern(P, seed)
    h.pwrite(d, pg * P)
    want[pg * P:(pg + 1) * P] = d
d = pattern(512, 5)
h.pwrite(d, 12 * P + 1024)
want[12 * P + 1024:12 * P + 1536] = d

def read_chunks(count, off, flags=0):
    chunks = []
    def cb(sub, o, status, err):
        chunks.append((o, len(sub), status, bytes(sub)))
        return 0
    buf = h.pread_structured(count, off, cb, flags)
    return bytes(buf), sorted(chunks)

holes_seen = 0
for off, count in ((0, 16 * P), (512, 14 * P), (P + 1536, 4 * P), (3 * P, 2 * P),
                   (12 * P, P), (20 * P, 64 * KiB)):
    buf, chunks = read_chunks(count, off)
    if buf != bytes(want[off:off + count]):
        raise TestFailure("read %d@%d: wrong bytes" % (count, off))
    pos = off
    for o, ln, st, sub in chunks:
        if o != pos:
            raise TestFailure("read %d@%d: chunk at %d, expected %d (gap or overlap): %r" %
                              (count, off, o, pos, [(c[0], c[1], c[2]) for c in chunks]))
        if st == nbd.READ_DATA:
            if sub != bytes(want[o:o + ln]):
                raise TestFailure("read %d@%d: data chunk %d+%d wrong" % (count, off, o, ln))
        elif st == nbd.READ_HOLE:
            holes_seen += 1
            if any(want[o:o + ln]):
                raise TestFailure("read %d@%d: hole chunk %d+%d over non-zero data" % (count, off, o, ln))
        else:
            raise TestFailure("unexpected chunk status %d" % st)
        pos = o + ln
    check_eq(pos, off + count, "read %d@%d: %d chunks tile the range" % (count, off, len(chunks)))

buf, chunks = read_chunks(16 * P, 0, nbd.CMD_FLAG_DF)
check_eq([(o, ln, st) for o, ln, st, _ in chunks], [(0, 16 * P, nbd.READ_DATA)], "DF read: one data chunk")
check_eq(buf, bytes(want[:16 * P]), "DF read bytes")

if fe in ("bio", "mq"):
    buf, chunks = read_chunks(64 * KiB, 2 * MiB)
    check(any(st == nbd.READ_HOLE for _, _, st, _ in chunks),
          "znbd: a never-written 64 KiB range is read as a hole chunk")
else:
    say("%s: %d hole chunks seen (not required of nbdkit)" % (fe, holes_seen))
h.shutdown()
EOF
stop_frontend
pass "structured reads tile exactly"
