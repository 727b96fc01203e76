#!/bin/bash
# In a guest booted on the Debian 13 root (blktests.test): blktests' zbd
# group, unchanged, as the block layer's developers run it, on Linux
# null_blk (the reference), on znbd-ublk and on znbd-tcmu of the same
# geometry, in one boot; then zbd/007, which needs a "logical" device,
# with `./check -d` on dm-linear over each of the three.  TAP: one check
# per test and znbd disk, passing when its verdict (passed, failed, not
# run) is null_blk's, or, where they differ for a reason that is not a
# defect of znbd, XFAIL (# TODO) with that reason.
#
#   guest-blktests.sh GEOM...
#
# GEOM (each a set of three disks, made in turn): all are 256 MiB with
# 4 KiB blocks, 8 MiB zones, the first 4 conventional, at most 8 open:
#   conv4   zone capacity = zone size
#   zcap    zone capacity 6 MiB (SCSI: ZBC-2 gap zones)
#   nodev   no disk: the group's tests that make their own (zbd/008-012:
#           scsi_debug, null_blk, dm-crypt), once, to record the kernel's
#           verdicts beside the others
#   nbd     not zbd: the nbd group, first with Debian's nbd-server (the
#           reference), then with znbd standing in for it
#           (nbd-server-standin); one check per test: the same verdict
# Environment: BLKTESTS (the suite, built for the root: blktests.test
# does it), ZNBD_ROOT_BUILD (znbd built for the root), BLKTESTS_TIMEOUT
# (blktests' TIMEOUT, the bound of its timed tests, default 30),
# BLKTESTS_DISKS (znbd's disks beside null_blk, default "ublk tcmu").  The
# verdicts go to /out/verdicts ("GEOM DISK TEST VERDICT" lines) and each
# run's results folder to /out/GEOM when /out is shared.
# shellcheck source=guest-lib.sh
. "$top_srcdir/tests/vm/guest-lib.sh"
: "${BLKTESTS:?BLKTESTS: the built suite}" "${ZNBD_ROOT_BUILD:?ZNBD_ROOT_BUILD: znbd built for the root}"
geoms=${*:-conv4}
disks=${BLKTESTS_DISKS:-ublk tcmu}
for g in $geoms; do
  case $g in conv4 | zcap | nodev | nbd) ;; *) echo "guest-blktests.sh: unknown GEOM $g" >&2 && exit 2 ;; esac
done
UBLK=$ZNBD_ROOT_BUILD/ublk/znbd-ublk
TCMU=$ZNBD_ROOT_BUILD/tcmu/znbd-tcmu
# The suite writes its results into its own tree: a writable view.
bt=/tmp/blktests
writable_copy "$BLKTESTS" "$bt" || exit 1
note "t=${SECONDS}s: the suite copied"
[ -d /out ] && : > /out/verdicts

# Differences from null_blk that are not defects of znbd, by
# "GEOM:DISK:TEST" (DISK ublk or tcmu; dm-ublk, dm-tcmu for dm-linear):
# the reason, shown as the check's TODO.
declare -A explained=()

note "kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME"), blktests $(cat "$bt/.znbd-suite" 2> /dev/null)"
# A blocked task's stack on the console (vm-run --console), not only its name.
echo 7 > /proc/sys/kernel/printk
# blktests waits on udev (udevadm settle) and looks disks up by
# /dev/disk/by-*: the root's udevd serves the guest as it would a machine.
/usr/lib/systemd/systemd-udevd --daemon > /dev/null 2>&1 || note "systemd-udevd did not start"
for m in null_blk target_core_user tcm_loop sd_mod sg ublk_drv dm_mod; do
  modprobe "$m" || note "modprobe $m failed"
done
note "t=${SECONDS}s: udevd and modules"
[ -d /sys/module/null_blk ] && [ -e /dev/ublk-control ] && [ -d /sys/kernel/config/target ] || {
  echo "Bail out! null_blk, ublk_drv or TCMU missing in $(uname -r)"
  exit 1
}

