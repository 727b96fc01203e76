#!/usr/bin/env bash
# Write ordering in a sequential zone under each submission model: a
# write B sent just before the write A that reaches B's offset.
#   mq, scheduler none, pipeline_zoned_writes=true: B is parked until A
#     moved the wp, both succeed.
#   bio, pipeline_zoned_writes=true: B is parked until A moved the wp.
#   mq and bio with pipeline_zoned_writes=false: B fails at once (EIO), A ok.
#   mq, mq-deadline with pipeline_zoned_writes=false (zone write locking):
#     B takes the zone lock, fails EIO; A waited behind it, then ok.
#   mq-deadline with pipelining (the default) or no_zone_write_lock=true
#     does not lock: as scheduler none.
# A parked write that never lines up fails with EIO after
# zone_write_timeout, when a TRIM resets its zone, or when the server
# stops (SIGTERM: at once, though the timeout is a minute) (bio and mq).
# Then 64 in-order writes to one zone with zone locking, completion_nsec
# and 2 hardware queues all succeed, and a 2-tag set serves 64 pipelined
# requests (the reader waits for tags).
. "$(dirname "$0")/../functions.sh"
require_python_nbd
export ZNBD_FRONTEND=mq
frontend_available

order() { # EXPECT_B: ok|EIO
  # B and A go out in one send, so they reach the server together.
  PYTHONPATH=$srcdir /usr/bin/python3 - "$sock" "$1" <<'PY' || die "ordering check failed ($*)"
import struct, sys
import rawnbd
c = rawnbd.ready(sys.argv[1], structured=False)
a, b = b"A" * 4096, b"B" * 4096
hdr = lambda ck, off: struct.pack(">IHHQQI", rawnbd.REQ_MAGIC, 0, rawnbd.CMD_WRITE, ck, off, 4096)
c.s.sendall(hdr(1, 4096) + b + hdr(2, 0) + a)   # B ahead of the wp, then A
res = {}
for i in range(2):
    m, err, ck = struct.unpack(">IIQ", c.recv(16))
    res["B" if ck == 1 else "A"] = "ok" if err == 0 else ("EIO" if err == 5 else "errno %d" % err)
want = {"A": "ok", "B": sys.argv[2]}
assert res == want, (res, want)
ck = c.request(rawnbd.CMD_READ, 0, 8192)
err, data = c.simple(ck, 8192)
assert data[:4096] == a
if sys.argv[2] == "ok":
    assert data[4096:] == b
print("B ahead of the wp: %s, A at the wp: ok" % res["B"])
PY
}

# A parked write waits for the wp up to zone_write_timeout: make that far
# longer than any delay a loaded machine adds between B and A (500 ms by
# default), so "ok" cannot become EIO by scheduling.
Z="size=16M zone_size=4M zone_write_timeout=60000"
start_frontend $Z
order ok; stop_frontend
note "mq, none, pipeline: out-of-order write parked and completed"
start_frontend $Z pipeline_zoned_writes=false
order EIO; stop_frontend
note "mq, none, no pipelining: out-of-order write fails"
start_frontend $Z --scheduler=mq-deadline pipeline_zoned_writes=false
order EIO; stop_frontend
note "mq, mq-deadline, zone write locking: out-of-order write fails, the one behind it succeeds"
start_frontend $Z --scheduler=mq-deadline
order ok; stop_frontend
note "mq, mq-deadline with pipelining: no zone lock, parked and completed"
start_frontend $Z --scheduler=mq-deadline no_zone_write_lock=true
order ok; stop_frontend
note "mq, mq-deadline, no_zone_write_lock: as none"
parked_fail() { # HOW: timeout|reset|stop: a parked write B that never lines up fails with EIO
  PYTHONPATH=$srcdir /usr/bin/python3 - "$sock" "$1" "$server_pid" <<'PY' || die "parked write check failed ($*)"
import os, signal, struct, sys
import rawnbd
c = rawnbd.ready(sys.argv[1], structured=False)
b = b"B" * 4096
ckb = c.request(rawnbd.CMD_WRITE, 4096, 4096, payload=b)  # ahead of the wp (0)
res = {}
if sys.argv[2] == "reset":
    ckt = c.request(rawnbd.CMD_TRIM, 0, 4 << 20)  # the whole zone: a reset
    for i in range(2):
        m, err, ck = struct.unpack(">IIQ", c.recv(16))
        res[ck] = err
    assert res[ckt] == 0, res
elif sys.argv[2] == "stop":  # SIGTERM: answered at once, not after the timeout
    # A READ behind B, answered: B was executed (parked) before it (bio
    # executes a connection's requests in order, mq's one hardware queue
    # dispatches them in order).
    ckr = c.request(rawnbd.CMD_READ, 0, 4096)
    m, err, ck = struct.unpack(">IIQ", c.recv(16))
    assert ck == ckr and err == 0, (ck, err)
    c.recv(4096)
    os.kill(int(sys.argv[3]), signal.SIGTERM)
    m, err, ck = struct.unpack(">IIQ", c.recv(16))
    res[ck] = err
    assert res[ckb] == 5, ("parked write at SIGTERM: want EIO", res)
    print("parked write ahead of the wp, server stopping: EIO")
    sys.exit(0)
else:
    m, err, ck = struct.unpack(">IIQ", c.recv(16))
    res[ck] = err
assert res[ckb] == 5, ("parked write: want EIO", res)
ck = c.request(rawnbd.CMD_WRITE, 0, 4096, payload=b"A" * 4096)  # wp still 0
err, _ = c.simple(ck)
assert err == 0, err
ck = c.request(rawnbd.CMD_READ, 4096, 4096)
err, data = c.simple(ck, 4096)
assert err == 0 and data == bytes(4096), "the failed parked write left data"
print("parked write ahead of the wp, %s: EIO, nothing written" % sys.argv[2])
PY
}

for fe in bio mq; do
  ZNBD_FRONTEND=$fe
  start_frontend size=16M zone_size=4M zone_write_timeout=200
  parked_fail timeout; stop_frontend
  start_frontend $Z
  parked_fail reset; stop_frontend
  start_frontend $Z
  parked_fail stop # the server was sent SIGTERM: it must exit cleanly
  _stop_server || die "$fe: exit status $? after SIGTERM with a parked write"
  check_server_log
  note "$fe: a parked write fails after zone_write_timeout, on a zone reset and when the server stops"
done

ZNBD_FRONTEND=bio
start_frontend $Z
order ok; stop_frontend
note "bio, pipeline: out-of-order write parked, run when the wp reached it"
start_frontend $Z pipeline_zoned_writes=false
order EIO; stop_frontend
note "bio, no pipelining: out-of-order write fails at once"
ZNBD_FRONTEND=mq

start_frontend $Z --scheduler=mq-deadline pipeline_zoned_writes=false submit_queues=2 \
  completion_nsec=100000 --threads=2
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
