#!/bin/bash
# znbd benchmark driver (`make bench`).  See bench/README.md.
#
# Starts every server itself (a fresh one for every measured fio run, on a
# Unix socket in a mktemp -d directory), runs fio's nbd engine with JSON
# output, interleaves the servers of a table (A, B, C, A, B, C, ...) for
# ROUNDS rounds, and hands the raw runs to report.py, which prints medians
# with min-max and ratios to the anchor measured in the same run, and
# writes bench/results/<date>-<host>.md plus PNG plots (gnuplot).
#
# Environment:
#   BUILD=DIR        build tree (default: <top>/build)
#   BENCH_QUICK=1    1-2 s runs, 1 round, small ranges; results go to
#                    bench/results/tmp/ (not committed)
#   BENCH_PARTS="ram zoned order submit peers scale engine persist faults map tls"
#                    parts to run, in order (persist: bench/persist.sh,
#                    faults: bench/faults.sh; each its own table)
#   BENCH_TIME_LIMIT=S  skip what is left after S seconds (default 1680)
#   BENCH_ROUNDS=N   override the number of rounds
#   BENCH_OUT=DIR    override the results directory
#   BENCH_IDLE_WAIT=S  part zoned: wait up to S s (default 10, quick 0)
#                    before each measured run for the CPUs to be idle
set -u
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH # Debian's python3 (json only)
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=${BUILD:-$top/build}
quick=${BENCH_QUICK:-0}
parts=${BENCH_PARTS:-ram zoned order submit peers scale engine persist faults map tls}

if [ "$quick" = 1 ]; then
  rounds=${BENCH_ROUNDS:-1}
  R=1            # seconds per measured run (headline rows)
  RM=1           # seconds per run in the bio/mq matrix and scale rows
  RO=2           # zone write ordering runs (the slow config needs time)
  RZ=1           # part zoned's sequential writes (the zoned=false floor)
  FRESHZ=1G      # at most what those write
  IDLE_WAIT=${BENCH_IDLE_WAIT:-0}
  FILL=64M       # prefilled range for reads and rewrites
  FRESH=1G       # range written once by "fresh" write runs
  outdir=${BENCH_OUT:-$top/bench/results/tmp}
else
  # Sized so that the whole default run takes about 15 minutes.
  rounds=${BENCH_ROUNDS:-3}
  R=2
  RM=1
  RO=3
  RZ=5
  FRESHZ=3G
  IDLE_WAIT=${BENCH_IDLE_WAIT:-10}
  FILL=128M
  FRESH=2G
  outdir=${BENCH_OUT:-$top/bench/results}
fi

command -v fio >/dev/null || { echo "bench: fio is missing (scripts/install-deps.sh)" >&2; exit 1; }
command -v nbdkit >/dev/null || { echo "bench: nbdkit is missing (scripts/install-deps.sh)" >&2; exit 1; }

# Front-ends built by this tree (they may not exist yet: rows then say
# "n/a (not built)").
zoned_so=
for f in "$build/zoned.so" "$build/plugin/.libs/zoned.so" "$build/plugin/zoned.so"; do
  [ -f "$f" ] && { zoned_so=$f; break; }
done
znbd=
for f in "$build/server/znbd" "$build/znbd"; do
  [ -x "$f" ] && { znbd=$f; break; }
done

# The fio engine with zone hooks (client/znbd-fio.c; built when configure
# found fio's source).
engine_so=
[ -f "$build/znbd-fio.so" ] && engine_so=$(cd "$build" && pwd)/znbd-fio.so
# nbdzone draws the zone state a zoned run leaves (MAP_OUT below).
nbdzone=
[ -x "$build/client/nbdzone" ] && nbdzone=$build/client/nbdzone

