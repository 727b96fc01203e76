# shellcheck shell=bash
# guest-ublk.sh's part zcap (sourced; its nullb_create, ublk_start,
# ublk_stop, ublk_same_zones, ublk_diff, zone_is and guest-lib.sh's): a
# zone capacity below the zone size on znbd-ublk, which reports it as
# null_blk does (each sequential zone's capacity, no gap zones).
# - 16 zones of 4 MiB with 3 MiB capacity, the first conventional: the
#   kernel's zones (start, length, capacity, type, condition, wp) are the
#   control socket's; 3 MiB at a zone's start make it FULL and read back;
#   a write in the gap past the capacity fails with EIO and changes
#   nothing; fio's zbd mode verifies over 4 zones;
# - the differential run against null_blk with zone_capacity=3 (MB):
#   DIFF_OPS random zone operations, the same results and zones.
ZC=(size=64M zone_size=4M zone_capacity=3M zone_nr_conv=1 zone_max_open=4)
head -c $((3 * M)) /dev/urandom > "$work/cap3"
zcap_sysfs() { # every sequential zone's capacity is 3 MiB (6144 sectors)
  local out
  out=$(blkzone report "$DEV") || return 1
  printf '%s\n' "$out" | sed -n '1,2p'
  [ "$(grep -c 'cap 0x001800' <<< "$out")" = 15 ] &&
    [ "$(grep -c 'CONVENTIONAL' <<< "$out")" = 1 ]
}
if check "zcap: znbd-ublk, 16 zones of 4 MiB with 3 MiB capacity" ublk_start "${ZC[@]}"; then
  check "zcap: blkzone report gives 15 sequential zones a 3 MiB capacity" zcap_sysfs
  check "zcap: the kernel's zones (capacity too) are the control socket's" ublk_same_zones
  check "zcap: 3 MiB at zone 2's start make it FULL and read back" \
    all dwrite $((8 * M)) $((3 * M)) "$work/cap3" -- zone_is 16384 6144 fu -- \
    same_bytes $((8 * M)) $((3 * M)) "$work/cap3"
  check "zcap: a write in zone 3's gap (past its capacity) fails with EIO" \
    expect_eio dwrite $((12 * M + 3 * M)) 4096 "$work/rand"
  check "zcap: ... and changes nothing (zone 3 EMPTY)" zone_is 24576 0 em
  check "zcap: fio zbd over zones 4-7 at QD8: 12 MiB written, crc32c verified" fio_zbd_verify 16M 16 12
  check "zcap: the kernel's zones are the control socket's after fio" ublk_same_zones
  check "zcap: SIGTERM removes the disk and exits 0" ublk_stop
fi
if check "zcap: null_blk of the same geometry (zone_capacity=3)" \
  nullb_create zone_capacity=3 zone_nr_conv=1 zone_max_open=4; then
  NB_DEV=$DEV
  if check "zcap: znbd-ublk of that geometry, reading 0xff past the wp" \
    ublk_start "${ZC[@]}" zone_read_past_wp=ones; then
    check "zcap: $DIFF_OPS random zone operations: the same results and zones as null_blk" \
      ublk_diff "$NB_DEV" "$DEV"
    check "zcap: SIGTERM removes that disk and exits 0" ublk_stop
  fi
  echo 0 > "$nb/power"
  rmdir "$nb"
fi
