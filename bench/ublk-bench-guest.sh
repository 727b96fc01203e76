#!/bin/bash
# The guest half of bench/ublk-bench.sh (run by tests/vm/vm-run on
# today's kernel): the zoned disks side by side, the same geometry
# (512 MiB, 16 MiB zones, no conventional zone, 4096-byte blocks, no
# open-zone limit), fio jobs on them in interleaved rounds.  Appends
# "ROUND JOB DISK IOPS FIO-IOS SERVER-CPU-NS DISK-REQUESTS CELL-S" lines
# to /results/results.tsv (CELL-S: the cell's wall seconds, zone resets
# and the read job's fill included), the set-up
# to /results/info.txt and the rounds done to /results/rounds.
#   usage: ublk-bench-guest.sh RUNTIME-S ROUNDS
# Environment (vm-run -e): top_builddir, top_srcdir; BENCH_UBLK_JOBS (some of the
# jobs only, e.g. for a smoke run); BENCH_UBLK_LIMIT (seconds: no round is
# started that the rounds so far say would end after it; 0: no limit);
# BENCH_UBLK_SET: tmpfs (default: the disks and jobs above) or seed004
# (file-backed zones on XFS, injected latency, RAM against another
# build: bench/ublk-bench.sh says which); BENCH_UBLK_OLD: that other
# build's znbd-ublk (seed004; none: no A/B rows).
set -u
rt=$1 rounds=$2
# shellcheck source=vm-lib.sh
. "$top_srcdir/bench/vm-lib.sh"
vm_bench_guest
info() { echo "# $*" | tee -a $out/info.txt; }
die() { echo "ublk-bench: $*" >&2; exit 1; }
MB=512 ZMB=16 BS=4096
UBLK=$top_builddir/ublk/znbd-ublk
TCMU=$top_builddir/tcmu/znbd-tcmu
[ -x "$UBLK" ] || die "$UBLK is not built"
[ -x "$TCMU" ] || die "$TCMU is not built"
for m in null_blk ublk_drv zloop target_core_user tcm_loop sd_mod; do
  case $m in null_blk) modprobe $m nr_devices=0 ;; *) modprobe $m ;; esac || die "modprobe $m"
done
bset=${BENCH_UBLK_SET:-tmpfs}
# zloop's base_dir and znbd-ublk's dir= on one file system: a tmpfs, or
# (seed004) XFS on a RAM disk (brd), whose buffered writes io_uring
# issues without a worker thread (FOP_BUFFER_WASYNC).
FS=$work/fs
mkdir -p $FS || die "no $FS"
if [ "$bset" = seed004 ]; then
  modprobe brd rd_nr=1 rd_size=$((4 * MB * 1024)) && modprobe xfs &&
    mkfs.xfs -f -q /dev/ram0 && mount -t xfs /dev/ram0 $FS || die "no XFS on brd"
else
  mount -t tmpfs -o size=$((4 * MB))m bench $FS || die "no tmpfs"
fi
mkdir $FS/zloop $FS/zloop/0 $FS/znbd $FS/znbd-poll $FS/znbd-copy || die "no directories on $FS"

