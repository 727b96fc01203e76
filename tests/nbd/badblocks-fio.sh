#!/usr/bin/env bash
# Bad blocks added and removed at run time while fio runs (fio's nbd
# engine, random 4 KiB reads and writes over 16 MiB, continue_on_error):
# once fio is under way, `badblocks add` makes requests fail with EIO
# (fio counts errors, stats counts as many bad-block failures), then
# `badblocks del` empties the list and every request passes again: a
# full read of the device succeeds afterwards and the server stayed up.
# No timing is asserted: each step waits for the counter it needs.
. "$(dirname "$0")/../functions.sh"
require fio
require_znbd_frontend "badblocks"

ctl=$tmpdir/ctl
start_frontend size=16M zoned=false zone_control="$ctl"
fio --output-format=json --output="$tmpdir/bb.json" --name=bb \
  --ioengine=nbd --uri="$uri" --iodepth=8 --rw=randrw --bs=4k --size=16M \
  --time_based --runtime=600 --continue_on_error=all \
  >"$tmpdir/bb.fio.log" 2>&1 &
fio_pid=$!
on_exit "kill $fio_pid 2>/dev/null"

ctl=$ctl fio_pid=$fio_pid nbd_py <<'EOF'
from znbdtest import *
import time
ctl = os.environ["ctl"]
def wait_for(what, cond, limit=120):
    for _ in range(limit * 20):
        if cond():
            say(what)
            return
        time.sleep(0.05)
    raise TestFailure("timed out waiting: " + what)
wait_for("fio is writing", lambda: control_stats(ctl)["allocated"] > 0)
# A quarter of the device, in two ranges.
check_eq(control(ctl, "badblocks add 0-4095,16384-20479"), "ok\n", "bad blocks added under fio")
wait_for("fio's requests hit them", lambda: control_stats(ctl)["badblock_errors"] >= 50)
check_eq(control(ctl, "badblocks del 0-32767"), "ok\n", "all removed under fio")
check_eq(control(ctl, "badblocks list"), "ok\n", "list empty")
n = control_stats(ctl)["badblock_errors"]
time.sleep(0.5)
check_eq(control_stats(ctl)["badblock_errors"], n, "no failure after del")
os.kill(int(os.environ["fio_pid"]), 2)  # SIGINT: fio stops and reports
EOF
wait "$fio_pid" || true
err=$(fio_get bb jobs.0.total_err)
n=$(ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
print(control_stats(os.environ["ctl"])["badblock_errors"])
h = connect()
h.pread(16 * MiB, 0)
EOF
)
note "fio saw $err errors, the server failed $n requests on bad blocks"
[ "$err" -gt 0 ] && [ "$err" = "$n" ] || die "fio counted $err errors, stats $n"
frontend_alive || die "the server died"
stop_frontend
pass "bad blocks added and removed under fio"
