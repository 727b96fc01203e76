#!/usr/bin/env bash
# A zoned export seen by standard NBD tools: the export description is one
# key=value line that parses to the geometry, and `nbdinfo --map` shows
# every write pointer (sequential zones: [start, wp) data, [wp, end)
# hole,zero; the conventional zone: real allocation), compared exactly.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "zones"
require nbdinfo

start_frontend size=5M zone_size=1M zone_nr_conv=1 zone_max_open=2 \
  zone_max_active=3
nbd_py <<'EOF'
from znbdtest import *
h = nbd.NBD()
h.set_full_info(True)
h.connect_uri(uri)
desc = h.get_export_description()
words = desc.split()
check_eq(words[0], "znbd", "description starts with 'znbd': %r" % desc)
kv = dict(w.split("=", 1) for w in words[1:])
check_eq(kv, {"model": "host-managed", "size": "5242880", "zone_size": "1048576",
              "zone_capacity": "1048576", "nr_zones": "5", "nr_conv": "1",
              "max_open": "2", "max_active": "3", "blocksize": "512"},
         "description parses to the geometry")
h.pwrite(pattern(8 * KiB, 1), 0)            # conventional: pages 0-1
h.pwrite(pattern(12 * KiB, 2), 1 * MiB)     # zone 1: wp at +12K
h.pwrite(pattern(256 * KiB, 3), 2 * MiB)    # zone 2: wp at +256K
h.pwrite(pattern(512, 4), 3 * MiB)          # zone 3: wp at +512
h.shutdown()
EOF
line() { printf '%10d  %10d  %3d  %s\n' "$1" "$2" "$3" "$4"; }
M=1048576
{
  line 0 8192 0 data
  line 8192 $((M - 8192)) 3 hole,zero
  line $M 12288 0 data
  line $((M + 12288)) $((M - 12288)) 3 hole,zero
  line $((2 * M)) 262144 0 data
  line $((2 * M + 262144)) $((M - 262144)) 3 hole,zero
  line $((3 * M)) 512 0 data
  line $((3 * M + 512)) $((2 * M - 512)) 3 hole,zero
} >"$tmpdir/want"
nbdinfo --map "$uri" >"$tmpdir/got" || die "nbdinfo --map failed"
if ! cmp -s "$tmpdir/want" "$tmpdir/got"; then
  diff -u "$tmpdir/want" "$tmpdir/got" >&2 || true
  die "nbdinfo --map does not show the write pointers"
fi
note "nbdinfo --map shows the write pointers of zones 1-4 ($(wc -l <"$tmpdir/got") lines)"
stop_frontend
pass "description parses, nbdinfo --map shows the write pointers"
