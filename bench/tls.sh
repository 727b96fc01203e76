#!/bin/bash
# What TLS costs: part `tls` of `make bench` (bench/run.sh appends its
# table to the report), or alone: BUILD=build bench/tls.sh.
# A RAM disk (size=1G zoned=false) on a Unix socket, each row a fresh
# server per run, rows interleaved round by round:
#   znbd-bio, znbd-mq          plain, the anchors of the CPU ratio
#   znbd-bio-tls, znbd-mq-tls  --tls=require --tls-psk=FILE
#   nbdkit-tls                 nbdkit --tls=require --tls-psk=FILE with
#                              zoned.so, the anchor of the rate ratio
# Workloads (fio through the project's engine znbd-fio.so, on libnbd, for
# every row: fio's own nbd engine refuses a URI naming a PSK file; TLS
# through an nbds+unix URI with a PSK file made here with psktool; no
# zones, so the engine adds nothing but the transport): randread-4k-qd32 over a
# prefilled 256 MiB, write-128k-qd32 sequential over fresh pages.
# Each row: IOPS and server CPU µs per request (utime+stime of the server
# from /proc/PID/stat over the fio run, / requests), median of the rounds
# (min-max).  Targets: every znbd TLS row at least 1.0x nbdkit-tls's IOPS,
# and TLS at most 1.5x the plain server's CPU per request at 4 KiB.
bench_name=tls
. "$(dirname "$0")/env.sh"
for t in fio psktool nbdkit; do
  command -v $t >/dev/null || { echo "tls: $t is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
engine=$build/znbd-fio.so
[ -f "$engine" ] || { echo "tls: $engine is not built (no fio source)" >&2; exit 1; }
zoned_so=$build/zoned.so
[ -f "$zoned_so" ] || zoned_so=$build/plugin/.libs/zoned.so
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  rounds=${BENCH_ROUNDS:-1} R=1
else
  rounds=${BENCH_ROUNDS:-3} R=3
fi
tmp=$(mktemp -d /tmp/znbd-bench-tls.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
psktool -u bench -p "$tmp/keys.psk" >/dev/null 2>&1 || { echo "tls: psktool failed" >&2; exit 1; }
tlsargs="--tls=require --tls-psk=$tmp/keys.psk"
disk="size=1G zoned=false"

# serve ROW: start it on $tmp/sock; sets pid and uri.
serve() {
  rm -f "$tmp/sock" "$tmp/pid"
  local tls=
  case $1 in *-tls) tls=$tlsargs ;; esac
  case $1 in
    znbd-bio*) exec "$znbd" -f -U "$tmp/sock" -P "$tmp/pid" --queue-mode=bio $tls $disk ;;
    znbd-mq*) exec "$znbd" -f -U "$tmp/sock" -P "$tmp/pid" --queue-mode=mq --scheduler none $tls $disk ;;
    nbdkit-tls) exec nbdkit -f -U "$tmp/sock" -P "$tmp/pid" $tls "$zoned_so" $disk ;;
  esac >"$tmp/log" 2>&1 &
  pid=$!
  for _ in $(seq 400); do [ -s "$tmp/pid" ] && [ -S "$tmp/sock" ] && break; sleep 0.025; done
  [ -s "$tmp/pid" ] || { echo "tls: $1 did not start: $(cat "$tmp/log")" >&2; exit 1; }
  if [ -n "$tls" ]; then
    uri="nbds+unix://bench@/?socket=$tmp/sock&tls-psk-file=$tmp/keys.psk"
  else
    uri="nbd+unix:///?socket=$tmp/sock"
  fi
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=; }

ticks() { # utime+stime of the server, clock ticks
  local s f
  s=$(cat "/proc/$pid/stat" 2>/dev/null) || { echo 0; return; }
  s=${s##*) }
  read -ra f <<<"$s"
  echo $((f[11] + f[12]))
}

fio_run() { # OUT ARGS...
  local out=$1
  shift
  timeout 120 fio --name=tls --ioengine=external:"$engine" --uri="$uri" --group_reporting \
    --output-format=json --output="$out" "$@" >/dev/null 2>"$out.err"
}

: >"$tmp/res"
rows="znbd-bio znbd-bio-tls nbdkit-tls znbd-mq znbd-mq-tls"
for ((r = 1; r <= rounds; r++)); do
  for wl in randread-4k-qd32 write-128k-qd32; do
    for row in $rows; do
      serve "$row"
      case $wl in
        randread-4k-qd32)
          fio_run "$tmp/fill.json" --rw=write --bs=128k --iodepth=8 --size=256M ||
            { echo "tls: prefill on $row failed: $(cat "$tmp/fill.json.err")" >&2; exit 1; }
          args="--rw=randread --bs=4k --iodepth=32 --size=256M --time_based --runtime=$R" ;;
        write-128k-qd32)
          args="--rw=write --bs=128k --iodepth=32 --size=1G --runtime=$R" ;;
      esac
      t0=$(ticks)
      # shellcheck disable=SC2086
      fio_run "$tmp/run.json" $args ||
        { echo "tls: fio on $row failed: $(head -c 300 "$tmp/run.json.err")" >&2; exit 1; }
      t1=$(ticks)
      /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
