#!/bin/bash
# The zone map's redraw rate: part `map` of `make bench` (bench/run.sh
# appends its table to the report), or alone: BUILD=build bench/map.sh.
# One znbd (bio) with ZONES zones (default 100,000 of 1 MiB; a few hundred
# written partly, so the map has conditions and fills to draw) serves, in
# interleaved rounds of SECS seconds each:
#   map --watch=0      nbdzone map redrawing as fast as it can (frames
#                      counted by the screen clears it writes);
#   nbdinfo --map      the anchor: `nbdinfo --map=x-znbd:zone` run again
#                      and again, which reads the same zone states over
#                      NBD with no drawing;
#   map --watch=0.1    the map with 0.1 s between redraws (a little under
#                      10 a second), as a person watches: the server's CPU
#                      share it costs.
# Each row: redraws (or runs) per second, the server's CPU (% of one core,
# from /proc/PID/stat over the run) and the client's; ratio = the row's
# rate / the anchor's, same round.  Target: map --watch=0 at least 10
# redraws a second, and the server under 10 % of a core with --watch=0.1.
bench_name=map
. "$(dirname "$0")/env.sh"
nbdzone=$build/client/nbdzone
[ -x "$nbdzone" ] || { echo "map: $nbdzone is not built" >&2; exit 1; }
command -v nbdinfo >/dev/null || { echo "map: nbdinfo is missing" >&2; exit 1; }
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  rounds=${BENCH_ROUNDS:-1} SECS=1
else
  rounds=${BENCH_ROUNDS:-3} SECS=3
fi
ZONES=${ZONES:-100000}
tmp=$(mktemp -d /tmp/znbd-bench-map.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

"$znbd" -f -U "$tmp/sock" -P "$tmp/pid" --queue-mode=bio size=$((ZONES))M \
  zone_size=1M zone_nr_conv=4 >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -s "$tmp/pid" ] && break; sleep 0.05; done
[ -s "$tmp/pid" ] || { echo "map: znbd did not start: $(cat "$tmp/log")" >&2; exit 1; }
uri="nbd+unix:///?socket=$tmp/sock"
# Zones 4.. in steps of 331: 4 KiB x k, so fills and IMP_OPEN/FULL differ.
/usr/bin/python3 - "$uri" "$ZONES" <<'EOF' || { echo "map: prefill failed" >&2; exit 1; }
import sys, nbd
h = nbd.NBD(); h.connect_uri(sys.argv[1])
M = 1 << 20
for i, z in enumerate(range(4, int(sys.argv[2]), 331)):
    n = (i % 257) * 4096
    if n:
        h.pwrite(bytes(n), z * M)
h.shutdown()
EOF

ticks() { # utime+stime of PID, clock ticks
  local s f
  s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  s=${s##*) }
  read -ra f <<<"$s"
  echo $((f[11] + f[12]))
}
hz=$(getconf CLK_TCK)

usec() { local t=${EPOCHREALTIME/./}; echo "$t"; } # wall clock, µs

# one ROW: run it for SECS seconds; prints "ROW COUNT MICROSECONDS SERVER_TICKS"
one() {
  local row=$1 t0 t1 s0 end n=0 iv=0
  t0=$(ticks "$pid")
  s0=$(usec)
  case $row in
    map-fast | map-10)
      [ "$row" = map-10 ] && iv=0.1
      timeout "$SECS" "$nbdzone" map --watch="$iv" "$uri" >"$tmp/out" 2>/dev/null
      n=$(grep -o $'\033\[2J' "$tmp/out" | wc -l)
      ;;
    nbdinfo)
      end=$((s0 + SECS * 1000000))
      while [ "$(usec)" -lt "$end" ]; do
        nbdinfo --map=x-znbd:zone "$uri" >/dev/null || { echo "map: nbdinfo failed" >&2; exit 1; }
        n=$((n + 1))
      done
      ;;
  esac
  t1=$(ticks "$pid")
  echo "$row $n $(($(usec) - s0)) $((t1 - t0))"
}

: >"$tmp/res"
for ((r = 1; r <= rounds; r++)); do
  for row in map-fast nbdinfo map-10; do
    c0=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
    line=$(one "$row")
    c1=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
    echo "$r $line $((c1 - c0))" >>"$tmp/res"
  done
done

/usr/bin/python3 - "$tmp/res" "$rounds" "$ZONES" "$hz" "$SECS" <<'EOF'
import statistics, sys
res, rounds, zones, hz, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
runs = {}
for line in open(res):
    r, row, n, el, st, ct = line.split()
    el = float(el) / 1e6
    runs.setdefault(row, []).append(dict(r=int(r), rate=int(n) / el,
        srv=100.0 * int(st) / hz / el, cli=100.0 * int(ct) / hz / el))
anchor = {x["r"]: x["rate"] for x in runs["nbdinfo"]}
def mm(v, f="%.1f"):
    return (f + " (" + f + "–" + f + ")") % (statistics.median(v), min(v), max(v))
desc = {"map-fast": "nbdzone map --watch=0 (as fast as it draws)",
        "nbdinfo": "nbdinfo --map=x-znbd:zone, run after run (anchor)",
        "map-10": "nbdzone map --watch=0.1 (0.1 s between redraws)"}
print("## Zone map redraw rate (bench/map.sh)\n")
print("znbd bio, %d zones of 1 MiB (4 conventional, every 331st zone partly "
      "written), %s s per run, median of %d interleaved rounds (min–max); "
      "CPU in %% of one core over the run (server: /proc/PID/stat; "
      "client: the children's times of the bench shell).\n" % (zones, secs, rounds))
print("| row | per second | ×anchor | server CPU % | client CPU % |")
print("|---|---|---|---|---|")
for row in ("map-fast", "nbdinfo", "map-10"):
    v = runs[row]
    ratio = [x["rate"] / anchor[x["r"]] for x in v if anchor.get(x["r"])]
    print("| %s | %s | %s | %s | %s |" % (desc[row], mm([x["rate"] for x in v]),
          "%.2f" % statistics.median(ratio) if ratio else "n/a",
          mm([x["srv"] for x in v]), mm([x["cli"] for x in v])))
fast = statistics.median(x["rate"] for x in runs["map-fast"])
srv10 = statistics.median(x["srv"] for x in runs["map-10"])
print()
print("| target | measured | result |")
print("|---|---|---|")
print("| map of %d zones: ≥ 10 redraws a second | %.1f | %s |" % (zones, fast, "met" if fast >= 10 else "NOT met"))
print("| server CPU with --watch=0.1 < 10 %% of a core | %.1f %% | %s |" % (srv10, "met" if srv10 < 10 else "NOT met"))
EOF
