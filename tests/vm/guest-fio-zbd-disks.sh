#!/bin/bash
# In the vm-run guest: fio's own t/zbd/test-zbd-support, unchanged, on
# Linux null_blk, on a znbd-tcmu disk (/dev/sdX through LIO TCMU and
# tcm_loop) and, where the kernel has ublk, on a znbd-ublk disk
# (/dev/ublkbN) of the same geometry, one after the other in one boot,
# and the pass lists side by side (man znbd-tcmu and znbd-ublk, "FIO'S
# ZONED TEST SUITE").
# make check-vm runs it through guest-fio-zbd.sh (fio-zbd.test), which
# checks the two lists test by test; by hand, from the top of a build:
#
#   mkdir -p /tmp/zbd-out
#   tests/vm/vm-run -t 7200 -m 3072 --expose "$PWD" --expose "$PWD/build" \
#     -w /tmp/zbd-out:/out -e top_builddir="$PWD/build" -e top_srcdir="$PWD" \
#     tests/vm/guest-fio-zbd-disks.sh 1m [-t N]...
#
# GEOM as for guest-fio-zbd-nullb.sh (1m, zcap, open8; zcap is served with
# ZBC-2 gap zones on SCSI); other arguments go to test-zbd-support.  The
# per-test logs go to /out/nullb, /out/tcmu and /out/ublk when that share exists;
# the last lines are "tcmu vs null_blk: SAME" (and "ublk vs ...") or the
# tests whose result differs.
set -u
# vm-run runs a copy of this script: the tree comes from top_srcdir.
: "${top_srcdir:?top_srcdir: the source tree (vm-run -e)}"
: "${top_builddir:=$top_srcdir/build}"
geom=$1
shift
fio_src=${FIO_SOURCE:-/usr/local/src/fio}
work=/tmp/zbdt
mkdir -p "$work"

# The reference: guest-fio-zbd-nullb.sh's null_blk, its own run.
mkdir -p /out/nullb 2> /dev/null
bash "$top_srcdir/tests/vm/guest-fio-zbd-nullb.sh" "$geom" "$@" | tee "$work/nullb.out"
[ -d /out ] && mv /out/test-zbd-support.log.* /out/nullb/ 2> /dev/null
# The geometry is null_blk's own, read back from its configfs (MB; a
# zone_capacity of 0 means the whole zone), so the two cannot drift.
NB=/sys/kernel/config/nullb/nullb0
size=$(cat $NB/size) zsize=$(cat $NB/zone_size) zcap=$(cat $NB/zone_capacity)
maxopen=$(cat $NB/zone_max_open) bs=$(cat $NB/blocksize)
[ "$zcap" != 0 ] || zcap=$zsize
opts=()
[ "$maxopen" = 0 ] || opts=(-o "$maxopen") # as guest-fio-zbd-nullb.sh runs the suite
echo 0 > $NB/power && rmdir $NB

# The znbd-tcmu disk with the same geometry and block size, no
# conventional zones, in RAM.
for m in target_core_user tcm_loop sd_mod sg; do modprobe "$m" || exit 1; done
cap=()
[ "$zcap" = "$zsize" ] || cap=(zone_capacity=${zcap}M)
"$top_builddir/tcmu/znbd-tcmu" zbd0 size=${size}M zone_size=${zsize}M "${cap[@]}" \
  blocksize=$bs zone_nr_conv=0 zone_max_open=$maxopen > "$work/tcmu.log" 2>&1 &
pid=$!
d=
for _ in $(seq 1 120); do
  d=$(ls /sys/block | grep '^sd' | head -1)
  [ -n "$d" ] && grep -q 'serving on' "$work/tcmu.log" && break
  sleep 0.5