iops = j["read"]["iops"] + j["write"]["iops"]
print(sys.argv[2], sys.argv[3], sys.argv[4], "%.1f" % iops, ios, sys.argv[5])
' "$tmp/run.json" "$r" "$wl" "$row" $((t1 - t0)) >>"$tmp/res"
      stop
    done
  done
done

/usr/bin/python3 - "$tmp/res" "$rounds" "$R" "$(getconf CLK_TCK)" <<'EOF'
import statistics, sys
res, rounds, secs, hz = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
runs = {}
for line in open(res):
    r, wl, row, iops, ios, ticks = line.split()
    cpu = 1e6 * int(ticks) / hz / int(ios) if int(ios) else float("nan")
    runs.setdefault((wl, row), []).append(dict(r=int(r), iops=float(iops), cpu=cpu))
def med(wl, row, k):
    return statistics.median(x[k] for x in runs[(wl, row)])
def mm(v, f):
    return (f + " (" + f + "–" + f + ")") % (statistics.median(v), min(v), max(v))
desc = {"znbd-bio": "znbd bio, plain", "znbd-bio-tls": "znbd bio, TLS (PSK)",
        "nbdkit-tls": "nbdkit + zoned.so, TLS (PSK)", "znbd-mq": "znbd mq, plain",
        "znbd-mq-tls": "znbd mq, TLS (PSK)"}
plain = {"znbd-bio-tls": "znbd-bio", "znbd-mq-tls": "znbd-mq"}
print("## TLS cost (bench/tls.sh)\n")
print("A 1 GiB RAM disk (zoned=false) on a Unix socket, a fresh server per run, "
      "fio through znbd-fio.so (libnbd; nbds+unix URI with a PSK file for the TLS rows); "
      "%s s runs, median of %d interleaved rounds (min–max).  CPU µs/req = the "
      "server's utime+stime during the run / requests.\n" % (secs, rounds))
print("| workload | server | IOPS | ×nbdkit TLS | CPU µs/req | CPU ×plain |")
print("|---|---|---|---|---|---|")
for wl in ("randread-4k-qd32", "write-128k-qd32"):
    for row in ("znbd-bio", "znbd-bio-tls", "znbd-mq", "znbd-mq-tls", "nbdkit-tls"):
        v = runs.get((wl, row))
        if not v:
            continue
        xr = "%.2f" % (med(wl, row, "iops") / med(wl, "nbdkit-tls", "iops"))
        xc = "%.2f" % (med(wl, row, "cpu") / med(wl, plain[row], "cpu")) if row in plain else "1.00" if row != "nbdkit-tls" else "—"
        print("| %s | %s | %s | %s | %s | %s |" % (wl, desc[row], mm([x["iops"] for x in v], "%.0f"),
              xr, mm([x["cpu"] for x in v], "%.1f"), xc))
print()
print("| target | measured | result |")
print("|---|---|---|")
for wl in ("randread-4k-qd32", "write-128k-qd32"):
    for row in ("znbd-bio-tls", "znbd-mq-tls"):
        x = med(wl, row, "iops") / med(wl, "nbdkit-tls", "iops")
        print("| %s %s ≥ 1.0× nbdkit TLS | %.2f× | %s |" % (desc[row], wl, x, "met" if x >= 1.0 else "NOT met"))
for row in ("znbd-bio-tls", "znbd-mq-tls"):
    x = med("randread-4k-qd32", row, "cpu") / med("randread-4k-qd32", plain[row], "cpu")
    print("| %s: CPU per 4K request ≤ 1.5× plain | %.2f× | %s |" % (desc[row], x, "met" if x <= 1.5 else "NOT met"))
EOF
