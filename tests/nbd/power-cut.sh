#!/usr/bin/env bash
# write_cache=true: a power cut loses exactly the writes no FLUSH or FUA
# covered.  On a RAM device: flushed bytes, a FUA write and zone
# management survive the control socket's power-cut, unflushed
# conventional and sequential writes are gone (bytes, wp, conditions:
# open zones come back CLOSED or EMPTY), and the connection made before
# the cut is dead (znbd drops it; the plugin fails every request on it
# with ESHUTDOWN).  "power-cut after 2": two writes complete, the third
# fails and is not executed, the cut keeps what FUA covered.  On dir=:
# the same rollback after kill -9 and a restart, and nothing lost after a
# clean stop (SIGTERM flushes).  write_cache=false:
# power-cut is refused and nothing is lost.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "write_cache and power-cut"

geo=(size=8M zone_size=1M zone_capacity=768K zone_nr_conv=1)

# The writes of both scenarios: $1 is "flushed" or "unflushed".
cat >"$tmpdir/writes.py" <<'EOF'
from znbdtest import *
import re
Z, CAP = MiB, 768 * KiB
ctl = os.environ["ctl"]

def op(line, want="ok"):
    r = control(ctl, line)
    check(r.startswith(want), "control: %s -> %s" % (line, r.strip()))

def zone(n):
    r = control(ctl, "report %d 1" % n)
    m = re.search(r"wp=(\S+) .*cond=(\S+)", r)
    check(m is not None, "report %d" % n)
    return (m.group(2), None if m.group(1) == "-" else int(m.group(1)) - n * Z)

def durable(h):
    h.pwrite(pattern(8 * KiB, 0), 0)                 # conventional zone 0
    h.pwrite(pattern(12 * KiB, 1), 1 * Z)            # zone 1
    for i in range(0, CAP, 256 * KiB):               # zone 2 FULL
        h.pwrite(pattern(256 * KiB, 20 + i), 2 * Z + i)
    h.pwrite(pattern(4 * KiB, 5), 5 * Z)             # zone 5, reset below
    h.flush()

def volatile(h):
    h.pwrite(pattern(4 * KiB, 10), 0)                # over flushed bytes
    h.pwrite(pattern(4 * KiB, 11), 8 * KiB)          # a new block
    h.pwrite(pattern(8 * KiB, 12), 1 * Z + 12 * KiB) # zone 1 on
    h.pwrite(pattern(4 * KiB, 13), 3 * Z, nbd.CMD_FLAG_FUA)  # zone 3: FUA
    op("open 4")
    h.pwrite(pattern(4 * KiB, 14), 4 * Z)            # zone 4: opened
    op("reset 5")                                    # durable at once
    h.pwrite(pattern(4 * KiB, 15), 6 * Z)            # zone 6: lost

def after_cut(h):
    check_eq(h.pread(8 * KiB, 0), pattern(8 * KiB, 0), "flushed conventional bytes")
    check_eq(h.pread(4 * KiB, 8 * KiB), bytes(4 * KiB), "unflushed block gone")
    check_eq(h.pread(12 * KiB, 1 * Z), pattern(12 * KiB, 1), "zone 1 flushed bytes")
    check_eq(h.pread(8 * KiB, 1 * Z + 12 * KiB), bytes(8 * KiB), "zone 1 unflushed bytes gone")
    check_eq(h.pread(4 * KiB, 3 * Z), pattern(4 * KiB, 13), "FUA write kept")
    check_eq(h.pread(256 * KiB, 2 * Z), pattern(256 * KiB, 20), "FULL zone 2 kept")
    want = {1: ("CLOSED", 12 * KiB), 2: ("FULL", CAP), 3: ("CLOSED", 4 * KiB),
            4: ("EMPTY", 0), 5: ("EMPTY", 0), 6: ("EMPTY", 0)}
    for n in range(1, 8):
        check_eq(zone(n), want.get(n, ("EMPTY", 0)), "zone %d after the cut" % n)
EOF

# RAM: power-cut while running.
start_frontend "${geo[@]}" write_cache=true zone_control="$tmpdir/ctl1"
ctl=$tmpdir/ctl1 nbd_py "$tmpdir/writes.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
durable(h)
volatile(h)
op("power-cut")
try:
    h.pread(4 * KiB, 0)
    raise TestFailure("a connection from before the power cut still reads")
except nbd.Error as e:
    say("the old connection is dead: %s" % e.string)
h = connect()
after_cut(h)

