#!/bin/bash
# Persistent devices (dir=) against plain files on the same file system,
# one table from one run (part `persist` of `make bench`; also runs alone:
#   BUILD=build bench/persist.sh).
#
# Rows, each the median of ROUNDS interleaved rounds (A, B, C, A, B, C...),
# each znbd row divided by its own plain-file row measured in the same
# rounds.  Two definitions of the throughput, each on both sides:
#   buffered  the writes only: data reaches the page cache (what plain fio
#             measures by default: one memcpy per write);
#   durable   the same job with fio's end_fsync=1 (plain: fsync of the
#             file; znbd: an NBD FLUSH, fdatasync of the written zone
#             files), so the time includes reaching the disk.  This is the
#             physical limit the targets are judged against.
# Preallocation is matched: zone_prealloc=true (the zone capacity
# fallocated with KEEP_SIZE on its first write) against fio
# --fallocate=keep (the file's range fallocated with KEEP_SIZE), and
# zone_prealloc=false against --fallocate=none (fio's default, native,
# would also set the file size, which no zone file does).
#   seq-128k-qd32    fio 128 KiB sequential writes, iodepth 32, 1 GiB, to
#                    a fresh dir= device through znbd (bio; fio's nbd
#                    engine), beside fio io_uring (direct=0) on a new file
#                    in the same directory;
#   4k-qd32-8zones   8 fio jobs of 4 KiB sequential writes at iodepth 4
#                    (32 in all), each in its own zone (znbd, default
#                    zone_prealloc=true) or its own file (plain, keep),
#                    64 MiB each;
#   format           seconds from exec to serving for a new 10,000-zone
#                    directory (1 MiB zones): every zone file is created;
#   start-up         the same for the formatted directory;
#   buffered_io=false  (durable only) the same two jobs on znbd with
#                    direct I/O (zloop's default), beside plain fio with
#                    direct=1: the same work on both sides; the plain
#                    buffered rows stay the physical limit;
#   writeback_mb=0   (durable, zone_prealloc=true) znbd without early
#                    writeback (the default starts a zone file's writeback
#                    every 8 MiB written to it), to show what it buys;
#   sync_file_range=write:64  (durable, fallocate=keep) plain fio doing
#                    the same: fio's sync_file_range(SYNC_FILE_RANGE_WRITE)
#                    after every 64 writes (8 MiB); divided by the plain
#                    row, which stays the limit the target is judged by;
#   [cpu]            the row's CPU cost: ms of CPU per MiB written, fio's
#                    jobs and (znbd) the server together; steadier than
#                    MiB/s when other work shares the cores;
#   rss              VmRSS of znbd serving a 1 TiB dir= device after 4 GiB
#                    were written to it (one round).
# Targets (durable rows): prealloc >= 0.9x plain, 8 zones >= 0.8x plain;
# start-up < 1 s, RSS < 64 MiB.
#
# Environment: BUILD (default <top>/build), BENCH_ROUNDS (default 3),
# BENCH_PERSIST_DIR (file system to measure; default /var/tmp),
# BENCH_PERSIST_MODE (znbd --queue-mode, default bio),
# BENCH_QUICK=1 (1 round, smaller sizes).
bench_name=persist
. "$(dirname "$0")/env.sh"
command -v fio >/dev/null || { echo "persist: fio is missing" >&2; exit 1; }

if [ "${BENCH_QUICK:-0}" = 1 ]; then
  rounds=${BENCH_ROUNDS:-1} SEQ=256M Z8=16M RSSW=512M
else
  rounds=${BENCH_ROUNDS:-3} SEQ=1G Z8=64M RSSW=4G