# DEV[NAME]: each disk's /dev node, by its name in the tables; PID[NAME]:
# its server process (the user-space ones only).
declare -A DEV PID
# nullb_add NAME ITEM ATTR=VALUE...: a memory-backed null_blk (configfs
# item ITEM) as disk NAME.
nullb_add() {
  local name=$1 nb=/sys/kernel/config/nullb/$2 a
  shift 2
  mkdir "$nb" || die "no null_blk configfs"
  for a in blocksize=$BS memory_backed=1 "$@" power=1; do
    echo "${a#*=}" > "$nb/${a%%=*}" || die "null_blk: cannot set $a"
  done
  DEV[$name]=/dev/${nb##*/}
  [ -b "${DEV[$name]}" ] || DEV[$name]=/dev/nullb$(cat "$nb/index")
}
nullb_add null_blk zb0 size=$MB zoned=1 zone_size=$ZMB zone_nr_conv=0

# zloop on the tmpfs.
echo "add id=0,capacity_mb=$MB,zone_size_mb=$ZMB,conv_zones=0,base_dir=$FS/zloop" > /dev/zloop-control ||
  die "zloop add"
for _ in $(seq 100); do [ -b /dev/zloop0 ] && break; sleep 0.1; done
DEV[zloop]=/dev/zloop0

# ublk_start NAME ARG...: znbd-ublk ARG... as disk NAME.
ublk_start() {
  local name=$1 d=''
  shift
  "$UBLK" "$@" > "$work/$name.out" 2> "$work/$name.err" < /dev/null &
  PID[$name]=$!
  for _ in $(seq 300); do
    d=$(head -n 1 "$work/$name.out")
    [ -n "$d" ] && break
    sleep 0.1
  done
  [ -b "$d" ] || { cat "$work/$name.err"; die "znbd-ublk $* did not start"; }
  DEV[$name]=$d
}
geo="size=${MB}M zone_size=${ZMB}M blocksize=$BS zone_nr_conv=0 zone_max_open=0"
# shellcheck disable=SC2086
ublk_start znbd-ublk $geo
# shellcheck disable=SC2086
ublk_start znbd-ublk-dir $geo dir=$FS/znbd
if [ "$bset" = seed004 ]; then
  # dir= with user copy (the tag's buffer between the kernel and the
  # file) beside the zero-copy default; injected latency against
  # null_blk's timer mode, on plain disks; the other build in RAM.
  # shellcheck disable=SC2086
  ublk_start znbd-ublk-dir-copy --zero-copy off $geo dir=$FS/znbd-copy
  for t in 100us:100000 1ms:1000000; do
    nullb_add null_blk-t${t%%:*} t${t%%:*} size=64 zoned=0 irqmode=2 completion_nsec=${t#*:}
    ublk_start znbd-ublk-t${t%%:*} size=64M zoned=false completion_nsec=${t#*:}
  done
  if [ -n "${BENCH_UBLK_OLD:-}" ]; then
    UBLK_NEW=$UBLK UBLK=$BENCH_UBLK_OLD
    # shellcheck disable=SC2086
    ublk_start znbd-ublk-old $geo
    UBLK=$UBLK_NEW
  fi
else
  # shellcheck disable=SC2086
  ublk_start znbd-ublk-q2 --queues 2 $geo
  # The same two with their queue's thread polling 100 us for the next
  # requests before it sleeps (--poll-us).
  # shellcheck disable=SC2086
  ublk_start znbd-ublk-poll --poll-us 100 $geo
  # shellcheck disable=SC2086
  ublk_start znbd-ublk-dir-poll --poll-us 100 $geo dir=$FS/znbd-poll
fi

# znbd-tcmu through tcm_loop: /dev/sdX (the tmpfs set).
tcmu_start() {
  # shellcheck disable=SC2086
  "$TCMU" bench0 $geo > "$work/tcmu.log" 2>&1 < /dev/null &
  PID[znbd-tcmu]=$!
  d=
  for _ in $(seq 120); do
    for b in /sys/block/sd*; do
      case $(cat "$b/device/model" 2> /dev/null) in znbd*) d=${b##*/} ;; esac
    done
    [ -n "$d" ] && grep -q 'serving on' "$work/tcmu.log" && break
    sleep 0.5
  done
  [ -n "$d" ] || { cat "$work/tcmu.log"; die "no znbd-tcmu disk"; }
  # No udev in the guest: the node from sysfs where devtmpfs has none.
  [ -b "/dev/$d" ] || { IFS=: read -r ma mi < "/sys/block/$d/dev" && mknod "/dev/$d" b "$ma" "$mi"; }
  DEV[znbd-tcmu]=/dev/$d
}
if [ "$bset" = seed004 ]; then
  devs="null_blk zloop znbd-ublk znbd-ublk-dir znbd-ublk-dir-copy"
  lat="null_blk-t100us znbd-ublk-t100us null_blk-t1ms znbd-ublk-t1ms"
  [ -z "${BENCH_UBLK_OLD:-}" ] || devs="$devs znbd-ublk-old"
else
  tcmu_start
  devs="null_blk zloop znbd-ublk znbd-ublk-dir znbd-tcmu znbd-ublk-q2 znbd-ublk-poll znbd-ublk-dir-poll"
  lat=
fi
info "guest kernel $(uname -r), $(nproc) vCPUs, $(($(awk '/MemTotal/ { print $2 }' /proc/meminfo) / 1024)) MiB"
info "fio $(fio --version), libaio, direct=1, --zonemode=zbd, runtime $rt s per cell (time_based)"
for n in $devs $lat; do
  d=${DEV[$n]}
  q=/sys/block/${d#/dev/}/queue
  case " $lat " in
    *" $n "*) [ "$(cat $q/zoned)" = none ] || die "$n ($d) is zoned" ;;
    *) [ "$(cat $q/zoned)" = host-managed ] || die "$n ($d) is not host-managed" ;;
  esac
  echo none > $q/scheduler || die "$n: no scheduler none"
  info "$n: $d, $(cat $q/nr_zones) zones of $(($(cat $q/chunk_sectors) / 2048)) MiB," \
    "block $(cat $q/logical_block_size), max open $(cat $q/max_open_zones)," \
    "hw queues $(ls /sys/block/${d#/dev/}/mq | wc -l), nr_requests $(cat $q/nr_requests)"
done
if [ "$bset" = seed004 ]; then
  # Not its path, which names one machine: the results are committed.
  old_build=none
  [ -z "${BENCH_UBLK_OLD:-}" ] || old_build="another build of znbd-ublk (BENCH_UBLK_OLD: name its commit here)"
  info "znbd-ublk: znbd-ublk $geo (RAM); znbd-ublk-dir: the same with dir= on the XFS (brd) of" \
    "zloop's base_dir, zero copy ($(grep -c 'zero copy' "$work/znbd-ublk-dir.err") note);" \
    "znbd-ublk-dir-copy: the same with --zero-copy off; znbd-ublk-old: $geo (RAM), $old_build;" \
    "null_blk-tT, znbd-ublk-tT: plain 64 MiB disks, completion_nsec T (null_blk irqmode=2);" \
    "zloop: add id=0,capacity_mb=$MB,zone_size_mb=$ZMB,conv_zones=0 (other options its defaults)"
else
  info "znbd-ublk: znbd-ublk $geo (RAM); znbd-ublk-dir: the same with dir= on the tmpfs of" \
    "zloop's base_dir; znbd-ublk-q2: RAM with --queues 2; znbd-ublk-poll and znbd-ublk-dir-poll:" \
    "the first two with --poll-us 100; znbd-tcmu: znbd-tcmu bench0 $geo (tcm_loop);" \
    "zloop: add id=0,capacity_mb=$MB,zone_size_mb=$ZMB,conv_zones=0 (other options its defaults)"
fi

cpu_ns() { # PID: ns on a CPU, all threads (NA: no server process)
  [ -n "$1" ] || { echo NA; return; }
  cat /proc/"$1"/task/*/schedstat 2> /dev/null | awk '{ s += $1 } END { printf "%d", s }'
}
requests() { # DEV: requests the disk completed, reads and writes (NA: no stat)
  awk '{ print $1 + $5 }' "/sys/block/${1#/dev/}/stat" 2> /dev/null || echo NA
}
# cell ROUND JOB NAME T0 FIO-ARGS...: one fio run (the cell began at
# $SECONDS T0); a line of results.tsv.
cell() {
  local r=$1 j=$2 n=$3 d pid c0 c1 q0 q1 rc=0 f=$work/$2-$3 iops ios cpu=NA reqs=NA t=$4
  shift 4
  d=${DEV[$n]} pid=${PID[$n]:-}
  c0=$(cpu_ns "$pid") q0=$(requests "$d")
  fio --name="$j" --filename="$d" --direct=1 --ioengine=libaio --zonemode=zbd \
    --runtime="$rt" --time_based --group_reporting --output-format=json --output="$f.json" \
    "$@" > "$f.log" 2>&1 || rc=$?
  c1=$(cpu_ns "$pid") q1=$(requests "$d")
  read -r iops ios < <(jq -r '.jobs[0] | "\((.read.iops + .write.iops) | floor) \(.read.total_ios + .write.total_ios)"' "$f.json" 2> /dev/null)
  [ "$rc" = 0 ] && [ -n "${iops:-}" ] || { iops=NA ios=0; sed "s/^/  $n $j: /" "$f.log" | head -5; }
  [ "$c0" = NA ] || cpu=$((c1 - c0))
  [ "$q0" = NA ] || [ "$q1" = NA ] || reqs=$((q1 - q0))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$j" "$n" "$iops" "$ios" "$cpu" "$reqs" $((SECONDS - t)) |
    tee -a $out/results.tsv
}
# prepare JOB DEV: every zone empty; the read job's 128 MiB written first.
prepare() {
  case $1 in lat-*) return 0 ;; esac # plain disks, read anywhere
  blkzone reset "$2" || return 1
  case $1 in
    randread-*)
      fio --name=fill --filename="$2" --direct=1 --ioengine=libaio --iodepth=4 \
        --zonemode=zbd --rw=write --bs=1M --offset=0 --size=128M > "$work/fill.log" 2>&1 ||
        { cat "$work/fill.log"; return 1; }
      ;;
  esac
}
if [ "$bset" = seed004 ]; then
  jobs=${BENCH_UBLK_JOBS:-write-4k write-128k randwrite-4k randwrite-128k write-4k-8j write-128k-8j
    randwrite-4k-8j randwrite-128k-8j randread-4k lat-100us-qd1 lat-100us-qd32 lat-1ms-qd1 lat-1ms-qd32}
else
  jobs=${BENCH_UBLK_JOBS:-write-4k write-128k randwrite-4k randwrite-128k randwrite-4k-8j randread-4k
    write-4k-qd64-b16-none write-4k-qd64-b16-mq-deadline}
fi
limit=${BENCH_UBLK_LIMIT:-0} t0=$SECONDS nr=0
for r in $(seq 1 "$rounds"); do
  el=$((SECONDS - t0))
  if [ "$limit" != 0 ] && [ $nr != 0 ] && [ $((el + el / nr)) -gt "$limit" ]; then
    info "stopped after $nr of $rounds rounds ($el s): another would end past the limit of $limit s"
    break
  fi
  for j in $jobs; do
    sched=none on="null_blk zloop znbd-ublk znbd-ublk-dir znbd-tcmu znbd-ublk-poll znbd-ublk-dir-poll"
    [ "$bset" = seed004 ] && on="null_blk zloop znbd-ublk znbd-ublk-dir znbd-ublk-dir-copy"
    # 8 jobs: rublk's zfio (--cpus_allowed_policy=split); a sequential
    # writer each on an eighth of the disk.
    j8="--numjobs=8 --cpus_allowed_policy=split"
    case $j in
      write-4k-8j) a="--rw=write --bs=4k --iodepth=32 $j8 --size=$((MB / 8))M --offset_increment=$((MB / 8))M" ;;
      write-128k-8j) a="--rw=write --bs=128k --iodepth=32 $j8 --size=$((MB / 8))M --offset_increment=$((MB / 8))M" ;;
      randwrite-128k-8j) a="--rw=randwrite --bs=128k --iodepth=32 $j8 --max_open_zones=8 --norandommap --randrepeat=0" ;;
      lat-*) t=${j#lat-} t=${t%-qd*} on="null_blk-t$t znbd-ublk-t$t"
        a="--zonemode=none --rw=randread --bs=4k --iodepth=${j##*-qd} --norandommap --randrepeat=0" ;;
    esac
    case $j in
      write-4k) [ "$bset" = seed004 ] && [ -n "${BENCH_UBLK_OLD:-}" ] && on="$on znbd-ublk-old"
        a="--rw=write --bs=4k --iodepth=32" ;;
      write-128k) a="--rw=write --bs=128k --iodepth=32" ;;
      randwrite-4k) a="--rw=randwrite --bs=4k --iodepth=32 --max_open_zones=8 --norandommap --randrepeat=0" ;;
      randwrite-128k) a="--rw=randwrite --bs=128k --iodepth=32 --max_open_zones=8 --norandommap --randrepeat=0" ;;
      randwrite-4k-8j) a="--rw=randwrite --bs=4k --iodepth=32 $j8 --max_open_zones=8 --norandommap --randrepeat=0" ;;
      randread-4k) [ "$bset" = seed004 ] && on="null_blk zloop znbd-ublk znbd-ublk-dir znbd-ublk-dir-copy"
        on="$on $([ "$bset" = seed004 ] && echo "${BENCH_UBLK_OLD:+znbd-ublk-old}" || echo znbd-ublk-q2)"
        a="--rw=randread --bs=4k --iodepth=32 --offset=0 --size=128M --norandommap --randrepeat=0" ;;
      write-4k-qd64-b16-*) on="null_blk znbd-ublk znbd-ublk-poll" sched=${j#write-4k-qd64-b16-}
        a="--rw=write --bs=4k --iodepth=64 --iodepth_batch_submit=16 --iodepth_batch_complete_min=16" ;;
    esac
    # Round r starts at the (r-1)th disk of the list (the others in turn
    # after it): each disk takes every place in turn, none always first.
    set -- $on
    k=$(((r - 1) % $#))
    order="${*:k+1} ${*:1:k}"
    for n in $order; do
      d=${DEV[$n]} tc=$SECONDS
      prepare $j "$d" || { printf '%s\t%s\t%s\tNA\t0\tNA\tNA\t0\n' "$r" "$j" "$n" >> $out/results.tsv; continue; }
      echo $sched > /sys/block/${d#/dev/}/queue/scheduler
      # shellcheck disable=SC2086
      cell "$r" "$j" "$n" $tc $a
      echo none > /sys/block/${d#/dev/}/queue/scheduler
    done
  done
  nr=$r
  echo $nr > $out/rounds
  info "round $r done at $((SECONDS - t0)) s"
done
info "guest load at the end: $(cat /proc/loadavg)"
for p in "${PID[@]}"; do kill "$p"; done
for p in "${PID[@]}"; do wait "$p"; done
echo "remove id=0" > /dev/zloop-control
exit 0
