# shellcheck shell=bash
# shellcheck disable=SC2154 # work, d, DEV, rc: set by guest-tcmu.sh
# Sourced by guest-tcmu.sh (its functions: start_tcmu, stop_tcmu,
# kernel_zones, same_zones, check, dwrite...).  Zone capacity below the
# zone size: znbd-tcmu shows each sequential zone as a sequential zone of
# the capacity and a gap zone (ZBC-2), which sd merges back into one zone
# of the zone size with that capacity (sd_zbc_parse_report()), skipping
# the gap zones.  NZ, ZS and CAP are this fragment's own (locals of
# gap_checks, seen by the functions it calls); nothing else is changed
# for the rest of the script.

# gap_zone_is N WP_REL COND: zone N as the kernel reports it.
gap_zone_is() {
  local got
  got=$(kernel_zones cap | sed -n "$(($1 + 1))p")
  echo "zone $1: $got"
  [ "$got" = "$(($1 * ZS / 512)) $2 $3 $((CAP / 512))" ]
}
# blkzone's own lines: 16 zones, the sequential ones 0x2000 long with a
# capacity of 0x1800 sectors.
gap_blkzone_lens() {
  blkzone report "$DEV" > "$work/gb" || return 1
  cat "$work/gb"
  [ "$(grep -c 'start:' "$work/gb")" = "$NZ" ] &&
    [ "$(grep -c 'len 0x002000, cap 0x001800,.*SEQ_WRITE_REQUIRED' "$work/gb")" = 14 ] &&
    [ "$(grep -c 'len 0x002000, cap 0x002000,.*CONVENTIONAL' "$work/gb")" = 2 ]
}
gap_fio() {
  $T fio --name=gap --filename="$DEV" --direct=1 --zonemode=zbd \
    --ioengine=libaio --iodepth=4 --rw=write --bs=64k --offset=$((4 * ZS)) \
    --size=$((4 * ZS)) --verify=crc32c --do_verify=1 > "$work/fio-gap.out" 2>&1 ||
    { cat "$work/fio-gap.out"; return 1; }
  grep -e 'err=' -e 'WRITE:' -e 'READ:' "$work/fio-gap.out"
  local w r
  w=$(sed -nE 's/.*WRITE:.*io=([0-9.]+[KMG]iB).*/\1/p' "$work/fio-gap.out")
  r=$(sed -nE 's/.*READ:.*io=([0-9.]+[KMG]iB).*/\1/p' "$work/fio-gap.out")
  # 4 zones of 3 MiB capacity: 12 MiB written, then read and verified.
  grep -q 'err= *0:' "$work/fio-gap.out" && [ "$w" = 12.0MiB ] && [ "$r" = 12.0MiB ]
}

gap_checks() {
  local NZ=16 ZS=$((4 << 20)) CAP=$((3 << 20))
  start_tcmu gap0 size=64M zone_size=4M zone_capacity=3M zone_nr_conv=2 zone_max_open=4
  check "zone capacity 3M of 4M: a host-managed disk" grep -qx host-managed "/sys/block/$d/queue/zoned"
  check "... nr_zones 16 (gap zones merged by sd)" grep -qx 16 "/sys/block/$d/queue/nr_zones"
  check "... chunk_sectors 8192" grep -qx 8192 "/sys/block/$d/queue/chunk_sectors"
  check "... blkzone: 16 zones, sequential ones len 0x2000 cap 0x1800" gap_blkzone_lens
  check "... blkzone report equals the control socket's (wp, cond, capacity)" same_zones cap
  head -c "$CAP" /dev/urandom > "$work/cap"
  check "... a write at the wp of zone 2 up to the capacity" dwrite $((2 * ZS)) "$CAP" "$work/cap"
  check "... makes it FULL" gap_zone_is 2 full 14
  check "... and reads back" same_bytes $((2 * ZS)) "$CAP" "$work/cap"
  check "... a write up to 4 KiB below zone 3's capacity" dwrite $((3 * ZS)) $((CAP - 4096)) "$work/cap"
  check "... then 8 KiB at its wp, past the capacity, fails with EREMOTEIO" \
    expect_eremoteio dwrite $((3 * ZS + CAP - 4096)) 8192 "$work/cap"
  check "... and changes no wp" gap_zone_is 3 $(((CAP - 4096) / 512)) 2
  check "... and no byte" zero_bytes $((3 * ZS + CAP - 4096)) 4096
  # Linux 6.10 and later refuse a write at or past the zone capacity in
  # the block layer (zone write plugging, block/blk-zoned.c):
  # EIO, and the device never sees it; 6.1 sends it and the device
  # answers ILLEGAL REQUEST (EREMOTEIO).
  if wplug_kernel; then
    check "... a write in the gap (zone 4 at its capacity) fails with EIO (zone write plugging)" \
      expect_eio dwrite $((4 * ZS + CAP)) 4096 "$work/a"
  else
    check "... a write in the gap (zone 4 at its capacity) fails with EREMOTEIO" \
      expect_eremoteio dwrite $((4 * ZS + CAP)) 4096 "$work/a"
  fi
  check "... and leaves zone 4 EMPTY" gap_zone_is 4 0 1
  check "... fio --zonemode=zbd over 4 zones: 12 MiB written, crc32c verified" gap_fio
  check "... blkzone report equals the control socket's after fio" same_zones cap
  stop_tcmu gap0
  check "znbd-tcmu gap0 stops with status 0" test "$rc" = 0
  check "no configfs entry and no disk left" no_config_left
}
gap_checks
