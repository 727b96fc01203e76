#!/bin/bash
# In the guest: znbd-tcmu makes a znbd device a host-managed SCSI disk
# through LIO's TCMU and tcm_loop; its zones as the kernel sees them
# (sysfs, blkzone) must be the device's own (the control socket's
# report), writes must follow the wp rules, and a clean stop must leave
# no configfs entry behind.  A refused SCSI write fails with EREMOTEIO
# (ILLEGAL REQUEST -> BLK_STS_TARGET in scsi_lib.c), not EIO.
# shellcheck source=guest-lib.sh
. "$top_srcdir/tests/vm/guest-lib.sh"
TCMU=$top_builddir/tcmu/znbd-tcmu
CTL=$work/zc.sock
CFG=/sys/kernel/config/target
ZS=$((4 << 20)) # 4 MiB zones = 8192 sectors; 16 zones, 2 conventional
NZ=16

# zone_is N WP_REL COND: zone N as the kernel reports it.
zone_is() {
  local got
  got=$(kernel_zones | sed -n "$(($1 + 1))p")
  echo "zone $1: $got"
  [ "$got" = "$(($1 * ZS / 512)) $2 $3" ]
}
expect_eremoteio() {
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  printf '%s\n' "$out"
  [ "$rc" != 0 ] && grep -q 'Remote I/O error' <<< "$out"
}
# written_through HOW WRITER ZONE: three checks: a 4 KiB write at the wp
# of ZONE through another path to the same backstore (WRITER: a dwrite on
# that path's disk) moves the wp the SCSI disk reports and reads back
# through it.
written_through() {
  check "... a write at the wp through $1 (zone $3)" "$2" $(($3 * ZS)) 4096 "$work/a"
  check "... moves the wp the SCSI disk reports" zone_is "$3" 8 2
  check "... and reads back through the SCSI disk" same_bytes $(($3 * ZS)) 4096 "$work/a"
}
no_config_left() {
  ls "$CFG/core" "$CFG/loopback"
  ! ls -d "$CFG"/core/user_* 2> /dev/null &&
    ! ls -d "$CFG"/loopback/naa.* 2> /dev/null && [ ! -e "/sys/block/${DEV#/dev/}" ]
}

# start_tcmu NAME key=value...: znbd-tcmu with its control socket at
# $CTL, in the background (PID, log in $work/NAME.log); waits for its
# disk, the only sd disk in the guest, and sets DEV and d.
start_tcmu() {
  "$TCMU" "$@" zone_control="$CTL" > "$work/$1.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 120); do
    d=$(ls /sys/block | grep '^sd' | head -1)
    [ -n "$d" ] && [ -S "$CTL" ] && grep -q 'serving on' "$work/$1.log" && break
    sleep 0.5
  done
  DEV=/dev/$d
  note "disk $DEV for $*"
}
# device_cond N: zone N's condition as the device (the control socket)
# reports it.
device_cond() { ctl "report $1 1" | sed -n 's/.* cond=\([A-Z_]*\).*/\1/p'; }
# finish_meanwhile: a FINISH (4 s of zone_finish_nsec) in flight while a
# read is sent: with several commands in flight the read completes first.
# znbd-tcmu runs a command when it takes it and holds its reply for the
# latency (tcmu/ring.c), so the FINISH has reached the device once the
# device reports zone 6 FULL: the read goes only then, and must complete
# while blkzone still waits for the FINISH's reply.
finish_meanwhile() {
  local c
  c=$(device_cond 6)
  echo "zone 6 before: $c"
  [ "$c" != FULL ] || return 1
  $T blkzone finish -o $((6 * ZS / 512)) -c 1 "$DEV" &
  local fp=$!
  for _ in $(seq 1 300); do
    c=$(device_cond 6)
    [ "$c" = FULL ] || ! kill -0 "$fp" 2> /dev/null && break
    sleep 0.1
  done
  if [ "$c" != FULL ]; then
    echo "the FINISH did not reach the device (zone 6 $c)"
    wait "$fp"
    return 1
  fi
  dread 0 4096 > /dev/null || return 1
  kill -0 "$fp" && echo "the read completed while the FINISH was in flight"
  local in_flight=$?
  wait "$fp" && [ "$in_flight" = 0 ] && [ "$(device_cond 6)" = FULL ]
}
# stop_tcmu NAME: SIGTERM, its exit status in rc, its log as comments.
stop_tcmu() {
  kill "$PID"
  rc=0
  wait "$PID" || rc=$?
  sed 's/^/# znbd-tcmu: /' "$work/$1.log"
}

