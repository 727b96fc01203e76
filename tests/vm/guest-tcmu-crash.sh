# shellcheck shell=bash
# Sourced by guest-tcmu.sh before its last check (its functions and
# variables: start_tcmu, stop_tcmu, ctl, same_zones, kernel_zones, DEV,
# CTL, NZ, ZS): a power cut under a mounted zoned btrfs and a kill -9 of
# znbd-tcmu under I/O, both on dir= disks, as the kernel sees them and as
# a user recovers from them.
# shellcheck disable=SC2034,SC2154 # NZ, ZS: guest-tcmu.sh reads them; rc: stop_tcmu sets it

# ------------------------------------------------ power cut under btrfs
# write_cache=true: the control socket's power-cut undoes every write no
# SYNCHRONIZE CACHE covered, and from then on znbd-tcmu fails every
# command with NOT READY (02/04/00, EIO in the kernel) until it is
# started again, as znbd drops the NBD connections made before a cut.
# File A is synced, file B is written with O_DIRECT and no sync: its
# data reached the device, unflushed, and its metadata did not.
NZ=64
ZS=$((8 << 20))
PC=(pc0 size=512M zone_size=8M zone_nr_conv=4 zone_max_open=8 write_cache=true dir="$work/pc")
# shellcheck source=guest-powercut.sh
. "$top_srcdir/tests/vm/guest-powercut.sh"
# A read through the page cache would not reach the disk: O_DIRECT.
pc_not_ready() {
  expect_eio dread 0 4096 || return 1
  dmesg | grep -m 2 -i 'not ready'
}
start_tcmu "${PC[@]}"
note "t=${SECONDS}s"
check "power cut: zoned btrfs, A written and synced, B written O_DIRECT unsynced" pc_mkfs_a_b
check "... power-cut through the control socket rolls B's zone back" pc_cut
check "... then a read of the disk fails with EIO (NOT READY 02/04/00)" pc_not_ready
check "... umount completes, btrfs having aborted on EIO" pc_umount
stop_tcmu pc0
check "... znbd-tcmu stops on SIGTERM with status 0" test "$rc" = 0
rm -f "$CTL"
start_tcmu "${PC[@]}"
check "... restarted on the same dir=: zones as the control socket's" same_zones
check "... mount again: A reads back byte-identical" pc_remount
note "$(pc_note_b)"
check "... umount, btrfs check passes" pc_check
stop_tcmu pc0
check "... znbd-tcmu stops with status 0" test "$rc" = 0
note "t=${SECONDS}s"

# ------------------------------------------- kill -9 under direct writes
# write_cache=false: every write acknowledged is durable (dir= writes go
# to the zone files before the reply, so SIGKILL loses none), so not only
# the data fsync'ed first but every write dd counted must come back.
# completion_nsec=50 ms keeps dd's 64 KiB writes in flight (~6 s for
# 8 MiB) when the kill comes; cmd_time_out=5 fails an unanswered command
# after 5 s (tcmu_check_expired_ring_cmd()) instead of 30.
NZ=16
ZS=$((4 << 20))
K9=(k9 size=64M zone_size=4M zone_nr_conv=2 zone_max_open=4 completion_nsec=50000000
  cmd_time_out=5 dir="$work/k9")
