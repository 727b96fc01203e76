#!/bin/bash
# What TLS costs (not part of `make bench`): fio's nbd engine over a Unix
# socket, 4 KiB random reads at iodepth 32 and 128 KiB sequential writes
# at iodepth 8 (SECONDS each, on a 256 MiB RAM disk written once first),
# against znbd bio and mq, plain and with --tls=require, and nbdkit with
# zoned.so and --tls=require, interleaved, each run on a fresh server.
# TLS is X.509 (certtool, made here): fio's nbd engine takes no
# tls-psk-file= in its URI, so the client's certificates come from
# libnbd's default directory under a private HOME; after the handshake
# PSK and X.509 sessions cost the same kind of record encryption.  Per
# run: IOPS and the server's CPU per request (utime+stime of the server
# process over the measured run, /proc/PID/stat).  Then the medians and
# the same-run ratios: TLS / plain CPU per request, znbd TLS / nbdkit
# TLS IOPS.  Timing figures: compare rows of one run only.
#
#   BUILD=build bench/tls-cost.sh [ROUNDS [SECONDS]]    (default 3 5)
set -u
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-$here/../build}
rounds=${1:-3} secs=${2:-5}
for t in fio nbdkit certtool; do
  command -v $t >/dev/null || { echo "tls-cost: $t is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$build/server/znbd" ] && [ -f "$build/zoned.so" ] ||
  { echo "tls-cost: build znbd and zoned.so first" >&2; exit 1; }
work=$(mktemp -d /tmp/znbd-tlscost.XXXXXX)
trap 'rm -rf "$work"' EXIT
tmpdir=$work
die() { echo "tls-cost: $*" >&2; exit 1; }
require() { :; }
. "$here/../tests/tlsfiles.sh"
make_certs "$work/pki"
mkdir -p "$work/fiohome/.pki/libnbd"
cp "$work/pki/client/"*.pem "$work/fiohome/.pki/libnbd/"
out=$work/runs.tsv
: >"$out"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run() { # JOB ROW SCHEME SERVER... -- FIO-ARGS...
  local job=$1 row=$2 scheme=$3 i
  shift 3
  local srv=()
  while [ "$1" != -- ]; do srv+=("$1"); shift; done
  shift
  rm -f "$work/sock" "$work/pid"
  "${srv[@]}" >"$work/log" 2>&1 &
  local spid=$!
  for ((i = 0; i < 500; i++)); do
    [ -s "$work/pid" ] && [ -S "$work/sock" ] && break
    sleep 0.01
  done
  local pid uri="$scheme:///?socket=$work/sock"
  pid=$(cat "$work/pid") || die "$row did not start: $(cat "$work/log")"
  HOME=$work/fiohome fio --name=fill --ioengine=nbd --uri="$uri" --rw=write \
    --bs=1M --size=256M --output=/dev/null >/dev/null 2>&1 || die "$row: fill failed"
  local c0 c1
  c0=$(cpu_ticks "$pid")
  HOME=$work/fiohome fio --name=m --ioengine=nbd --uri="$uri" "$@" --size=256M \
    --runtime="$secs" --time_based --output-format=json --output="$work/m.json" \
    >/dev/null 2>&1 || die "$row: fio failed"
  c1=$(cpu_ticks "$pid")
  kill "$spid"
  wait "$spid" 2>/dev/null
  python3 - "$work/m.json" "$c0" "$c1" "$job" "$row" >>"$out" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
iops = j["read"]["iops"] + j["write"]["iops"]
cpu = (float(sys.argv[3]) - float(sys.argv[2])) / os.sysconf("SC_CLK_TCK")
print("%s\t%s\t%.0f\t%.2f" % (sys.argv[4], sys.argv[5], iops, cpu / ios * 1e6))
PY
}

z=("$build/server/znbd" -f -U "$work/sock" -P "$work/pid")
zt=(--tls=require --tls-certificates="$work/pki")
disk=(size=256M zoned=false)
for ((r = 1; r <= rounds; r++)); do
  for job in randread-4k-qd32 write-128k-qd8; do
    case $job in
    randread-4k-qd32) f=(--rw=randread --bs=4k --iodepth=32) ;;
    write-128k-qd8) f=(--rw=write --bs=128k --iodepth=8) ;;
    esac
    run $job "znbd bio" nbd+unix "${z[@]}" --queue-mode=bio "${disk[@]}" -- "${f[@]}"
    run $job "znbd bio tls" nbds+unix "${z[@]}" --queue-mode=bio "${zt[@]}" "${disk[@]}" -- "${f[@]}"
    run $job "znbd mq" nbd+unix "${z[@]}" --queue-mode=mq "${disk[@]}" -- "${f[@]}"
    run $job "znbd mq tls" nbds+unix "${z[@]}" --queue-mode=mq "${zt[@]}" "${disk[@]}" -- "${f[@]}"
    run $job "nbdkit zoned.so tls" nbds+unix nbdkit -f -U "$work/sock" -P "$work/pid" \
      "${zt[@]}" "$build/zoned.so" "${disk[@]}" -- "${f[@]}"
  done
done
python3 - "$out" "$rounds" "$secs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    job, row, iops, cpu = line.rstrip("\n").split("\t")
    rows.setdefault((job, row), []).append((float(iops), float(cpu)))
print("TLS cost: medians of %s interleaved rounds of %s s, fio nbd engine, Unix socket\n" % (sys.argv[2], sys.argv[3]))
print("| job | server | IOPS | server CPU us/request |")
print("|---|---|---:|---:|")
med = {}
for (job, row), v in rows.items():
    i = statistics.median(x[0] for x in v)
    c = statistics.median(x[1] for x in v)
    med[(job, row)] = (i, c)
    print("| %s | %s | %.0f | %.2f |" % (job, row, i, c))
print()
for job in sorted({j for j, _ in med}):
    for m in ("bio", "mq"):
        p, t = med.get((job, "znbd " + m)), med.get((job, "znbd %s tls" % m))
        k = med.get((job, "nbdkit zoned.so tls"))
        if p and t and k:
            print("%s %s: TLS/plain CPU per request %.2fx; IOPS vs nbdkit TLS %.2fx" %
                  (job, m, t[1] / p[1], t[0] / k[0]))
PY