# ------------------------------------------------------------ the disks
size=256 zsize=8 nconv=4 maxopen=8 bs=4096
nb=/sys/kernel/config/nullb/zref
nullb_make() { # CAP_MB (0: the zone size)
  local a
  mkdir "$nb" || return 1
  for a in size=$size memory_backed=1 blocksize=$bs zoned=1 zone_size=$zsize \
    zone_capacity="$1" zone_nr_conv=$nconv zone_max_open=$maxopen power=1; do
    echo "${a#*=}" > "$nb/${a%%=*}" || { echo "cannot set null_blk $a"; return 1; }
  done
  udevadm settle
  [ -b /dev/zref ] || { echo "no /dev/zref"; return 1; }
}
nullb_remove() {
  echo 0 > "$nb/power" && rmdir "$nb"
}
# znbd_params CAP_MB: the same geometry as key=value words.
znbd_params() {
  echo "size=${size}M zone_size=${zsize}M zone_nr_conv=$nconv zone_max_open=$maxopen blocksize=$bs" \
    "$([ "$1" = 0 ] || echo "zone_capacity=${1}M")"
}
ublk_make() { # CAP_MB
  # shellcheck disable=SC2046 # the parameters are words
  "$UBLK" $(znbd_params "$1") > "$work/ublk.dev" 2> "$work/ublk.log" &
  UBLK_PID=$!
  # It prints /dev/ublkbN once the disk is there (or exits).
  timeout 60 sh -c 'until [ -s "$1" ] || ! kill -0 "$2" 2> /dev/null; do sleep 0.1; done' \
    sh "$work/ublk.dev" $UBLK_PID
  UBLKB=$(head -n 1 "$work/ublk.dev")
  udevadm settle
  [ -b "$UBLKB" ] || { cat "$work/ublk.log"; return 1; }
}
tcmu_make() { # CAP_MB
  local i d=
  # shellcheck disable=SC2046
  "$TCMU" zbt0 $(znbd_params "$1") > "$work/tcmu.log" 2>&1 &
  TCMU_PID=$!
  for i in $(seq 600); do
    grep -q 'serving on' "$work/tcmu.log" && d=$(ls /sys/block | grep '^sd' | head -n 1)
    [ -n "$d" ] && break
    kill -0 $TCMU_PID 2> /dev/null || { cat "$work/tcmu.log"; return 1; }
    sleep 0.1
  done
  udevadm settle
  SD=/dev/$d
  [ -n "$d" ] && [ -b "$SD" ] || { cat "$work/tcmu.log"; return 1; }
}
server_stop() { # PID
  kill -TERM "$1" 2> /dev/null && wait "$1"
}
describe() { # DEV
  local q=/sys/block/${1#/dev/}/queue
  echo "$1: $(cat "$q/zoned"), $(cat "$q/nr_zones") zones of $(cat "$q/chunk_sectors") sectors," \
    "max open $(cat "$q/max_open_zones"), block $(cat "$q/logical_block_size"), scheduler $(cat "$q/scheduler")"
  blkzone report -c 6 "$1" | sed -n '4,6p'
}
dm_make() { # NAME DEV: dm-linear over all of DEV
  dmsetup create "$1" --table "0 $(blockdev --getsz "$2") linear $2 0" && udevadm settle &&
    [ -b "/dev/mapper/$1" ]
}

# ------------------------------------------------------------- the runs
# run_check NAME CHECK-ARG...: ./check with the config's TEST_DEVS,
# results under $bt/out-NAME; its output as notes.
run_check() {
  local name=$1 rc
  shift
  # Its output as it comes, and bounded: a test that hangs the kernel
  # (a task blocked in D state) must not hold the guest to its timeout.
  (cd "$bt" && TIMEOUT=${BLKTESTS_TIMEOUT:-30} timeout -k 60 "${BLKTESTS_CHECK_TIMEOUT:-1800}" \
    ./check -o "$bt/out-$name" "$@") 2>&1 | tee "$work/check-$name.out" | sed -u 's/^/# /'
  rc=${PIPESTATUS[0]}
  [ "$rc" != 124 ] || note "check $* stopped after ${BLKTESTS_CHECK_TIMEOUT:-3600} s"
  if [ -d /out ]; then
    mkdir -p "/out/$name" && cp -a "$bt/out-$name/." "/out/$name/"
    cp "$work/check-$name.out" "/out/$name/check.out"
  fi
  return $rc
}
# verdict NAME DISK TEST: passed, failed or "not run", from the results
# file check wrote (status pass, fail, not run); "missing" without one.
verdict() {
  local f=$bt/out-$1/$2/$3
  [ -f "$f" ] || { echo missing && return; }
  case $(sed -n 's/^status\t//p' "$f") in
    pass) echo passed ;;
    fail) echo failed ;;
    "not run") echo "not run" ;;
    *) echo "unknown" ;;
  esac
}
reason() { # NAME DISK TEST: why not run / what failed, from check's output
  local head="^$3 => $2 "
  [ "$2" != nodev ] || head="^$3 "
  grep -A3 -E "$head" "$work/check-$1.out" | sed -n '2,4s/^ *//p' | tr '\n' ' '
}
same_verdict() { # NAME GEOM REFDISK DISK TEST
  local ref got
  ref=$(verdict "$1" "$3" "$5") got=$(verdict "$1" "$4" "$5")
  echo "null_blk ($3): $ref $(reason "$1" "$3" "$5")"
  echo "${4}: $got $(reason "$1" "$4" "$5")"
  [ -d /out ] && echo "$2 $4 $5 $got" >> /out/verdicts
  [ "$ref" != missing ] && [ "$got" = "$ref" ]
}
same_nbd() { # TEST: the nbd group's verdict with znbd is nbd-server's
  local ref got
  ref=$(verdict nbd-server nodev "$1") got=$(verdict nbd-znbd nodev "$1")
  echo "nbd-server: $ref $(reason nbd-server nodev "$1")"
  echo "znbd: $got $(reason nbd-znbd nodev "$1")"
  [ -d /out ] && echo "nbd znbd $1 $got" >> /out/verdicts
  [ "$ref" != missing ] && [ "$got" = "$ref" ]
}
# compare NAME GEOM KIND REF DISK...: a check per test null_blk ran and
# znbd disk; KIND names the disks in explained[] (ublk, tcmu, dm-...).
compare() {
  local name=$1 geom=$2 ref=$4 t d kinds=($3)
  shift 4
  local tests
  tests=$(cd "$bt/out-$name/$ref" 2> /dev/null && ls zbd | grep -E '^[0-9]+$')
  [ -d /out ] && for t in $tests; do echo "$geom $ref zbd/$t $(verdict "$name" "$ref" "zbd/$t")" >> /out/verdicts; done
  check "$geom: null_blk has a verdict for every test run ($(echo $tests))" test -n "$tests"
  local i=0
  for d in "$@"; do
    for t in $tests; do
      TODO=${explained[$geom:${kinds[$i]}:zbd/$t]:-} check \
        "$geom: zbd/$t on ${kinds[$i]} ($d): null_blk's verdict ($(verdict "$name" "$ref" "zbd/$t"))" \
        same_verdict "$name" "$geom" "$ref" "$d" "zbd/$t"
    done
    i=$((i + 1))
  done
}