note "kernel $(uname -r), $(nproc) vCPUs"
for m in target_core_user tcm_loop sd_mod sg; do modprobe "$m"; done
head -c 4096 /dev/urandom > "$work/a"

ZBD0=(zbd0 size=64M zone_size=4M zone_nr_conv=2 zone_max_open=4 zone_finish_nsec=4000000000)
start_tcmu "${ZBD0[@]}"
note "t=${SECONDS}s"
check "a SCSI disk appears" test -b "$DEV"
check "queue/zoned is host-managed" grep -qx host-managed "/sys/block/$d/queue/zoned"
check "nr_zones is 16" grep -qx 16 "/sys/block/$d/queue/nr_zones"
check "max_open_zones is 4" grep -qx 4 "/sys/block/$d/queue/max_open_zones"
check "non-rotational (VPD B1 0001h)" grep -qx 0 "/sys/block/$d/queue/rotational"
check "blkzone report equals the control socket's" same_zones
check "a 4 KiB write at the wp of zone 2" dwrite $((2 * ZS)) 4096 "$work/a"
check "... moves the wp to 8 (IMP_OPEN)" zone_is 2 8 2
check "... reads back" same_bytes $((2 * ZS)) 4096 "$work/a"
check "a write off the wp fails with EREMOTEIO" expect_eremoteio dwrite $((3 * ZS + 8192)) 4096 "$work/a"
check "... and changes no wp" zone_is 3 0 1
check "... and no byte" zero_bytes $((3 * ZS + 8192)) 4096
check "blkzone open zone 4 -> EXP_OPEN" blkzone open -o $((4 * ZS / 512)) -c 1 "$DEV"
check "... reported" zone_is 4 0 3
check "blkzone close zone 2 -> CLOSED" blkzone close -o $((2 * ZS / 512)) -c 1 "$DEV"
check "... reported" zone_is 2 8 4
# null_blk's rule (the engine's), where a ZBC drive completes it: listed
# in znbd-tcmu(1).
check "blkzone close of an EMPTY zone fails with EREMOTEIO" \
  expect_eremoteio blkzone close -o $((3 * ZS / 512)) -c 1 "$DEV"
check "... and leaves it EMPTY" zone_is 3 0 1
check "blkzone finish zone 5 -> FULL" blkzone finish -o $((5 * ZS / 512)) -c 1 "$DEV"
check "... reported" zone_is 5 8192 14
check "blkzone report still equals the control socket's" same_zones
check "blkzone reset of the whole disk" blkzone reset "$DEV"
check "... zone 2 EMPTY at wp 0" zone_is 2 0 1
check "... zone 5 EMPTY at wp 0" zone_is 5 0 1
check "a conventional write and read back" write_read 4096 4096 "$work/a"
# A killed znbd-tcmu leaves its LUN and backstore behind; the next start
# of the same name takes them down and serves again.
kill -KILL "$PID"
wait "$PID" 2> /dev/null
sed 's/^/# znbd-tcmu (killed): /' "$work/zbd0.log"
check "after kill -9 the backstore is still configured" test -d "$CFG/core/user_0/zbd0"
rm -f "$CTL"
start_tcmu "${ZBD0[@]}"
check "a restart of the same name reclaims it and serves" same_zones
check "... writes at the wp again" write_read $((2 * ZS)) 4096 "$work/a"
check "a read overtakes a slow FINISH (out-of-order completion)" finish_meanwhile
check "... and zone 6 is FULL" zone_is 6 8192 14
# The same backstore over LIO's iSCSI target with CHAP (export-iscsi.sh).
# shellcheck source=guest-tcmu-iscsi.sh
. "$top_srcdir/tests/vm/guest-tcmu-iscsi.sh"
note "t=${SECONDS}s"
stop_tcmu zbd0
check "znbd-tcmu stops on SIGTERM with status 0" test "$rc" = 0
check "... having had commands in flight together, one completed early" \
  grep -E 'at most ([2-9]|[1-9][0-9]+) in flight, [1-9][0-9]* completed before' "$work/zbd0.log"
check "no configfs entry and no disk left" no_config_left