done
[ -n "$d" ] || { cat "$work/tcmu.log"; exit 1; }
dev=/dev/$d
# No udev in the guest: the node from sysfs.
[ -b "$dev" ] || { IFS=: read -r ma mi < "/sys/block/$d/dev" && mknod "$dev" b "$ma" "$mi"; }
for g in /sys/block/"$d"/device/scsi_generic/*; do
  [ -c "/dev/${g##*/}" ] || { IFS=: read -r ma mi < "$g/dev" && mknod "/dev/${g##*/}" c "$ma" "$mi"; }
done
suite=$work/t/zbd
mkdir -p "$suite"
cp "$fio_src/t/zbd/test-zbd-support" "$fio_src/t/zbd/functions" "$suite/"
ln -sf "$(type -P fio)" "$work/fio"
rc=0
# run_suite NAME DEV [ARG...]: the suite on DEV, its output in
# $work/NAME.out and its per-test logs in $work/NAME/ (and /out/NAME).
run_suite() {
  local name=$1 dev=$2 d=${2#/dev/}
  shift 2
  echo "$name $dev: $(cat /sys/block/$d/queue/zoned), $(cat /sys/block/$d/queue/nr_zones) zones," \
    "max_open $(cat /sys/block/$d/queue/max_open_zones), scheduler $(cat /sys/block/$d/queue/scheduler)"
  rm -f "$suite"/test-zbd-support.log.*
  bash "$suite/test-zbd-support" "$@" "$dev" | tee "$work/$name.out" || rc=$?
  mkdir -p "$work/$name" && cp "$suite"/test-zbd-support.log.* "$work/$name/" 2> /dev/null
  if [ -d /out ]; then
    mkdir -p "/out/$name"
    cp "$suite"/test-zbd-support.log.* "/out/$name/" 2> /dev/null
  fi
}
run_suite tcmu "$dev" "${opts[@]}" "$@"
kill "$pid"
wait "$pid"
sed 's/^/# znbd-tcmu: /' "$work/tcmu.log"

# znbd-ublk, where the kernel has ublk_drv (6.6 and later; not Debian
# 12's 6.1): the same geometry in RAM as a host-managed /dev/ublkbN.
if modprobe ublk_drv 2> /dev/null && [ -x "$top_builddir/ublk/znbd-ublk" ]; then
  "$top_builddir/ublk/znbd-ublk" size=${size}M zone_size=${zsize}M "${cap[@]}" \
    blocksize=$bs zone_nr_conv=0 zone_max_open=$maxopen > "$work/ublk.dev" 2> "$work/ublk.log" &
  pid=$!
  dev=
  for _ in $(seq 1 120); do
    dev=$(head -n 1 "$work/ublk.dev")
    [ -n "$dev" ] && break
    sleep 0.5
  done
  [ -b "$dev" ] || { cat "$work/ublk.log"; exit 1; }
  run_suite ublk "$dev" "${opts[@]}" "$@"
  kill "$pid"
  wait "$pid"
  sed 's/^/# znbd-ublk: /' "$work/ublk.log"
fi

# Side by side: "NN STATUS" per test from each run.
results() { sed -nE 's/^Running test ([0-9]+) \.\.\. (PASS|FAIL|SKIP).*/\1 \2/p' "$1"; }
results "$work/nullb.out" > "$work/nullb.res"
results "$work/tcmu.out" > "$work/tcmu.res"
runs="nullb tcmu"
[ -f "$work/ublk.out" ] && results "$work/ublk.out" > "$work/ublk.res" && runs="$runs ublk"
for t in $runs; do
  echo "$t: $(grep -c PASS "$work/$t.res") passed, $(grep -c FAIL "$work/$t.res") failed," \
    "$(grep -c SKIP "$work/$t.res") skipped; failed: $(awk '$2 == "FAIL" {printf "%s ", $1}' "$work/$t.res")"
done
for t in ${runs#nullb }; do
  if diff "$work/nullb.res" "$work/$t.res" > "$work/res.diff"; then
    echo "$t vs null_blk: SAME"
  else
    echo "$t vs null_blk: differences (< null_blk, > $t):"
    cat "$work/res.diff"
  fi
done
exit "$rc"