for geom in $geoms; do
  note "t=${SECONDS}s: $geom"
  if [ "$geom" = nodev ]; then
    # The tests that make their own devices (null_blk, scsi_debug,
    # dm-crypt over null_blk): no TEST_DEVS, null_blk unloadable.
    # One check run each, bounded (zbd/009 hung 6.18.15: btrfs on
    # scsi_debug's gap zones, writeback blocked for good), so that one
    # hang leaves the others their verdicts.
    echo 'TEST_DEVS=()' > "$bt/config"
    for t in 008 009 010 011 012; do
      BLKTESTS_CHECK_TIMEOUT=${BLKTESTS_NODEV_TIMEOUT:-900} run_check "nodev-$t" "zbd/$t"
      v=$(verdict "nodev-$t" nodev "zbd/$t")
      [ -d /out ] && echo "nodev - zbd/$t $v" >> /out/verdicts
      check "nodev: zbd/$t ran to a verdict ($v) $(reason "nodev-$t" nodev "zbd/$t")" test "$v" != missing
    done
    modprobe null_blk
    continue
  fi
  if [ "$geom" = nbd ]; then
    echo 'TEST_DEVS=()' > "$bt/config"
    run_check nbd-server nbd
    mkdir -p "$work/standin"
    cp "$top_srcdir/tests/vm/nbd-server-standin" "$work/standin/nbd-server"
    PATH=$work/standin:$PATH ZNBD_SERVER=$ZNBD_ROOT_BUILD/server/znbd \
      ZNBD_STANDIN_DIR=$work/standin-exe run_check nbd-znbd nbd
    for t in $(cd "$bt/out-nbd-server/nodev" 2> /dev/null && ls nbd | grep -E '^[0-9]+$'); do
      [ -d /out ] && echo "nbd nbd-server nbd/$t $(verdict nbd-server nodev "nbd/$t")" >> /out/verdicts
      TODO=${explained[nbd:znbd:nbd/$t]:-} check \
        "nbd: nbd/$t with znbd for nbd-server: nbd-server's verdict ($(verdict nbd-server nodev "nbd/$t"))" \
        same_nbd "nbd/$t"
    done
    continue
  fi
  cap=0
  [ "$geom" = zcap ] && cap=6
  # null_blk, then each of $disks: the disks, their names for check
  # (basename) and for explained[] (ublk, tcmu).
  devs=(/dev/zref) kinds=() makes=(nullb_make "$cap")
  for k in $disks; do makes+=(-- "${k}_make" "$cap"); done
  if ! check "$geom: null_blk and ${disks// /, } disks of the same geometry" all "${makes[@]}"; then
    continue
  fi
  for k in $disks; do
    case $k in ublk) devs+=("$UBLKB") ;; tcmu) devs+=("$SD") ;; esac
    kinds+=("$k")
  done
  for d in "${devs[@]}"; do describe "$d" | sed 's/^/# /'; done
  echo "TEST_DEVS=(${devs[*]})" > "$bt/config"
  run_check "$geom" -d zbd
  names=()
  for d in "${devs[@]:1}"; do names+=("${d#/dev/}"); done
  compare "$geom" "$geom" "${kinds[*]}" zref "${names[@]}"
  # zbd/007: the zone mapping of a logical device, dm-linear.
  lins=(lin-zref) dmk=() dms=(dm_make lin-zref /dev/zref)
  for k in "${kinds[@]}"; do lins+=("lin-$k") dmk+=("dm-$k"); done
  for i in "${!kinds[@]}"; do dms+=(-- dm_make "lin-${kinds[$i]}" "${devs[$((i + 1))]}"); done
  if check "$geom: dm-linear over each disk" all "${dms[@]}"; then
    echo "TEST_DEVS=(${lins[*]/#//dev/mapper/})" > "$bt/config"
    run_check "$geom-dm" -d zbd/007
    compare "$geom-dm" "$geom" "${dmk[*]}" "${lins[@]}"
  fi
  dmsetup remove_all > /dev/null 2>&1
  case " $disks " in *" ublk "*) check "$geom: znbd-ublk stops with status 0" server_stop $UBLK_PID ;; esac
  case " $disks " in *" tcmu "*) check "$geom: znbd-tcmu stops with status 0" server_stop $TCMU_PID ;; esac
  nullb_remove
done
note "t=${SECONDS}s"
tap_end