# ----------------------------------------------------- ZNS over NVMe/TCP
# nvmet re-exports the SCSI disk as a zoned namespace (ZNS) on 127.0.0.1
# (configfs, as nvmetcli would; the host side through /dev/nvme-fabrics,
# as `nvme connect` does).  ZNS has no conventional zones and nvmet
# refuses a zoned disk that has any, hence zone_nr_conv=0.  Only the host
# NQN linked in allowed_hosts may connect (attr_allow_any_host stays 0),
# as man znbd-tcmu says; the NQN is the host's claim, not a proof: 6.1's
# nvmet has no DH-HMAC-CHAP (CONFIG_NVME_TARGET_AUTH is not set), which
# the host entry's attributes (none) show.
NQN=nqn.2014-08.org.znbd:zns0
NVHOST=nqn.2014-08.org.znbd:host0
NVS=/sys/kernel/config/nvmet/subsystems/$NQN
NVH=/sys/kernel/config/nvmet/hosts/$NVHOST
NVP=/sys/kernel/config/nvmet/ports/1
nvmet_up() {
  modprobe nvmet && modprobe nvmet_tcp && modprobe nvme_tcp || return 1
  mkdir "$NVS" && mkdir "$NVH" && ln -s "$NVH" "$NVS/allowed_hosts/$NVHOST" &&
    mkdir "$NVS/namespaces/1" && printf %s "$DEV" > "$NVS/namespaces/1/device_path" &&
    echo 1 > "$NVS/namespaces/1/enable" || return 1
  mkdir "$NVP" && echo tcp > "$NVP/addr_trtype" && echo ipv4 > "$NVP/addr_adrfam" &&
    echo 127.0.0.1 > "$NVP/addr_traddr" && echo 4420 > "$NVP/addr_trsvcid" &&
    ln -s "$NVS" "$NVP/subsystems/$NQN" || return 1
  echo "attr_allow_any_host $(cat "$NVS/attr_allow_any_host"), allowed_hosts: $(ls "$NVS/allowed_hosts")"
  local attrs=("$NVH"/*)
  [ -e "${attrs[0]}" ] || attrs=()
  echo "host entry attributes: ${attrs[*]##*/}"
  [ "$(cat "$NVS/attr_allow_any_host")" = 0 ]
}
# nvme_connect HOSTNQN HOSTID: a host ID of its own for each host NQN:
# since Linux 6.x (6.18 measured) the fabrics layer refuses a second host
# NQN under the one default host ID ("found same hostid but different
# hostnqn", drivers/nvme/host/fabrics.c), as nvme-cli's --hostid avoids.
nvme_connect() {
  echo "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=$NQN,hostnqn=$1,hostid=$2" > /dev/nvme-fabrics
}
nvme_refused() {
  if nvme_connect nqn.2014-08.org.znbd:not-allowed 2f1f0a2e-7f1c-4f0e-9d56-000000000001; then
    echo "the connect succeeded"
    return 1
  fi
  dmesg | grep -i nvme | tail -n 2
  ! ls -d /sys/class/nvme/nvme* 2> /dev/null
}
nvme_up() {
  nvme_connect "$NVHOST" 2f1f0a2e-7f1c-4f0e-9d56-000000000002 || return 1
  local i
  for i in $(seq 1 100); do
    # nvme0c0n1 is the path's hidden disk (native multipath): no node.
    NVDEV=/dev/$(ls /sys/block | grep -E '^nvme[0-9]+n[0-9]+$' | head -1)
    [ -b "$NVDEV" ] && grep -qx host-managed "/sys/block/${NVDEV#/dev/}/queue/zoned" &&
      echo "ZNS namespace $NVDEV" && return 0
    sleep 0.2
  done
  return 1
}
nvme_nr_zones() { grep -qx "$NZ" "/sys/block/${NVDEV#/dev/}/queue/nr_zones"; }
nvme_dwrite() {
  local DEV=$NVDEV
  dwrite "$@"
}
nvme_reset() { blkzone reset -o "$1" -c 1 "$NVDEV"; }
nvme_down() {
  local c
  for c in /sys/class/nvme/nvme*; do echo 1 > "$c/delete_controller"; done
  rm "$NVP/subsystems/$NQN" && rmdir "$NVP" &&
    echo 0 > "$NVS/namespaces/1/enable" && rmdir "$NVS/namespaces/1" &&
    rm "$NVS/allowed_hosts/$NVHOST" && rmdir "$NVS" "$NVH" &&
    [ ! -e "/sys/block/${NVDEV#/dev/}" ]
}
start_tcmu zns0 size=64M zone_size=4M zone_nr_conv=0 zone_max_open=4
check "nvmet over TCP on 127.0.0.1, one host NQN in allowed_hosts" nvmet_up
check "... a host NQN not in allowed_hosts cannot connect" nvme_refused
check "... the allowed host connects: a host-managed ZNS namespace" nvme_up
check "... with the SCSI disk's 16 zones" nvme_nr_zones
written_through NVMe/TCP nvme_dwrite 1
check "... a write off the wp fails with EREMOTEIO" \
  expect_eremoteio nvme_dwrite $((2 * ZS + 8192)) 4096 "$work/a"
