#!/usr/bin/env bash
# Timing parameters (null_blk's mbps and rotational, znbd's zone_*_nsec):
# the export advertises NBD_FLAG_ROTATIONAL exactly with rotational=true;
# under mbps=64 and 2 ms zone operation latencies every request still
# completes with the right result (reads, writes, TRIM resets, control
# socket zone operations).  How long they take is measured in bench/
# (bench/faults.sh), not asserted here.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "mbps="

start_frontend size=4M zoned=false
nbd_py <<'EOF'
from znbdtest import *
h = connect()
check_eq(h.is_rotational(), False, "not rotational by default")
h.shutdown()
EOF
stop_frontend

ctl=$tmpdir/ctl
start_frontend size=8M zone_size=1M rotational=true mbps=64 zone_control="$ctl" \
  zone_open_nsec=2000000 zone_close_nsec=2000000 zone_finish_nsec=2000000 \
  zone_reset_nsec=2000000
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
import re
ctl = os.environ["ctl"]
Z = 1 * MiB
h = connect()
check_eq(h.is_rotational(), True, "rotational=true advertised")
data = pattern(256 * KiB, 9)
for k in range(4):
    h.pwrite(data, k * 256 * KiB)
check_eq(h.pread(Z, 0), data * 4, "throttled writes and reads are right")
for op, cond in (("open 1", "EXP_OPEN"), ("close 1", "EMPTY"), ("finish 2", "FULL"), ("reset 2", "EMPTY")):
    r = control(ctl, op)
    check_eq(re.search(r"cond=(\S+)", r).group(1), cond, "%s with its latency" % op)
h.trim(Z, 0)
check_eq(re.search(r"cond=(\S+)", control(ctl, "report 0 1")).group(1), "EMPTY", "TRIM reset with zone_reset_nsec")
h.shutdown()
EOF
stop_frontend
pass "timing parameters keep results right"
