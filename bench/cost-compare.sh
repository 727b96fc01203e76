#!/bin/bash
# Two builds of znbd against each other by what a request costs, not by how
# fast it went: wall-clock IOPS on a shared machine vary by tens of percent
# between identical runs, far more than the 5 % a refactoring may cost.
#
#   bench/cost-compare.sh BUILD_A BUILD_B
#
# zoned.so (nbdkit plugin; parts ram and zoned of bench/run.sh): the nbdkit
# process runs under valgrind's callgrind, which counts the instructions it
# executes (Ir), threads included, whatever else the machine is doing.  A
# fresh server per run, prefilled for reads; then the counters are zeroed
# (callgrind_control -z); fio's nbd engine, outside valgrind, sends a fixed
# number of requests (--number_ios); SIGTERM ends the server, callgrind
# writes its totals.  The same run with one request (handshake, shutdown)
# is subtracted, and the rest divided by the difference
# in requests fio counted: instructions per request.  nbdkit itself is the
# same binary for both builds, so a difference is the plugin and lib/.
#
# znbd (part submit, --queue-mode=bio and mq): under valgrind 3.19 znbd
# does not come up (io_uring: no pid file, the client hangs), so these rows
# are CPU time instead: utime+stime of the server (all threads, from
# /proc/PID/stat, clock ticks) over the fixed number of requests, A and B
# interleaved for ROUNDS rounds, median.  Noisier than the counts: the
# table says which rows are which.
#
# Environment:
#   COST_N=N          requests per callgrind run (default 2000)
#   COST_RUNS=N       callgrind runs per build and workload (default 2)
#   COST_CPU_N=N      requests per znbd CPU-time run (default 100000)
#   COST_ROUNDS=N     interleaved rounds of the znbd rows (default 5)
#   COST_PARTS="ram zoned submit"   parts to run
#   SLOWER=X          B/A above 1+X is "slower" (default 0.05)
set -u
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
export LC_ALL=C

