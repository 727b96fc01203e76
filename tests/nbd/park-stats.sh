#!/usr/bin/env bash
# The plugin's parked-write counters in the control socket's `stats`:
# park_waits (writes parked ahead of the wp whose nbdkit thread waited)
# and park_sleeps (those whose thread gave up yielding and slept).  A
# write in order counts nothing; a write ahead of the wp counts one wait
# and, once its thread sleeps (the gap is filled only then), one sleep;
# it then runs and its data reads back.  znbd parks without holding a
# thread, so its `stats` has no such fields, and the parked write still
# runs once the gap is filled.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "park-stats"

ctl=$tmpdir/ctl
start_frontend size=8M zone_size=1M zone_write_timeout=60000 zone_control="$ctl"
ctl=$ctl fe=$ZNBD_FRONTEND nbd_py <<'EOF'
import time
from znbdtest import *
ctl = os.environ["ctl"]
plugin = os.environ["fe"] == "plugin"
Z = 1 * MiB


def park_counts():
    st = control_stats(ctl)
    return st["park_waits"], st["park_sleeps"]


if plugin:
    check_eq(park_counts(), (0, 0), "nothing parked yet")
else:
    check("park_waits" not in control_stats(ctl),
          "znbd: no thread waits for a parked write, no park_* fields")
h = connect()
h.pwrite(pattern(4 * KiB, 1), Z)
if plugin:
    check_eq(park_counts(), (0, 0), "a write at the wp does not wait")
cookie = h.aio_pwrite(nbd.Buffer.from_bytearray(pattern(4 * KiB, 3)), Z + 8 * KiB)
if plugin:
    # Its thread waits, yields for a few microseconds, then sleeps:
    # poll (up to 20 s) until it does, before filling the gap.
    for _ in range(2000):
        if park_counts() == (1, 1):
            break
        time.sleep(0.01)
    check_eq(park_counts(), (1, 1), "the write ahead of the wp waited and slept")
else:
    h.pread(4 * KiB, 0)  # the write was received (and parked) before this
h.pwrite(pattern(4 * KiB, 2), Z + 4 * KiB)  # fills the gap: runs it
while h.aio_command_completed(cookie) is False:
    h.poll(-1)
check_eq(h.pread(12 * KiB, Z),
         pattern(4 * KiB, 1) + pattern(4 * KiB, 2) + pattern(4 * KiB, 3),
         "the parked write ran after the one that filled its gap")
if plugin:
    check_eq(park_counts(), (1, 1), "one wait, one sleep in all")
h.shutdown()
EOF
stop_frontend
pass "parked-write counters"
