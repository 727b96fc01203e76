#!/usr/bin/env bash
# Many requests in flight on one connection (plain RAM disk, zoned=false):
# 256 asynchronous 4 KiB writes to distinct blocks with up to 64 in flight,
# each checked for success in its completion callback, then 256
# asynchronous reads compared with what was written; a mix of writes,
# zeroes and trims in flight together leaves exactly the expected bytes;
# requests of 32 MiB (the interoperable maximum) work, and trim, zero,
# cache and block status of more than that.
. "$(dirname "$0")/../functions.sh"

start_frontend size=64M zoned=false
nbd_py <<'EOF'
from znbdtest import *
h = connect()
B, N = 4 * KiB, 256
data = pattern(N * B, 7)
errs = []
def done(err):
    if err.value != 0:
        errs.append(err.value)
    return 1
order = list(range(N))
random.Random(1).shuffle(order)
for k in order:
    while h.aio_in_flight() >= 64:
        h.poll(-1)
    h.aio_pwrite(data[k * B:(k + 1) * B], k * B, completion=done)
while h.aio_in_flight() > 0:
    h.poll(-1)
check_eq(errs, [], "%d async writes, up to 64 in flight, all succeeded" % N)

bufs = {}
for k in order:
    while h.aio_in_flight() >= 64:
        h.poll(-1)
    bufs[k] = nbd.Buffer(B)
    h.aio_pread(bufs[k], k * B, completion=done)
while h.aio_in_flight() > 0:
    h.poll(-1)
check_eq(errs, [], "%d async reads all succeeded" % N)
bad = [k for k in range(N) if bufs[k].to_bytearray() != data[k * B:(k + 1) * B]]
check_eq(bad, [], "every async read returned its block")

# Writes, zeroes and trims on distinct blocks, all in flight at once.
want = bytearray(data)
for k in range(N):
    if k % 3 == 0:
        h.aio_zero(B, k * B, completion=done)
        want[k * B:(k + 1) * B] = bytes(B)
    elif k % 3 == 1:
        h.aio_trim(B, k * B, completion=done)
        want[k * B:(k + 1) * B] = bytes(B)
    else:
        blk = pattern(B, 1000 + k)
        h.aio_pwrite(blk, k * B, completion=done)
        want[k * B:(k + 1) * B] = blk
    while h.aio_in_flight() >= 64:
        h.poll(-1)
while h.aio_in_flight() > 0:
    h.poll(-1)
check_eq(errs, [], "mixed async write/zero/trim succeeded")
check_eq(h.pread(N * B, 0), bytes(want), "mixed async requests left exactly the expected bytes")

big = pattern(32 * MiB, 8)
h.pwrite(big, 16 * MiB + 512)
check_eq(h.pread(32 * MiB, 16 * MiB + 512), big, "32 MiB write and read at an unaligned-to-page offset")
check_eq(h.pread(512, 16 * MiB), bytes(512), "byte range before the 32 MiB write untouched")

# Trim, write-zeroes, cache and block status carry no payload: lengths over
# the 32 MiB payload limit are fine.
h.trim(48 * MiB, 0)
check_eq(h.pread(1536, 48 * MiB - 512), bytes(512) + big[-512:] + bytes(512),
         "48 MiB trim: zeros up to 48 MiB, the write's last 512 bytes beyond")
h.zero(40 * MiB + 4096, 8 * MiB)
check_eq(h.pread(1536, 48 * MiB - 512), bytes(1536), "40 MiB + 4 KiB write-zeroes")
h.cache(64 * MiB, 0)
check_eq(extents(h, 0, 64 * MiB), [(0, 64 * MiB, HOLE | ZERO)], "64 MiB block status: all holes")
h.shutdown()
EOF
stop_frontend
pass "deep async queues and large requests"
