#!/bin/bash
# Timing injection (part of the fault-injection work; runs alone:
#   BUILD=build bench/faults.sh), one table from one run:
#   mbps=N        MiB/s of 64 MiB of 1 MiB writes then reads, 8 in flight,
#                 through znbd (bio) with mbps=0 (no limit), 200 and 50:
#                 the limited rows should sit at their limit, far below
#                 the unlimited one (ratio = achieved / limit);
#   zone op       milliseconds per control-socket open+close / finish /
#                 reset round trip with zone_*_nsec=0 and =2000000 (2 ms):
#                 the difference should be the configured latency.
# Each row is the median of BENCH_ROUNDS rounds (default 3).  Numbers
# are for comparing rows of the same run, not absolute.
set -u
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=${BUILD:-$top/build}
znbd=$build/server/znbd
[ -x "$znbd" ] || { echo "faults: $znbd is not built" >&2; exit 1; }
rounds=${BENCH_ROUNDS:-3}
tmp=$(mktemp -d /tmp/znbd-bench-faults.XXXXXX)
trap 'kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

# serve ARGS...: start znbd on $tmp/sock with ARGS, wait until it serves.
serve() {
  rm -f "$tmp/sock" "$tmp/ctl" "$tmp/pid"
  "$znbd" -f -U "$tmp/sock" -P "$tmp/pid" "$@" zone_control="$tmp/ctl" \
    >"$tmp/log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do [ -S "$tmp/sock" ] && [ -S "$tmp/ctl" ] && return 0; sleep 0.05; done
  echo "faults: znbd did not start: $(cat "$tmp/log")" >&2
  exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null; }

measure() { # what: mbps | zoneops
  PYTHONPATH="$top/tests" uri="nbd+unix:///?socket=$tmp/sock" \
    /usr/bin/python3 - "$1" "$tmp/ctl" "$rounds" <<'EOF'
import sys, time, statistics
import nbd
from znbdtest import control
what, ctl, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def mbps():
    h = nbd.NBD(); h.connect_uri(__import__("os").environ["uri"])
    B, N = 1 << 20, 64
    buf = bytearray(B)
    t = time.monotonic()
    for rw in ("w", "r"):
        for k in range(N):
            while h.aio_in_flight() >= 8:
                h.poll(-1)
            if rw == "w":
                h.aio_pwrite(buf, k * B)
            else:
                h.aio_pread(nbd.Buffer(B), k * B)
        while h.aio_in_flight() > 0:
            h.poll(-1)
    h.shutdown()
    return 2 * N / (time.monotonic() - t)
def zoneops():
    out = []
    for ops in (("open 1", "close 1"), ("finish 1",), ("reset 1",)):
        t = time.monotonic()
        for _ in range(20):
            for o in ops:
                control(ctl, o)
        out.append((time.monotonic() - t) / 20 * 1000)
    return out
if what == "mbps":
    print("%.1f" % statistics.median(mbps() for _ in range(rounds)))
else:
    zoneops()  # warm-up: first connections, page faults
    rs = [zoneops() for _ in range(rounds)]
    print(" ".join("%.2f" % statistics.median(r[i] for r in rs) for i in range(3)))
EOF
}

echo "| row | setting | result | ratio |"
echo "|---|---|---|---|"
serve size=128M zoned=false
base=$(measure mbps)
stop
echo "| mbps | 0 (no limit) | $base MiB/s | 1.00 |"
for lim in 200 50; do
  serve size=128M zoned=false mbps=$lim
  got=$(measure mbps)
  stop
  echo "| mbps | $lim | $got MiB/s | $(awk -v a="$got" -v b="$lim" 'BEGIN{printf "%.2f of limit", a/b}') |"
done
serve size=64M zone_size=4M
read -r o0 f0 r0 <<<"$(measure zoneops)"
stop
serve size=64M zone_size=4M zone_open_nsec=2000000 zone_close_nsec=2000000 \
  zone_finish_nsec=2000000 zone_reset_nsec=2000000
read -r o1 f1 r1 <<<"$(measure zoneops)"
stop
for row in "open+close $o0 $o1 4" "finish $f0 $f1 2" "reset $r0 $r1 2"; do
  set -- $row
  echo "| zone op $1 | 0 ns -> 2 ms each | $2 -> $3 ms | +$(awk -v a="$2" -v b="$3" 'BEGIN{printf "%.2f", b-a}') ms (want +$4) |"
done