[ $# -eq 2 ] || { echo "usage: $0 BUILD_A BUILD_B" >&2; exit 2; }
a=$(cd "$1" && pwd) || exit 1
b=$(cd "$2" && pwd) || exit 1
N=${COST_N:-2000}
RUNS=${COST_RUNS:-2}
CPU_N=${COST_CPU_N:-100000}
ROUNDS=${COST_ROUNDS:-5}
parts=${COST_PARTS:-ram zoned submit}
slower=${SLOWER:-0.05}

for t in valgrind callgrind_control fio nbdkit python3; do
  command -v $t >/dev/null || { echo "cost-compare: $t is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
for d in "$a" "$b"; do
  [ -f "$d/zoned.so" ] || { echo "cost-compare: $d/zoned.so not built" >&2; exit 1; }
  [ -x "$d/server/znbd" ] || { echo "cost-compare: $d/server/znbd not built" >&2; exit 1; }
done

work=$(mktemp -d /tmp/znbd-cost.XXXXXX)
raw=$work/raw.tsv
: >"$raw"
SRV_PID=
cleanup() {
  [ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
  [ "${COST_KEEP:-0}" = 1 ] && echo "cost-compare: raw data kept in $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

URI="nbd+unix:///?socket=$work/sock"

# start CMD...: the server; CMD must serve $work/sock and write the pid file
# $work/pid (which nbdkit and znbd do once they listen; under valgrind $!
# is valgrind's pid, which is the same process).
SRV_OPTS=(-f -U "$work/sock" -P "$work/pid")
start() {
  rm -f "$work/sock" "$work/pid"
  "$@" >"$work/log" 2>&1 &
  SRV_PID=$!
  local i
  for ((i = 0; i < 1500; i++)); do
    [ -s "$work/pid" ] && [ -S "$work/sock" ] && return 0
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.02
  done
  echo "cost-compare: server did not start: $(tail -3 "$work/log" | tr '\n' ' ')" >&2
  stop
  return 1
}

# stop: SIGTERM, and wait: callgrind writes its output file at exit.
stop() {
  [ -n "$SRV_PID" ] || return 0
  kill -TERM "$SRV_PID" 2>/dev/null
  local i
  for ((i = 0; i < 3000; i++)); do
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.02
  done
  kill -KILL "$SRV_PID" 2>/dev/null
  wait "$SRV_PID" 2>/dev/null
  SRV_PID=
}

ios() { # FIO_JSON: requests fio completed (reads + writes + trims)
  python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print(sum(j[d]["total_ios"] for d in ("read", "write", "trim")))' "$1"
}

ticks() { # utime+stime of the server process (all threads), clock ticks
  local s f
  s=$(cat "/proc/$SRV_PID/stat" 2>/dev/null) || { echo 0; return; }
  s=${s##*) }
  read -ra f <<<"$s"
  echo $((f[11] + f[12]))
}

prefill() { # SIZE: sequential 128 KiB writes, so reads find data
  fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=128k --iodepth=8 \
    --size="$1" --output=/dev/null >/dev/null 2>&1
}

measure() { # COUNT FIO_ARGS...: COUNT requests (fio's --number_ios); prints the count fio did
  local n=$1
  shift
  # shellcheck disable=SC2068
  fio --name=cost --ioengine=nbd --uri="$URI" --number_ios="$n" $@ \
    --output-format=json --output="$work/fio.json" >/dev/null 2>"$work/fio.err" || {
    echo "cost-compare: fio failed: $(head -c 200 "$work/fio.err")" >&2
    echo 0
    return
  }
  ios "$work/fio.json"
}

# callgrind_total SIDE BUILD PARAMS FILL COUNT FIO_ARGS: one nbdkit run
# under callgrind; prints "Ir requests".
callgrind_total() {
  local side=$1 build=$2 params=$3 fill=$4 count=$5 args=$6 n out
  out=$work/cg.out
  rm -f "$out"
  # shellcheck disable=SC2086
  start valgrind --tool=callgrind --callgrind-out-file="$out" \
    nbdkit "${SRV_OPTS[@]}" "$build/zoned.so" $params || { echo "0 0"; return; }
  [ "$fill" = none ] || prefill "$fill"
  # Count from here: start-up and the prefill cost a varying number of
  # instructions (threads waiting on each other), which would be noise
  # of hundreds of instructions per request on top of what is measured.
  callgrind_control -z "$SRV_PID" >/dev/null 2>&1 || echo "cost-compare: callgrind_control -z failed" >&2
  n=$(measure "$count" "$args")
  stop
  echo "$(awk '/^totals:/ { print $2 }' "$out") $n"
}

# Callgrind rows: PART WORKLOAD "PLUGIN PARAMS" FILL "FIO ARGS".  The
# workloads are bench/run.sh's (parts ram and zoned), with a fixed number
# of requests instead of a run time.
count_row() {
  local part=$1 wl=$2 params=$3 fill=$4 args=$5 r side build base full
  for ((r = 1; r <= RUNS; r++)); do
    for side in a b; do
      build=$a
      [ "$side" = b ] && build=$b
      base=$(callgrind_total "$side" "$build" "$params" "$fill" 1 "$args")
      full=$(callgrind_total "$side" "$build" "$params" "$fill" "$N" "$args")
      printf '%s\t%s\t%s\t%s\t%s\tIr\t%s %s\n' "$part" "zoned.so" "$wl" "$side" "$r" "$base" "$full" >>"$raw"
      printf '.' >&2
    done
  done
}

# CPU-time rows (znbd): PART "ZNBD OPTIONS" WORKLOAD "FIO ARGS", A B A B ...
cpu_row() {
  local part=$1 opts=$2 wl=$3 args=$4 r side build t0 t1 n mode
  mode=${opts%% *}
  mode=${mode#--queue-mode=}
  for ((r = 1; r <= ROUNDS; r++)); do
    for side in a b; do
      build=$a
      [ "$side" = b ] && build=$b
      # shellcheck disable=SC2086
      start "$build/server/znbd" "${SRV_OPTS[@]}" $opts || continue
      prefill 128M
      t0=$(ticks)
      # --io_size: fio stops at --size otherwise, before --number_ios
      # (the rows are 4 KiB requests; --loops would not stop at
      # --number_ios).
      n=$(measure "$CPU_N" "$args --io_size=$((CPU_N * 4))k")
      t1=$(ticks)
      stop
      printf '%s\t%s\t%s\t%s\t%s\tticks\t%s %s\n' "$part" "znbd $mode" "$wl" "$side" "$r" $((t1 - t0)) "$n" >>"$raw"
      printf '.' >&2
    done
  done
}

for part in $parts; do
  echo "cost-compare: part $part" >&2
  case $part in
  ram)
    ram="size=4G zoned=false"
    count_row ram randwrite-4k-qd1-fresh "$ram" none "--rw=randwrite --bs=4k --iodepth=1 --size=2G"
    count_row ram randwrite-4k-qd32-fresh "$ram" none "--rw=randwrite --bs=4k --iodepth=32 --size=2G"
    count_row ram write-128k-qd32-fresh "$ram" none "--rw=write --bs=128k --iodepth=32 --size=2G"
    count_row ram randread-4k-qd1 "$ram" 128M "--rw=randread --bs=4k --iodepth=1 --size=128M"
    count_row ram randread-4k-qd32 "$ram" 128M "--rw=randread --bs=4k --iodepth=32 --size=128M"
    count_row ram randwrite-4k-qd32-rewrite "$ram" 128M "--rw=randwrite --bs=4k --iodepth=32 --size=128M"
    ;;
  zoned)
    zoned="size=4G zoned=true zone_size=64M pipeline_zoned_writes=true"
    # Sequential writes from offset 0: always at a zone's write pointer.
    count_row zoned write-4k-qd32 "$zoned" none "--rw=write --bs=4k --iodepth=32 --size=3G"
    count_row zoned randread-4k-qd32 "$zoned" 128M "--rw=randread --bs=4k --iodepth=32 --size=128M"
    ;;
  submit)
    for q in "--queue-mode=bio" "--queue-mode=mq --scheduler none"; do
      cpu_row submit "$q size=4G zoned=false" randread-4k-qd32 "--rw=randread --bs=4k --iodepth=32 --size=128M"
      cpu_row submit "$q size=4G zoned=false" randwrite-4k-qd32 "--rw=randwrite --bs=4k --iodepth=32 --size=128M"
    done
    ;;
  *) echo "cost-compare: unknown part $part" >&2 ;;
  esac
done
echo >&2

python3 - "$raw" "$a" "$b" "$slower" "$(getconf CLK_TCK)" <<'EOF'
import statistics, sys
raw, a, b, slower, hz = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
rows, order = {}, []
for line in open(raw):
    part, srv, wl, side, r, unit, v = line.rstrip("\n").split("\t")
    key = (part, srv, wl, unit)
    if key not in rows:
        order.append(key)
        rows[key] = {"a": [], "b": []}
    f = [int(x) for x in v.split()]
    if len(f) < (4 if unit == "Ir" else 2):
        continue  # a run that failed half-way
    if unit == "Ir":  # base Ir, base requests, full Ir, full requests
        if f[3] > f[1] and f[0] and f[2]:
            rows[key][side].append((f[2] - f[0]) / (f[3] - f[1]))
    elif f[1]:       # ticks, requests -> µs per request
        rows[key][side].append(f[0] * 1e6 / hz / f[1])
print(f"A: {a}\nB: {b}\n")
print("| part | server | workload | measure | A per request | B per request | B/A | verdict |")
print("|---|---|---|---|---|---|---|---|")
for key in order:
    part, srv, wl, unit = key
    va, vb = rows[key]["a"], rows[key]["b"]
    if not va or not vb:
        print(f"| {part} | {srv} | {wl} | - | n/a | n/a | - | failed |")
        continue
    if unit == "Ir":
        meas = "instructions (callgrind)"
        fmt = lambda v: " / ".join(f"{x:.0f}" for x in v)
        ma, mb = statistics.mean(va), statistics.mean(vb)
    else:
        meas = f"CPU µs, median of {len(va)} (noisy)"
        ma, mb = statistics.median(va), statistics.median(vb)
        fmt = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
    ratio = mb / ma if ma else float("nan")
    verdict = "slower" if ratio > 1 + slower else "ok"
    # CPU time: a ratio past the bound while the two builds' ranges
    # overlap is not told apart from the noise.
    if verdict == "slower" and unit != "Ir" and min(vb) <= max(va):
        verdict = "slower? (ranges overlap)"
    print(f"| {part} | {srv} | {wl} | {meas} | {fmt(va)} | {fmt(vb)} | {ratio:.3f} | {verdict} |")
EOF
