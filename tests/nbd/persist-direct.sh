#!/usr/bin/env bash
# buffered_io=false (direct I/O, zloop's default): writes bypass the page
# cache (fincore finds none of a sequential zone file's pages cached),
# read back, and survive kill -9 both when the restarted server uses
# direct I/O again and when it uses the page cache (the default); a FUA
# write and a FLUSH succeed.  Unaligned offsets and memory are covered by
# tests/unit/dir_test (the store takes them; NBD requests here are
# multiples of 512 bytes).
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "persistent devices"
require fincore

dev=$tmpdir/dev
geo=(size=8M zone_size=1M zone_nr_conv=1 blocksize=512) # 512-byte pieces
# The bytes every server must read back (python, in both scripts below).
reads=$(
  cat <<'EOF'
check_eq(h.pread(4 * KiB, 8 * KiB), pattern(4 * KiB, 0), "conventional")
for i in range(4):
    check_eq(h.pread(128 * KiB, MiB + i * 128 * KiB),
             pattern(128 * KiB, 10 + i), "zone 1 part %d" % i)
check_eq(h.pread(4 * KiB, 2 * MiB), pattern(512, 2) + pattern(3584, 3),
         "zone 2")
EOF
)
start_frontend dir="$dev" "${geo[@]}" buffered_io=false zone_control="$tmpdir/ctl1"
nbd_py <<EOF
from znbdtest import *
h = connect()
h.pwrite(pattern(4 * KiB, 0), 8 * KiB)             # conventional zone 0
for i in range(4):                                   # zone 1, 512 KiB
    h.pwrite(pattern(128 * KiB, 10 + i), MiB + i * 128 * KiB)
h.pwrite(pattern(512, 2), 2 * MiB)                   # zone 2, one sector
h.pwrite(pattern(3584, 3), 2 * MiB + 512, nbd.CMD_FLAG_FUA)
h.flush()
$reads
check_eq(h.pread(4 * KiB, MiB + 512 * KiB), bytes(4 * KiB),
         "past zone 1's wp: zeros")
h.shutdown()
EOF
res=$(fincore --bytes --noheadings --output RES "$dev/seq-000001" | tr -d " ")
[ "$res" = 0 ] || die "seq-000001: $res bytes in the page cache, want 0 (direct I/O)"
[ "$(stat -c %s "$dev/seq-000001")" = $((512 * 1024)) ] ||
  die "seq-000001 holds $(stat -c %s "$dev/seq-000001") bytes, want 524288"
kill -KILL "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=

check_back() {
  nbd_py <<EOF
from znbdtest import *
import re
h = connect()
ctl = os.environ["ctl"]
for n, wp in ((1, 512 * KiB), (2, 4 * KiB)):
    m = re.search(r"wp=(\S+) .*cond=(\S+)", control(ctl, "report %d 1" % n))
    check_eq((int(m.group(1)) - n * MiB, m.group(2)), (wp, "CLOSED"),
             "zone %d after the restart" % n)
$reads
h.shutdown()
EOF
}
for buffered in false true; do
  start_frontend dir="$dev" buffered_io=$buffered zone_control="$tmpdir/ctl-$buffered"
  ctl=$tmpdir/ctl-$buffered check_back
  note "restarted with buffered_io=$buffered: every byte and wp back"
  stop_frontend
done
pass "direct I/O bypasses the page cache and survives kill -9"
