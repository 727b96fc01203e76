#!/bin/bash
# The zoned block devices of today's kernel side by side (`make
# bench-ublk`): one qemu TCG guest run (tests/vm/vm-run --kernel-root
# modern) with, all of the same geometry (512 MiB, 16 MiB zones, no
# conventional zone, 4096-byte blocks, no open-zone limit):
#   null_blk       zoned, memory_backed=1 (in-kernel): the anchor
#   zloop          Linux's zoned loop driver, base_dir on a guest tmpfs
#   znbd-ublk      this project's ublk front-end, in RAM
#   znbd-ublk-dir  the same with dir= on zloop's tmpfs
#   znbd-tcmu      this project's TCMU front-end (tcm_loop -> /dev/sdX), RAM
#   znbd-ublk-q2   znbd-ublk in RAM with --queues 2 (the random read only)
#   znbd-ublk-poll, znbd-ublk-dir-poll
#                  znbd-ublk and znbd-ublk-dir with --poll-us 100 (their
#                  queue's thread polls 100 us for the next requests
#                  before it sleeps), dir= on the same tmpfs
# Jobs (fio, libaio, direct=1, --zonemode=zbd, time_based, I/O
# scheduler none unless named; every zone reset before each cell):
#   write-4k, write-128k          sequential write, QD32 (rublk's zfio)
#   randwrite-4k, randwrite-128k  random write, QD32, --max_open_zones=8
#   randwrite-4k-8j               4 KiB random write, QD32, numjobs=8
#                                 (--max_open_zones=8, group_reporting)
#   randread-4k                   4 KiB random read, QD32, over 128 MiB
#                                 written first
#   write-4k-qd64-b16-SCHED       4 KiB sequential write, QD64,
#                                 iodepth_batch_submit=16,
#                                 iodepth_batch_complete_min=16, with the
#                                 none and mq-deadline schedulers, on
#                                 null_blk, znbd-ublk and
#                                 znbd-ublk-poll only
# Rounds run job after job, each on every disk in turn, the disk order
# rotated by one each round.  Per job a table: median IOPS over the
# rounds, medians of the per-round ratios to null_blk, znbd-ublk /
# znbd-tcmu, znbd-ublk / zloop (RAM vs zloop on tmpfs) and znbd-ublk-dir
# / zloop (the same tmpfs), and the user-space servers' CPU ns per
# request.  Under TCG only ratios from this one guest run mean anything.
# The guest CPU is qemu's "max" without ERMS (BENCH_UBLK_CPU, default
# max,-erms): TCG runs `rep movsb` a byte at a time (measured in a 6.18
# guest: a 128 KiB memcpy 245 us with it, 36 us without, 535 against
# 3600 MB/s), and with ERMS advertised both glibc's memcpy and the
# kernel's copy_to_user/copy_from_user pick it for large copies, so the
# table would weigh each device's copies by an emulation artefact, not by
# their number.  The same CPU for every disk; BENCH_UBLK_CPU=max measures
# with it.
# Targets (reported, not asserted): znbd-ublk >= 2x znbd-tcmu on every
# row, >= 1.0x zloop on every 4 KiB row with the same backing, and >= 0.5x
# null_blk on the 4 KiB random read; reported for the polling disks too.
#
# BENCH_UBLK_SET=seed004: file-backed zones as the linux-block thread
# that compared zloop with a user-space target measured them (rublk's
# scripts/zfio): zloop's base_dir and znbd-ublk's dir= on XFS over a RAM
# disk (brd) in the guest, whose buffered writes io_uring issues without
# a worker (FOP_BUFFER_WASYNC);
#   null_blk, zloop, znbd-ublk (RAM), znbd-ublk-dir (zero copy where the
#   kernel has it), znbd-ublk-dir-copy (--zero-copy off), and with
#   BENCH_UBLK_OLD=PATH (another build's znbd-ublk) znbd-ublk-old (RAM);
#   null_blk-tT and znbd-ublk-tT: plain 64 MiB disks each request held T
#   (completion_nsec 100 us and 1 ms; null_blk in timer mode, irqmode=2);
# jobs: write-4k, write-128k, randwrite-4k, randwrite-128k at QD32, each
# with 1 job and 8 (-8j: --numjobs=8 --cpus_allowed_policy=split, the
# sequential ones an eighth of the disk each), randread-4k (with the old
# build), lat-100us-qd1/qd32, lat-1ms-qd1/qd32 (4 KiB random reads).
# Targets: znbd-ublk-dir >= 1.0x zloop on every write row and >= 2x on the
# random-zone write rows; znbd-ublk-tT >= 0.8x null_blk-tT, and QD32/QD1
# at 1 ms >= 0.8x null_blk's own; znbd-ublk >= 0.95x znbd-ublk-old;
# moonshot: znbd-ublk >= 1.5x null_blk on randread-4k, znbd-ublk-dir >=
# 1.5x zloop on every write row.
#   usage: bench/ublk-bench.sh [RUNTIME-S] (default 5 s per cell)
# Environment: BUILD (build tree, default ./build), BENCH_ROUNDS (3),
# BENCH_UBLK_OUT (result file instead of bench/results/ublk-<date>.md),
# BENCH_UBLK_JOBS (some of the jobs only: names as above, e.g. for a smoke
# run), BENCH_UBLK_LIMIT (seconds of rounds in the guest: no round is
# started that would end past it, judged by the rounds before; default 0,
# no limit), BENCH_UBLK_CPU (the guest's qemu -cpu, default max,-erms).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
rt=${1:-5}
rounds=${BENCH_ROUNDS:-3}
cpu=${BENCH_UBLK_CPU:-max,-erms}
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
for t in fio jq blkzone; do
  command -v $t > /dev/null || { echo "ublk-bench: $t is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
for b in ublk/znbd-ublk tcmu/znbd-tcmu; do
  [ -x "$build/$b" ] || { echo "ublk-bench: $build/$b is not built" >&2; exit 1; }
done
# shellcheck source=../tests/vm/modern-kernel.sh
. "$top/tests/vm/modern-kernel.sh"
modern_kernel || { echo "ublk-bench: $MODERN_WHY" >&2; exit 1; }
# shellcheck source=vm-lib.sh
. "$top/bench/vm-lib.sh"
vm_bench_host ublk-bench
bset=${BENCH_UBLK_SET:-tmpfs}
case $bset in
  tmpfs) name=ublk ;;
  seed004) name=ublk-seed004 ;;
  *) echo "ublk-bench: BENCH_UBLK_SET=$bset: tmpfs or seed004" >&2 && exit 1 ;;