work=$(mktemp -d /tmp/znbd-bench.XXXXXX)
raw=$work/raw.tsv
: >"$raw"
SRV_PID= SRV_DIR=
cleanup() {
  [ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
  [ "${BENCH_KEEP:-0}" = 1 ] && echo "bench: raw data kept in $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- servers
# A server spec is "KIND ARGS...": KIND is nbdkit (ARGS are plugin and
# parameters; @ZONED@ is the zoned.so path) or znbd (options, key=value).
declare -A SRV
SRV[null]="nbdkit null size=4G"
SRV[memory]="nbdkit memory size=4G"
SRV[zoned.so-ram]="nbdkit @ZONED@ size=4G zoned=false"
SRV[zoned.so-zoned]="nbdkit @ZONED@ size=4G zoned=true zone_size=64M pipeline_zoned_writes=true"
SRV[zoned.so-po2]="nbdkit @ZONED@ size=4G zoned=true zone_size=64M pipeline_zoned_writes=true"
SRV[zoned.so-npo2]="nbdkit @ZONED@ size=4G zoned=true zone_size=96M pipeline_zoned_writes=true"
SRV[znbd-bio]="znbd --queue-mode=bio size=4G zoned=false"
SRV[znbd-mq]="znbd --queue-mode=mq --scheduler none size=4G zoned=false"
SRV[znbd-bio-zoned]="znbd --queue-mode=bio size=4G zoned=true zone_size=64M"
# A server that stores nothing: the floor of znbd's write path.
SRV[znbd-bio-nomem]="znbd --queue-mode=bio size=4G zoned=false memory_backed=false"
# Zone write ordering: null_blk's published setup, over one connection.
ord="zoned=true size=4G zone_size=1M completion_nsec=100000 hw_queue_depth=64 submit_queues=1"
SRV[null-ord]="nbdkit null size=4G"
SRV[mq-none]="znbd --queue-mode=mq --scheduler none $ord pipeline_zoned_writes=false"
SRV[mq-deadline]="znbd --queue-mode=mq --scheduler mq-deadline $ord pipeline_zoned_writes=false"
SRV[mq-deadline-nzwl]="znbd --queue-mode=mq --scheduler mq-deadline $ord no_zone_write_lock=true pipeline_zoned_writes=false"
SRV[mq-deadline-pipe]="znbd --queue-mode=mq --scheduler mq-deadline $ord pipeline_zoned_writes=true"
# In the kernel patch series that added pipeline_zoned_writes, mq-deadline
# stops zone write locking on a queue that pipelines zoned writes; znbd's
# mq-deadline keeps locking unless told, so this row spells it out.
SRV[mq-deadline-pipe-nzwl]="znbd --queue-mode=mq --scheduler mq-deadline $ord pipeline_zoned_writes=true no_zone_write_lock=true"
SRV[zoned.so-pipe]="nbdkit @ZONED@ zoned=true size=4G zone_size=1M completion_nsec=100000 pipeline_zoned_writes=true"
# Zone write plugging (Linux 6.10+) with either scheduler.
SRV[mq-plug-none]="znbd --queue-mode=mq --scheduler none $ord zone_write_plugging=true"
SRV[mq-plug-deadline]="znbd --queue-mode=mq --scheduler mq-deadline $ord zone_write_plugging=true"
# The 1 MiB rows: 64 MiB zones, so that one zone takes 64 writes (with
# 1 MiB zones every write would be a zone of its own).
ord64="zoned=true size=4G zone_size=64M completion_nsec=100000 hw_queue_depth=64 submit_queues=1"
SRV[mq-none-64m]="znbd --queue-mode=mq --scheduler none $ord64 pipeline_zoned_writes=false"
SRV[mq-deadline-64m]="znbd --queue-mode=mq --scheduler mq-deadline $ord64 pipeline_zoned_writes=false"
SRV[mq-plug-none-64m]="znbd --queue-mode=mq --scheduler none $ord64 zone_write_plugging=true"
SRV[mq-plug-deadline-64m]="znbd --queue-mode=mq --scheduler mq-deadline $ord64 zone_write_plugging=true"
# Scale: 1 TiB, 64 MiB zones.
big="size=1T zoned=true zone_size=64M"
SRV[null-1T]="nbdkit null size=1T"
SRV[memory-1T]="nbdkit memory size=1T"
SRV[zoned.so-1T]="nbdkit @ZONED@ $big pipeline_zoned_writes=true"
SRV[znbd-bio-1T]="znbd --queue-mode=bio $big"
SRV[znbd-mq-1T]="znbd --queue-mode=mq --scheduler none $big pipeline_zoned_writes=true"
# fio engines on one zoned znbd: rows named engine-* run fio with
# znbd-fio.so, nbd-* with fio's own nbd engine (fio_run, ENGINE).
zbd="znbd --queue-mode=bio size=4G zoned=true zone_size=64M"
SRV[nbd-strided]=$zbd
SRV[nbd-zbd]=$zbd
SRV[engine-zbd]=$zbd
SRV[engine-strided]=$zbd

srv_available() { # NAME: 0 if its binary is built
  case $1 in engine-*) [ -n "$engine_so" ] || return 1 ;; esac
  case ${SRV[$1]} in
    *@ZONED@*) [ -n "$zoned_so" ] ;;
    znbd*) [ -n "$znbd" ] ;;
    *) return 0 ;;
  esac
}

