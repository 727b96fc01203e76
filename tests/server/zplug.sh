#!/usr/bin/env bash
# Zone write plugging in znbd's mq model (zone_write_plugging=true,
# man/znbd.pod "Ordering writes to sequential zones"):
#   1. fio, 4 KiB sequential writes at iodepth 32 into one zone, scheduler
#      none and mq-deadline: all succeed, the data verifies, the zone is
#      FULL, and the control socket's stats counted plugged writes.
#   2. 32 writes sent at once into one zone while the first is held by
#      completion_nsec: 31 wait in the plug (the deepest plug is 31), the
#      30 behind the second are merged into its request, all succeed and
#      read back; writes to a conventional zone bypass the plug.
#   3. Writes arriving out of order from three connections are issued in
#      arrival order: the one ahead of the wp fails with EIO, the others
#      succeed (nothing parked, unlike pipelining).
#   4. A TRIM resetting the zone fails the writes plugged for it with EIO
#      at once; the write in flight completes; the zone ends EMPTY.
#   5. A client that goes away with writes plugged: they are dropped as
#      their turn comes (not executed), the plug empties, and the zone
#      takes writes at its write pointer from another connection.
# The long completion_nsec only makes the first write stay in flight while
# the others arrive, and in 4 and 5 while the test takes its next step
# (the TRIM, the hang-up), which a loaded machine may delay by far more
# than a few hundred ms: seconds there.  Nothing measures time.
. "$(dirname "$0")/../functions.sh"
require_python_nbd
require fio
export ZNBD_FRONTEND=mq
frontend_available

ctl=$tmpdir/ctl
Z="size=16M zone_size=4M zone_nr_conv=1 zone_write_plugging=true zone_control=$ctl"

# zplugtest.py: helpers of the Python checks (and the shell's stats KEY):
# the control socket's stats counters, raw writes into zone 1, replies.
cat >"$tmpdir/zplugtest.py" <<'PY'
import socket, struct, sys, time
import rawnbd
BASE = 4 << 20  # zone 1, the first sequential zone
def stat(ctl, key):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(ctl)
    s.sendall(b"stats\n")
    line = s.makefile().readline()
    s.close()
    return int(dict(w.split("=", 1) for w in line.split()[1:])[key])
def wait_at_least(ctl, key, n):
    """Poll until the (monotonic) counter KEY reaches N."""
    while stat(ctl, key) < n:
        time.sleep(0.01)
def conns(path, n):
    return [rawnbd.ready(path, structured=False) for i in range(n)]
def write(cookie, k, data):
    """A raw WRITE of DATA at block K (4 KiB) of zone 1."""
    return struct.pack(">IHHQQI", rawnbd.REQ_MAGIC, 0, rawnbd.CMD_WRITE,
                       cookie, BASE + k * 4096, len(data)) + data
def replies(conn, n):
    """N simple replies: {cookie: error}."""
    out = {}
    for i in range(n):
        m, err, ck = struct.unpack(">IIQ", conn.recv(16))
        out[ck] = err
    return out
if __name__ == "__main__":
    print(stat(sys.argv[1], sys.argv[2]))
PY
export PYTHONPATH=$srcdir:$tmpdir
stats() { /usr/bin/python3 "$tmpdir/zplugtest.py" "$ctl" "$1"; }

# 1. fio at iodepth 32 into zone 1, both schedulers.
for sched in none mq-deadline; do
  start_frontend $Z --scheduler=$sched completion_nsec=100000
  run_fio seq-$sched --ioengine=nbd --uri="$uri" --rw=write --bs=4k \
    --iodepth=32 --offset=4M --size=4M --verify=crc32c --do_verify=1
  [ "$(fio_get seq-$sched jobs.0.error)" = 0 ] || die "fio reported an error ($sched)"
  [ "$(fio_get seq-$sched jobs.0.write.io_bytes)" = 4194304 ] || die "fio did not write the zone ($sched)"
  nbdinfo --map=x-znbd:zone "$uri" >"$tmpdir/map"
  grep -q "^ *4194304 *4194304 *46" "$tmpdir/map" || { cat "$tmpdir/map"; die "zone 1 not FULL ($sched)"; }
  w=$(stats plug_writes) p=$(stats plug_plugged) n=$(stats plug_now)
  [ "$w" = 1024 ] || die "plug_writes=$w, want 1024 ($sched)"
  [ "$p" -gt 0 ] || die "no write was plugged at iodepth 32 ($sched)"
  [ "$n" = 0 ] || die "plug_now=$n after the run ($sched)"
  note "$sched: 1024 writes at iodepth 32 verified, $p plugged, $(stats plug_merged) merged"
  stop_frontend
done

# 2. 32 writes at once; hw_queue_depth=2: plugged writes need no tag.
start_frontend $Z completion_nsec=1000000000 hw_queue_depth=2
/usr/bin/python3 - "$sock" <<'PY' || die "plug depth check failed"
import os, sys
from zplugtest import *
c, = conns(sys.argv[1], 1)
pats = [os.urandom(4096) for i in range(32)]
c.s.sendall(b"".join(write(i + 1, i, pats[i]) for i in range(32)))
errs = replies(c, 32)
assert errs == {i + 1: 0 for i in range(32)}, errs
c.cookie = 100
ck = c.request(rawnbd.CMD_READ, BASE, 32 * 4096)
err, data = c.simple(ck, 32 * 4096)
assert err == 0 and data == b"".join(pats), "data read back differs"
ck = c.request(rawnbd.CMD_WRITE, 0, 4096, payload=b"c" * 4096)  # conventional
assert c.simple(ck)[0] == 0
print("32 writes into one zone at once: all ok, data read back")
PY
for kv in plug_writes=32 plug_plugged=31 plug_max_depth=31 plug_merged=30 plug_now=0 plug_aborted=0; do
  [ "$(stats "${kv%=*}")" = "${kv#*=}" ] || die "stats: $(stats "${kv%=*}") for ${kv%=*}, want ${kv#*=}"
