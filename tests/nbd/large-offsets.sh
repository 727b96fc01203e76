#!/usr/bin/env bash
# A sparse 8 GiB plain RAM disk (zoned=false): I/O straddling the 4 GiB
# boundary and at the very end reads back exactly (no 32-bit offset
# truncation: nothing appears at the offset modulo 4 GiB), base:allocation
# reports those pages and only those, trims there free them, and the server
# holds far less than the device size.
. "$(dirname "$0")/../functions.sh"

start_frontend size=8G zoned=false
page=$(frontend_page_size) nbd_py <<'EOF'
from znbdtest import *
P = int(os.environ["page"])
G = 1024 * MiB
size = 8 * G
HZ = HOLE | ZERO
h = connect()
check_eq(h.get_size(), size, "export size 8 GiB")
a = pattern(2 * P, 1)
h.pwrite(a, 4 * G - P)
b = pattern(P, 2)
h.pwrite(b, size - P)
c = pattern(512, 3)
h.pwrite(c, 6 * G + 512)
check_eq(h.pread(2 * P, 4 * G - P), a, "2 pages straddling 4 GiB")
check_eq(h.pread(P, size - P), b, "last page of 8 GiB")
check_eq(h.pread(512, 6 * G + 512), c, "512 bytes at 6 GiB + 512")
check_eq(h.pread(2 * P, 0), bytes(2 * P), "offset 0 untouched (no 4 GiB wrap-around)")
check_eq(h.pread(2 * P, 2 * G + 512 - 512), bytes(2 * P), "offset 2 GiB untouched")
check_eq(h.pread(P, 4 * G - 2 * P), bytes(P), "page before the straddling write untouched")
check_eq(extents(h, 0, size),
         [(0, 4 * G - P, HZ), (4 * G - P, 2 * P, 0), (4 * G + P, 2 * G - P, HZ),
          (6 * G, P, 0), (6 * G + P, 2 * G - 2 * P, HZ), (size - P, P, 0)],
         "base:allocation over 8 GiB: exactly the written pages")
h.trim(2 * P, 4 * G - P)
check_eq(h.pread(2 * P, 4 * G - P), bytes(2 * P), "trim at 4 GiB reads zeros")
check_eq(extents(h, 4 * G - 2 * P, 4 * P), [(4 * G - 2 * P, 4 * P, HZ)], "trim at 4 GiB freed the pages")
h.shutdown()
EOF
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$server_pid/status")
[ "$rss" -lt $((256 * 1024)) ] || die "server RSS ${rss} KiB for a sparse 8 GiB disk holding 2 pages"
note "server RSS ${rss} KiB for the sparse 8 GiB disk"
stop_frontend
pass "offsets beyond 4 GiB"