start_server() { # NAME: sets SRV_PID, SRV_DIR, URI; 1 if it did not come up
  local w i
  read -ra w <<<"${SRV[$1]//@ZONED@/$zoned_so}"
  SRV_DIR=$(mktemp -d "$work/srv.XXXXXX")
  local sock=$SRV_DIR/sock pidf=$SRV_DIR/pid
  case ${w[0]} in
    nbdkit) nbdkit -f -U "$sock" -P "$pidf" "${w[@]:1}" >"$SRV_DIR/log" 2>&1 & ;;
    znbd) "$znbd" -f -U "$sock" -P "$pidf" "${w[@]:1}" >"$SRV_DIR/log" 2>&1 & ;;
  esac
  SRV_PID=$!
  URI="nbd+unix:///?socket=$sock"
  for ((i = 0; i < 2000; i++)); do
    [ -s "$pidf" ] && [ -S "$sock" ] && return 0
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.005
  done
  echo "bench: server $1 did not start: $(tail -3 "$SRV_DIR/log" | tr '\n' ' ')" >&2
  stop_server
  return 1
}

stop_server() {
  local i
  [ -n "$SRV_PID" ] || return 0
  kill -TERM "$SRV_PID" 2>/dev/null
  for ((i = 0; i < 500; i++)); do
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.01
  done
  kill -KILL "$SRV_PID" 2>/dev/null
  wait "$SRV_PID" 2>/dev/null
  rm -rf "$SRV_DIR"
  SRV_PID= SRV_DIR=
}