check "... and changes no wp" zone_is 2 0 1
check "... a zone reset through NVMe/TCP empties zone 1" nvme_reset $((1 * ZS / 512))
check "... as the SCSI disk reports" zone_is 1 0 1
check "NVMe/TCP disconnect and nvmet removal" nvme_down
note "t=${SECONDS}s"
stop_tcmu zns0
check "znbd-tcmu zns0 stops with status 0" test "$rc" = 0
check "no configfs entry and no disk left" no_config_left

# Sense bytes, errnos, and the differential run against null_blk.
# shellcheck source=guest-tcmu-diff.sh
. "$top_srcdir/tests/vm/guest-tcmu-diff.sh"
check "no configfs entry and no disk left" no_config_left

# ------------------------------------- zone capacity below the zone size
# shellcheck source=guest-tcmu-gap.sh
. "$top_srcdir/tests/vm/guest-tcmu-gap.sh"

# --------------------------------------------------- file systems and fio
# The geometry btrfs and f2fs were measured to accept on 6.1: 512 MiB,
# 8 MiB zones, 4 conventional (f2fs keeps its metadata there), max open
# 8; kept in dir= so nbdzone can read the same zones back over NBD.
FS=$work/fs
NZ=64
head -c $((8 << 20)) /dev/urandom > "$work/f8"
fio_zbd() { fio_zbd_verify 32M 64; }
for m in btrfs f2fs; do modprobe "$m"; done
start_tcmu fs0 size=512M zone_size=8M zone_nr_conv=4 zone_max_open=8 dir="$FS"
check "the fs disk: 64 zones of 8 MiB, host-managed" grep -qx 64 "/sys/block/$d/queue/nr_zones"
note "t=${SECONDS}s"
check "fio zbd: 64 MiB sequential writes at QD8, crc32c verified" fio_zbd
check "... again over the now full zones (fio resets them first)" fio_zbd
check "blkzone report equals the control socket's after fio" same_zones
note "t=${SECONDS}s"
check "mkfs.btrfs -O zoned, mount, write, btrfs check, remount, read back" \
  fs_check btrfs "btrfs check" mkfs.btrfs -f -O zoned -d single -m single
check "blkzone report equals the control socket's after btrfs" same_zones
note "t=${SECONDS}s"
check "mkfs.f2fs -m, mount, write, fsck.f2fs, remount, read back" \
  fs_check f2fs "fsck.f2fs" mkfs.f2fs -f -m
check "blkzone report equals the control socket's after f2fs" same_zones
kernel_report_as_dir "$DEV" > "$work/blkzone.txt"
stop_tcmu fs0
check "znbd-tcmu fs0 stops with status 0" test "$rc" = 0
check "nbdzone report over NBD (znbd on the same dir=) equals blkzone's" \
  nbdzone_same "$FS" 64 "$work/blkzone.txt"
note "t=${SECONDS}s"
# The fault scenario guest-nbd.sh runs through NBD, here through SCSI.
# shellcheck source=guest-faults.sh
. "$top_srcdir/tests/vm/guest-faults.sh"
FAULT_CTL=$CTL FAULT_READ_ERR="No data available" FAULT_ZONE_ERR="Remote I/O error"
start_tcmu faults "${FAULT_PARAMS[@]}"
fault_scenario scsi
stop_tcmu faults
check "znbd-tcmu faults stops with status 0" test "$rc" = 0
note "t=${SECONDS}s"
# An injected latency holds each command on its own deadline (the timer
# thread of tcmu/ring.c), as null_blk's timer mode holds each request:
# 32 reads at QD32, each held 1 s, end in about 1 s of fio's run time
# (one after the other, or four at a time by the workers: 32 s or 8 s).
if command -v fio > /dev/null; then
  start_tcmu lat0 size=16M zoned=false completion_nsec=1000000000
  check "32 reads at QD32 each held 1 s are held together" held_together 6000
  stop_tcmu lat0
  check "znbd-tcmu lat0 stops with status 0" test "$rc" = 0
else
  skip_check "latency: 32 reads held together" "no fio in the guest"
fi
note "t=${SECONDS}s"
# shellcheck source=guest-tcmu-crash.sh
. "$top_srcdir/tests/vm/guest-tcmu-crash.sh"
check "no kernel WARNING, BUG or oops" sh -c '! dmesg | grep -E "WARNING:|BUG:|Oops"'
tap_end
