#!/usr/bin/env bash
# memory_backed=false (zoned=false), like null_blk's memory_backed=0: writes
# succeed but keep nothing, reads return zeros, base:allocation shows no
# data; the default (memory_backed=true, also given explicitly) keeps data.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "memory_backed="

start_frontend size=1M zoned=false memory_backed=false
nbd_py <<'EOF'
from znbdtest import *
h = connect()
h.pwrite(pattern(64 * KiB, 1), 0)
h.pwrite(pattern(4 * KiB, 2), 512 * KiB, nbd.CMD_FLAG_FUA)
h.flush()
check_eq(h.pread(64 * KiB, 0), bytes(64 * KiB), "64 KiB written at 0 reads zeros")
check_eq(h.pread(4 * KiB, 512 * KiB), bytes(4 * KiB), "FUA write at 512 KiB reads zeros")
check_eq(extents(h, 0, 1 * MiB), [(0, 1 * MiB, HOLE | ZERO)], "no allocated extent")
h.zero(4 * KiB, 0)
h.trim(4 * KiB, 8 * KiB)
say("zero and trim accepted")
h.shutdown()
EOF
stop_frontend

start_frontend size=1M zoned=false memory_backed=true
nbd_py <<'EOF'
from znbdtest import *
h = connect()
a = pattern(64 * KiB, 1)
h.pwrite(a, 0)
check_eq(h.pread(64 * KiB, 0), a, "memory_backed=true keeps the data")
h.shutdown()
EOF
stop_frontend
pass "memory_backed=false reads zeros"
