#!/usr/bin/env bash
# A client killed (SIGKILL) with many writes and reads in flight leaves the
# server healthy (plain RAM disk, zoned=false): it keeps running, new
# connections read and write normally, data written before the kill and
# flushed is intact; repeated three times.
. "$(dirname "$0")/../functions.sh"
require_python_nbd

# nbdkit 1.32.5 itself aborts ("connections.c:402: raw_send_socket:
# Assertion `sock >= 0' failed") when a client vanishes while several of
# its worker threads still have replies to send — with nbdkit's own memory
# plugin too (4 runs in 5 here), so not a zoned.so bug.  One worker thread
# per connection avoids that race on those releases; the plugin still sees
# the disconnect with requests queued.  Later ones (1.34 and on; Debian
# 13's 1.42) run with nbdkit's own threads, as a user would start it.
# (man nbdkit-zoned-plugin, BUGS.)
if { [ "$ZNBD_FRONTEND" = plugin ] || [ "$ZNBD_FRONTEND" = memory ]; } &&
  "$top_srcdir/scripts/nbdkit-racy.sh"; then
  ZNBD_NBDKIT_OPTS="${ZNBD_NBDKIT_OPTS:-} --threads=1"
  note "$(nbdkit --version): --threads=1"
fi
start_frontend size=32M zoned=false
nbd_py <<'EOF'
from znbdtest import *
h = connect()
h.pwrite(pattern(1 * MiB, 1), 0)
h.flush()
h.shutdown()
say("1 MiB written and flushed before the kills")
EOF
for round in 1 2 3; do
  # The victim keeps 64 x 256 KiB writes and reads in flight, forever.
  /usr/bin/python3 - "$uri" >"$tmpdir/victim.log" 2>&1 <<'EOF' &
import nbd, sys, os
h = nbd.NBD()
h.connect_uri(sys.argv[1])
buf = os.urandom(256 * 1024)
rb = [nbd.Buffer(256 * 1024) for _ in range(32)]
done = 0
def count(err):
    global done
    done += 1
    return 1
i = 0
while True:
    while h.aio_in_flight() < 64:
        off = (1 + i % 120) * 256 * 1024
        if i % 2:
            h.aio_pwrite(buf, off, completion=count)
        else:
            h.aio_pread(rb[i % 32], off, completion=count)
        i += 1
    h.poll(-1)
    # Ready once replies are flowing; it keeps 64 requests in flight.
    if done >= 64:
        open(os.environ["tmpdir"] + "/victim.ready", "a").close()
EOF
  victim=$!
  # Wait (no time limit of its own: the test's timeout bounds it) until
  # the victim has had 64 replies, so it is killed in the middle of I/O.
  while [ ! -e "$tmpdir/victim.ready" ]; do
    kill -0 "$victim" 2>/dev/null || die "victim client failed: $(cat "$tmpdir/victim.log")"
    sleep 0.05
  done
  kill -KILL "$victim"
  wait "$victim" 2>/dev/null || true
  rm -f "$tmpdir/victim.ready"
  frontend_alive || die "server died after a client was killed mid-I/O (round $round)"
  round=$round nbd_py <<'EOF'
from znbdtest import *
h = connect()
check_eq(h.pread(256 * KiB, 0), pattern(1 * MiB, 1)[:256 * KiB], "round %s: data from before the kill intact" % os.environ["round"])
x = pattern(64 * KiB, 50 + int(os.environ["round"]))
h.pwrite(x, 31 * MiB)
check_eq(h.pread(64 * KiB, 31 * MiB), x, "round %s: new connection writes and reads" % os.environ["round"])
h.shutdown()
EOF
done
stop_frontend
pass "server survives killed clients"
