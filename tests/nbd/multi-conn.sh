#!/usr/bin/env bash
# Several connections to one plain RAM disk (zoned=false), as multi-conn
# allows: each of 4 connections writes its own region with asynchronous
# requests, one FLUSH on any connection, then every connection reads every
# region back; overwrites from one connection are seen by the others.
. "$(dirname "$0")/../functions.sh"

start_frontend size=16M zoned=false
nbd_py <<'EOF'
from znbdtest import *
N, R = 4, 2 * MiB
hs = [connect() for _ in range(N)]
check(all(h.can_multi_conn() for h in hs), "every connection: can_multi_conn")
data = [pattern(R, 10 + i) for i in range(N)]

# Asynchronous 64 KiB writes, all connections in flight together.
errs = []
def done(err):
    if err.value != 0:
        errs.append(err.value)
    return 1
for i, h in enumerate(hs):
    for off in range(0, R, 64 * KiB):
        h.aio_pwrite(data[i][off:off + 64 * KiB], i * R + off, completion=done)
for h in hs:
    while h.aio_in_flight() > 0:
        h.poll(-1)
check_eq(errs, [], "all async writes succeeded")
say("%d connections wrote %d KiB each, asynchronously" % (N, R // KiB))
hs[2].flush()
say("one flush")
for j, h in enumerate(hs):
    for i in range(N):
        if h.pread(R, i * R) != data[i]:
            raise TestFailure("connection %d reads region %d wrong" % (j, i))
say("every connection reads every region back")

# Overwrite on connection 0, read on 3; trim on 1, read on 2.
x = pattern(4 * KiB, 99)
hs[0].pwrite(x, R + 4 * KiB)
hs[0].flush()
check_eq(hs[3].pread(4 * KiB, R + 4 * KiB), x, "overwrite on conn 0 visible on conn 3")
hs[1].trim(64 * KiB, 3 * R)
hs[1].flush()
check_eq(hs[2].pread(64 * KiB, 3 * R), bytes(64 * KiB), "trim on conn 1 visible on conn 2")
for h in hs:
    h.shutdown()
EOF
stop_frontend
pass "multi-connection consistency"
