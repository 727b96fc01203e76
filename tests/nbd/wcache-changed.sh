#!/usr/bin/env bash
# write_cache=true on dir=: a directory changed after a crash is not
# rolled back blindly.  The server is killed with writes unflushed, then
# (as Linux zloop or a user would, once the server is gone) a sequential
# zone file is appended to.  The restart must refuse, with write_cache
# true and false, naming znbd.wcache and the changed file, and change no
# file (the journal included); moving znbd.wcache away then starts with
# every file as it is.  After a clean stop the journal is empty, and a
# change made before the next start is kept.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "write_cache on dir="

dev=$tmpdir/dev
geo=(size=8M zone_size=1M zone_nr_conv=1)
start_frontend dir="$dev" "${geo[@]}" write_cache=true
nbd_py <<'EOF'
from znbdtest import *
h = connect()
h.pwrite(pattern(4 * KiB, 1), 0)
h.pwrite(pattern(8 * KiB, 2), MiB)
h.flush()
h.pwrite(pattern(4 * KiB, 3), 0)                 # unflushed, conventional
h.pwrite(pattern(4 * KiB, 4), MiB + 8 * KiB)     # unflushed, zone 1
h.pwrite(pattern(4 * KiB, 5), 2 * MiB)           # unflushed, zone 2
h.shutdown()
EOF
kill -KILL "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=
# As if the server had died longer ago than its lease (10 s): the lease
# in the journal's header (after the 16-byte magic, the zone count and one
# 8-byte FLUSHED per zone; lib/wcache.c) is set to just after the newest
# ctime of the zone files, instead of waiting it out.
/usr/bin/python3 - "$dev" <<'PY'
import os, struct, sys, time
d = sys.argv[1]
newest = max(os.stat(os.path.join(d, f)).st_ctime_ns
             for f in os.listdir(d) if f[:4] in ("cnv-", "seq-"))
with open(os.path.join(d, "znbd.wcache"), "r+b") as j:
    j.seek(16)
    nr = struct.unpack("=Q", j.read(8))[0]
    j.seek(16 + 8 + 8 * nr)
    j.write(struct.pack("=q", newest + 1))
time.sleep(0.02)  # past the kernel's coarse clock tick
PY
note "killed the server with SIGKILL; its lease moved to the last change"
head -c 4096 /dev/urandom >"$tmpdir/foreign"
cat "$tmpdir/foreign" >>"$dev/seq-000003"
snap() { (cd "$dev" && sha256sum cnv-* seq-* znbd.meta znbd.wcache); }
snap >"$tmpdir/before"
[ -s "$dev/znbd.wcache" ] || die "no journal after the crash"
expect_start_failure "seq-000003 was changed" dir="$dev" write_cache=true
grep -q "znbd.wcache" "$tmpdir/start-failure$_nservers.log" ||
  die "the refusal does not name znbd.wcache"
expect_start_failure "znbd.wcache holds the writes" dir="$dev" write_cache=false
snap | cmp -s - "$tmpdir/before" || die "a refused start changed a file"

mv "$dev/znbd.wcache" "$tmpdir/journal.saved"
start_frontend dir="$dev" write_cache=true
foreign=$tmpdir/foreign nbd_py <<'EOF'
from znbdtest import *
h = connect()
with open(os.environ["foreign"], "rb") as f:
    foreign = f.read()
check_eq(h.pread(4 * KiB, 3 * MiB), foreign, "the change after the crash")
check_eq(h.pread(4 * KiB, 0), pattern(4 * KiB, 3), "nothing rolled back")
check_eq(h.pread(12 * KiB, MiB), pattern(8 * KiB, 2) + pattern(4 * KiB, 4),
         "zone 1 as it was")
h.pwrite(pattern(4 * KiB, 6), 4 * MiB)           # unflushed, then a clean stop
h.shutdown()
EOF
stop_frontend
[ ! -s "$dev/znbd.wcache" ] || die "a clean stop left $(stat -c %s "$dev/znbd.wcache") bytes of journal"
cat "$tmpdir/foreign" >>"$dev/seq-000004"
start_frontend dir="$dev" write_cache=true zone_control="$tmpdir/ctl"
ctl=$tmpdir/ctl foreign=$tmpdir/foreign nbd_py <<'EOF'
from znbdtest import *
h = connect()
with open(os.environ["foreign"], "rb") as f:
    foreign = f.read()
check_eq(h.pread(8 * KiB, 4 * MiB), pattern(4 * KiB, 6) + foreign,
         "zone 4: the write before the clean stop and the change after it")
r = control(os.environ["ctl"], "report 4 1")
check("wp=%d " % (4 * MiB + 8 * KiB) in r, "zone 4's wp: %s" % r)
h.shutdown()
EOF
stop_frontend
pass "a directory changed after a crash is refused, not rolled back; a clean stop empties the journal"
