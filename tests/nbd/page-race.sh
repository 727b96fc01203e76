#!/usr/bin/env bash
# Concurrent first writes to the same pages (plain RAM disk, zoned=false):
# 4 connections write interleaved 512-byte sectors (connection c owns
# sectors c, c+4, c+8, ...) of 8 MiB of never-written pages, asynchronously
# with up to 64 requests in flight each, so every page is allocated by
# several writers racing; then every other 64 KiB is trimmed and a second
# round races over freed and still-allocated pages.  Every byte must be what its owner wrote: a lost
# allocation race or a torn page shows up as a wrong sector.
. "$(dirname "$0")/../functions.sh"

start_frontend size=8M zoned=false
nbd_py <<'EOF'
from znbdtest import *
S, C, B = 8 * MiB, 4, 512
hs = [connect() for _ in range(C)]
errs = []
def done(err):
    if err.value != 0:
        errs.append(err.value)
    return 1

def round_(seed):
    want = bytearray(pattern(S, seed))
    for s in range(0, S // B):
        c = s % C
        h = hs[c]
        h.aio_pwrite(want[s * B:(s + 1) * B], s * B, completion=done)
        if h.aio_in_flight() >= 64:
            h.poll(0)
            while h.aio_in_flight() >= 64:
                h.poll(-1)
        if s % 4096 == 4095:
            for x in hs:
                x.poll(0)
    for h in hs:
        while h.aio_in_flight() > 0:
            h.poll(-1)
    check_eq(errs, [], "seed %d: %d sector writes from %d connections succeeded" % (seed, S // B, C))
    got = hs[0].pread(S, 0)
    bad = [s for s in range(S // B) if got[s * B:(s + 1) * B] != want[s * B:(s + 1) * B]]
    check_eq(bad[:10], [], "seed %d: every sector holds its owner's data (%d wrong)" % (seed, len(bad)))

round_(1)
# Free every other 64 KiB, then race again over freed and allocated pages.
for off in range(0, S, 128 * KiB):
    hs[1].trim(64 * KiB, off)
round_(2)
for h in hs:
    h.shutdown()
EOF
stop_frontend
pass "racing first writes to shared pages"
