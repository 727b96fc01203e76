#!/usr/bin/env bash
# completion_nsec (null_blk's timer completion) on a plain RAM disk
# (zoned=false): with a 200 us completion delay every request still
# completes with the right result — 128 asynchronous writes and reads with
# up to 32 in flight, plus flush, trim and zero, and the control socket's
# stats count one delay of 200 us per request, whichever front-end served
# it (the core hands the delay out).  (Timing itself is for bench/, not
# asserted here.)
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "completion_nsec="

ctl=$tmpdir/ctl
export ctl
start_frontend size=8M zoned=false completion_nsec=200000 zone_control="$ctl"
nbd_py <<'EOF'
import os
from znbdtest import *
ctl = os.environ["ctl"]
h = connect()
B, N = 16 * KiB, 128
data = pattern(N * B, 3)
errs = []
def done(err):
    if err.value != 0:
        errs.append(err.value)
    return 1
for k in range(N):
    while h.aio_in_flight() >= 32:
        h.poll(-1)
    h.aio_pwrite(data[k * B:(k + 1) * B], k * B, completion=done)
while h.aio_in_flight() > 0:
    h.poll(-1)
check_eq(errs, [], "%d delayed async writes succeeded" % N)
bufs = []
for k in range(N):
    while h.aio_in_flight() >= 32:
        h.poll(-1)
    bufs.append(nbd.Buffer(B))
    h.aio_pread(bufs[k], k * B, completion=done)
while h.aio_in_flight() > 0:
    h.poll(-1)
check_eq(errs, [], "delayed async reads succeeded")
check_eq(b"".join(bytes(b.to_bytearray()) for b in bufs), data, "delayed reads return the written data")
h.flush()
h.trim(B, 0)
h.zero(B, B)
check_eq(h.pread(2 * B, 0), bytes(2 * B), "delayed trim and zero")
check_eq(h.pread(B, 2 * B), data[2 * B:3 * B], "neighbour intact")
# 2N reads and writes, flush, trim, zero and two reads: one delay each.
st = control_stats(ctl)
check_eq(int(st["delayed_requests"]), 2 * N + 5, "one delay per request")
check_eq(int(st["delay_nsec"]), (2 * N + 5) * 200000, "each of 200 us")
h.shutdown()
EOF
stop_frontend
pass "completion_nsec delays complete correctly"
