#!/usr/bin/env bash
# Zone resource limits over NBD: with zone_max_open=2 zone_max_active=3, a
# write that needs an open slot when two zones are explicitly open
# (ETOOMANYREFS inside) and one that needs an active slot when three zones
# are active (EOVERFLOW inside) both reach the client as ENOSPC (dev.h
# znbd_dev_wire_errno), distinct from the EIO of write-pointer errors, and
# change nothing; the plugin's log names the exact reason.  An implicitly
# open zone is closed to make room (round-robin victim).
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "zone limits"

ctl=$tmpdir/ctl
start_frontend size=8M zone_size=1M zone_max_open=2 zone_max_active=3 \
  zone_control="$ctl"
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
import re
Z = 1 * MiB
ctl = os.environ["ctl"]

def cond(n):
    r = control(ctl, "report %d 1" % n)
    return re.search(r"cond=(\S+)", r).group(1)

h = connect()
b = pattern(4 * KiB, 1)
check(control(ctl, "open 1").startswith("ok"), "zone 1 explicitly opened")
check(control(ctl, "open 2").startswith("ok"), "zone 2 explicitly opened")
expect_errno(errno.ENOSPC, "write to EMPTY zone 3 with 2 of 2 zones EXP_OPEN (open limit)",
             h.pwrite, b, 3 * Z)
check_eq((cond(3), h.pread(4 * KiB, 3 * Z)), ("EMPTY", bytes(4 * KiB)),
         "refused write changed nothing")
expect_errno(errno.EIO, "write-pointer error is still EIO", h.pwrite, b, 3 * Z + 4 * KiB)

# Two CLOSED zones and one IMP_OPEN zone: 3 of 3 active.
h.pwrite(b, 1 * Z)
h.pwrite(b, 2 * Z)
check(control(ctl, "close 1").startswith("ok"), "zone 1 closed")
check(control(ctl, "close 2").startswith("ok"), "zone 2 closed")
h.pwrite(b, 3 * Z)
check_eq([cond(n) for n in (1, 2, 3)], ["CLOSED", "CLOSED", "IMP_OPEN"], "3 active zones")
expect_errno(errno.ENOSPC, "write to EMPTY zone 4 with 3 of 3 zones active (active limit)",
             h.pwrite, b, 4 * Z)
check_eq((cond(4), h.pread(4 * KiB, 4 * Z)), ("EMPTY", bytes(4 * KiB)),
         "refused write changed nothing")

# Implicit close: a CLOSED zone is written (IMP_OPEN) while one other zone
# is IMP_OPEN and the open limit is 2: no victim needed.  Then reset zone 2
# and write zone 5 (EMPTY, active 2 -> 3) with IO 2: zone 1 or 3 is closed.
h.pwrite(b, 1 * Z + 4 * KiB)
check_eq(cond(1), "IMP_OPEN", "CLOSED zone reopened by a write")
check(control(ctl, "reset 2").startswith("ok"), "zone 2 reset")
h.pwrite(b, 5 * Z)
got = sorted([cond(1), cond(3)])
check_eq(got, ["CLOSED", "IMP_OPEN"], "one IMP_OPEN zone implicitly closed for zone 5")
check_eq(cond(5), "IMP_OPEN", "zone 5 open")
h.shutdown()
EOF
frontend_alive || die "the server died"
stop_frontend
if [ "$ZNBD_FRONTEND" = plugin ]; then
  grep -q ETOOMANYREFS "$server_log" || die "server log does not name ETOOMANYREFS"
  grep -q EOVERFLOW "$server_log" || die "server log does not name EOVERFLOW"
  note "server log: $(grep -m1 ETOOMANYREFS "$server_log")"
fi
pass "open/active exhaustion is ENOSPC on the wire, EIO stays EIO"
