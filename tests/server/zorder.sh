#!/usr/bin/env bash
# Write ordering in a sequential zone under each submission model: a
# write B sent just before the write A that reaches B's offset.
#   mq, scheduler none, pipeline_zoned_writes=true: B is requeued until A
#     moved the wp, both succeed.
#   mq, pipeline_zoned_writes=false, and bio: B fails at once (EIO), A ok.
#   mq, mq-deadline (zone write locking): B holds the zone lock, is
#     requeued submit_queues x hw_queue_depth times, fails EIO; A then ok.
#   mq-deadline with no_zone_write_lock=true behaves as scheduler none.
# Then 64 in-order writes to one zone with zone locking, completion_nsec
# and 2 hardware queues all succeed, and a 2-tag set serves 64 pipelined
# requests (the reader waits for tags).
. "$(dirname "$0")/../functions.sh"
require_python_nbd
export ZNBD_FRONTEND=mq
frontend_available

order() { # EXPECT_B: ok|EIO
  /usr/bin/python3 - "$1" <<PY || die "ordering check failed ($*)"
import nbd, sys
h = nbd.NBD(); h.connect_uri("$uri")
a, b = b"A" * 4096, b"B" * 4096
cb_ = h.aio_pwrite(b, 4096)    # ahead of the wp
ca = h.aio_pwrite(a, 0)        # at the wp
res = {}
while h.aio_in_flight() > 0:
    h.poll(-1)
for name, c in (("A", ca), ("B", cb_)):
    try:
        h.aio_command_completed(c); res[name] = "ok"
    except nbd.Error as e:
        res[name] = "EIO" if e.errno in (5, "EIO") else "errno %s" % e.errno
want = {"A": "ok", "B": sys.argv[1]}
assert res == want, (res, want)
data = h.pread(8192, 0)
assert data[:4096] == a
if sys.argv[1] == "ok":
    assert data[4096:] == b
print("B ahead of the wp: %s, A at the wp: ok" % res["B"])
PY
}

Z="size=16M zone_size=4M"
start_frontend $Z
order ok; stop_frontend
note "mq, none, pipeline: out-of-order write requeued and completed"
start_frontend $Z pipeline_zoned_writes=false
order EIO; stop_frontend
note "mq, none, no pipelining: out-of-order write fails"
start_frontend $Z --scheduler=mq-deadline hw_queue_depth=4
order EIO; stop_frontend
note "mq, mq-deadline: out-of-order write holds the zone lock, fails after 4 attempts"
start_frontend $Z --scheduler=mq-deadline no_zone_write_lock=true
order ok; stop_frontend
note "mq, mq-deadline, no_zone_write_lock: as none"
ZNBD_FRONTEND=bio
start_frontend $Z
order EIO; stop_frontend
note "bio: out-of-order write fails at once"
ZNBD_FRONTEND=mq

start_frontend $Z --scheduler=mq-deadline submit_queues=2 completion_nsec=100000 --threads=2
/usr/bin/python3 - <<PY || die "in-order burst failed"
import nbd, os
hs = [nbd.NBD() for i in range(2)]
for h in hs:
    h.connect_uri("$uri")
pats = {}
cookies = []
for z, h in enumerate(hs):
    for i in range(64):
        p = os.urandom(4096); pats[(z, i)] = p
        cookies.append((h, h.aio_pwrite(p, z * 4 * 2**20 + i * 4096)))
for h in hs:
    while h.aio_in_flight() > 0:
        h.poll(-1)
for h, c in cookies:
    h.aio_command_completed(c)
for z in range(2):
    got = hs[0].pread(64 * 4096, z * 4 * 2**20)
    assert got == b"".join(pats[(z, i)] for i in range(64)), z
print("2 connections x 64 in-order writes to 2 zones, zone locking, 2 hw queues: all ok")
PY
nbdinfo --map=x-znbd:zone "$uri" | head -2 >"$tmpdir/map"
grep -q "^ *0 *262144 *34" "$tmpdir/map" || { cat "$tmpdir/map"; die "zone 0 wp not at 256 KiB"; }
stop_frontend

start_frontend size=64M zoned=false hw_queue_depth=2 completion_nsec=50000
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" pipeline || die "2 tags, 64 requests"
stop_frontend
pass "zoned write ordering under bio, mq, mq-deadline, pipelining"
