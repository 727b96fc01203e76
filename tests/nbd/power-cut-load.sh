#!/usr/bin/env bash
# A power cut under load is one instant.  Four connections keep writing
# (libnbd AIO, depth 8 each, no FLUSH) to a write_cache=true device while
# the control socket's power-cut is carried out; nothing was ever
# flushed, so afterwards a new connection must read zeros everywhere and
# find every sequential zone EMPTY and none open or closed, however the
# writes raced the cut: each either ran before it (and was rolled back)
# or failed without touching the device.  On RAM and on dir=; ROUNDS
# rounds each (default 4; the cut comes at a different moment in each).
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "write_cache and power-cut"

rounds=${ROUNDS:-4}
geo=(size=16M zone_size=1M zone_nr_conv=2 write_cache=true)

cat >"$tmpdir/load.py" <<'EOF'
from znbdtest import *
import re, threading, time
Z, BS, DEPTH, CONNS = MiB, 4 * KiB, 8, 4
ctl, rnd = os.environ["ctl"], int(os.environ["round"])

def writer(k, h, stop, counts):
    """Connection K writes conventional zone k % 2 (rewrites) and then
    sequential zones 2 + 3k .. 4 + 3k in order, DEPTH requests in flight."""
    offs = [(k % 2) * Z + (i % 64) * BS for i in range(64)]
    for z in range(2 + 3 * k, 5 + 3 * k):
        offs += [z * Z + i * BS for i in range(Z // BS)]
    buf = nbd.Buffer.from_bytearray(bytearray(b"\xa5" * BS))

    def done(err):
        counts["ok" if err.value == 0 else "failed"] += 1
        return 1  # retire the command

    sent = 0
    try:
        # Until told to stop: the zones in order, then the conventional
        # blocks again and again, so writes are in flight when the cut
        # comes and keep coming while it is carried out.
        while not stop.is_set():
            while h.aio_in_flight() < DEPTH and not stop.is_set():
                off = offs[sent] if sent < len(offs) else offs[sent % 64]
                h.aio_pwrite(buf, off, completion=done)
                sent += 1
            h.poll(1)
    except nbd.Error:
        counts["dropped"] += 1  # the server closed the connection: fine

handles = [connect() for _ in range(CONNS)]
stop = threading.Event()
counts = [dict(ok=0, failed=0, dropped=0) for _ in range(CONNS)]
ts = [threading.Thread(target=writer, args=(k, handles[k], stop, counts[k]))
      for k in range(CONNS)]
for t in ts:
    t.start()
# The cut comes mid-stream: once some writes completed (however slow
# the machine), then a little later in each round.
t_end = time.monotonic() + 30
while sum(c["ok"] for c in counts) == 0 and time.monotonic() < t_end:
    time.sleep(0.001)
time.sleep(0.01 + 0.02 * (rnd % 5))
r = control(ctl, "power-cut", timeout=60)
check(r.startswith("ok"), "power-cut: %s" % r.strip())
time.sleep(0.2)  # requests sent around the cut have reached the server
stop.set()
for t in ts:
    t.join(60)
    check(not t.is_alive(), "a writer thread is stuck")
ok = sum(c["ok"] for c in counts)
check(ok > 0, "some writes completed before the cut")

h = connect()
nonzero = 0
for off in range(0, 16 * Z, Z):
    if h.pread(Z, off) != bytes(Z):
        nonzero += 1
        say("round %d: MiB %d holds data after the cut" % (rnd, off // Z))
rep = control(ctl, "report 0 16")
conds = re.findall(r"cond=(\S+)", rep)
check_eq(len(conds), 16, "16 zones reported")
seq = conds[2:]
check_eq([c for c in seq if c != "EMPTY"], [], "every sequential zone EMPTY")
check_eq(zone_counts(ctl), (0, 0, 0), "no zone open or closed")
check_eq(nonzero, 0, "MiB blocks holding data after the cut")
say("round %d: %d writes acknowledged before the cut, device all zeros"
    % (rnd, ok))
h.shutdown()
EOF

for store in ram dir; do
  for ((i = 0; i < rounds; i++)); do
    d=()
    [ "$store" = dir ] && d=(dir="$tmpdir/dev-$i")
    start_frontend "${d[@]}" "${geo[@]}" zone_control="$tmpdir/ctl-$store-$i"
    ctl=$tmpdir/ctl-$store-$i round=$i nbd_py <"$tmpdir/load.py" ||
      die "$store round $i: the power cut leaked (see above)"
    stop_frontend
  done
  pass "$store: $rounds rounds of a cut under 4 x depth 8 writes left all zeros"
done
