#!/usr/bin/env bash
# Command flags not documented for a command (NBD spec, "Error values":
# the server SHOULD return EINVAL) are refused with EINVAL and the
# connection keeps working: NO_HOLE or REQ_ONE on READ, DF or an unknown
# bit on WRITE, NO_HOLE on TRIM; the documented ones (FUA on
# WRITE/TRIM/WRITE_ZEROES, NO_HOLE|FAST_ZERO on WRITE_ZEROES, DF on READ)
# work.  Plain RAM disk (zoned=false), libnbd strict mode off.
. "$(dirname "$0")/../functions.sh"

start_frontend size=1M zoned=false
nbd_py <<'EOF'
from znbdtest import *
h = connect(strict=False)
a = pattern(8 * KiB, 1)
h.pwrite(a, 0)
expect_errno(errno.EINVAL, "READ with NO_HOLE", h.pread, 512, 0, nbd.CMD_FLAG_NO_HOLE)
expect_errno(errno.EINVAL, "READ with REQ_ONE", h.pread, 512, 0, nbd.CMD_FLAG_REQ_ONE)
expect_errno(errno.EINVAL, "WRITE with DF", h.pwrite, pattern(512, 2), 0, nbd.CMD_FLAG_DF)
expect_errno(errno.EINVAL, "WRITE with unknown flag bit 7", h.pwrite, pattern(512, 2), 0, 0x80)
expect_errno(errno.EINVAL, "TRIM with NO_HOLE", h.trim, 4096, 0, nbd.CMD_FLAG_NO_HOLE)
check_eq(h.pread(8 * KiB, 0), a, "refused requests changed nothing")
h.pwrite(pattern(512, 3), 0, nbd.CMD_FLAG_FUA)
h.trim(4096, 4096, nbd.CMD_FLAG_FUA)
h.zero(512, 512, nbd.CMD_FLAG_FUA | nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FAST_ZERO)
want = pattern(512, 3) + bytes(512) + a[1024:4096] + bytes(4096)
check_eq(h.pread(8 * KiB, 0), want, "FUA write, FUA trim, FUA|NO_HOLE|FAST_ZERO zero")
h.shutdown()
EOF
frontend_alive || die "the server died"
stop_frontend
pass "undocumented flags refused, documented ones work"
