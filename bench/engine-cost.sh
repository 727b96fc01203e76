#!/bin/bash
# What one request costs the fio client, per engine and zone mode: the
# steady counterpart of bench/run.sh's part engine (whose IOPS swing with
# the machine's load).  See bench/README.md, "fio engine cost".
#
#   BUILD=build bench/engine-cost.sh
#
# For each row of part engine (fio nbd engine / znbd-fio.so, each with
# --zonemode=strided and --zonemode=zbd) on a fresh zoned znbd (bio, 64 MiB
# zones): fio sequential 4 KiB writes at iodepth 32, run under valgrind
# --tool=callgrind at two sizes; the difference of the fio job process's
# instruction counts divided by the difference of requests is the
# user-space instructions per request, without start-up and zone report
# costs.  Then one run under strace -c -f at the larger size: system calls
# per request of the hot path (sendto, recvfrom, poll, ioctl).  Neither
# figure depends on timing; both count the client only (the server is the
# same for every row).
set -u
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${BUILD:-$here/../build}" && pwd)
small=${ENGINE_COST_SMALL:-64M} large=${ENGINE_COST_LARGE:-128M}
for t in valgrind strace fio; do
  command -v $t >/dev/null || { echo "engine-cost: $t is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$build/server/znbd" ] || { echo "engine-cost: $build/server/znbd not built" >&2; exit 1; }
[ -f "$build/znbd-fio.so" ] || { echo "engine-cost: $build/znbd-fio.so not built" >&2; exit 1; }
work=$(mktemp -d /tmp/znbd-engine-cost.XXXXXX)
SRV_PID=
trap '[ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null; rm -rf "$work"' EXIT

# run ROW SIZE MODE: one fio run of ROW on a fresh server in a new
# directory $d, under callgrind (MODE cg: $d/cg.PID) or strace -c
# (MODE strace: $d/strace); fio's JSON in $d/out.json.
run() {
  local row=$1 size=$2 mode=$3 eng zm i tool
  d=$(mktemp -d "$work/run.XXXXXX")
  "$build/server/znbd" -f -U "$d/sock" -P "$d/pid" --queue-mode=bio size=4G \
    zoned=true zone_size=64M >"$d/srv.log" 2>&1 &
  SRV_PID=$!
  for ((i = 0; i < 500; i++)); do
    [ -S "$d/sock" ] && [ -s "$d/pid" ] && break
    sleep 0.01
  done
  case $row in
    nbd-*) eng=nbd ;;
    *) eng=external:$build/znbd-fio.so ;;
  esac
  case $row in
    *-strided) zm="--zonemode=strided --zonesize=64M --zonerange=64M" ;;
    nbd-zbd) zm="--zonemode=zbd --zonesize=64M" ;;
    *) zm="--zonemode=zbd" ;;
  esac
  case $mode in
    cg) tool="valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=$d/cg.%p" ;;
    strace) tool="strace -f -c -o $d/strace" ;;
  esac
  # shellcheck disable=SC2086
  $tool fio --name=cost --ioengine="$eng" --uri="nbd+unix:///?socket=$d/sock" \
    --rw=write --bs=4k --iodepth=32 $zm --size="$size" \
    --output-format=json --output="$d/out.json" >"$d/fio.log" 2>&1
  kill -TERM "$SRV_PID" 2>/dev/null
  wait "$SRV_PID" 2>/dev/null
  SRV_PID=
}

# Instructions of the busiest process of the run in $d (fio's job).
job_ir() {
  local f ir best=0
  for f in "$d"/cg.*; do
    ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$f")
    [ "${ir:-0}" -gt "$best" ] && best=$ir
  done
  echo "$best"
}

ios() { # requests completed by the run in $d (0 if fio failed)
  python3 -c 'import json,sys
try:
    s = open(sys.argv[1]).read()
    print(json.loads(s[s.index("{"):])["jobs"][0]["write"]["total_ios"])
except (OSError, ValueError, KeyError, IndexError):
    print(0)' "$d/out.json"
}

calls() { # SYSCALL: its count in the strace -c table of the run in $d
  awk -v s="$1" '$NF == s { print $4; f = 1 } END { if (!f) print 0 }' "$d/strace"
}

echo "| row | instructions/request | sendto | recvfrom | poll | ioctl | these syscalls/request |"
echo "|---|---|---|---|---|---|---|"
for row in nbd-strided engine-zbd nbd-zbd engine-strided; do
  run "$row" "$small" cg
  ir1=$(job_ir) n1=$(ios)
  run "$row" "$large" cg
  ir2=$(job_ir) n2=$(ios)
  run "$row" "$large" strace
  n3=$(ios)
  if [ "$n1" -eq 0 ] || [ "$n2" -le "$n1" ] || [ "$n3" -eq 0 ]; then
    echo "| $row | failed (see fio's log) | | | | | |"
    continue
  fi
  awk -v row="$row" -v ir1="$ir1" -v ir2="$ir2" -v n1="$n1" -v n2="$n2" -v n3="$n3" \
    -v s="$(calls sendto)" -v r="$(calls recvfrom)" -v p="$(calls poll)" -v i="$(calls ioctl)" \
    'BEGIN { printf "| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", row,
      (ir2 - ir1) / (n2 - n1), s / n3, r / n3, p / n3, i / n3, (s + r + p + i) / n3 }'
  echo "engine-cost: $row done" >&2
done
