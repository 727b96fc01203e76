#!/usr/bin/env bash
# Server-side validation on a plain RAM disk (zoned=false, blocksize=512),
# with libnbd's strict mode off so the requests really reach the server:
# out-of-range reads/trims/block status get EINVAL, out-of-range writes and
# write-zeroes ENOSPC, unaligned requests EINVAL; a rejected write changes
# no byte; the connection and the server keep serving afterwards.
. "$(dirname "$0")/../functions.sh"

start_frontend size=1M zoned=false blocksize=512
znbd=no
frontend_is_znbd && znbd=yes
znbd=$znbd nbd_py <<'EOF'
from znbdtest import *
size = 1 * MiB
h = connect(strict=False)
check_eq(h.get_strict_mode(), 0, "libnbd strict mode off")
a = pattern(8 * KiB, 1)
h.pwrite(a, 0)
b = pattern(4 * KiB, 2)
h.pwrite(b, size - 4 * KiB)

# Out of range.
expect_errno(errno.EINVAL, "read crossing the end", h.pread, 1024, size - 512)
expect_errno(errno.EINVAL, "read starting at the end", h.pread, 512, size)
expect_errno(errno.EINVAL, "read far past the end", h.pread, 512, 1 << 40)
expect_errno(errno.ENOSPC, "write crossing the end", h.pwrite, pattern(1024, 3), size - 512)
expect_errno(errno.ENOSPC, "write starting at the end", h.pwrite, pattern(512, 3), size)
expect_errno(errno.ENOSPC, "write-zeroes crossing the end", h.zero, 1024, size - 512)
expect_errno(errno.EINVAL, "trim crossing the end", h.trim, 1024, size - 512)
expect_errno(errno.EINVAL, "block status past the end",
             h.block_status, 512, size + 512, lambda *a: 0)
check_eq(h.pread(4 * KiB, size - 4 * KiB), b, "last 4 KiB unchanged by the refused requests")

# Unaligned (not multiples of the 512-byte block).
if os.environ["znbd"] == "yes":
    expect_errno(errno.EINVAL, "read at offset 1", h.pread, 512, 1)
    expect_errno(errno.EINVAL, "read of 100 bytes", h.pread, 100, 0)
    expect_errno(errno.EINVAL, "write at offset 256", h.pwrite, pattern(512, 4), 256)
    expect_errno(errno.EINVAL, "write of 700 bytes", h.pwrite, pattern(700, 4), 1024)
    expect_errno(errno.EINVAL, "write-zeroes at offset 100", h.zero, 512, 100)
    expect_errno(errno.EINVAL, "trim of 1000 bytes", h.trim, 1000, 0)
    check_eq(h.pread(8 * KiB, 0), a, "first 8 KiB unchanged by the refused writes")
else:
    say("unaligned requests not checked: nbdkit memory stand-in accepts them")

# Still serving on the same connection, and to a new one.
c = pattern(4 * KiB, 5)
h.pwrite(c, 64 * KiB)
check_eq(h.pread(4 * KiB, 64 * KiB), c, "same connection still reads and writes")
h.flush()
h2 = connect()
check_eq(h2.pread(8 * KiB, 0), a, "new connection reads the old data")
check_eq(h2.pread(4 * KiB, 64 * KiB), c, "new connection reads the new data")
h2.shutdown()
h.shutdown()
EOF
frontend_alive || die "the server died"
stop_frontend
pass "out-of-range and unaligned requests refused, server still serving"
