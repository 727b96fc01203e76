#!/bin/bash
# What parked writes cost zoned.so (not part of `make bench`): sequential
# 4 KiB writes at iodepth 32 on fresh pages (fio's nbd engine, one pass
# from offset 0, SECONDS per run) through zoned.so zoned (64 MiB zones,
# pipelined) and zoned.so zoned=false, interleaved, each run on a fresh
# server.  Per run: IOPS, the server's CPU and context switches per
# request (GNU time's rusage of the nbdkit process: every thread, start-up
# included, which is the same for both rows), and for the zoned row the
# plugin's park_waits / park_sleeps (control socket `stats`: writes that
# arrived ahead of the write pointer and waited, and those whose thread
# slept).  Then the medians.  Timing figures: compare rows of one run only.
#
#   BUILD=build bench/park-cost.sh [ROUNDS [SECONDS]]    (default 5 3)
set -u
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
rounds=${1:-5} secs=${2:-3}
so=$build/zoned.so
[ -f "$so" ] || { echo "park-cost: $so not built" >&2; exit 1; }
for t in fio nbdkit /usr/bin/time; do
  command -v $t >/dev/null || { echo "park-cost: $t is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/znbd-park.XXXXXX)
trap 'rm -rf "$work"' EXIT
out=$work/runs.tsv

run() { # ROUND ROW PARAMS...
  local r=$1 row=$2 i st
  shift 2
  rm -f "$work/sock" "$work/pid" "$work/ctl" "$work/rusage"
  /usr/bin/time -o "$work/rusage" -f "%U %S %w %c" \
    nbdkit -f -U "$work/sock" -P "$work/pid" "$so" size=4G zone_control="$work/ctl" "$@" \
    >"$work/log" 2>&1 &
  local tpid=$!
  for ((i = 0; i < 500; i++)); do
    [ -s "$work/pid" ] && [ -S "$work/sock" ] && [ -S "$work/ctl" ] && break
    sleep 0.01
  done
  fio --name=park --ioengine=nbd --uri="nbd+unix:///?socket=$work/sock" \
    --rw=write --bs=4k --iodepth=32 --size=3G --runtime="$secs" \
    --output-format=json --output="$work/fio.json" >/dev/null 2>&1 || echo "park-cost: fio failed ($row)" >&2
  # The control socket's stats, through the tests' helper.
  st=$(PYTHONPATH="$here/../tests" /usr/bin/python3 -c '
import sys
from znbdtest import control_stats
st = control_stats(sys.argv[1])
print(st.get("park_waits", 0), st.get("park_sleeps", 0))' "$work/ctl")
  kill "$(cat "$work/pid")"
  wait "$tpid"
  printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$row" "$(cat "$work/fio.json" | tr -d '\n' | sed 's/^[^{]*//')" \
    "$(tail -1 "$work/rusage")" "$st" >>"$out"
  printf '.' >&2
}

for ((r = 1; r <= rounds; r++)); do
  run "$r" zoned zoned=true zone_size=64M pipeline_zoned_writes=true
  run "$r" zoned=false zoned=false
done
echo >&2
/usr/bin/python3 - "$out" "$(getconf CLK_TCK)" <<'EOF'
import json, statistics, sys
rows = {}
print("| round | row | IOPS | server CPU µs/req | context switches/req | park_waits/req | park_sleeps/req |")
print("|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    r, row, js, ru, st = line.rstrip("\n").split("\t")
    w = json.loads(js)["jobs"][0]["write"]
    n = w["total_ios"]
    usr, sys_, vol, inv = ru.split()
    waits, sleeps = (int(x) for x in st.split())
    v = (w["iops"], (float(usr) + float(sys_)) * 1e6 / n, (int(vol) + int(inv)) / n,
         waits / n, sleeps / n)
    rows.setdefault(row, []).append(v)
    print("| %s | %s | %.1fk | %.2f | %.3f | %.4f | %.4f |" % (r, row, v[0] / 1000, *v[1:]))
print()
print("| row (median of %d) | IOPS | server CPU µs/req | context switches/req | park_waits/req | park_sleeps/req |"
      % len(next(iter(rows.values()))))
print("|---|---|---|---|---|---|")
for row, vs in rows.items():
    m = [statistics.median(x) for x in zip(*vs)]
    print("| %s | %.1fk | %.2f | %.3f | %.4f | %.4f |" % (row, m[0] / 1000, *m[1:]))
EOF
