#!/bin/bash
# Timing injection: part `faults` of `make bench` (bench/run.sh appends
# its table to the report), or alone: BUILD=build bench/faults.sh.
# One table from one run:
#   mbps=N        MiB/s of N_MIB MiB of 1 MiB writes then reads, 8 in
#                 flight (libnbd), through znbd (bio) with mbps=0 (no
#                 limit), 200 and 50: the limited rows should sit at
#                 their limit, far below the unlimited one;
#   zone op       milliseconds per control-socket open+close / finish /
#                 reset round trip with zone_*_nsec=0 and =2000000 (2 ms):
#                 the difference should be the configured latency.
# Rounds are interleaved (every setting once per round, a fresh server
# each time); each row is the median of BENCH_ROUNDS rounds (default 3,
# 1 with BENCH_QUICK=1) with min-max.  Then the target check: for each
# limit, measured / configured (median) within 0.9-1.1 ("met").
# Numbers are for comparing rows of the same run, not absolute.
bench_name=faults
. "$(dirname "$0")/env.sh"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  rounds=${BENCH_ROUNDS:-1} N_MIB=32
else
  rounds=${BENCH_ROUNDS:-3} N_MIB=64
fi
LIMITS="200 50"
tmp=$(mktemp -d /tmp/znbd-bench-faults.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

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
stop() { kill "$pid"; wait "$pid" 2>/dev/null; pid=; }

measure() { # what: mbps | zoneops; one measurement on one line
  PYTHONPATH="$top/tests" uri="nbd+unix:///?socket=$tmp/sock" \
    /usr/bin/python3 - "$1" "$tmp/ctl" "$N_MIB" <<'EOF'
import os, sys, time
import nbd
from znbdtest import control
what, ctl, n_mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
def mbps():
    h = nbd.NBD(); h.connect_uri(os.environ["uri"])
    B = 1 << 20
    buf = bytearray(B)
    t = time.monotonic()
    for rw in ("w", "r"):
        for k in range(n_mib):
            while h.aio_in_flight() >= 8:
                h.poll(-1)
            if rw == "w":
                h.aio_pwrite(buf, k * B)
            else:
                h.aio_pread(nbd.Buffer(B), k * B)
        while h.aio_in_flight() > 0:
            h.poll(-1)
    el = time.monotonic() - t
    h.shutdown()
    return 2 * n_mib / el
def zoneops():
    out = []
    for ops in (("open 1", "close 1"), ("finish 1",), ("reset 1",)):
        t = time.monotonic()
        for _ in range(20):
            for o in ops:
                r = control(ctl, o)
                if not r.startswith("ok"):
                    sys.exit("faults: %s: %s" % (o, r.strip()))
        out.append((time.monotonic() - t) / 20 * 1000)
    return out
if what == "mbps":
    print("%.2f" % mbps())
else:
    zoneops()  # warm-up: first connections, page faults
    print(" ".join("%.3f" % x for x in zoneops()))
EOF
}

res=$tmp/res # lines: KEY VALUE...
: >"$res"
nsec=2000000
for ((r = 1; r <= rounds; r++)); do
  for lim in 0 $LIMITS; do
    serve size=128M zoned=false mbps="$lim"
    echo "mbps$lim $(measure mbps)" >>"$res"
    stop
  done
  serve size=64M zone_size=4M
  echo "zone0 $(measure zoneops)" >>"$res"
  stop
  serve size=64M zone_size=4M zone_open_nsec=$nsec zone_close_nsec=$nsec \
    zone_finish_nsec=$nsec zone_reset_nsec=$nsec
  echo "zone1 $(measure zoneops)" >>"$res"
  stop
done

/usr/bin/python3 - "$res" "$rounds" "$N_MIB" "$LIMITS" <<'EOF'
import statistics, sys
res, rounds, n_mib, limits = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
rows = {}
for line in open(res):
    w = line.split()
    if len(w) < 2:
        sys.exit("faults: a measurement failed: %r" % line)
    rows.setdefault(w[0], []).append([float(x) for x in w[1:]])
def col(key, i=0):
    return [v[i] for v in rows[key]]
def mm(vals, f):
    return (f + " (" + f + "-" + f + ")") % (statistics.median(vals), min(vals), max(vals))
print("Timing injection (bench/faults.sh), znbd bio, median of %s interleaved "
      "rounds (min-max): %s MiB of 1 MiB writes then reads at 8 in flight, "
      "and control-socket zone operations:\n" % (rounds, n_mib))
print("| row | setting | result | ratio |")
print("|---|---|---|---|")
base = statistics.median(col("mbps0"))
print("| mbps | 0 (no limit) | %s MiB/s | 1.00 |" % mm(col("mbps0"), "%.1f"))
checks = []
for lim in limits:
    v = col("mbps" + lim)
    q = statistics.median(v) / float(lim)
    checks.append((lim, q, min(v) / float(lim), max(v) / float(lim)))
    print("| mbps | %s | %s MiB/s | %.2f of limit (%.2f of no limit) |"
          % (lim, mm(v, "%.1f"), q, statistics.median(v) / base))
for i, (name, want) in enumerate((("open+close", 4), ("finish", 2), ("reset", 2))):
    a, b = col("zone0", i), col("zone1", i)
    print("| zone op %s | 0 ns -> 2 ms each | %s -> %s ms | +%.2f ms (want +%d) |"
          % (name, mm(a, "%.2f"), mm(b, "%.2f"),
             statistics.median(b) - statistics.median(a), want))
print("\n| target | figure | verdict |")
print("|---|---|---|")
for lim, q, lo, hi in checks:
    print("| mbps=%s: measured / configured within 0.9-1.1 | %.2f (rounds %.2f-%.2f) | %s |"
          % (lim, q, lo, hi, "met" if 0.9 <= q <= 1.1 else "**missed**"))
EOF
