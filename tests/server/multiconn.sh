#!/usr/bin/env bash
# Multi-conn: a write on one connection is visible on another after FLUSH,
# on a raw socket and through nbdsh with four connections in parallel.
. "$(dirname "$0")/../functions.sh"
frontend_available
require_python_nbd
start_frontend size=64M zoned=false --threads=2
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" multiconn || die "raw multi-conn failed"
/usr/bin/python3 - <<PY || die "libnbd multi-conn failed"
import nbd, os
hs = []
for i in range(4):
    h = nbd.NBD(); h.connect_uri("$uri"); hs.append(h)
assert all(h.can_multi_conn() for h in hs)
pats = [os.urandom(65536) for i in range(4)]
for i, h in enumerate(hs):
    h.pwrite(pats[i], i * 65536)
hs[0].flush()
for i in range(4):
    got = hs[(i + 1) % 4].pread(65536, i * 65536)
    assert got == pats[i], "connection %d does not see write %d" % ((i + 1) % 4, i)
print("4 connections: every write visible on the next connection after one FLUSH")
PY
stop_frontend
pass "multi-conn"