ticks() { # utime+stime of the server process (all threads), clock ticks
  local s
  s=$(cat "/proc/$SRV_PID/stat" 2>/dev/null) || { echo 0; return; }
  s=${s##*) }
  read -ra f <<<"$s"
  # After "pid (comm) " the fields start at 3 (state): 14 and 15 are
  # f[11] and f[12].
  echo $((f[11] + f[12]))
}

status_kib() { # FIELD (VmRSS, VmHWM): of the server, KiB
  awk -v k="$1:" '$1 == k { print $2 }' "/proc/$SRV_PID/status" 2>/dev/null || echo 0
}

ENGINE=nbd # fio's --ioengine for fio_run
fio_run() { # OUTFILE TIMEOUT ARGS...: one fio run against $URI
  local out=$1 t=$2
  shift 2
  timeout "$t" fio --name=bench --ioengine="$ENGINE" --uri="$URI" --group_reporting \
    --output-format=json --output="$out" "$@" >"$out.stdout" 2>"$out.stderr"
}

prefill() { # SIZE: sequential 128 KiB writes over [0, SIZE), not measured
  fio_run "$SRV_DIR/fill.json" 120 --rw=write --bs=128k --iodepth=8 --size="$1"
}

record() { # PART ROW WORKLOAD ROUND STATUS JSON TICKS HWM RSS EXTRA
  local IFS=$'\t'
  echo "$*" >>"$raw"
}

over_time() { # 0 once the run is past $BENCH_TIME_LIMIT seconds
  [ $(($(date +%s) - t_start)) -ge "$time_limit" ]
}

# idle_gate: with IDLE_GATE=1, wait at most $IDLE_WAIT s until the CPUs
# were at least 80 % idle over half a second (/proc/stat), so that a run
# starts while other work on the machine pauses; counts the runs that
# started without (gate_late) out of those gated (gate_runs).
IDLE_GATE=0 gate_runs=0 gate_late=0
cpu_idle_pct() { # idle share of all CPUs over 0.5 s, percent
  local a b
  read -ra a < <(grep '^cpu ' /proc/stat)
  sleep 0.5
  read -ra b < <(grep '^cpu ' /proc/stat)
  local i tot=0 idle=$(((b[4] + b[5]) - (a[4] + a[5])))
  for ((i = 1; i < ${#a[@]}; i++)); do tot=$((tot + b[i] - a[i])); done
  echo $((tot > 0 ? 100 * idle / tot : 100))
}
idle_gate() {
  [ "$IDLE_GATE" = 1 ] && [ "$IDLE_WAIT" -gt 0 ] || return 0
  local t0
  t0=$(date +%s)
  gate_runs=$((gate_runs + 1))
  while [ "$(cpu_idle_pct)" -lt 80 ]; do
    if [ $(($(date +%s) - t0)) -ge "$IDLE_WAIT" ]; then
      gate_late=$((gate_late + 1))
      return 0
    fi
  done
}

# session PART ROW ROUND PREP WORKLOAD...: start ROW's server once, PREP
# ("none" or "fill": prefill [0, $FILL)), then one measured fio run per
# WORKLOAD ("name|fio args"), each with its own CPU/RSS snapshot, then stop.
# Used with one workload (a fresh server per run) for anything that writes
# fresh pages, and with several workloads only for reads and rewrites of the
# same prefilled range, whose state the runs do not change.
session() {
  local part=$1 row=$2 round=$3 prep=$4 w name args t0 t1 out
  shift 4
  if over_time; then
    for w in "$@"; do record "$part" "$row" "${w%%|*}" "$round" skip - 0 0 0 "time limit"; done
    return
  fi
  if ! srv_available "$row"; then
    for w in "$@"; do record "$part" "$row" "${w%%|*}" "$round" na - 0 0 0 -; done
    return
  fi
  if ! start_server "$row"; then
    for w in "$@"; do record "$part" "$row" "${w%%|*}" "$round" fail - 0 0 0 "server did not start"; done
    return
  fi
  if [ "$prep" = fill ] && ! prefill "$FILL"; then
    for w in "$@"; do record "$part" "$row" "${w%%|*}" "$round" fail - 0 0 0 "prefill failed"; done
    stop_server
    return
  fi
  for w in "$@"; do
    IFS='|' read -r name args <<<"$w"
    out=$work/$part.$row.$name.$round.json
    if ! kill -0 "$SRV_PID" 2>/dev/null; then
      record "$part" "$row" "$name" "$round" fail - 0 0 0 "server died"
      continue
    fi
    idle_gate
    t0=$(ticks)
    # shellcheck disable=SC2086
    if fio_run "$out" 300 $args; then
      t1=$(ticks)
      record "$part" "$row" "$name" "$round" ok "$out" $((t1 - t0)) "$(status_kib VmHWM)" "$(status_kib VmRSS)" -
    else
      record "$part" "$row" "$name" "$round" fail "$out" 0 0 0 "fio: $(grep -h -m1 -i err "$out.stderr" "$out" 2>/dev/null | head -1 | head -c 160 | tr '\t\n' '  ')"
    fi
    printf '.' >&2
  done
  # MAP_OUT=PREFIX: the zone map of what the runs left, as text
  # (PREFIX.txt) and as a picture (PREFIX.svg), before the server goes.
  if [ -n "${MAP_OUT:-}" ] && [ -n "$nbdzone" ] && kill -0 "$SRV_PID" 2>/dev/null; then
    { NO_COLOR=1 "$nbdzone" map "$URI" >"$MAP_OUT.txt" 2>&1 &&
      "$nbdzone" map --svg "$MAP_OUT.svg" "$URI" 2>>"$MAP_OUT.txt"; } ||
      echo "bench: nbdzone map failed: $(head -c 200 "$MAP_OUT.txt")" >&2
  fi
  stop_server
}

# fresh PART ROUND "ROWS" PREP WORKLOAD...: one round; for every workload,
# every row in turn on a fresh server.
fresh() {
  local part=$1 round=$2 rows=$3 prep=$4 w row
  shift 4
  for w in "$@"; do
    for row in $rows; do session "$part" "$row" "$round" "$prep" "$w"; done
  done
}

# shared PART ROUND "ROWS" PREP WORKLOAD...: one round; every row in turn,
# one prefilled server per row for all the workloads (reads/rewrites only).
shared() {
  local part=$1 round=$2 rows=$3 prep=$4 row
  shift 4
  for row in $rows; do session "$part" "$row" "$round" "$prep" "$@"; done
}

# ------------------------------------------------------------------ parts
part_ram() { # RAM disks against the anchors
  local rows="null memory zoned.so-ram" r
  echo "bench: part ram ($rounds rounds: $rows)" >&2
  # The kernel's price of a page's first write (bench/page-floor.c), for
  # the bound report.py puts under the fresh-write rows.
  if [ -x "$build/bench/page-floor" ]; then
    "$build/bench/page-floor" 3 | tail -1 | tr ' ' '\n' >>"$work/meta"
  else
    echo "bench: $build/bench/page-floor not built (make -C bench page-floor): no fresh-page bound" >&2
  fi
  for ((r = 1; r <= rounds; r++)); do
    fresh ram $r "$rows" none \
      "randwrite-4k-qd1-fresh|--rw=randwrite --bs=4k --iodepth=1 --size=$FRESH --runtime=$R" \
      "randwrite-4k-qd32-fresh|--rw=randwrite --bs=4k --iodepth=32 --size=$FRESH --runtime=$R" \
      "write-128k-qd32-fresh|--rw=write --bs=128k --iodepth=32 --size=$FRESH --runtime=$R"
    shared ram $r "$rows" fill \
      "randread-4k-qd1|--rw=randread --bs=4k --iodepth=1 --size=$FILL --time_based --runtime=$R" \
      "randread-4k-qd32|--rw=randread --bs=4k --iodepth=32 --size=$FILL --time_based --runtime=$R" \
      "read-128k-qd32|--rw=read --bs=128k --iodepth=32 --size=$FILL --time_based --runtime=$R" \
      "randwrite-4k-qd1-rewrite|--rw=randwrite --bs=4k --iodepth=1 --size=$FILL --time_based --runtime=$R" \
      "randwrite-4k-qd32-rewrite|--rw=randwrite --bs=4k --iodepth=32 --size=$FILL --time_based --runtime=$R" \
      "write-128k-qd32-rewrite|--rw=write --bs=128k --iodepth=32 --size=$FILL --time_based --runtime=$R"
  done
  echo >&2
  rss_rows ram "memory zoned.so-ram znbd-bio" 1G
}

# rss_rows PART "ROWS" SIZE: RSS empty, after writing SIZE from offset 0
# (sequential 128 KiB writes) and after trimming it again (whole 64 MiB
# requests: on a zoned export that resets the zones).
rss_rows() {
  local part=$1 rows=$2 size=$3 r row e w h t st t0 t1 i
  echo "bench: part $part RSS ($rounds rounds, rows: $rows)" >&2
  for ((r = 1; r <= rounds; r++)); do
    for row in $rows; do
      if over_time; then
        record "$part" "$row" "rss-$size" "$r" skip - 0 0 0 "time limit"
        continue
      fi
      if ! srv_available "$row"; then
        record "$part" "$row" "rss-$size" "$r" na - 0 0 0 -
        continue
      fi
      t0=$(date +%s%N)
      if ! start_server "$row"; then
        record "$part" "$row" "rss-$size" "$r" fail - 0 0 0 "server did not start"
        continue
      fi
      # Start-up: until the socket accepts a full NBD handshake.
      for ((i = 0; i < 1000; i++)); do
        nbdinfo --size "$URI" >/dev/null 2>&1 && break
        sleep 0.01
      done
      t1=$(date +%s%N)
      e=$(status_kib VmRSS)
      st=ok
      fio_run "$SRV_DIR/w.json" 300 --rw=write --bs=128k --iodepth=8 --size="$size" || st=fail
      w=$(status_kib VmRSS) h=$(status_kib VmHWM)
      fio_run "$SRV_DIR/t.json" 300 --rw=trim --bs=64m --iodepth=1 --size="$size" || st=fail
      t=$(status_kib VmRSS)
      record "$part" "$row" "rss-$size" "$r" "$st" - 0 "$h" "$t" \
        "startup_ms=$(((t1 - t0) / 1000000));empty_kib=$e;written_kib=$w;hwm_kib=$h;trimmed_kib=$t"
      stop_server
      printf '.' >&2
    done
  done
  echo >&2
}

# serpentine ROUND WORD...: the words in order in odd rounds, reversed in
# even ones, so that no row is always measured at the same point of a
# round (after the same neighbour, or as the load of a round grows).
serpentine() {
  local r=$1 w out=
  shift
  if ((r % 2)); then
    echo "$*"
  else
    for w; do out="$w${out:+ $out}"; done
    echo "$out"
  fi
}

part_zoned() { # zoned.so zoned mode, po2 vs npo2
  local rows="null zoned.so-po2 zoned.so-npo2" r
  # The sequential writes: zoned.so zoned=false (the same fresh pages
  # without zones, the floor the zoned rows can reach) right after po2,
  # the row the target compares with it.
  local wrows="null zoned.so-po2 zoned.so-ram zoned.so-npo2"
  echo "bench: part zoned ($rounds rounds: $wrows)" >&2
  # Not recorded: one short run first, so the first measured run does not
  # pay for fio, nbdkit and the plugin coming into the page cache.
  if ! over_time && srv_available zoned.so-ram && start_server zoned.so-ram; then
    fio_run "$SRV_DIR/warmup.json" 60 --rw=write --bs=4k --iodepth=32 --size=256M --runtime=1
    stop_server
  fi
  IDLE_GATE=1
  for ((r = 1; r <= rounds; r++)); do
    # $RZ s per run (not $R): this target is judged on the spread of the
    # rounds, and a longer run averages over the swings of other work on
    # the machine (bench/README.md, zoned writes).
    fresh zoned $r "$(serpentine $r $wrows)" none \
      "write-4k-qd32|--rw=write --bs=4k --iodepth=32 --size=$FRESHZ --runtime=$RZ"
    fresh zoned $r "$(serpentine $r $rows)" fill \
      "randread-4k-qd32|--rw=randread --bs=4k --iodepth=32 --size=$FILL --time_based --runtime=$R"
  done
  IDLE_GATE=0
  if [ "$IDLE_WAIT" -gt 0 ]; then
    echo "idle_gate_zoned=$gate_runs runs waited up to ${IDLE_WAIT} s for 80 % idle CPUs, $gate_late started without"
  else
    echo "idle_gate_zoned=off (BENCH_IDLE_WAIT=0)"
  fi >>"$work/meta"
  echo >&2
}

part_submit() { # bio vs mq on a prefilled RAM disk
  local qd32=() other=() rw bs qd t r
  for qd in 1 32 128; do
    for rw in read randread write randwrite; do
      t=$RM
      # The issue-5 target rows (4 KiB rand* at iodepth 32) run longer.
      [ "$qd" = 32 ] && [ "${rw#rand}" != "$rw" ] && t=$R
      if [ "$qd" = 32 ]; then
        qd32+=("$rw-4k-qd$qd|--rw=$rw --bs=4k --iodepth=$qd --size=$FILL --time_based --runtime=$t")
      else
        other+=("$rw-4k-qd$qd|--rw=$rw --bs=4k --iodepth=$qd --size=$FILL --time_based --runtime=$t")
      fi
    done
  done
  for qd in 1 32 128; do
    for rw in read randread write randwrite; do
      other+=("$rw-128k-qd$qd|--rw=$rw --bs=128k --iodepth=$qd --size=$FILL --time_based --runtime=$RM")
    done
  done
  # nbdkit null (the anchor of the submit part's targets) on the 4 KiB iodepth-32
  # rows only: the whole matrix against it would not fit the time budget.
  # znbd bio with memory_backed=false on the 4 KiB iodepth-32 writes: the
  # CPU a request costs when nothing is stored (reads would be holes).
  local wfloor=()
  for rw in write randwrite; do
    wfloor+=("$rw-4k-qd32|--rw=$rw --bs=4k --iodepth=32 --size=$FILL --time_based --runtime=$R")
  done
  echo "bench: part submit ($rounds rounds: znbd-bio znbd-mq, + null at 4k qd32)" >&2
  for ((r = 1; r <= rounds; r++)); do
    shared submit $r "null znbd-bio znbd-mq" fill "${qd32[@]}"
    shared submit $r "znbd-bio-nomem" none "${wfloor[@]}"
    shared submit $r "znbd-bio znbd-mq" fill "${other[@]}"
  done
  echo >&2
}

part_order() { # zone write ordering (one pass over 1 MiB zones)
  local rows="null-ord mq-none mq-deadline mq-deadline-nzwl mq-deadline-pipe mq-deadline-pipe-nzwl mq-plug-none mq-plug-deadline zoned.so-pipe" r
  # The zone write plugging shapes (published null_blk figures of the
  # plugging series): none, zone write locking, plugging with none and
  # with mq-deadline.  "-1zone" = sequential, so one zone at a time has
  # writes in flight; "-16zones" = 16 connections at iodepth 1, each
  # sequential in a 256 MiB range of its own: 16 open zones written at
  # once in no particular order (fio's nbd engine cannot report zones, so
  # fio's zonemode=zbd random writes at the write pointers are out).
  local prows="mq-none mq-deadline mq-plug-none mq-plug-deadline"
  local prows64="mq-none-64m mq-deadline-64m mq-plug-none-64m mq-plug-deadline-64m"
  echo "bench: part order ($rounds rounds: $rows; plugging shapes: $prows; 1 MiB: $prows64)" >&2
  for ((r = 1; r <= rounds; r++)); do
    fresh order $r "$rows" none \
      "write-4k-qd64-batch16|--rw=write --bs=4k --iodepth=64 --iodepth_batch=16 --zonemode=strided --zonesize=1M --zonerange=1M --size=4G --runtime=$RO"
    fresh order $r "$prows" none \
      "write-4k-qd1-1zone|--rw=write --bs=4k --iodepth=1 --size=4G --runtime=$RO" \
      "write-4k-qd16-1zone|--rw=write --bs=4k --iodepth=16 --size=4G --runtime=$RO" \
      "write-4k-qd1x16-16zones|--rw=write --bs=4k --iodepth=1 --numjobs=16 --offset_increment=256M --size=256M --runtime=$RO"
    fresh order $r "$prows64" none \
      "write-1m-qd16-64mzones|--rw=write --bs=1m --iodepth=16 --size=4G --runtime=$RO"
  done
  echo >&2
}

part_peers() { # every front-end: randread and sequential write at iodepth 32
  local rows="null memory zoned.so-ram zoned.so-zoned znbd-bio znbd-mq znbd-bio-zoned" r
  echo "bench: part peers ($rounds rounds: $rows)" >&2
  for ((r = 1; r <= rounds; r++)); do
    fresh peers $r "$rows" fill \
      "randread-4k-qd32|--rw=randread --bs=4k --iodepth=32 --size=$FILL --time_based --runtime=$R"
    fresh peers $r "$rows" none \
      "write-4k-qd32|--rw=write --bs=4k --iodepth=32 --size=$FRESH --runtime=$R"
  done
  echo >&2
}

part_scale() { # 1 TiB, 64 MiB zones
  local rows="null-1T zoned.so-1T znbd-bio-1T" ws=() n r
  rss_rows scale "memory-1T zoned.so-1T znbd-bio-1T" 1G
  for n in 1 2 4; do
    ws+=("randread-4k-qd32-conn$n|--rw=randread --bs=4k --iodepth=32 --numjobs=$n --size=$FILL --time_based --runtime=$RM")
  done
  echo "bench: part scale connections ($rounds rounds: $rows)" >&2
  for ((r = 1; r <= rounds; r++)); do
    shared scale $r "$rows" fill "${ws[@]}"
  done
  echo >&2
}

part_engine() { # fio --zonemode=zbd through znbd-fio.so vs fio's nbd engine
  local r row zm
  echo "bench: part engine ($rounds rounds: nbd-strided engine-zbd nbd-zbd engine-strided)" >&2
  for ((r = 1; r <= rounds; r++)); do
    for row in nbd-strided engine-zbd nbd-zbd engine-strided; do
      case $row in
        *-strided) zm="--zonemode=strided --zonesize=64M --zonerange=64M" ;;
        nbd-zbd) zm="--zonemode=zbd --zonesize=64M" ;; # fio emulates the zones
        *) zm="--zonemode=zbd" ;; # the zones come from the engine
      esac
      ENGINE=nbd
      [ "${row#engine-}" != "$row" ] && ENGINE=external:$engine_so
      session engine "$row" $r none \
        "write-4k-qd32|--rw=write --bs=4k --iodepth=32 $zm --size=$FRESH --runtime=$R"
      # The last round's zbd run through the engine: its zone map goes
      # into the report.
      MAP_OUT=
      [ "$r" = "$rounds" ] && [ "$row" = engine-zbd ] && MAP_OUT=$work/zones-engine-zbd
      session engine "$row" $r none \
        "write-128k-qd32|--rw=write --bs=128k --iodepth=32 $zm --size=$FRESH --runtime=$R"
      MAP_OUT= ENGINE=nbd
    done
  done
  echo >&2
}

# ------------------------------------------------------------------- main
t_start=$(date +%s)
# Parts still to run once this many seconds have passed are skipped (their
# rows say so); the report is written from what was measured.
time_limit=${BENCH_TIME_LIMIT:-1680}
host=$(hostname -s)
stamp=$(date -u +%Y-%m-%d)
commit=$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host=$host"
  echo "kernel=$(uname -r)"
  echo "commit=$commit"
  echo "cpus=$(nproc)"
  echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "fio=$(fio --version)"
  echo "nbdkit=$(nbdkit --version | head -1)"
  echo "clk_tck=$(getconf CLK_TCK)"
  echo "profile=$([ "$quick" = 1 ] && echo quick || echo default)"
  echo "rounds=$rounds"
  echo "runtime_s=$R (bio/mq matrix and connections: $RM, zone ordering: $RO, part zoned writes: $RZ)"
  echo "fill=$FILL fresh=$FRESH"
  # Paths relative to the build tree: a report names no machine's paths.
  rel() { if [ -n "$1" ]; then echo "BUILD/${1#"$build/"}"; else echo "not built"; fi; }
  echo "zoned_so=$(rel "$zoned_so")"
  echo "znbd=$(rel "$znbd")"
  echo "parts=$parts"
} >"$work/meta"
for p in $parts; do
  case $p in
    ram | zoned | submit | order | peers | scale | engine)
      tp=$(date +%s)
      la=$(cut -d' ' -f1 /proc/loadavg)
      "part_$p"
      echo "elapsed_$p=$(($(date +%s) - tp))" >>"$work/meta"
      echo "load_$p=$la→$(cut -d' ' -f1 /proc/loadavg)" >>"$work/meta"
      ;;
    persist | faults | map | tls) # scripts of their own, each printing
      # its own table (persist: dir= against plain files; faults: mbps and
      # zone_*_nsec; map: nbdzone map's redraw rate on 100,000 zones; tls:
      # TLS against plain and against nbdkit)
      if over_time; then
        echo "bench: part $p skipped (time limit)" >&2
      else
        BENCH_ROUNDS=$rounds BENCH_QUICK=$quick BUILD=$build \
          "$here/$p.sh" >"$work/$p.md" || : >"$work/$p.md"
      fi
      ;;
    *) echo "bench: unknown part $p" >&2; exit 2 ;;
  esac
