#!/usr/bin/env bash
# A read-only export (-r, both nbdkit and znbd) of a plain RAM disk
# (zoned=false): it says so at handshake (read-only, no trim, no zero),
# refuses writes, FUA writes, trims and write-zeroes with EPERM (strict
# mode off so they reach the server), still reads, flushes and answers
# block status, and nothing changes.
. "$(dirname "$0")/../functions.sh"

ZNBD_FRONTEND_OPTS="-r" start_frontend size=1M zoned=false
nbd_py <<'EOF'
from znbdtest import *
h = connect(strict=False)
check(h.is_read_only(), "export is read-only")
check(not h.can_trim() and not h.can_zero(), "no trim, no write-zeroes advertised")
expect_errno(errno.EPERM, "write", h.pwrite, pattern(512, 2), 0)
expect_errno(errno.EPERM, "FUA write", h.pwrite, pattern(512, 2), 4096, nbd.CMD_FLAG_FUA)
expect_errno(errno.EPERM, "trim", h.trim, 4096, 0)
expect_errno(errno.EPERM, "write-zeroes", h.zero, 4096, 0)
check_eq(h.pread(1 * MiB, 0), bytes(1 * MiB), "refused requests changed nothing: all zeros")
h.flush()
say("flush")
check_eq(extents(h, 0, 1 * MiB), [(0, 1 * MiB, HOLE | ZERO)], "block status: nothing allocated")
h.shutdown()
EOF
stop_frontend
pass "read-only export refuses writes with EPERM"
