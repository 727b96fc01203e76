#!/usr/bin/env bash
# Zone rules over NBD (man/nbdkit-zoned-plugin.pod, ZONES OVER NBD) on a
# zoned export with a conventional zone and zone capacity < zone size:
# a write off the write pointer (behind it, or ahead of it once the
# pipelining wait times out) fails with EIO and changes no byte and no wp;
# a partial trim leaves a sequential zone alone, a whole-zone trim resets
# it; write-zeroes from the wp to the capacity finishes the zone without
# allocating; READONLY zones read but refuse writes, OFFLINE zones refuse
# reads; the zone control socket's report agrees after every step.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "zone rules"

ctl=$tmpdir/ctl
start_frontend size=8M zone_size=1M zone_capacity=768K zone_nr_conv=1 \
  zone_write_timeout=100 zone_control="$ctl"
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
import re
Z, CAP = 1 * MiB, 768 * KiB
ctl = os.environ["ctl"]

def zone(n):
    """(cond, wp) of zone N from the control socket's report."""
    r = control(ctl, "report %d 1" % n)
    m = re.search(r"wp=(\S+) .*cond=(\S+)", r)
    if not r.startswith("ok") or not m:
        raise TestFailure("report %d: %r" % (n, r))
    return m.group(2), (None if m.group(1) == "-" else int(m.group(1)))

def stats():
    r = control(ctl, "stats")
    return dict(kv.split("=") for kv in r.split()[1:])

h = connect()

# Conventional zone 0: writes anywhere, in any order.
c = pattern(8 * KiB, 1)
h.pwrite(c, 64 * KiB)
h.pwrite(c, 0)
check_eq(h.pread(8 * KiB, 64 * KiB), c, "conventional zone takes writes in any order")
check_eq(zone(0), ("NOT_WP", None), "conventional zone: NOT_WP, no wp")

# Sequential zone 1: at the wp.
a = pattern(64 * KiB, 2)
h.pwrite(a, Z)
check_eq(zone(1), ("IMP_OPEN", Z + 64 * KiB), "write at the wp: IMP_OPEN, wp moved")

# Off the wp: EIO, nothing changes.
expect_errno(errno.EIO, "write behind the wp (overwrite at the zone start)",
             h.pwrite, pattern(4 * KiB, 3), Z)
expect_errno(errno.EIO, "random write ahead of the wp (after the 100 ms wait)",
             h.pwrite, pattern(4 * KiB, 4), Z + 300 * KiB)
expect_errno(errno.EIO, "write crossing the zone capacity",
             h.pwrite, pattern(CAP, 5), Z + 64 * KiB)
check_eq(h.pread(64 * KiB, Z), a, "rejected writes changed no byte below the wp")
check_eq(h.pread(4 * KiB, Z + 300 * KiB), bytes(4 * KiB), "nor above it")
check_eq(zone(1), ("IMP_OPEN", Z + 64 * KiB), "nor the wp or condition")

# Trim: partial leaves the zone alone, whole zone resets it.
h.trim(512 * KiB, Z)
check_eq(zone(1), ("IMP_OPEN", Z + 64 * KiB), "partial trim of a sequential zone: no change")
check_eq(h.pread(64 * KiB, Z), a, "partial trim: data still there")
h.trim(Z, Z)
check_eq(zone(1), ("EMPTY", Z), "whole-zone trim: zone reset to EMPTY")
check_eq(h.pread(64 * KiB, Z), bytes(64 * KiB), "reset zone reads zeros")
h.pwrite(a, Z)
check_eq(zone(1), ("IMP_OPEN", Z + 64 * KiB), "reset zone writable from its start again")

# Write-zeroes from the wp to the capacity finishes zone 2, allocating nothing.
b = pattern(4 * KiB, 6)
h.pwrite(b, 2 * Z)
before = int(stats()["allocated"])
h.zero(CAP - 4 * KiB, 2 * Z + 4 * KiB)
check_eq(zone(2), ("FULL", 2 * Z + CAP), "write-zeroes to the capacity: FULL, wp = start + capacity")
check_eq(int(stats()["allocated"]), before, "write-zeroes allocated nothing")
check_eq(h.pread(8 * KiB, 2 * Z), b + bytes(4 * KiB), "FULL zone reads its data, then zeros")
expect_errno(errno.EIO, "write to a FULL zone", h.pwrite, b, 2 * Z)
expect_errno(errno.EIO, "write in [capacity, zone end)", h.pwrite, b, 2 * Z + CAP)

# Fault zones through the control socket.
h.pwrite(b, 3 * Z)
check(control(ctl, "readonly 3").startswith("ok"), "zone 3 set READONLY")
check_eq(h.pread(4 * KiB, 3 * Z), b, "READONLY zone still reads its data")
expect_errno(errno.EIO, "write to a READONLY zone", h.pwrite, b, 3 * Z)
check(control(ctl, "offline 4").startswith("ok"), "zone 4 set OFFLINE")
expect_errno(errno.EIO, "read of an OFFLINE zone", h.pread, 4 * KiB, 4 * Z)
check(control(ctl, "online 4").startswith("ok"), "zone 4 back online")
check_eq(zone(4), ("EMPTY", 4 * Z), "online zone is EMPTY at its start")

# Whole-device trim: reset-all (READONLY kept), conventional data freed.
h.trim(8 * Z, 0)
check_eq([zone(n)[0] for n in range(8)],
         ["NOT_WP", "EMPTY", "EMPTY", "READONLY", "EMPTY", "EMPTY", "EMPTY", "EMPTY"],
         "whole-device trim: reset-all, READONLY zone skipped")
check_eq(h.pread(8 * KiB, 0), bytes(8 * KiB), "whole-device trim freed the conventional zone")
h.shutdown()
EOF
frontend_alive || die "the server died"
stop_frontend
pass "write-pointer rules, trim, write-zeroes and fault zones over NBD"
