#!/usr/bin/env bash
# Requests larger than the advertised maximum block size (32 MiB) but
# within the 64 MiB nbdkit serves whatever a plugin advertises: a client
# that ignores the advertised maximum (libnbd with strict mode off here,
# nbd-tester-client's integrityhuge test in the wild) gets them served on
# every front-end.  A 48 MiB and a 64 MiB write read back byte for byte,
# on a RAM disk and into the sequential zones of a zoned disk (write
# pointers checked with REPORT through the zone control socket).
# bio and mq used to refuse anything over 32 MiB with EINVAL.
. "$(dirname "$0")/../functions.sh"

for mode in plain zoned; do
  if [ $mode = plain ]; then
    start_frontend size=160M zoned=false
  else
    start_frontend size=192M zone_size=64M zone_nr_conv=1 \
      zone_control="$tmpdir/ctl"
  fi
  nbd_py "$mode" <<'PY'
import sys
from znbdtest import *
mode = sys.argv[1]
h = connect(strict=False)
mx = h.get_block_size(nbd.SIZE_MAXIMUM)
check_eq(mx, 32 * MiB, "advertised maximum block size")
base = 64 * MiB if mode == "zoned" else 0  # zone 1: the first sequential
a = pattern(48 * MiB, 1)
h.pwrite(a, base)
check_eq(h.pread(len(a), base), a, mode + ": 48 MiB write reads back with one 48 MiB read")
b = pattern(64 * MiB, 2)
off = base + 64 * MiB if mode == "zoned" else 96 * MiB
h.pwrite(b, off)
check_eq(h.pread(len(b), off), b, mode + ": 64 MiB write reads back with one 64 MiB read")
check_eq(h.pread(4 * KiB, base + 48 * MiB - 4 * KiB), a[-4 * KiB:],
         mode + ": the end of the 48 MiB write, read alone")
h.shutdown()
PY
  if [ $mode = zoned ]; then
    # zone 1 wp after 48 MiB, zone 2 FULL after 64 MiB.
    nbd_py "$tmpdir/ctl" <<'PY'
import sys
from znbdtest import *
r1 = control(sys.argv[1], "report 1 1").strip()
r2 = control(sys.argv[1], "report 2 1").strip()
check(" wp=%d " % (112 * MiB) in r1 and r1.endswith("cond=IMP_OPEN"),
      "zone 1 after 48 MiB: " + r1)
check(r2.endswith("cond=FULL"), "zone 2 after 64 MiB: " + r2)
PY
  fi
  stop_frontend
done
pass "48 MiB and 64 MiB requests served and read back, plain and zoned"
