#!/bin/bash
# Two builds of znbd against each other, interleaved: is a change (a
# refactoring, a new rule) slower anywhere?  Runs bench/run.sh's parts
# (default "ram zoned submit") once with build A, once with build B, and
# again, ROUNDS times (A B A B ...: the machine's drift hits both alike),
# then prints one table: per row (part, server, workload) the median IOPS
# of each build over the rounds and B/A.  A row below 1 - SLOWER (default
# 0.05) is marked.  Only ratios from the same run mean anything.
#
#   bench/compare-builds.sh BUILD_A BUILD_B [ROUNDS]
#
# Environment: BENCH_PARTS, BENCH_QUICK (default 1: 1-2 s runs), SLOWER,
# COMPARE_OUT (default: a mktemp -d directory; the CSVs stay there).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
rounds=${3:-3}
parts=${BENCH_PARTS:-ram zoned submit}
out=${COMPARE_OUT:-$(mktemp -d /tmp/znbd-compare.XXXXXX)}
for r in $(seq 1 "$rounds"); do
  for side in a b; do
    build=$a
    [ "$side" = b ] && build=$b
    dir=$out/$side-$r
    mkdir -p "$dir"
    echo "compare: round $r, build $side ($build)" >&2
    BUILD=$build BENCH_QUICK=${BENCH_QUICK:-1} BENCH_ROUNDS=1 \
      BENCH_PARTS="$parts" BENCH_OUT="$dir" "$top/bench/run.sh" >"$dir/report.md" 2>"$dir/stderr"
  done
done
python3 - "$out" "$rounds" "${SLOWER:-0.05}" "$a" "$b" <<'PY'
import csv, glob, os, statistics, sys
out, rounds, slower, a, b = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
runs = {}
order = []
for side in "ab":
    for r in range(1, rounds + 1):
        for f in glob.glob(os.path.join(out, f"{side}-{r}", "*.csv")):
            for row in csv.DictReader(open(f)):
                if row["status"] != "ok" or not row["iops"]:
                    continue
                key = (row["part"], row["server"], row["workload"])
                if key not in runs:
                    order.append(key)
                runs.setdefault(key, {"a": [], "b": []})[side].append(float(row["iops"]))
print(f"A: {a}\nB: {b}\n{rounds} interleaved rounds (A B A B ...), median IOPS per build\n")
print("| part | server | workload | A IOPS | B IOPS | B/A |")
print("|---|---|---|---|---|---|")
worst = None
for key in order:
    v = runs[key]
    if not v["a"] or not v["b"]:
        continue
    ma, mb = statistics.median(v["a"]), statistics.median(v["b"])
    ratio = mb / ma if ma else float("nan")
    mark = " **slower**" if ratio < 1 - slower else ""
    if worst is None or ratio < worst[0]:
        worst = (ratio, key)
    print(f"| {key[0]} | {key[1]} | {key[2]} | {ma:.0f} | {mb:.0f} | {ratio:.3f}{mark} |")
if worst:
    print(f"\nlowest B/A: {worst[0]:.3f} ({' '.join(worst[1])})")
PY
