#!/usr/bin/env bash
# Plain RAM disk (zoned=false) through libnbd: reads return what was
# written, FUA writes, flush, cache, write-zeroes (with and without
# NO_HOLE) and trim read back as zeros, partial-page trim/zero leave the
# rest of the page intact, and the export advertises what the plugin
# promises (size, flush, FUA, trim, zero, fast zero, cache, DF,
# multi-conn, writable).
. "$(dirname "$0")/../functions.sh"

start_frontend size=4M zoned=false
nbd_py <<'EOF'
from znbdtest import *
h = connect()
check_eq(h.get_size(), 4 * MiB, "export size 4 MiB")
check(not h.is_read_only(), "export is writable")
for name in ("can_flush", "can_fua", "can_trim", "can_zero", "can_fast_zero",
             "can_multi_conn", "can_cache", "can_df"):
    check(getattr(h, name)(), name)

check_eq(h.pread(64 * KiB, 0), bytes(64 * KiB), "never-written range reads zeros")

a = pattern(256 * KiB, 1)
h.pwrite(a, 0)
check_eq(h.pread(256 * KiB, 0), a, "256 KiB written at 0 reads back")

# Overwrite an unaligned-to-page, sector-aligned piece in the middle.
b = pattern(8 * KiB + 512, 2)
h.pwrite(b, 6 * KiB + 512, nbd.CMD_FLAG_FUA)
want = bytearray(a)
want[6 * KiB + 512:6 * KiB + 512 + len(b)] = b
check_eq(h.pread(256 * KiB, 0), bytes(want), "FUA overwrite of 8.5 KiB at 6.5 KiB; rest unchanged")
h.flush()
say("flush")
check_eq(h.pread(256 * KiB, 0), bytes(want), "data unchanged after flush")

# Write-zeroes: a whole page and a part of a page, with and without NO_HOLE.
h.zero(4 * KiB, 16 * KiB)
want[16 * KiB:20 * KiB] = bytes(4 * KiB)
h.zero(1 * KiB, 33 * KiB, nbd.CMD_FLAG_NO_HOLE)
want[33 * KiB:34 * KiB] = bytes(1 * KiB)
h.zero(512, 40 * KiB + 1536, nbd.CMD_FLAG_FUA)
want[40 * KiB + 1536:40 * KiB + 2048] = bytes(512)
h.zero(8 * KiB, 48 * KiB, nbd.CMD_FLAG_FAST_ZERO)
want[48 * KiB:56 * KiB] = bytes(8 * KiB)
check_eq(h.pread(256 * KiB, 0), bytes(want), "zeroed ranges read zeros, neighbours intact")

# Trim: whole pages and a partial page (only those bytes become zero).
h.trim(64 * KiB, 128 * KiB)
want[128 * KiB:192 * KiB] = bytes(64 * KiB)
h.trim(1536, 200 * KiB + 512)
want[200 * KiB + 512:200 * KiB + 2048] = bytes(1536)
check_eq(h.pread(256 * KiB, 0), bytes(want), "trimmed ranges read zeros, neighbours intact")

# Rewriting a trimmed range works.
c = pattern(64 * KiB, 3)
h.pwrite(c, 128 * KiB)
want[128 * KiB:192 * KiB] = c
check_eq(h.pread(256 * KiB, 0), bytes(want), "trimmed range rewritten")

# The very end of the device.
d = pattern(4 * KiB, 4)
h.pwrite(d, 4 * MiB - 4 * KiB)
check_eq(h.pread(4 * KiB, 4 * MiB - 4 * KiB), d, "last 4 KiB of the device")
check_eq(h.pread(4 * KiB, 4 * MiB - 8 * KiB), bytes(4 * KiB), "block before the last still zero")

# DF (don't fragment) structured read: the same bytes.
buf = bytearray(64 * KiB)
chunks = []
def chunk(sub, off, status, err):
    chunks.append((off, len(sub), status))
    if status == nbd.READ_DATA:
        buf[off:off + len(sub)] = sub
    return 0
res = h.pread_structured(64 * KiB, 0, chunk, nbd.CMD_FLAG_DF)
check_eq(bytes(res), bytes(want[:64 * KiB]), "structured read with DF flag")
check_eq(chunks, [(0, 64 * KiB, nbd.READ_DATA)], "DF read: one data chunk")

h.cache(64 * KiB, 0)
say("cache")
check_eq(h.pread(256 * KiB, 0), bytes(want), "data unchanged after cache")

# A second connection sees the same data (one device, multi-conn).
h2 = connect()
check_eq(h2.pread(256 * KiB, 0), bytes(want), "second connection reads the same bytes")
h2.shutdown()
h.shutdown()
EOF

# The same device through the nbdsh command line (Debian's /usr/bin/nbdsh).
require nbdsh
nbdsh -u "$uri" -c 'h.pwrite(b"\xa5" * 4096, 3 * 1024 * 1024)' \
  -c 'assert h.pread(4096, 3 * 1024 * 1024) == b"\xa5" * 4096' \
  -c 'assert h.pread(512, 3 * 1024 * 1024 + 4096) == bytes(512)' ||
  die "nbdsh -c write/read checks failed"
note "nbdsh: 4 KiB of 0xa5 written and read back, next sector zero"
stop_frontend
pass "reads, writes, FUA, flush, zero, trim, cache"