fi
work=$(mktemp -d "${BENCH_PERSIST_DIR:-/var/tmp}/znbd-persist.XXXXXX")
SRV_PID=
cleanup() {
  [ -n "$SRV_PID" ] && kill -KILL "$SRV_PID" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
res=$work/results.tsv # row, round, value, row it is divided by
: >"$res"
row() { # NAME ROUND VALUE [BASE]
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$res"
}

start() { # DIR ARGS...: znbd on DIR; sets SRV_PID, URI; prints seconds to serve
  local dir=$1 sock=$work/sock i t0
  shift
  rm -f "$sock" "$work/pid"
  t0=$(date +%s.%N)
  "$znbd" -f -U "$sock" -P "$work/pid" --queue-mode="${BENCH_PERSIST_MODE:-bio}" dir="$dir" "$@" \
    >"$work/log" 2>&1 &
  SRV_PID=$!
  URI="nbd+unix:///?socket=$sock"
  for ((i = 0; i < 20000; i++)); do
    if [ -S "$sock" ] && [ -s "$work/pid" ]; then
      echo "$(date +%s.%N) - $t0" | bc
      return 0
    fi
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.001
  done
  echo "persist: znbd did not start: $(tail -3 "$work/log")" >&2
  exit 1
}

# Before each measured job: the previous job's files are already deleted;
# sync makes the file system commit that (and, on a file system mounted
# with `discard`, send its discards) and write back what the job left
# dirty, and the pause lets the disk go idle, so that no row pays for the
# one measured before it.  Both sides get it alike.
settle() {
  sync
  sleep 1
}

stop() {
  kill -TERM "$SRV_PID" 2>/dev/null
  wait "$SRV_PID" 2>/dev/null
  SRV_PID=
}

bw() { # JSON: write bandwidth, MiB/s, over all jobs
  /usr/bin/python3 -c '
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])
print("%.1f" % (sum(x["write"]["bw_bytes"] for x in j["jobs"]) / 2**20))' "$1"
}

# CPU cost, steadier than bandwidth on a shared machine: milliseconds of
# CPU per MiB written, fio's (user + system time of fio, its job
# processes and their io_uring workers: JSON.cpu, see rusage) plus the
# server's (utime + stime from /proc, SRV_TICKS clock ticks).  Kernel
# writeback threads are not counted on either side.
cpu() { # JSON
  /usr/bin/python3 -c '
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])
ms = float(open(sys.argv[1] + ".cpu").read()) * 1000
ms += int(sys.argv[2]) * 1000 / int(sys.argv[3])
mib = sum(x["write"]["io_bytes"] for x in j["jobs"]) / 2**20
print("%.2f" % (ms / mib))' "$1" "$SRV_TICKS" "$(getconf CLK_TCK)"
}

# Run CMD; write the CPU seconds it and its children used to FILE.
rusage() { # FILE CMD...
  /usr/bin/python3 -c '
import resource, subprocess, sys
r = subprocess.call(sys.argv[2:])
u = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%f\n" % (u.ru_utime + u.ru_stime))
sys.exit(r)' "$@"
}

ticks() { awk '{print $14 + $15}' "/proc/$SRV_PID/stat"; }

fio_nbd() { # OUT ARGS...: also sets SRV_TICKS
  local out=$1 t0
  shift
  t0=$(ticks)
  rusage "$out.cpu" fio --name=p --ioengine=nbd --uri="$URI" --output-format=json \
    --output="$out" "$@" >/dev/null 2>"$out.err" ||
    { echo "persist: fio failed: $(head -3 "$out.err")" >&2; exit 1; }
  SRV_TICKS=$(($(ticks) - t0))
}

fio_file() { # OUT ARGS...: DIRECT=1 in the environment for O_DIRECT
  local out=$1
  shift
  SRV_TICKS=0
  rusage "$out.cpu" fio --name=p --ioengine=io_uring --direct="${DIRECT:-0}" --output-format=json \
    --output="$out" "$@" >/dev/null 2>"$out.err" ||
    { echo "persist: fio failed: $(head -3 "$out.err")" >&2; exit 1; }
}

# fio arguments of a definition.
def_args() { # buffered|durable
  [ "$1" = durable ] && echo --end_fsync=1
}

