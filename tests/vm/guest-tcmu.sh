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

ctl() {
  PYTHONPATH=$top_srcdir/tests $T python3 -c '
import sys
from znbdtest import control
sys.stdout.write(control(sys.argv[1], sys.argv[2], 10.0))' "$CTL" "$1"
}
# Zones as "START_SECTOR WP_REL_SECTORS COND" lines (conventional: wp -),
# from blkzone and from the control socket.
kernel_zones() {
  # Parsed in this shell: three seds per line cost ~5 s per report in TCG.
  local line re='start: (0x[0-9a-f]+).*wptr (0x[0-9a-f]+).*zcond: *([0-9]+)'
  blkzone report "$DEV" | while read -r line; do
    [[ $line =~ $re ]] || continue
    case $line in
      *CONVENTIONAL*) w=- ;;
      *) w=$((BASH_REMATCH[2])) ;;
    esac
    echo "$((BASH_REMATCH[1])) $w ${BASH_REMATCH[3]}"
  done
}
device_zones() {
  ctl "report 0 16" | grep "^zone=" | awk '{
    for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    m["NOT_WP"] = 0; m["EMPTY"] = 1; m["IMP_OPEN"] = 2; m["EXP_OPEN"] = 3
    m["CLOSED"] = 4; m["FULL"] = 14
    w = (f["type"] == "CONVENTIONAL") ? "-" : (f["wp"] - f["start"]) / 512
    print f["start"] / 512, w, m[f["cond"]] }'
}
same_zones() {
  kernel_zones > "$work/k"
  device_zones > "$work/d"
  [ "$(wc -l < "$work/k")" = 16 ] && diff "$work/k" "$work/d"
}
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
no_config_left() {
  ls "$CFG/core" "$CFG/loopback"
  ! ls -d "$CFG"/core/user_* 2> /dev/null &&
    ! ls -d "$CFG"/loopback/naa.* 2> /dev/null && [ ! -e "/sys/block/${DEV#/dev/}" ]
}

note "kernel $(uname -r), $(nproc) vCPUs"
for m in target_core_user tcm_loop sd_mod sg; do modprobe "$m"; done
head -c 4096 /dev/urandom > "$work/a"

"$TCMU" zbd0 size=64M zone_size=4M zone_nr_conv=2 zone_max_open=4 \
  zone_control="$CTL" > "$work/tcmu.log" 2>&1 &
PID=$!
for _ in $(seq 1 120); do
  d=$(ls /sys/block | grep '^sd' | head -1)
  [ -n "$d" ] && [ -S "$CTL" ] && break
  sleep 0.5
done
DEV=/dev/$d
note "disk $DEV"
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
check "blkzone finish zone 5 -> FULL" blkzone finish -o $((5 * ZS / 512)) -c 1 "$DEV"
check "... reported" zone_is 5 8192 14
check "blkzone report still equals the control socket's" same_zones
check "blkzone reset of the whole disk" blkzone reset "$DEV"
check "... zone 2 EMPTY at wp 0" zone_is 2 0 1
check "... zone 5 EMPTY at wp 0" zone_is 5 0 1
check "a conventional write and read back" write_read 4096 4096 "$work/a"
kill "$PID"
rc=0
wait "$PID" || rc=$?
sed 's/^/# znbd-tcmu: /' "$work/tcmu.log"
check "znbd-tcmu stops on SIGTERM with status 0" test "$rc" = 0
check "no configfs entry and no disk left" no_config_left
tap_end
