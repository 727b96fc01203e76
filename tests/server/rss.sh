#!/usr/bin/env bash
# Memory given back: after 32 MiB writes and reads and 64 parallel 1 MiB
# reads on two connections, a full TRIM brings the server's RSS back
# within 16 MiB of the fresh server while both connections stay open
# (idle connections keep no big buffers), and within 16 MiB after they
# close (an idle worker gives memory back about a second after its last
# request: the check waits up to 10 s for it).  Once on a RAM disk (bio may send its reads from the store) and
# once on conventional zones (reads copied into reply buffers).  RSS is
# read from /proc/PID/status; the figures are printed.
. "$(dirname "$0")/../functions.sh"
frontend_available
require_python_nbd
[ "$ZNBD_SANITIZERS" = no ] || skip "ASan's quarantine keeps freed memory resident"
check_rss() {
start_frontend "$@"
nbd_py "$server_pid" <<'PY' || die "RSS checks failed ($*)"
import nbd, os, sys, time

pid = sys.argv[1]
def rss():
    with open("/proc/%s/status" % pid) as f:
        for l in f:
            if l.startswith("VmRSS:"):
                return int(l.split()[1])

fresh = rss()
M = 1 << 20
h = nbd.NBD(); h.connect_uri(os.environ["uri"])
g = nbd.NBD(); g.connect_uri(os.environ["uri"])
data = os.urandom(32 * M)
for i in range(4):
    h.pwrite(data, i * 32 * M)
    if h.pread(32 * M, i * 32 * M) != data or g.pread(32 * M, i * 32 * M) != data:
        sys.exit("32 MiB read back wrong at %d MiB" % (i * 32))
bufs = [nbd.Buffer(M) for i in range(64)]
for i in range(64):
    h.aio_pread(bufs[i], i * M)
while h.aio_in_flight() > 0:
    h.poll(-1)
busy = rss()
def settled():
    """RSS once the server gave memory back: an idle worker does so about
    a second after its last request (TRIM_NSEC in worker.c); wait up to
    10 s for RSS to come within the bound, then take what it is."""
    for i in range(50):
        r = rss()
        if r - fresh <= 16 * 1024:
            return r
        time.sleep(0.2)
    return rss()
h.trim(256 * M, 0)
trimmed = settled()
h.shutdown(); g.shutdown()
closed = settled()
print("RSS KiB: fresh %d, with 128 MiB stored %d, after full trim (2 idle "
      "connections) %d (+%d), after close %d (+%d)"
      % (fresh, busy, trimmed, trimmed - fresh, closed, closed - fresh))
if trimmed - fresh > 16 * 1024:
    sys.exit("RSS after trim is %d KiB above the fresh server" % (trimmed - fresh))
if closed - fresh > 16 * 1024:
    sys.exit("RSS after close is %d KiB above the fresh server" % (closed - fresh))
PY
stop_frontend
}
check_rss size=256M zoned=false
check_rss size=256M zone_size=32M zone_nr_conv=7
pass "RSS back within 16 MiB of the fresh server after trim"