# power-cut after 2: zone 1 is at 12K.
op("power-cut after 2", "ok armed after 2 writes")
h.pwrite(pattern(4 * KiB, 30), 0)                      # conventional, lost
h.pwrite(pattern(4 * KiB, 31), 1 * Z + 12 * KiB, nbd.CMD_FLAG_FUA)
try:
    h.pwrite(pattern(4 * KiB, 32), 1 * Z + 16 * KiB, nbd.CMD_FLAG_FUA)
    raise TestFailure("the third write after 'power-cut after 2' succeeded")
except nbd.Error as e:
    say("the third write fails: %s" % e.string)
h = connect()
check_eq(zone(1), ("CLOSED", 16 * KiB), "zone 1: the FUA write of the two")
check_eq(h.pread(8 * KiB, 1 * Z + 12 * KiB), pattern(4 * KiB, 31) + bytes(4 * KiB),
         "the FUA write is kept, the third never ran")
check_eq(h.pread(4 * KiB, 0), pattern(4 * KiB, 0), "the unflushed write of the two is gone")
h.shutdown()
EOF
stop_frontend

# A write parked ahead of its wp when the power goes never runs: znbd
# fails it at the cut; the plugin's waiting thread holds the cut back
# until its zone_write_timeout.  With it still parked, the write that
# brings the wp to it on the new connection would run it.
start_frontend "${geo[@]}" write_cache=true zone_write_timeout=3000 \
  zone_control="$tmpdir/ctl6"
ctl=$tmpdir/ctl6 nbd_py "$tmpdir/writes.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
h.aio_pwrite(nbd.Buffer.from_bytearray(pattern(4 * KiB, 60)), 1 * Z + 4 * KiB)
h.pread(4 * KiB, 0)  # znbd: the write was received (and parked) before
r = control(ctl, "power-cut", timeout=30)
check(r.startswith("ok"), "power-cut with a write parked")
h2 = connect()
h2.pwrite(pattern(4 * KiB, 61), 1 * Z)
check_eq(zone(1), ("IMP_OPEN", 4 * KiB), "the parked write did not run")
check_eq(h2.pread(8 * KiB, 1 * Z), pattern(4 * KiB, 61) + bytes(4 * KiB),
         "bytes of the new write only")
h2.shutdown()
EOF
stop_frontend

# dir=: kill -9, then the restart rolls back.
dev=$tmpdir/dev
start_frontend dir="$dev" "${geo[@]}" write_cache=true zone_control="$tmpdir/ctl2"
ctl=$tmpdir/ctl2 nbd_py "$tmpdir/writes.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
durable(h)
volatile(h)
EOF
kill -KILL "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=
note "killed the server with SIGKILL"
start_frontend dir="$dev" write_cache=true zone_control="$tmpdir/ctl3"
ctl=$tmpdir/ctl3 nbd_py "$tmpdir/writes.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
after_cut(h)
# Not flushed, but a clean stop (SIGTERM) flushes.
h.pwrite(pattern(4 * KiB, 50), 1 * Z + 12 * KiB)
h.pwrite(pattern(4 * KiB, 51), 8 * KiB)
h.shutdown()
EOF
stop_frontend
start_frontend dir="$dev" write_cache=true zone_control="$tmpdir/ctl5"
ctl=$tmpdir/ctl5 nbd_py "$tmpdir/writes.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
check_eq(zone(1), ("CLOSED", 16 * KiB), "zone 1 after a clean stop")
check_eq(h.pread(4 * KiB, 1 * Z + 12 * KiB), pattern(4 * KiB, 50), "kept by the shutdown flush")
check_eq(h.pread(4 * KiB, 8 * KiB), pattern(4 * KiB, 51), "conventional block kept too")
h.shutdown()
EOF
stop_frontend

# write_cache=false: refused, nothing lost.
start_frontend "${geo[@]}" zone_control="$tmpdir/ctl4"
ctl=$tmpdir/ctl4 nbd_py "$tmpdir/writes.py" <<'EOF'
import sys; exec(open(sys.argv[1]).read())
h = connect()
h.pwrite(pattern(8 * KiB, 40), 1 * Z)
op("power-cut", "error EINVAL")
check_eq(zone(1), ("IMP_OPEN", 8 * KiB), "zone 1 unchanged")
check_eq(h.pread(8 * KiB, 1 * Z), pattern(8 * KiB, 40), "bytes unchanged")
h.shutdown()
EOF
stop_frontend
pass "power-cut keeps exactly what FLUSH, FUA and zone management made durable"
