#!/usr/bin/env bash
# max_memory bounds the RAM store: a write needing pages beyond it fails
# with ENOSPC and changes nothing (bytes written before read back, stats
# allocated= stays exactly the limit, a zone's wp, condition and the open
# counters stay), an allocating write-zeroes is refused whole, overwrites
# of allocated pages still work, and a trim or zone reset makes room.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "max_memory"

cat >"$tmpdir/lib.py" <<'EOF'
from znbdtest import *
import re
ctl = os.environ["ctl"]
def stat(key):
    r = control(ctl, "stats")
    m = re.search(r"\b%s=(\d+)" % key, r)
    check(m is not None, "stats has %s" % key)
    return int(m.group(1))
def zone(n):
    r = control(ctl, "report %d 1" % n)
    m = re.search(r"wp=(\S+) .*cond=(\S+)", r)
    check(m is not None, "report %d" % n)
    return (m.group(2), None if m.group(1) == "-" else int(m.group(1)) - n * MiB)
EOF

# Not zoned.
start_frontend size=4M zoned=false max_memory=1M zone_control="$tmpdir/ctl1"
ctl=$tmpdir/ctl1 nbd_py "$tmpdir/lib.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
h.pwrite(pattern(MiB, 1), 0)
check_eq(stat("allocated"), MiB, "1 MiB held")
expect_errno(errno.ENOSPC, "a write needing a new page", h.pwrite,
             pattern(4 * KiB, 2), 2 * MiB)
expect_errno(errno.ENOSPC, "a write half over held pages", h.pwrite,
             pattern(8 * KiB, 3), MiB - 4 * KiB)
expect_errno(errno.ENOSPC, "write-zeroes that must stay allocated",
             h.zero, 128 * KiB, 3 * MiB, nbd.CMD_FLAG_NO_HOLE)
check_eq(h.pread(MiB, 0), pattern(MiB, 1), "nothing written before is lost")
check_eq(h.pread(8 * KiB, 2 * MiB), bytes(8 * KiB), "the refused write left nothing")
check_eq(stat("allocated"), MiB, "allocated unchanged")
h.pwrite(pattern(4 * KiB, 4), 0)
check_eq(h.pread(4 * KiB, 0), pattern(4 * KiB, 4), "overwriting held pages works")
h.trim(64 * KiB, 0)
check_eq(stat("allocated"), MiB - 64 * KiB, "trim gives pages back")
h.pwrite(pattern(64 * KiB, 5), 2 * MiB)
check_eq(h.pread(64 * KiB, 2 * MiB), pattern(64 * KiB, 5), "the room is used")
check_eq(stat("allocated"), MiB, "at the limit again")
h.shutdown()
EOF
stop_frontend

# Zoned: the zone engine changes nothing on the refusal.
start_frontend size=8M zone_size=1M zone_nr_conv=1 max_memory=1M \
  zone_control="$tmpdir/ctl2"
ctl=$tmpdir/ctl2 nbd_py "$tmpdir/lib.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
h.pwrite(pattern(512 * KiB, 1), 1 * MiB)
h.pwrite(pattern(512 * KiB, 2), 0)
check_eq(stat("allocated"), MiB, "1 MiB held")
expect_errno(errno.ENOSPC, "zone 1 at its wp", h.pwrite,
             pattern(4 * KiB, 3), 1 * MiB + 512 * KiB)
check_eq(zone(1), ("IMP_OPEN", 512 * KiB), "zone 1 wp and condition unchanged")
expect_errno(errno.ENOSPC, "empty zone 2", h.pwrite, pattern(4 * KiB, 4), 2 * MiB)
check_eq(zone(2), ("EMPTY", 0), "zone 2 still EMPTY")
check_eq(stat("imp_open"), 1, "open counter unchanged")
check_eq(stat("allocated"), MiB, "allocated unchanged")
check_eq(h.pread(512 * KiB, 1 * MiB), pattern(512 * KiB, 1), "zone 1 bytes kept")
check_eq(h.pread(512 * KiB, 0), pattern(512 * KiB, 2), "conventional bytes kept")
check(control(ctl, "reset 1").startswith("ok"), "reset zone 1")
check_eq(stat("allocated"), 512 * KiB, "the reset gives pages back")
h.pwrite(pattern(4 * KiB, 5), 2 * MiB)
check_eq(zone(2), ("IMP_OPEN", 4 * KiB), "zone 2 takes the write now")
h.shutdown()
EOF
stop_frontend
pass "max_memory refuses writes beyond it with ENOSPC and loses nothing"