done
note "31 of 32 writes plugged without tags (hw_queue_depth=2), 30 merged; conventional write not counted"
stop_frontend

# 3. Out-of-order arrival over three connections.  Each connection's write
# is known to have arrived (plug_writes) before the next one is sent.
start_frontend $Z completion_nsec=200000000 --threads=2
/usr/bin/python3 - "$sock" "$ctl" <<'PY' || die "out-of-order check failed"
import sys
from zplugtest import *
ctl = sys.argv[2]
a, b, cc = conns(sys.argv[1], 3)
pat = {k: bytes([0x40 + k]) * 4096 for k in range(4)}
a.s.sendall(write(0, 0, pat[0]) + write(1, 1, pat[1]))
wait_at_least(ctl, "plug_writes", 2)
b.s.sendall(write(3, 3, pat[3]))   # ahead of the wp
wait_at_least(ctl, "plug_writes", 3)
cc.s.sendall(write(2, 2, pat[2]))
res = {**replies(a, 2), **replies(b, 1), **replies(cc, 1)}
assert res == {0: 0, 1: 0, 2: 0, 3: rawnbd.EIO}, res
a.cookie = 10
ck = a.request(rawnbd.CMD_READ, BASE, 3 * 4096)
err, data = a.simple(ck, 3 * 4096)
assert err == 0 and data == pat[0] + pat[1] + pat[2]
print("arrival order W0 W1 W3 W2: W3 (ahead of the wp) EIO, the others ok")
PY
nbdinfo --map=x-znbd:zone "$uri" | grep "^ *4194304" >"$tmpdir/map"
grep -q "^ *4194304 *12288 *34" "$tmpdir/map" || { cat "$tmpdir/map"; die "zone 1 wp not at 12 KiB"; }
stop_frontend

# 4. TRIM (zone reset) with writes plugged (the first still in flight).
start_frontend $Z completion_nsec=2000000000
/usr/bin/python3 - "$sock" "$ctl" <<'PY' || die "reset check failed"
import sys
from zplugtest import *
ctl = sys.argv[2]
a, b = conns(sys.argv[1], 2)
a.s.sendall(b"".join(write(i, i, bytes([0x61 + i]) * 4096) for i in range(3)))
wait_at_least(ctl, "plug_writes", 3)
assert stat(ctl, "plug_plugged") == 2, "the 2nd and 3rd write were not plugged"
b.cookie = 20
ck = b.request(rawnbd.CMD_TRIM, BASE, 4 << 20)
res = replies(a, 3)
assert res == {0: 0, 1: rawnbd.EIO, 2: rawnbd.EIO}, res
assert b.simple(ck)[0] == 0
assert stat(ctl, "plug_aborted") == 2 and stat(ctl, "plug_now") == 0
b.cookie = 30
ck = b.request(rawnbd.CMD_WRITE, BASE, 4096, payload=b"z" * 4096)
assert b.simple(ck)[0] == 0, "write at the reset zone's start"
print("TRIM with 2 writes plugged: both EIO, the write in flight ok, zone reset")
PY
nbdinfo --map=x-znbd:zone "$uri" | grep "^ *4194304" >"$tmpdir/map"
grep -q "^ *4194304 *4096 *34" "$tmpdir/map" || { cat "$tmpdir/map"; die "zone 1 wp not at 4 KiB after reset + write"; }
stop_frontend

# 5. The client goes away with writes plugged (the first still in flight:
# were it done first, the next one would run and move the wp past 4 KiB).
start_frontend $Z completion_nsec=2000000000
/usr/bin/python3 - "$sock" "$ctl" <<'PY' || die "gone-client check failed"
import sys, time
from zplugtest import *
ctl = sys.argv[2]
a, = conns(sys.argv[1], 1)
a.s.sendall(b"".join(write(i, i, b"g" * 4096) for i in range(8)))
wait_at_least(ctl, "plug_writes", 8)
a.s.close()
while stat(ctl, "plug_now") > 0:
    time.sleep(0.01)
print("client gone with %d writes plugged: plug emptied" % stat(ctl, "plug_plugged"))
PY
# The write in flight may or may not have executed before the server saw
# the client go: write at whatever the write pointer is.
wp=$(nbdinfo --map=x-znbd:zone "$uri" | awk '$1 == 4194304 { print ($3 >= 256 ? 0 : $2) }')
case $wp in 0 | 4096) ;; *) die "zone 1 wp $wp after the client went: want 0 or 4096 (plugged writes must not execute)" ;; esac
nbdsh -u "$uri" -c "h.pwrite(b'x' * 4096, $((4194304 + wp)))" || die "write at the wp after the client went"
stop_frontend
pass "zone write plugging: depth, merging, arrival order, reset, gone client"