esac
if [ -n "${BENCH_UBLK_OLD:-}" ] && [ ! -x "$BENCH_UBLK_OLD" ]; then
  echo "ublk-bench: BENCH_UBLK_OLD=$BENCH_UBLK_OLD is not a program" >&2
  exit 1
fi
out=${BENCH_UBLK_OUT:-$top/bench/results/$name-$date.md}
# tmpfs: 7 disks x 5 jobs + 8 + 3 x 2: 49 cells a round; seed004: 5 x 9 +
# 2 + 4 x 2: 55.  Each the run time and about 3 s of fio start-up and
# zone resets under TCG.
cells=49
[ "$bset" = tmpfs ] || cells=55
echo "ublk-bench: one guest run on $MODERN_KVER, $rounds rounds of $cells fio cells of $rt s" >&2
"$top/tests/vm/vm-run" -v -t $((300 + rounds * cells * (rt + 10))) -m 6144 --append no_timer_check \
  --qemu -cpu --qemu "$cpu" --kernel-root "$MODERN_ROOT" --kernel "$MODERN_KVER" -w "$res:/results" -e "top_builddir=$build" -e "top_srcdir=$top" \
  ${BENCH_UBLK_JOBS:+-e "BENCH_UBLK_JOBS=$BENCH_UBLK_JOBS"} -e "BENCH_UBLK_LIMIT=${BENCH_UBLK_LIMIT:-0}" \
  -e "BENCH_UBLK_SET=$bset" ${BENCH_UBLK_OLD:+-e "BENCH_UBLK_OLD=$BENCH_UBLK_OLD"} \
  "$top/bench/ublk-bench-guest.sh" "$rt" "$rounds"
rc=$?
[ "$rc" = 0 ] || { echo "ublk-bench: the guest run failed (status $rc)" >&2; exit 1; }
nrounds=$(cat "$res/rounds" 2> /dev/null || echo 0)
mkdir -p "$(dirname "$out")"
{
  echo "# Zoned block devices on today's kernel: znbd-ublk beside null_blk, zloop and znbd-tcmu"
  echo
  echo "One guest run (qemu TCG, -cpu $cpu, tests/vm/vm-run --kernel-root modern -m 6144), $nrounds interleaved"
  echo "rounds (of $rounds asked for) of ${rt} s per cell, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, host kernel"
  echo "$(uname -r), $(nproc) host CPUs, host load $load0 -> $(cut -d' ' -f1-3 /proc/loadavg),"
  echo "whole run $((SECONDS - t0)) s.  IOPS: median over the rounds; ratios: median of the"
  echo "per-round ratios; CPU ns/req: the server process's time on a CPU (all threads,"
  echo "/proc/PID/task/*/schedstat) over the cell, divided by fio's I/Os (user-space servers only);"
  echo "ios/req: fio's I/Os per request the disk completed (/sys/block/X/stat; above 1: merged)."
  echo
  python3 "$top/bench/ublk-report.py" "$res/results.tsv" "$bset"
  echo
  sed 's/^# /- /' "$res/info.txt"
  echo
  echo "Raw results (round, job, disk, IOPS, fio I/Os, server CPU ns, disk requests, cell wall s):"
  echo
  sed 's/^/    /' "$res/results.tsv"
} > "$out"
cat "$out"
