#!/usr/bin/env bash
# A persistent device (dir=) survives kill -9 like a power cycle: zones
# written, filled, finished, reset, opened, made READONLY and OFFLINE are
# flushed (and one write made durable by FUA alone), the server is killed
# with SIGKILL and restarted on the directory without any geometry; every
# zone's condition and wp must be what a drive reports after a power cycle
# (IMP_OPEN -> CLOSED, an open empty zone -> EMPTY, the rest kept) and
# every byte below the wp must read back.  A second server on the same
# directory and a restart with a contradicting zone_size are refused with
# a message naming the lock and the parameter.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "persistent devices"

dev=$tmpdir/dev
geo=(size=16M zone_size=1M zone_capacity=768K zone_nr_conv=1)
start_frontend dir="$dev" "${geo[@]}" zone_control="$tmpdir/ctl1"
ctl=$tmpdir/ctl1 nbd_py <<'EOF'
from znbdtest import *
Z, CAP = MiB, 768 * KiB
ctl = os.environ["ctl"]
def op(line):
    r = control(ctl, line)
    check(r.startswith("ok"), "control: %s" % line)

h = connect()
h.pwrite(pattern(8 * KiB, 0), 64 * KiB)          # conventional zone 0
h.pwrite(pattern(12 * KiB, 1), 1 * Z)            # 1: IMP_OPEN
for i in range(0, CAP, 128 * KiB):               # 2: FULL
    h.pwrite(pattern(128 * KiB, 20 + i), 2 * Z + i)
h.pwrite(pattern(4 * KiB, 3), 3 * Z); op("finish 3")
h.pwrite(pattern(4 * KiB, 4), 4 * Z); op("reset 4")
op("open 5")                                     # 5: EXP_OPEN, empty
h.pwrite(pattern(8 * KiB, 6), 6 * Z); op("readonly 6")
op("offline 7")
h.pwrite(pattern(4 * KiB, 8), 8 * Z); op("open 8")   # 8: EXP_OPEN, data
h.flush()
# Durable by FUA alone: no flush after it.
h.pwrite(pattern(16 * KiB, 9), 9 * Z, nbd.CMD_FLAG_FUA)
h.shutdown()
EOF
expect_start_failure "in use" dir="$dev" "${geo[@]}"
kill -KILL "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=
note "killed the server with SIGKILL"

expect_start_failure "zone_size" dir="$dev" zone_size=2M
start_frontend dir="$dev" zone_control="$tmpdir/ctl2"
ctl=$tmpdir/ctl2 nbd_py <<'EOF'
from znbdtest import *
import re
Z, CAP = MiB, 768 * KiB
ctl = os.environ["ctl"]
h = connect()
check_eq(h.get_size(), 16 * MiB, "size from the directory")
# A FULL zone's wp comes back at its capacity, also after a finish (which
# put it at the zone end): the file size cannot tell them apart.
want = {1: ("CLOSED", 12 * KiB), 2: ("FULL", CAP), 3: ("FULL", CAP),
        4: ("EMPTY", 0), 5: ("EMPTY", 0), 6: ("READONLY", None),
        7: ("OFFLINE", None), 8: ("CLOSED", 4 * KiB), 9: ("CLOSED", 16 * KiB)}
for n in range(1, 16):
    r = control(ctl, "report %d 1" % n)
    m = re.search(r"wp=(\S+) .*cond=(\S+)", r)
    check(m is not None, "report %d" % n)
    wp = None if m.group(1) == "-" else int(m.group(1)) - n * Z
    check_eq((m.group(2), wp), want.get(n, ("EMPTY", 0)),
             "zone %d after the power cycle" % n)
check_eq(h.pread(8 * KiB, 64 * KiB), pattern(8 * KiB, 0), "conventional bytes")
check_eq(h.pread(12 * KiB, 1 * Z), pattern(12 * KiB, 1), "zone 1 bytes")
for i in range(0, CAP, 128 * KiB):
    check_eq(h.pread(128 * KiB, 2 * Z + i), pattern(128 * KiB, 20 + i),
             "zone 2 bytes at %d" % i)
check_eq(h.pread(4 * KiB, 3 * Z), pattern(4 * KiB, 3), "finished zone 3")
check_eq(h.pread(4 * KiB, 4 * Z), bytes(4 * KiB), "reset zone 4 reads zeros")
check_eq(h.pread(8 * KiB, 6 * Z), pattern(8 * KiB, 6), "READONLY zone 6 reads")
check_eq(h.pread(16 * KiB, 9 * Z), pattern(16 * KiB, 9), "FUA write kept")
# The restored CLOSED zone takes the next write at its wp.
h.pwrite(pattern(4 * KiB, 10), 1 * Z + 12 * KiB)
check_eq(h.pread(16 * KiB, 1 * Z), pattern(12 * KiB, 1) + pattern(4 * KiB, 10),
         "write at the restored wp")
h.shutdown()
EOF
stop_frontend
pass "a dir= device survives kill -9 with every zone as after a power cycle"
