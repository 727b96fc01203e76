#!/bin/bash
# In-guest kernel anchors (`make bench-vm`): one qemu TCG guest run
# (tests/vm/vm-run) measures, with fio, 4 KiB I/O on
#   brd (/dev/ram0, bio based), null_blk queue_mode=0 (bio) and
#   queue_mode=2 (blk-mq), memory_backed=1, and /dev/nbd0 (kernel NBD
#   client, nbd-client -b 4096) on nbdkit + zoned.so and on znbd bio / mq,
#   all RAM disks (zoned=false):
#   read, randread, write, randwrite x io_uring, libaio, iodepth 128;
# and the zoned case: null_blk zoned (completion_nsec=100000
#   hw_queue_depth=64 irqmode=2 memory_backed=1 zone_size=1) sequential
#   write iodepth 64, --ioscheduler=none vs mq-deadline, next to /dev/nbd0
#   on zoned exports (1 MiB zones, completion_nsec=100000).
# Writes bench/results/vm-<UTC date>.md (table, ratios, commands, kernel,
# load) and prints the table.  Under TCG absolute figures mean little:
# only ratios between devices measured in this one guest run are
# meaningful.
#   usage: bench/vm-bench.sh [RUNTIME-S]      (default 3 s per fio job)
# Environment: BUILD (build tree, default ./build), BENCH_VM_OUT (result
# file instead of bench/results/vm-<date>.md).
set -u
if [ "${1:-}" = --guest ]; then
  # ------------------------------------------------------------ in the guest
  shift
  rt=$1
  out=/results
  export PATH=/usr/bin:/usr/sbin:/bin:/sbin LC_ALL=C
  : > $out/results.tsv
  : > $out/info.txt
  work=$(mktemp -d)
  info() { echo "$*" | tee -a $out/info.txt; }
  plugin=$top_builddir/zoned.so
  [ -f "$plugin" ] || plugin=$top_builddir/plugin/.libs/zoned.so
  znbd=$top_builddir/server/znbd
  NB=/sys/kernel/config/nullb

  # fio_job TAG DEV FIO-ARGS...: one job; appends "TAG<TAB>IOPS<TAB>status".
  fio_job() {
    local tag=$1 dev=$2 rc=0 iops f
    shift 2
    f=$work/${tag//\//_}
    fio --name="${tag//\//_}" --filename="$dev" --direct=1 --bs=4k --runtime="$rt" --time_based \
      --output-format=json --output="$f.json" "$@" > "$f.log" 2>&1 || rc=$?
    iops=$(jq -r '.jobs[0] | ((.read.iops + .write.iops) | floor)' "$f.json" 2> /dev/null)
    [ "$rc" = 0 ] && [ -n "$iops" ] || { iops=NA; sed 's/^/    /' "$f.log" | head -3; }
    printf '%s\t%s\t%s\n' "$tag" "$iops" "$rc" | tee -a $out/results.tsv
  }
  # The RAM-disk matrix on one device.
  matrix() { # NAME DEV (I/O scheduler none where there is a choice)
    local eng rw q=/sys/block/${2#/dev/}/queue/scheduler
    echo none > $q 2> /dev/null
    info "  $2: scheduler for the matrix: $(cat $q)"
    for eng in io_uring libaio; do
      for rw in read randread write randwrite; do
        fio_job "$1/$eng/$rw" "$2" --ioengine=$eng --iodepth=128 --rw=$rw --size=1G \
          --norandommap --randrepeat=0
      done
    done
  }
  mk_nullb() { # NAME attr=value...: create and power on; prints the device
    local name=$1 kv
    shift
    mkdir "$NB/$name" || return 1
    for kv in "$@"; do echo "${kv#*=}" > "$NB/$name/${kv%%=*}" || return 1; done
    echo 1 > "$NB/$name/power" || return 1
    if [ -b "/dev/$name" ]; then echo "/dev/$name"; else echo "/dev/nullb$(cat "$NB/$name/index")"; fi
  }
  rm_nullb() { echo 0 > "$NB/$1/power"; rmdir "$NB/$1"; }
  qinfo() { # DEV
    local b=${1#/dev/}
    local q=/sys/block/$b/queue
    info "  $1: $(blockdev --getsize64 "$1") bytes, scheduler $(cat $q/scheduler), hw queues $(ls /sys/block/$b/mq 2> /dev/null | wc -l), zoned $(cat $q/zoned), nr_requests $(cat $q/nr_requests)"
  }
  SPID=
  serve() { # CMD...: start a server on $work/s.sock, attach /dev/nbd0 (-b 4096)
    local i
    rm -f $work/s.sock $work/s.pid
    "$@" > $work/server.log 2>&1 < /dev/null &
    SPID=$!
    for ((i = 0; i < 100; i++)); do
      [ -S $work/s.sock ] && [ -s $work/s.pid ] && break
      sleep 0.1
    done
    if ! [ -S $work/s.sock ] || ! nbd-client -unix $work/s.sock /dev/nbd0 -b 4096 > /dev/null 2>&1; then
      info "  cannot serve/attach: $* ($(head -c 300 $work/server.log))"
      kill $SPID 2> /dev/null
      SPID=
      return 1
    fi
    info "  server: ${*//"$top_builddir"/BUILD}"
    qinfo /dev/nbd0
  }
  unserve() {
    nbd-client -d /dev/nbd0 > /dev/null 2>&1
    [ -z "$SPID" ] || { kill $SPID; wait $SPID 2> /dev/null; }
    SPID=
    sleep 0.5
  }

  info "kernel $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ {print $2 / 1024 " MiB"}' /proc/meminfo), fio $(fio --version)"
  modprobe brd rd_nr=1 rd_size=1048576
  modprobe null_blk nr_devices=0
  modprobe nbd nbds_max=1
  info "brd: modprobe brd rd_nr=1 rd_size=1048576"
  qinfo /dev/ram0
  matrix brd /dev/ram0
  for qm in 0 2; do
    info "null_blk queue_mode=$qm: configfs memory_backed=1 size=1024 queue_mode=$qm"
    dev=$(mk_nullb nb$qm memory_backed=1 size=1024 queue_mode=$qm) && qinfo "$dev" &&
      matrix "nullb-qm$qm" "$dev"
    rm_nullb nb$qm
  done
  info "nbd0 on nbdkit zoned.so zoned=false"
  serve nbdkit -f -U $work/s.sock -P $work/s.pid "$plugin" size=1G zoned=false blocksize=4096 &&
    matrix nbd-plugin /dev/nbd0
  unserve
  for qm in bio mq; do
    info "nbd0 on znbd --queue-mode=$qm zoned=false"
    serve "$znbd" -f -U $work/s.sock -P $work/s.pid --queue-mode=$qm size=1G zoned=false blocksize=4096 &&
      matrix "nbd-znbd-$qm" /dev/nbd0
    unserve
  done

  # Zoned: sequential writes at iodepth 64.
  zw() { # TAG DEV SCHED ZONEMODE-ARGS...
    local tag=$1 dev=$2 s=$3
    shift 3
    fio_job "$tag" "$dev" --ioengine=io_uring --iodepth=64 --rw=write --ioscheduler="$s" "$@"
  }
  info "null_blk zoned: configfs completion_nsec=100000 hw_queue_depth=64 irqmode=2 memory_backed=1 zone_size=1 size=1024 zoned=1"
  dev=$(mk_nullb zb completion_nsec=100000 hw_queue_depth=64 irqmode=2 memory_backed=1 zone_size=1 size=1024 zoned=1) &&
    qinfo "$dev" && for s in none mq-deadline; do
    blkzone reset "$dev"
    zw "zoned/nullb/$s" "$dev" $s --zonemode=zbd
  done
  rm_nullb zb
  zparams="size=1G zone_size=1M completion_nsec=100000 blocksize=4096"
  info "nbd0 on nbdkit zoned.so $zparams"
  serve nbdkit -f -U $work/s.sock -P $work/s.pid "$plugin" $zparams &&
    zw zoned/nbd-plugin/none /dev/nbd0 none --size=1G
  unserve
  for qm in bio mq; do
    for s in none mq-deadline; do
      [ $qm = mq ] || [ $s = none ] || continue
      opt= extra=
      [ $qm = bio ] || opt=--scheduler=$s
      # zone write locking needs pipelining off (man znbd, QUEUE MODELS)
      [ $s = none ] || extra=pipeline_zoned_writes=false
      info "nbd0 on znbd --queue-mode=$qm $opt $zparams $extra"
      serve "$znbd" -f -U $work/s.sock -P $work/s.pid --queue-mode=$qm $opt $zparams $extra &&
        zw "zoned/nbd-znbd-$qm${opt:+-$s}/none" /dev/nbd0 none --size=1G
      unserve
    done
  done
  info "guest load at the end: $(cat /proc/loadavg)"
  exit 0
fi

# ------------------------------------------------------------------ on the host
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
rt=${1:-3}
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
date=$(date -u +%Y-%m-%d)
out=${BENCH_VM_OUT:-$top/bench/results/vm-$date.md}
res=$(mktemp -d "${TMPDIR:-/tmp}/vm-bench.XXXXXX")
trap 'rm -rf "$res"' EXIT
load0=$(cat /proc/loadavg)
t0=$SECONDS
echo "vm-bench: one guest run, ${rt} s per fio job (about 60 jobs; < 10 min)" >&2
"$top/tests/vm/vm-run" -v -t 1200 -m 4096 -w "$res:/results" \
  -e "top_builddir=$build" -e "top_srcdir=$top" "$top/bench/vm-bench.sh" --guest "$rt"
rc=$?
[ "$rc" = 0 ] || { echo "vm-bench: the guest run failed (status $rc)" >&2; exit 1; }
secs=$((SECONDS - t0))
load1=$(cat /proc/loadavg)

# Table: IOPS per device and job, and the ratio to brd (RAM matrix) or to
# null_blk zoned with none (zoned case).
table=$(awk -F'\t' '
  { split($1, p, "/"); dev = p[1]
    if (dev == "zoned") { zdev[++nz] = p[2] "/" p[3]; ziops[nz] = $2; next }
    job = p[2] " " p[3]; iops[dev, job] = $2
    if (!(dev in seen)) { seen[dev] = 1; devs[++nd] = dev }
    if (!(job in seenj)) { seenj[job] = 1; jobs[++nj] = job } }
  END {
    printf "| device |"; for (j = 1; j <= nj; j++) printf " %s |", jobs[j]; printf "\n|---|"
    for (j = 1; j <= nj; j++) printf "---|"; printf "\n"
    for (d = 1; d <= nd; d++) {
      printf "| %s |", devs[d]
      for (j = 1; j <= nj; j++) {
        v = iops[devs[d], jobs[j]]; b = iops["brd", jobs[j]]
        if (v == "NA" || v == "") printf " n/a |"
        else if (b > 0) printf " %d (%.2f) |", v, v / b
        else printf " %d |", v
      }
      printf "\n"
    }
    printf "\nZoned, sequential write, 4 KiB, io_uring, iodepth 64 (IOPS, ratio to null_blk zoned with none):\n\n"
    printf "| device / scheduler | IOPS | ratio |\n|---|---|---|\n"
    base = 0; for (i = 1; i <= nz; i++) if (zdev[i] == "nullb/none") base = ziops[i]
    for (i = 1; i <= nz; i++) {
      if (ziops[i] == "NA" || base == 0) printf "| %s | %s | n/a |\n", zdev[i], ziops[i]
      else printf "| %s | %d | %.2f |\n", zdev[i], ziops[i], ziops[i] / base
    }
  }' "$res/results.tsv")
commit=$(git -C "$top" rev-parse --short HEAD 2> /dev/null || echo unknown)
mkdir -p "$(dirname "$out")"
{
  echo "# In-guest kernel anchors, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "**TCG guest: absolute IOPS mean little; compare only ratios between devices measured in this one guest run.**"
  echo "Timing-sensitive effects (completion_nsec, scheduler zone write locking) are distorted by TCG."
  echo
  echo "- commit $commit; host $(uname -r), $(nproc) CPUs; host load before: $load0; after: $load1"
  echo "- guest: $(head -1 "$res/info.txt")"
  echo "- qemu $(qemu-system-x86_64 --version | head -1 | awk '{print $4}') TCG (tests/vm/vm-run -m 4096, 2 vCPUs), whole run ${secs} s"
  echo "- fio: 4 KiB, --direct=1, --runtime=$rt --time_based, one job; RAM matrix: --iodepth=128 --size=1G --norandommap --randrepeat=0, I/O scheduler none on every device; read and randread run first, on never-written sectors (zero-fill paths)"
  echo "- /dev/nbd0: nbd-client -unix SOCK /dev/nbd0 -b 4096 (one connection), server in the guest"
  echo "- command: \`make bench-vm\` = \`bench/vm-bench.sh $rt\`"
  echo
  echo "RAM disks, IOPS (ratio to brd in the same column):"
  echo
  echo "$table"
  echo
  echo "Zoned rows: \`nullb/SCHED\` = null_blk zoned with \`fio --zonemode=zbd --ioscheduler=SCHED\`;"
  echo "\`nbd-*/none\` = /dev/nbd0 (not zoned to the kernel: one sequential stream from offset 0, kernel scheduler none)"
  echo "on a zoned export with 1 MiB zones and completion_nsec=100000; \`nbd-znbd-mq-SCHED\` = \`znbd --queue-mode=mq --scheduler=SCHED\`"
  echo "(mq-deadline = znbd's own zone write locking, with pipeline_zoned_writes=false, which the locking needs: see man znbd)."
  echo
  echo "## Setup, as run"
  echo
  echo '```'
  cat "$res/info.txt"
  echo '```'
  echo
  echo "## Raw results (tag, IOPS, fio status)"
  echo
  echo '```'
  cat "$res/results.tsv"
  echo '```'
} > "$out"
echo
echo "$table"
echo
echo "vm-bench: wrote $out (${secs} s)"
