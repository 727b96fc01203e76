#!/usr/bin/env bash
# A plain RAM disk whose size is not a multiple of the 4 KiB store page
# (zoned=false, size = 1 MiB + 512 bytes, blocksize=512): the last, partial
# page can be written, read, reported by base:allocation, trimmed and
# zeroed; requests crossing the end are refused.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "exact partial-page extents"

start_frontend size=$((1024 * 1024 + 512)) zoned=false blocksize=512
nbd_py <<'EOF'
from znbdtest import *
size = MiB + 512
HZ = HOLE | ZERO
h = connect(strict=False)
check_eq(h.get_size(), size, "export size 1 MiB + 512")
check_eq(extents(h, 0, size), [(0, size, HZ)], "empty: one HOLE|ZERO extent")
a = pattern(512, 1)
h.pwrite(a, MiB)
check_eq(h.pread(512, MiB), a, "last 512 bytes written and read")
check_eq(extents(h, 0, size), [(0, MiB, HZ), (MiB, 512, 0)], "last partial page is data, clipped to the end")
b = pattern(4096, 2)
h.pwrite(b, MiB - 3584)
check_eq(h.pread(4096, MiB - 3584), b, "write crossing into the partial page")
check_eq(extents(h, MiB - 4096, 4096 + 512), [(MiB - 4096, 4096 + 512, 0)], "both pages data")
expect_errno(errno.ENOSPC, "write of 1024 at size-512", h.pwrite, pattern(1024, 3), MiB)
expect_errno(errno.EINVAL, "read of 1024 at size-512", h.pread, 1024, MiB)
h.trim(512, MiB)
check_eq(h.pread(512, MiB), bytes(512), "trimmed last 512 bytes read zeros")
check_eq(extents(h, MiB, 512), [(MiB, 512, HZ)], "trimmed partial page is a hole")
h.pwrite(a, MiB)
h.zero(4096, MiB - 3584)
check_eq(h.pread(4096 + 512, MiB - 4096), bytes(512) + bytes(4096), "zeroed across the last two pages")
check_eq(h.pread(MiB + 512, 0), bytes(MiB + 512), "whole device reads zeros")
h.shutdown()
EOF
stop_frontend
pass "partial last page"