# Direct I/O rows: BUFFERED_IO=false in the environment makes a znbd
# row buffered_io=false and DIRECT=1 a plain one direct=1; each znbd row
# is divided by the plain row doing the same kind of I/O.
dio_z() { [ "${BUFFERED_IO:-true}" = false ] && echo " buffered_io=false"; }
dio_p() { [ "${DIRECT:-0}" = 1 ] && echo " direct=1"; }
dio_base() { [ "${BUFFERED_IO:-true}" = false ] && echo " direct=1"; }

# WRITEBACK_MB=N in the environment: a znbd row with writeback_mb=N
# (named so); SFR=N: a plain row with fio's sync_file_range=write:N,
# divided by the plain row without it.
wb_z() { [ -n "${WRITEBACK_MB:-}" ] && echo " writeback_mb=$WRITEBACK_MB"; }

seq_znbd() { # ROUND DEF PREALLOC
  local d=$work/dev base name
  rm -rf "$d"
  settle
  start "$d" size=4G zone_size=256M zone_prealloc="$3" \
    buffered_io="${BUFFERED_IO:-true}" ${WRITEBACK_MB:+writeback_mb=$WRITEBACK_MB} >/dev/null
  fio_nbd "$work/s.json" --rw=write --bs=128k --iodepth=32 --size="$SEQ" \
    $(def_args "$2")
  stop
  base="seq-128k-qd32 $2 plain$(dio_base) fallocate=$([ "$3" = true ] && echo keep || echo none)"
  name="seq-128k-qd32 $2 znbd$(dio_z) zone_prealloc=$3$(wb_z)"
  row "$name" "$1" "$(bw "$work/s.json")" "$base"
  row "$name [cpu]" "$1" "$(cpu "$work/s.json")" "$base [cpu]"
  rm -rf "$d"
}

seq_plain() { # ROUND DEF FALLOCATE
  local name base=
  name="seq-128k-qd32 $2 plain$(dio_p) fallocate=$3"
  if [ -n "${SFR:-}" ]; then
    base=$name
    name="$name sync_file_range=write:$SFR"
  fi
  rm -f "$work/plain"
  settle
  fio_file "$work/s.json" --filename="$work/plain" --rw=write --bs=128k \
    --iodepth=32 --size="$SEQ" --fallocate="$3" $(def_args "$2") \
    ${SFR:+--sync_file_range=write:$SFR}
  row "$name" "$1" "$(bw "$work/s.json")" "$base"
  row "$name [cpu]" "$1" "$(cpu "$work/s.json")" "${base:+$base [cpu]}"
  rm -f "$work/plain"
}

z8_znbd() { # ROUND DEF
  local d=$work/dev base name
  rm -rf "$d"
  settle
  start "$d" size=4G zone_size=256M buffered_io="${BUFFERED_IO:-true}" >/dev/null
  fio_nbd "$work/z.json" --rw=write --bs=4k --iodepth=4 --numjobs=8 \
    --offset_increment=256M --size="$Z8" $(def_args "$2")
  stop
  base="4k-qd32-8zones $2 plain$(dio_base) 8 files"
  name="4k-qd32-8zones $2 znbd$(dio_z)"
  row "$name" "$1" "$(bw "$work/z.json")" "$base"
  row "$name [cpu]" "$1" "$(cpu "$work/z.json")" "$base [cpu]"
  rm -rf "$d"
}

z8_plain() { # ROUND DEF
  local name
  name="4k-qd32-8zones $2 plain$(dio_p) 8 files"
  rm -f "$work"/p8.*
  settle
  fio_file "$work/z.json" --filename_format="$work/p8.\$jobnum" --rw=write \
    --bs=4k --iodepth=4 --numjobs=8 --size="$Z8" --fallocate=keep \
    $(def_args "$2")
  row "$name" "$1" "$(bw "$work/z.json")"
  row "$name [cpu]" "$1" "$(cpu "$work/z.json")"
  rm -f "$work"/p8.*
}

