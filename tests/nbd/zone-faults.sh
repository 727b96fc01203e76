#!/usr/bin/env bash
# READONLY and OFFLINE at the open and active limits give null_blk's
# counters (null_set_zone_cond(): the zone is finished first, its result
# ignored), op by op, through the control socket's stats:
#  - an EMPTY zone at the open limit closes an IMP_OPEN victim;
#  - a CLOSED zone at the open limit with no IMP_OPEN zone cannot be
#    finished and stays counted as closed;
#  - an EMPTY zone at the active limit changes no counter;
#  - an open zone's slot is freed.
# And zone_full=true starts every sequential zone FULL.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "zone faults"

ctl=$tmpdir/ctl
start_frontend size=6M zone_size=1M zone_max_open=2 zone_control="$ctl"
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
import re
Z = 1 * MiB
ctl = os.environ["ctl"]
counts = lambda: zone_counts(ctl)

def conds():
    r = control(ctl, "report")
    return "".join(c[0] if c != "EXP_OPEN" else "x"
                   for c in re.findall(r"cond=(\S+)", r)).lower()

def ok(line):
    r = control(ctl, line)
    check(r.startswith("ok"), "%s: %s" % (line, r.strip()))

h = connect()
h.pwrite(b"a" * 4096, 0 * Z)
h.pwrite(b"b" * 4096, 1 * Z)
check_eq((conds(), counts()), ("iieeee", (2, 0, 0)), "two IMP_OPEN zones, open limit 2")
ok("readonly 2")
check_eq((conds(), counts()), ("cireee", (1, 0, 1)),
         "EMPTY zone 2 at the open limit: its finish closed IMP_OPEN zone 0")
ok("readonly 1")
check_eq((conds(), counts()), ("crreee", (0, 0, 1)), "IMP_OPEN zone 1: slot freed")
ok("open 3")
ok("open 4")
check_eq((conds(), counts()), ("crrxxe", (0, 2, 1)), "two EXP_OPEN zones, one CLOSED")
ok("offline 0")
check_eq((conds(), counts()), ("orrxxe", (0, 2, 1)),
         "CLOSED zone 0 at the open limit, no IMP_OPEN: finish refused, still counted closed")
ok("online 0")
check_eq((conds(), counts()), ("errxxe", (0, 2, 1)), "back online: the count stays (as null_blk)")
check_eq(h.pread(4096, 1 * Z), b"b" * 4096, "READONLY zone 1 keeps its data")
expect_errno(errno.EIO, "OFFLINE zone reads fail", lambda: (control(ctl, "offline 5"), h.pread(4096, 5 * Z)))
h.shutdown()
EOF
stop_frontend

start_frontend size=6M zone_size=1M zone_max_open=3 zone_max_active=3 zone_control="$ctl"
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
import re
Z = 1 * MiB
ctl = os.environ["ctl"]
counts = lambda: zone_counts(ctl)
h = connect()
for z in range(3):
    h.pwrite(b"a" * 4096, z * Z)
check(control(ctl, "close 0").startswith("ok"), "close 0")
check_eq(counts(), (2, 0, 1), "3 of 3 active")
check(control(ctl, "readonly 3").startswith("ok"), "readonly 3")
check_eq(counts(), (2, 0, 1), "EMPTY zone 3 at the active limit: finish refused, no counter moved")
check(control(ctl, "offline 0").startswith("ok"), "offline 0")
check_eq(counts(), (2, 0, 0), "CLOSED zone 0 below the open limit: finished, CL released")
h.shutdown()
EOF
stop_frontend

start_frontend size=4M zone_size=1M zone_nr_conv=1 zone_full=true zone_control="$ctl"
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
import re
ctl = os.environ["ctl"]
r = control(ctl, "report")
check_eq(re.findall(r"cond=(\S+)", r), ["NOT_WP", "FULL", "FULL", "FULL"], "zone_full: sequential zones start FULL")
h = connect()
expect_errno(errno.EIO, "write to a FULL zone", h.pwrite, b"x" * 4096, 1 * MiB)
h.shutdown()
EOF
stop_frontend
pass "zone faults follow null_blk's finish-first counters"