K9OFF=$((2 * ZS + (1 << 20))) # dd's first byte: zone 2 past the fsync'ed MiB
k9_flushed() {
  $T dd if="$work/A" of="$DEV" bs=1M count=1 seek=$((2 * ZS >> 20)) oflag=direct \
    conv=fsync status=none && zone_is 2 2048 2
}
# k9_kill: dd writes 8 MiB from K9OFF; once the device has taken its
# first write (zone 2's wp past K9OFF, on the control socket) znbd-tcmu
# is killed while dd runs; dd must fail with EIO within cmd_time_out + 5 s.
k9_kill() {
  local w t0 t1 st=0 lines wp=0
  lines=$(dmesg | wc -l)
  $T dd if="$work/f8" of="$DEV" bs=64k seek=$((K9OFF >> 16)) oflag=direct \
    > "$work/k9.dd" 2>&1 &
  w=$!
  for _ in $(seq 300); do
    wp=$(ctl "report 2 1" | sed -n 's/.* wp=\([0-9]*\).*/\1/p')
    [ "${wp:-0}" -gt "$K9OFF" ] && break
    sleep 0.1
  done
  echo "zone 2's wp at the kill: byte ${wp:-?} (dd's first at $K9OFF)"
  [ "${wp:-0}" -gt "$K9OFF" ] || { echo "the device took no write of dd's"; return 1; }
  kill -0 "$w" || { echo "dd ended before the kill"; return 1; }
  kill -KILL "$PID"
  t0=$(date +%s%N)
  wait "$PID" 2> /dev/null
  wait "$w" || st=$?
  t1=$(date +%s%N)
  dmesg | tail -n +$((lines + 1)) | grep -m 2 -e 'Sense Key' -e 'Add. Sense'
  grep -e error -e 'records out' "$work/k9.dd"
  echo "dd ended with status $st, $(((t1 - t0) / 1000000)) ms after the kill"
  [ "$st" != 0 ] && grep -q 'Input/output error' "$work/k9.dd" &&
    [ $(((t1 - t0) / 1000000)) -lt 10000 ]
}
k9_restart() {
  local t0=$SECONDS
  rm -f "$CTL"
  start_tcmu "${K9[@]}"
  echo "restarted in $((SECONDS - t0)) s"
  same_zones
}
# Every write dd reported is there: its bytes, and the wps past them.
k9_durable() {
  local recs wp=0 z w
  recs=$(sed -n 's/^\([0-9]*\)+[0-9]* records out$/\1/p' "$work/k9.dd")
  [ -n "$recs" ] || return 1
  while read -r z w _; do
    [ "$z" -ge $((2 * ZS / 512)) ] && [ "$w" != - ] && wp=$((wp + w))
  done < <(kernel_zones)
  echo "dd: $recs writes of 64 KiB acknowledged; $((wp / 2)) KiB in zones 2+"
  [ $((wp * 512)) -ge $(((1 << 20) + recs * 65536)) ] &&
    { [ "$recs" = 0 ] || same_bytes "$K9OFF" $((recs * 65536)) "$work/f8"; }
}
start_tcmu "${K9[@]}"
check "kill -9: the backstore's cmd_time_out is 5 s" \
  grep -qx 5 "$CFG/core/user_0/k9/attrib/cmd_time_out"
check "... 1 MiB at zone 2's wp, fsync'ed" k9_flushed
check "... kill -9 under dd oflag=direct: dd fails with EIO within 10 s" k9_kill
check "... a restart of the same name reclaims the LUN and serves" k9_restart
check "... the fsync'ed MiB reads back" same_bytes $((2 * ZS)) $((1 << 20)) "$work/A"
check "... every write dd counted reads back, the wps past it" k9_durable
check "... a write at an empty zone's wp reads back" write_read $((6 * ZS)) 4096 "$work/a"
# drop-reply on the same disk: a read is executed and its reply never
# sent, so the kernel fails it after cmd_time_out (5 s), with each retry
# dropped too; once dropping stops, reads are answered as before.
drop_read() {
  local t0 t1 st=0
  ctl "drop-reply every 1 read" | grep '^ok' || return 1
  t0=$(date +%s%N)
  $T dd if="$DEV" of=/dev/null bs=4k count=1 skip=$((2 * ZS / 4096)) \
    iflag=direct > "$work/drop.dd" 2>&1 || st=$?
  t1=$(date +%s%N)
  ctl "drop-reply off" | grep '^ok' || return 1
  grep -e error -e 'records in' "$work/drop.dd"
  echo "dd ended with status $st after $(((t1 - t0) / 1000000)) ms"
  [ "$st" != 0 ] && grep -q 'Input/output error' "$work/drop.dd" &&
    [ $(((t1 - t0) / 1000000)) -ge 4500 ]
}
dropped_counted() {
  local n
  n=$(ctl stats | sed -n 's/.*dropped_replies=\([0-9]*\).*/\1/p')
  echo "dropped_replies=$n"
  [ -n "$n" ] && [ "$n" -ge 1 ]
}
check "drop-reply every 1 read: the read fails with EIO after cmd_time_out" drop_read
check "... the control socket counts the dropped replies" dropped_counted
check "... drop-reply off: reads are answered, the fsync'ed MiB intact" \
  same_bytes $((2 * ZS)) $((1 << 20)) "$work/A"
stop_tcmu k9
check "... znbd-tcmu k9 stops with status 0" test "$rc" = 0
check "no configfs entry and no disk left" no_config_left
note "t=${SECONDS}s"