echo "persist: $rounds rounds in $work ($(df -h "$work" | awk 'NR==2 {print $1}'))" >&2
for ((r = 1; r <= rounds; r++)); do
  for def in buffered durable; do
    seq_znbd "$r" "$def" true
    seq_plain "$r" "$def" keep
    seq_znbd "$r" "$def" false
    seq_plain "$r" "$def" none
    z8_znbd "$r" "$def"
    z8_plain "$r" "$def"
  done
  WRITEBACK_MB=0 seq_znbd "$r" durable true
  SFR=64 seq_plain "$r" durable keep
  BUFFERED_IO=false seq_znbd "$r" durable true
  DIRECT=1 seq_plain "$r" durable keep
  BUFFERED_IO=false z8_znbd "$r" durable
  DIRECT=1 z8_plain "$r" durable
  rm -rf "$work/z10k"
  row "format 10000 zones" "$r" "$(start "$work/z10k" size=10000M zone_size=1M; stop)"
  row "start-up 10000 zones" "$r" "$(start "$work/z10k"; stop)"
  printf '.' >&2
done
# RSS of a 1 TiB device after writing RSSW sequentially over its zones.
start "$work/big" size=1T zone_size=256M >/dev/null
fio_nbd "$work/r.json" --rw=write --bs=128k --iodepth=32 --size="$RSSW"
rss=$(awk '$1 == "VmRSS:" {print $2}' "/proc/$SRV_PID/status")
stop
row "rss 1 TiB after $RSSW" 1 "$((rss / 1024))"
rm -rf "$work/big"
echo >&2

/usr/bin/python3 - "$res" "$rounds" "${BENCH_PERSIST_MODE:-bio}" <<'EOF'
import sys, statistics
rows, base = {}, {}
for line in open(sys.argv[1]):
    name, rnd, v, b = line.rstrip("\n").split("\t")
    rows.setdefault(name, []).append(float(v))
    if b:
        base[name] = b
med = {k: statistics.median(v) for k, v in rows.items()}
def ratio(k):
    b = base.get(k)
    if not b:
        return "1.00x" if k in base.values() else ""
    r = "%.2fx" % (med[k] / med[b]) if med.get(b) else "-"
    # Direct I/O rows: also against the buffered plain row, the limit.
    lim = b.replace(" direct=1", "")
    if lim != b and med.get(lim):
        r += " (%.2fx of %s)" % (med[k] / med[lim], lim)
    return r
print("Persistent devices (dir=, znbd --queue-mode=%s), median of %s "
      "interleaved rounds (min-max); each znbd row divided by the plain "
      "row named in its last column; [cpu] rows: CPU milliseconds per MiB "
      "written, fio and server together:\n" % (sys.argv[3], sys.argv[2]))
print("| row | value | vs plain | target | divided by |")
print("|---|---|---|---|---|")
def mm(k, f="%.1f"):
    v = rows[k]
    return (f + " (" + f + "-" + f + ")") % (med[k], min(v), max(v))
targets = {"seq-128k-qd32 durable znbd zone_prealloc=true": ">= 0.9x",
           "4k-qd32-8zones durable znbd": ">= 0.8x"}
for k in rows:
    if k.endswith("[cpu]"):
        print("| %s | %s ms/MiB | %s | | %s |" % (k, mm(k, "%.2f"),
              ratio(k), base.get(k, "")))
    elif k.startswith("seq") or k.startswith("4k"):
        print("| %s | %s MiB/s | %s | %s | %s |" % (k, mm(k), ratio(k),
              targets.get(k, ""), base.get(k, "")))
    elif k.startswith("start"):
        print("| %s | %s s | | < 1 s | |" % (k, mm(k, "%.3f")))
    elif k.startswith("format"):
        print("| %s | %s s | | | |" % (k, mm(k, "%.3f")))
    else:
        print("| %s | %d MiB | | < 64 MiB | |" % (k, med[k]))
EOF