done
{
  echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "elapsed_s=$(($(date +%s) - t_start))"
  echo "srv_spec_prefix=" # marker: server specs follow
} >>"$work/meta"
for k in "${!SRV[@]}"; do echo "srv.$k=${SRV[$k]//@ZONED@/zoned.so}"; done | sort >>"$work/meta"

mkdir -p "$outdir"
/usr/bin/python3 "$here/report.py" "$work" "$outdir/$stamp-$host"
for p in persist faults map tls; do
  if [ -s "$work/$p.md" ]; then
    { echo; cat "$work/$p.md"; } | tee -a "$outdir/$stamp-$host.md"
  fi
done
if [ -s "$work/zones-engine-zbd.txt" ]; then
  svg=$stamp-$host-zones-engine-zbd.svg
  [ -s "$work/zones-engine-zbd.svg" ] && cp "$work/zones-engine-zbd.svg" "$outdir/$svg"
  {
    echo
    echo "## Zone state after part engine's last zbd run"
    echo
    echo "\`nbdzone map\` of the znbd device (engine-zbd row, write-128k-qd32, last"
    echo "round) just before the server stopped; the same map as a picture: ![zones]($svg)"
    echo
    sed 's/^/    /' "$work/zones-engine-zbd.txt"
  } | tee -a "$outdir/$stamp-$host.md"
fi
