#!/usr/bin/env bash
# writeback_mb=1 (a zone file's writeback starts after each MiB written
# to it): 3 MiB of 128 KiB writes into a sequential zone and 2 MiB over a
# conventional one, a FLUSH, kill -9 and a restart without the option:
# every byte and the wp are back.  With write_cache=true, the writes after
# a FLUSH (again more than a MiB per file, so their writeback was started
# early) are still lost by kill -9 and the restart: early writeback is
# not a flush.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "persistent devices"

dev=$tmpdir/dev
geo=(size=16M zone_size=4M zone_nr_conv=1)
cat >"$tmpdir/lib.py" <<'EOF'
from znbdtest import *
import re
Z = 4 * MiB
ctl = os.environ["ctl"]

def zone(n):
    m = re.search(r"wp=(\S+) .*cond=(\S+)", control(ctl, "report %d 1" % n))
    check(m is not None, "report %d" % n)
    return (m.group(2), int(m.group(1)) - n * Z)

def writes(h, off, n, seed):
    for i in range(0, n, 128 * KiB):
        h.pwrite(pattern(128 * KiB, seed + i // (128 * KiB)), off + i)

def check_writes(h, off, n, seed, what):
    for i in range(0, n, 128 * KiB):
        check_eq(h.pread(128 * KiB, off + i),
                 pattern(128 * KiB, seed + i // (128 * KiB)),
                 "%s at +%d" % (what, i))
EOF

kill9() {
  kill -KILL "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

start_frontend dir="$dev" "${geo[@]}" writeback_mb=1 zone_control="$tmpdir/ctl1"
ctl=$tmpdir/ctl1 nbd_py "$tmpdir/lib.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
writes(h, 1 * Z, 3 * MiB, 10)
writes(h, 0, 2 * MiB, 40)
h.flush()
h.shutdown()
EOF
kill9
note "3 MiB + 2 MiB flushed with writeback_mb=1, killed with SIGKILL"
start_frontend dir="$dev" zone_control="$tmpdir/ctl2"
ctl=$tmpdir/ctl2 nbd_py "$tmpdir/lib.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
check_eq(zone(1), ("CLOSED", 3 * MiB), "zone 1 after the restart")
check_writes(h, 1 * Z, 3 * MiB, 10, "zone 1")
check_writes(h, 0, 2 * MiB, 40, "conventional zone 0")
h.shutdown()
EOF
stop_frontend

rm -rf "$dev"
start_frontend dir="$dev" "${geo[@]}" write_cache=true writeback_mb=1 \
  zone_control="$tmpdir/ctl3"
ctl=$tmpdir/ctl3 nbd_py "$tmpdir/lib.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
writes(h, 2 * Z, 256 * KiB, 60)
writes(h, 0, 2 * MiB, 70)
h.flush()
writes(h, 2 * Z + 256 * KiB, 3 * MiB, 80)    # not flushed
writes(h, 0, 2 * MiB, 90)                     # over flushed bytes
writes(h, 3 * Z, 2 * MiB, 100)                # zone 3: nothing flushed
check_eq(zone(2), ("IMP_OPEN", 256 * KiB + 3 * MiB), "zone 2 before the cut")
h.shutdown()
EOF
kill9
note "unflushed writes past writeback_mb, killed with SIGKILL"
start_frontend dir="$dev" write_cache=true zone_control="$tmpdir/ctl4"
ctl=$tmpdir/ctl4 nbd_py "$tmpdir/lib.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
check_eq(zone(2), ("CLOSED", 256 * KiB), "zone 2: back at the flushed wp")
check_eq(zone(3), ("EMPTY", 0), "zone 3: unflushed, gone")
check_writes(h, 2 * Z, 256 * KiB, 60, "zone 2 flushed bytes")
check_eq(h.pread(128 * KiB, 2 * Z + 256 * KiB), bytes(128 * KiB),
         "zone 2 past the flushed wp")
check_writes(h, 0, 2 * MiB, 70, "conventional zone 0 rolled back")
h.shutdown()
EOF
stop_frontend
pass "writeback_mb keeps flushed data through kill -9 and loses unflushed data"
