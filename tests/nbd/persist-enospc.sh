#!/usr/bin/env bash
# A dir= device on a full file system: the write that does not fit fails
# with ENOSPC and changes nothing (no byte, no wp, no file size: a partly
# written zone file is truncated back), earlier data stays, and once a
# zone reset frees space the same write succeeds.  Runs on a 2 MiB tmpfs,
# with zone_prealloc=false (each write allocates) and =true (the zone's
# preallocation does not fit and is skipped), and with direct I/O
# (buffered_io=false, zone_prealloc=true), and with writeback_mb=1
# (zone_prealloc=false: each zone's second 512 KiB write starts its
# writeback; the kick's result is ignored, so a full file system must
# not lose or fail anything more).  Mounting needs root: the
# test skips (77) when the mount is refused.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "persistent devices"

fs=$tmpdir/fs
mkdir -p "$fs"
mount -t tmpfs -o size=2m znbd-test "$fs" 2>/dev/null ||
  skip "cannot mount a 2 MiB tmpfs (needs root)"
on_exit "umount -l '$fs'"

for mode in false true direct writeback; do
  prealloc=$mode buffered=true wb=0
  [ "$mode" = direct ] && prealloc=true buffered=false
  [ "$mode" = writeback ] && prealloc=false wb=1
  dev=$fs/dev-$mode
  rm -rf "$fs"/dev-*
  start_frontend dir="$dev" size=8M zone_size=1M zone_prealloc=$prealloc \
    buffered_io=$buffered writeback_mb=$wb zone_control="$tmpdir/ctl-$mode"
  ctl=$tmpdir/ctl-$mode dev=$dev nbd_py <<'EOF'
from znbdtest import *
import re
Z = MiB
ctl, dev = os.environ["ctl"], os.environ["dev"]
def wp(n):
    m = re.search(r"wp=(\S+)", control(ctl, "report %d 1" % n))
    return int(m.group(1)) - n * Z
h = connect()
# Fill zones until the file system is full: 1.5 MiB fit in 2 MiB, the
# next 512 KiB cannot (tmpfs has little overhead, but some).
chunk = 512 * KiB
done = []
for i in range(8):
    zone, part = divmod(i, 2)
    off = zone * Z + part * chunk
    try:
        h.pwrite(pattern(chunk, i), off)
        done.append((off, i))
    except nbd.Error as e:
        check_eq(e.errnum, errno.ENOSPC, "write %d refused with ENOSPC" % i)
        failed = (off, i, zone)
        break
else:
    raise TestFailure("a 2 MiB file system took 4 MiB")
off, i, zone = failed
check_eq(wp(zone), off - zone * Z, "wp of zone %d unchanged" % zone)
size = os.path.getsize("%s/seq-%06d" % (dev, zone))
check_eq(size, off - zone * Z, "file of zone %d truncated back" % zone)
expect_errno(errno.ENOSPC, "the same write again", h.pwrite,
             pattern(chunk, i), off)
for o, k in done:
    check_eq(h.pread(chunk, o), pattern(chunk, k), "data at %d kept" % o)
h.flush()
# Free space: reset zone 0, then the write fits.
check(control(ctl, "reset 0").startswith("ok"), "reset zone 0")
if zone == 0:
    off = 0
h.pwrite(pattern(chunk, i), off)
check_eq(h.pread(chunk, off), pattern(chunk, i), "fits after a reset")
h.shutdown()
EOF
  stop_frontend
done
pass "a full file system fails one write with ENOSPC and loses nothing"
