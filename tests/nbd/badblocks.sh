#!/usr/bin/env bash
# Bad blocks (null_blk's badblocks, badblocks_once, badblocks_partial_io):
#  - every 512-byte sector of the first 2 MiB is read and written alone:
#    exactly the listed sectors fail with EIO, in a conventional and a
#    sequential zone; requests spanning a bad sector fail;
#  - a failed write on a sequential zone changes nothing (wp, condition,
#    counters, data); `badblocks del` at run time makes it pass, `add`
#    makes a good sector fail; `stats` counts every failure;
#  - badblocks_once: a range fails once, then reads and writes pass;
#  - badblocks_partial_io: a write is done up to the first bad block and
#    the wp moves exactly there (blocksize 512 and 4096: rounded down);
#  - -v logs every failure as it fires.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "badblocks="

ctl=$tmpdir/ctl
# Zone 0 conventional, zone 1 (sectors 2048-4095) sequential.
start_frontend size=8M zone_size=1M zone_nr_conv=1 zone_control="$ctl" \
  badblocks=100-107,300,2050,2056-2063
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
import re
Z = 1 * MiB
ctl = os.environ["ctl"]
bad = set(range(100, 108)) | {300} | {2050} | set(range(2056, 2064))
check_eq(control(ctl, "badblocks list"), "ok 100-107,300,2050,2056-2063\n",
         "start-up list")

def zone1():
    r = control(ctl, "report 1 1")
    return re.search(r"cond=(\S+)", r).group(1), re.search(r"wp=(\S+)", r).group(1)

stat = lambda key: control_stats(ctl)[key]

h = connect()
# Conventional zone: reads and writes sector by sector.
failed_r, failed_w = [], []
for s in range(0, 2048):
    try:
        h.pread(512, s * 512)
    except nbd.Error as e:
        check_eq(e.errnum, errno.EIO, "read of sector %d fails with EIO" % s)
        failed_r.append(s)
    try:
        h.pwrite(bytes([s & 255]) * 512, s * 512)
    except nbd.Error as e:
        check_eq(e.errnum, errno.EIO, "write of sector %d fails with EIO" % s)
        failed_w.append(s)
check_eq(failed_r, sorted(s for s in bad if s < 2048), "exactly the bad sectors of zone 0 fail reads")
check_eq(failed_w, failed_r, "exactly the bad sectors of zone 0 fail writes")
check_eq(h.pread(512, 99 * 512), bytes([99]) * 512, "good neighbour written")
check_eq(h.pread(512, 108 * 512), bytes([108]) * 512, "good neighbour written")
expect_errno(errno.EIO, "a 64 KiB read spanning sector 300 fails", h.pread, 64 * KiB, 256 * 512)
expect_errno(errno.EIO, "write zeroes over sector 300 fails", h.zero, 4096, 296 * 512)
check_eq(stat("badblock_errors"), 2 * len(failed_r) + 2, "stats counts every failure")

# Sequential zone 1: sector 2048 and 2049 are good, 2050 bad.
h.pwrite(b"a" * 1024, Z)
check_eq(zone1(), ("IMP_OPEN", str(Z + 1024)), "two good sectors written")
before = control(ctl, "stats")
expect_errno(errno.EIO, "write of bad sector 2050 at the wp", h.pwrite, b"b" * 512, Z + 1024)
check_eq(zone1(), ("IMP_OPEN", str(Z + 1024)), "failed write left wp and condition")
expect_errno(errno.EIO, "read of bad sector 2050", h.pread, 512, Z + 1024)
check_eq(h.pread(1024, Z), b"a" * 1024, "data before the bad sector intact")
# Empty zone 2 (sectors 4096-): a bad block added at run time.
check_eq(control(ctl, "badblocks add 4096"), "ok\n", "add a bad sector at run time")
expect_errno(errno.EIO, "write to new bad sector 4096 of an EMPTY zone", h.pwrite, b"c" * 4096, 2 * Z)
r = control(ctl, "report 2 1")
check_eq((re.search(r"cond=(\S+)", r).group(1), re.search(r"wp=(\S+)", r).group(1)),
         ("EMPTY", str(2 * Z)), "EMPTY zone stays EMPTY after the failed write")
after = control(ctl, "stats")
strip = lambda s: re.sub(r" (badblock_errors|allocated)=\d+", "", s)
check_eq(strip(after), strip(before), "no counter moved")
check_eq(control(ctl, "badblocks del 2050,4096"), "ok\n", "del at run time")
h.pwrite(b"b" * 512, Z + 1024)
check_eq(zone1(), ("IMP_OPEN", str(Z + 1536)), "sector 2050 writable after del")
h.pwrite(b"c" * 4096, 2 * Z)
check_eq(control(ctl, "badblocks list"), "ok 100-107,300,2056-2063\n", "list after del")
check(control(ctl, "badblocks add 16384").startswith("error EINVAL"), "sector past the end refused")
check(control(ctl, "badblocks add 5-3").startswith("error EINVAL"), "reversed range refused")
check_eq(control(ctl, "badblocks list"), "ok 100-107,300,2056-2063\n", "refused edits changed nothing")
h.shutdown()
EOF
stop_frontend

ZNBD_FRONTEND_OPTS=-v start_frontend size=1M zoned=false zone_control="$ctl" \
  badblocks=8,16-23 badblocks_once=true
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
ctl = os.environ["ctl"]
h = connect()
expect_errno(errno.EIO, "first read of sector 8", h.pread, 512, 8 * 512)
h.pread(512, 8 * 512)
say("second read of sector 8 passes (badblocks_once)")
expect_errno(errno.EIO, "first write over 16-23", h.pwrite, b"x" * 8192, 8192)
h.pwrite(b"x" * 8192, 8192)
check_eq(h.pread(8192, 8192), b"x" * 8192, "second write passes and reads back")
check_eq(control(ctl, "badblocks list"), "ok\n", "list empty")
h.shutdown()
EOF
stop_frontend
# -v: each failure logged once, with the sectors, as it fired.
grep -q 'fault: badblock: read of 512 bytes at 4096: bad sectors from 8 (cleared)' "$server_log" &&
  grep -q 'fault: badblock: write of 8192 bytes at 8192: bad sectors from 16 (cleared)' "$server_log" ||
  { cat "$server_log" >&2; die "-v did not log the bad-block failures"; }

for bs in 512 4096; do
  start_frontend size=4M zone_size=1M blocksize=$bs zone_control="$ctl" \
    badblocks=2058 badblocks_partial_io=true
  bs=$bs ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
import re
ctl, bs = os.environ["ctl"], int(os.environ["bs"])
Z = 1 * MiB
h = connect()
data = pattern(16 * KiB, 7)
expect_errno(errno.EIO, "16 KiB write over bad sector 2058", h.pwrite, data, Z)
good = (2058 * 512 // bs * bs) - Z
r = control(ctl, "report 1 1")
check_eq(re.search(r"wp=(\d+)", r).group(1), str(Z + good), "wp moved to the bad block (%d bytes)" % good)
check_eq(re.search(r"cond=(\S+)", r).group(1), "IMP_OPEN", "zone implicitly opened by the partial write")
check_eq(h.pread(good, Z), data[:good], "the part before the bad block was written")
h.shutdown()
EOF
  stop_frontend
done
pass "bad blocks fail exactly where listed"
