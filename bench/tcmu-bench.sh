#!/bin/bash
# The kernel-visible zoned disks side by side (`make bench-tcmu`): one
# qemu TCG guest run (tests/vm/vm-run) with four host-managed disks of
# the same geometry (512 MiB, 8 MiB zones, 4 conventional, max_open 8,
# 512-byte blocks), all in RAM:
#   znbd-tcmu      this project's TCMU front-end (tcm_loop -> /dev/sdX)
#   file_zbc       tcmu-runner's ZBC handler, its file on the guest's
#                  tmpfs, through tcm_loop too: the anchor of every ratio
#   scsi_debug     zbc=host-managed (in-kernel SCSI, no user-space hop)
#   null_blk       zoned=1 memory_backed=1 (in-kernel, no SCSI)
# Jobs (fio, libaio, O_DIRECT, mq-deadline on every disk):
#   randread-4k-qd1, randread-4k-qd32   over 64 MiB of zones filled first
#   write-4k, write-128k                --zonemode=zbd sequential writes
#                                       at QD16 on zones reset before each
#                                       run (mq-deadline lets one write per
#                                       zone through, as for a drive)
# Rounds interleave the disks (same job, disk after disk, then the next
# job; odd rounds in one order, even rounds in the reverse one) so that
# the host's load drift hits them alike and no disk always goes first.  Per row: median
# IOPS over the rounds, the median of the per-round ratios to file_zbc,
# and for the two user-space handlers CPU ns per request (every thread's
# time on a CPU from /proc/PID/task/*/schedstat over the fio run, divided
# by fio's request count) and its ratio to file_zbc's; fio's I/Os per
# request the disk completed (/sys/block/X/stat: above 1 where
# mq-deadline merged them), and the handler's voluntary context switches
# per disk request (its sleeps in the ring).  Under TCG only
# ratios from this one guest run mean anything.  Targets: znbd-tcmu at
# least 1.0x file_zbc's IOPS on every row, and CPU per request at most
# file_zbc's.
#   usage: bench/tcmu-bench.sh [RUNTIME-S] (default 3 s per fio job)
# Environment: BUILD (build tree, default ./build), BENCH_ROUNDS (10),
# BENCH_TCMU_OUT (result file instead of bench/results/tcmu-<date>.md).
set -u
if [ "${1:-}" = --guest ]; then
  # ------------------------------------------------------------ in the guest
  rt=$2 rounds=$3
  out=/results
  export PATH=/usr/bin:/usr/sbin:/bin:/sbin LC_ALL=C
  : > $out/results.tsv
  work=$(mktemp -d)
  CFG=/sys/kernel/config/target
  for m in target_core_user tcm_loop sd_mod sg; do modprobe $m || exit 1; done
  modprobe null_blk nr_devices=0 || exit 1
  sd_by_model() { # MODEL-PREFIX: the sd disk whose SCSI model starts so
    local b
    for b in /sys/block/sd*; do
      case $(cat "$b/device/model" 2> /dev/null) in "$1"*) echo "/dev/${b##*/}" ;; esac
    done
  }
  wait_for() { # MODEL-PREFIX
    local i
    for i in $(seq 1 120); do
      DISK=$(sd_by_model "$1")
      [ -n "$DISK" ] && return 0
      sleep 0.5
    done
    echo "tcmu-bench: no disk with model $1" >&2
    return 1
  }
  # tcmu-runner's file_zbc, configured as its documentation does
  # (dev_config zbc/OPTIONS@FILE), before znbd-tcmu so that its disk
  # comes up first; znbd-tcmu's own backstore names the subtype znbd,
  # which tcmu-runner has no handler for and leaves alone.
  F=$CFG/core/user_0/fzbc
  mkdir -p $F
  echo -n "dev_config=zbc/model-HM/lba-512/zsize-8/conv-4/open-8@$work/fzbc.raw" > $F/control
  echo -n "dev_size=$((512 << 20))" > $F/control
  echo -n "nl_reply_supported=-1" > $F/control
  echo 1 > $F/enable || exit 1
  setsid tcmu-runner -l "$work" > "$work/tcmu-runner.out" 2>&1 < /dev/null &
  RUNNER=$!
  L=$CFG/loopback/naa.5001405aaaaaaa01/tpgt_1
  mkdir -p $L && echo naa.5001405aaaaaaa02 > $L/nexus && mkdir -p $L/lun/lun_0 &&
    ln -s $F $L/lun/lun_0/fzbc || exit 1
  wait_for "TCMU ZBC" || { cat "$work/tcmu-runner.out" "$work"/*.log; exit 1; }
  dev_file_zbc=$DISK
  "$top_builddir/tcmu/znbd-tcmu" bench0 size=512M zone_size=8M zone_nr_conv=4 \
    zone_max_open=8 > "$work/znbd-tcmu.log" 2>&1 &
  ZNBD=$!
  wait_for "znbd" || { cat "$work/znbd-tcmu.log"; exit 1; }
  dev_znbd_tcmu=$DISK
  modprobe scsi_debug zbc=host-managed dev_size_mb=512 zone_size_mb=8 zone_nr_conv=4 \
    zone_max_open=8 sector_size=512 delay=0 max_queue=64 || exit 1
  wait_for "scsi_debug" || exit 1
  dev_scsi_debug=$DISK
  N=/sys/kernel/config/nullb/zb0
  mkdir $N && echo 512 > $N/size && echo 512 > $N/blocksize && echo 1 > $N/zoned &&
    echo 8 > $N/zone_size && echo 4 > $N/zone_nr_conv && echo 8 > $N/zone_max_open &&
    echo 1 > $N/memory_backed && echo 1 > $N/power || exit 1
  # 6.1 names the disk after the configfs item; older kernels nullbINDEX.
  dev_null_blk=/dev/zb0
  [ -b $dev_null_blk ] || dev_null_blk=/dev/nullb$(cat $N/index)
  devs="znbd-tcmu file_zbc scsi_debug null_blk"
  echo "# guest kernel $(uname -r), $(nproc) vCPUs" | tee -a $out/info.txt
  for n in $devs; do
    v=dev_${n//-/_}
    d=${!v}
    echo mq-deadline > /sys/block/${d#/dev/}/queue/scheduler
    echo "# $n: $d, $(cat /sys/block/${d#/dev/}/queue/nr_zones) zones," \
      "scheduler $(cat /sys/block/${d#/dev/}/queue/scheduler)" | tee -a $out/info.txt
    # The read region: zones 4-11 written whole.
    fio --name=fill --filename="$d" --direct=1 --ioengine=libaio --iodepth=4 \
      --zonemode=zbd --rw=write --bs=1M --offset=32M --size=64M > "$work/fill.log" 2>&1 ||
      { cat "$work/fill.log"; exit 1; }
  done
  cpu_ns() { # PID: ns on a CPU, all threads
    [ -n "$1" ] || { echo 0; return; }
    cat /proc/"$1"/task/*/schedstat 2> /dev/null | awk '{ s += $1 } END { printf "%d", s }'
  }
  sleeps() { # PID: voluntary context switches, all threads (NA: none)
    [ -n "$1" ] || { echo NA; return; }
    cat /proc/"$1"/task/*/status 2> /dev/null |
      awk '/^voluntary_ctxt_switches/ { s += $2 } END { printf "%d", s }'
  }
  requests() { # DEV: requests the disk completed (reads + writes)
    awk '{ print $1 + $5 }' /sys/block/"${1#/dev/}"/stat
  }
  job() { # ROUND JOB DISK-NAME DEV FIO-ARGS...
    local r=$1 j=$2 n=$3 d=$4 pid= c0 c1 s0 s1 q0 q1 rc=0 f=$work/$2-$3
    shift 4
    case $n in znbd-tcmu) pid=$ZNBD ;; file_zbc) pid=$RUNNER ;; esac
    case $j in write-*) blkzone reset -o $((128 << 11)) -c 48 "$d" ;; esac
    c0=$(cpu_ns "$pid") s0=$(sleeps "$pid") q0=$(requests "$d")
    fio --name="$j" --filename="$d" --direct=1 --ioengine=libaio --runtime="$rt" \
      --time_based --output-format=json --output="$f.json" "$@" > "$f.log" 2>&1 || rc=$?
    c1=$(cpu_ns "$pid") s1=$(sleeps "$pid") q1=$(requests "$d")
    read -r iops ios < <(jq -r '.jobs[0] | "\((.read.iops + .write.iops) | floor) \(.read.total_ios + .write.total_ios)"' "$f.json" 2> /dev/null)
    [ "$rc" = 0 ] && [ -n "${iops:-}" ] || { iops=NA ios=0; head -3 "$f.log"; }
    local cpu=NA sl=NA
    [ -n "$pid" ] && cpu=$((c1 - c0)) sl=$((s1 - s0))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$j" "$n" "$iops" "$ios" "$cpu" \
      $((q1 - q0)) "$sl" |
      tee -a $out/results.tsv
  }
  for r in $(seq 1 "$rounds"); do
    for j in randread-4k-qd1 randread-4k-qd32 write-4k write-128k; do
      case $j in
        randread-4k-qd1) a="--rw=randread --bs=4k --iodepth=1 --offset=32M --size=64M --norandommap" ;;
        randread-4k-qd32) a="--rw=randread --bs=4k --iodepth=32 --offset=32M --size=64M --norandommap" ;;
        write-4k) a="--zonemode=zbd --rw=write --bs=4k --iodepth=16 --offset=128M --size=384M" ;;
        write-128k) a="--zonemode=zbd --rw=write --bs=128k --iodepth=16 --offset=128M --size=384M" ;;
      esac
      order=$devs
      [ $((r % 2)) = 0 ] && order=$(printf '%s\n' $devs | tac)
      for n in $order; do
        v=dev_${n//-/_}
        # shellcheck disable=SC2086
        job "$r" "$j" "$n" "${!v}" $a
      done
    done
  done
  echo "# guest load at the end: $(cat /proc/loadavg)" | tee -a $out/info.txt
  kill "$ZNBD"
  wait "$ZNBD"
  exit 0
fi

# ------------------------------------------------------------------ on the host
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
rt=${1:-3}
rounds=${BENCH_ROUNDS:-10}
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
for t in tcmu-runner fio jq; do
  command -v $t > /dev/null || { echo "tcmu-bench: $t is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$build/tcmu/znbd-tcmu" ] || { echo "tcmu-bench: $build/tcmu/znbd-tcmu is not built" >&2; exit 1; }
# shellcheck source=vm-lib.sh
. "$top/bench/vm-lib.sh"
vm_bench_host tcmu-bench
out=${BENCH_TCMU_OUT:-$top/bench/results/tcmu-$date.md}
echo "tcmu-bench: one guest run, $rounds rounds of 16 fio jobs of ${rt} s" >&2
"$top/tests/vm/vm-run" -v -t 1800 -m 4096 --append no_timer_check -w "$res:/results" \
  -e "top_builddir=$build" -e "top_srcdir=$top" "$top/bench/tcmu-bench.sh" --guest "$rt" "$rounds"
rc=$?
[ "$rc" = 0 ] || { echo "tcmu-bench: the guest run failed (status $rc)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
{
  echo "# Kernel zoned disks: znbd-tcmu beside tcmu-runner file_zbc, scsi_debug and null_blk"
  echo
  echo "One guest run (qemu TCG, tests/vm/vm-run -m 4096), $rounds interleaved rounds of ${rt} s"
  echo "per job, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, host kernel $(uname -r),"
  echo "host load $load0 -> $(cut -d' ' -f1-3 /proc/loadavg), whole run $((SECONDS - t0)) s."
  echo "IOPS: median over the rounds; x file_zbc: median of the per-round ratios;"
  echo "CPU: ns on a CPU of the handler process per request (user-space handlers only);"
  echo "ios/req: fio's I/Os per request the disk completed (/sys/block/X/stat);"
  echo "sleeps/req: the handler's voluntary context switches per disk request."
  echo
  python3 - "$res/results.tsv" << 'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
data = {}
for r, job, dev, iops, ios, cpu, reqs, sleeps in rows:
    data.setdefault((job, dev), {})[r] = (iops, ios, cpu, reqs, sleeps)
jobs = list(dict.fromkeys(j for j, _ in data))
devs = list(dict.fromkeys(d for _, d in data))
med = lambda v: statistics.median(v) if v else float("nan")
print("| job | disk | IOPS | x file_zbc | CPU ns/req | CPU x file_zbc | ios/req | sleeps/req |")
print("|---|---|---|---|---|---|---|---|")
for j in jobs:
    anchor = data.get((j, "file_zbc"), {})
    acpu = [int(v[2]) / int(v[1]) for v in anchor.values() if v[2] != "NA" and int(v[1]) > 0]
    for d in devs:
        rs = data.get((j, d), {})
        iops = [int(v[0]) for v in rs.values() if v[0] != "NA"]
        ratio = [int(rs[r][0]) / int(anchor[r][0]) for r in rs
                 if r in anchor and rs[r][0] != "NA" and anchor[r][0] not in ("NA", "0")]
        cpu = [int(v[2]) / int(v[1]) for v in rs.values() if v[2] != "NA" and int(v[1]) > 0]
        c = "%.0f" % med(cpu) if cpu else "-"
        cr = "%.2f" % (med(cpu) / med(acpu)) if cpu and acpu else "-"
        # fio's I/Os per request the disk completed: above 1 where the
        # scheduler merged them; sleeps: the handler's voluntary context
        # switches per request (each a wake-up the next command waits for).
        per = [int(v[1]) / int(v[3]) for v in rs.values() if int(v[3]) > 0]
        sl = [int(v[4]) / int(v[3]) for v in rs.values() if v[4] != "NA" and int(v[3]) > 0]
        p = "%.2f" % med(per) if per else "-"
        q = "%.2f" % med(sl) if sl else "-"
        print("| %s | %s | %.0f | %.2f | %s | %s | %s | %s |" % (j, d, med(iops), med(ratio), c, cr, p, q))
EOF
  echo
  sed 's/^# /- /' "$res/info.txt"
  echo
  echo "Raw results (round, job, disk, IOPS, fio I/Os, handler CPU ns, disk requests,"
  echo "handler voluntary context switches):"
  echo
  sed 's/^/    /' "$res/results.tsv"
} > "$out"
cat "$out"
