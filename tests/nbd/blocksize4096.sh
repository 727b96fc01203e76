#!/usr/bin/env bash
# blocksize=4096 (zoned=false): the export advertises a 4096-byte minimum
# block size, refuses 512-aligned reads, writes, write-zeroes and trims
# with EINVAL (strict mode off so they reach the server) without changing
# a byte, and serves 4096-aligned I/O normally.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "blocksize="

start_frontend size=1M zoned=false blocksize=4096
nbd_py <<'EOF'
from znbdtest import *
h = connect(strict=False)
check_eq(h.get_block_size(nbd.SIZE_MINIMUM), 4096, "advertised minimum block size")
pref = h.get_block_size(nbd.SIZE_PREFERRED)
check(pref >= 4096 and pref & (pref - 1) == 0, "preferred block size %d: power of 2, >= 4096" % pref)

a = pattern(16 * KiB, 1)
h.pwrite(a, 0)
check_eq(h.pread(16 * KiB, 0), a, "4096-aligned write and read")

expect_errno(errno.EINVAL, "read of 512 at 0", h.pread, 512, 0)
expect_errno(errno.EINVAL, "read of 4096 at 512", h.pread, 4096, 512)
expect_errno(errno.EINVAL, "read of 8192+512 at 4096", h.pread, 8192 + 512, 4096)
expect_errno(errno.EINVAL, "write of 512 at 0", h.pwrite, pattern(512, 2), 0)
expect_errno(errno.EINVAL, "write of 4096 at 1536", h.pwrite, pattern(4096, 2), 1536)
expect_errno(errno.EINVAL, "write-zeroes of 512 at 4096", h.zero, 512, 4096)
expect_errno(errno.EINVAL, "write-zeroes of 4096 at 2048", h.zero, 4096, 2048)
expect_errno(errno.EINVAL, "trim of 4096 at 512", h.trim, 4096, 512)
expect_errno(errno.EINVAL, "trim of 1024 at 8192", h.trim, 1024, 8192)
check_eq(h.pread(16 * KiB, 0), a, "refused requests changed no byte")

h.zero(4096, 4096)
h.trim(4096, 12288)
check_eq(h.pread(16 * KiB, 0), a[:4096] + bytes(4096) + a[8192:12288] + bytes(4096),
         "4096-aligned write-zeroes and trim")
h.shutdown()
EOF
frontend_alive || die "the server died"
stop_frontend
pass "blocksize=4096 enforced"
