# shellcheck shell=bash
# guest-ublk.sh's part zloop (sourced there, with its functions): a
# directory goes between Linux's zoned loop driver (zloop, which
# scripts/build-zloop.sh builds for the fetched kernel) and znbd's dir=
# store, both ways, on a tmpfs (zloop's block size there: 4096, the page
# size, as znbd's default for a new zoned dir=).  16 zones of 4 MiB, the
# first conventional, made by the same operations on either side:
#   zone 0 conventional: 1 MiB at 512 KiB;   zone 1: 64 KiB (open);
#   zone 2: explicitly opened, then 256 KiB; zone 3: 128 KiB, finished;
#   zone 4: written full (4 MiB);            zone 5: explicitly opened;
#   zone 6: 64 KiB, then reset;              zones 7-15: never written.
# A device added again reads its zones from the files as a drive after a
# power cycle (zloop_init_zone(), zloop_update_seq_zone(); man
# nbdkit-zoned-plugin, "A restart is a power cycle"): open zones with
# data come back CLOSED, open empty ones EMPTY; the rest is kept.  So a
# live report is compared with the other side's after that mapping
# (power_cycled), and every byte of the device (zeros past the wps on
# both) by sha256sum.  The one difference the mapping also hides: zloop
# reports a FULL zone's wp as all-ones (blkzone prints it less the zone
# start), znbd as the zone end (null_blk's finish).
ZB=$work/zloop # a tmpfs; base_dir of zloop ids 0 and 1
ZL_ADD="capacity_mb=64,zone_size_mb=4,base_dir=$ZB"
ZN_GEO="size=64M zone_size=4M zone_nr_conv=1 zone_max_open=4"
head -c $((4 * M)) /dev/urandom > "$work/rand4"

zloop_ready() {
  modinfo -F filename zloop && modprobe zloop && [ -c /dev/zloop-control ] &&
    mkdir -p "$ZB" && mount -t tmpfs -o size=512m zloop "$ZB" && mkdir "$ZB/0" &&
    stat -f -c "base_dir on %T, block size %S" "$ZB"
}
zloop_add() { # ID [CONV]: /dev/zloopID on $ZB/ID, CONV conventional zones (1)
  local i
  echo "add id=$1,conv_zones=${2:-1},$ZL_ADD" > /dev/zloop-control || return 1
  for i in $(seq 100); do
    [ -b "/dev/zloop$1" ] && break
    sleep 0.1
  done
  DEV=/dev/zloop$1
  local q=/sys/block/zloop$1/queue
  echo "$DEV: $(cat $q/zoned), $(cat $q/nr_zones) zones of $(cat $q/chunk_sectors) sectors, block $(cat $q/logical_block_size)"
  [ "$(cat $q/zoned)" = host-managed ] && [ "$(cat $q/nr_zones)" = 16 ] && [ "$(cat $q/chunk_sectors)" = 8192 ]
}
zloop_remove() { # ID
  local i
  echo "remove id=$1" > /dev/zloop-control || return 1
  for i in $(seq 100); do
    [ -e "/sys/block/zloop$1" ] || return 0
    sleep 0.1
  done
  echo "/dev/zloop$1 still there"
  return 1
}
# The operations above, on $DEV.
fill_zones() {
  dwrite $((M / 2)) $M "$work/rand" &&
    dwrite $((4 * M)) 65536 "$work/rand" &&
    blkzone open -o 16384 -c 1 "$DEV" && dwrite $((8 * M)) 262144 "$work/rand" &&
    dwrite $((12 * M)) 131072 "$work/rand" && blkzone finish -o 24576 -c 1 "$DEV" &&
    seq_fill $((16 * M)) $((4 * M)) "$work/rand4" &&
    blkzone open -o 40960 -c 1 "$DEV" &&
    dwrite $((24 * M)) 65536 "$work/rand" && blkzone reset -o 49152 -c 1 "$DEV" &&
    blkzone report -c 7 "$DEV"
}
# report FILE: blkzone report of $DEV into FILE.  written_sums REPORT
# FILE: the sha256 of each zone's written bytes (a conventional zone's
# all, a sequential zone's up to its wp: the capacity when FULL), one
# line per zone.  Only up to the wp: zloop (6.18) zero-fills a whole read
# that ends past the wp, data below it too (a short read of the file,
# zloop_complete_rq()), where znbd returns the data and zeros past the
# wp.
report() { $T blkzone report "$DEV" > "$1" && [ "$(grep -c 'start:' "$1")" = 16 ] && sed -n '1,7p' "$1"; }
written_sums() {
  local line start len cap wp n
  local re='start: (0x[0-9a-f]+), len (0x[0-9a-f]+), cap (0x[0-9a-f]+), wptr (0x[0-9a-f]+)'
  while read -r line; do
    [[ $line =~ $re ]] || continue
    start=$((BASH_REMATCH[1])) len=$((BASH_REMATCH[2])) cap=$((BASH_REMATCH[3])) wp=$((BASH_REMATCH[4]))
    case $line in
      *CONVENTIONAL*) n=$len ;;
      *"zcond:14"*) n=$cap ;;
      *) n=$wp ;;
    esac
    if [ "$n" = 0 ]; then
      echo empty
    else
      $T dd if="$DEV" bs=1M skip=$((start * 512)) count=$((n * 512)) iflag=direct,skip_bytes,count_bytes status=none |
        sha256sum | cut -d' ' -f1
    fi
  done < "$1" > "$2"
  [ "$(wc -l < "$2")" = 16 ] && [ "$(grep -c empty "$2")" = 11 ] && [ "$(sort -u "$2" | wc -l)" = 6 ] ||
    { echo "not 16 zones, 5 written and different:"; cat "$2"; return 1; }
  echo "sha256 of the conventional zone $(head -c 16 "$2")..., of zone 1's written bytes $(sed -n 2p "$2" | head -c 16)..."
}
# power_cycled < REPORT: the report as a device added again would give it
# (IMP_OPEN and EXP_OPEN: CLOSED with data, EMPTY without), a FULL
# zone's wp as "full".
power_cycled() {
  sed -E -e '/zcond: *(2\(oi\)|3\(oe\))/{/wptr 0x0+ /s/zcond: *[23]\(o[ie]\)/zcond: 1(em)/;s/zcond: *[23]\(o[ie]\)/zcond: 4(cl)/}' \
    -e '/zcond: *14\(fu\)/s/wptr 0x[0-9a-f]+/wptr full/'
}
same_report() { # A B: equal after power_cycled
  if diff <(power_cycled < "$1") <(power_cycled < "$2"); then
    echo "the same 16 zones; $(grep -c 'zcond: *4(cl)' < <(power_cycled < "$1")) CLOSED, $(grep -c 'zcond: *14(fu)' "$1") FULL"
  else
    return 1
  fi
}
same_sum() {
  if cmp -s "$1" "$2"; then
    echo "the same written bytes in all 16 zones (sha256)"
  else
    paste "$1" "$2" | awk '$1 != $2 { print "zone " NR - 1 " differs: " substr($1, 1, 16) "... " substr($2, 1, 16) "..." }'
    return 1
  fi
}
power_cycle_zones() { # the zones fill_zones leaves, after a power cycle
  all zone_is 8192 128 cl -- zone_is 16384 512 cl -- zone_is 40960 0 em -- zone_is 49152 0 em
}

zn_files() { # DIR: what znbd left there besides the zone files
  ls "$1" | grep -v -E '^(cnv|seq)-[0-9]{6}$' | tr '\n' ' '
  echo "($(ls "$1" | grep -c -E '^(cnv|seq)-[0-9]{6}$') zone files)"
}

if ! want_part zloop; then
  :
elif ! why=$(modinfo -F filename zloop 2>&1); then
  skip_check "zloop: directories between Linux's zloop and znbd's dir=" \
    "no zloop module for $(uname -r) (scripts/build-zloop.sh builds it): $why"
elif check "zloop: modprobe zloop, /dev/zloop-control, a tmpfs base_dir" zloop_ready; then
  # From zloop to znbd: zloop's directory opens in znbd-ublk dir= with
  # every byte, wp and condition zloop itself finds there when added again.
  if check "zloop -> znbd: zloop add id=0 on an empty directory: 16 zones of 4 MiB, 1 conventional" zloop_add 0; then
    check "zloop: the zones written (conventional, partial, open, finished, full, reset)" fill_zones
    check "zloop: its blkzone report and written bytes recorded" all report "$work/zl.rep" -- written_sums "$work/zl.rep" "$work/zl.sum"
    check "zloop: remove id=0" zloop_remove 0
    if check "zloop: add id=0 again on its directory" zloop_add 0; then
      check "zloop: ... open zones came back CLOSED (with data) or EMPTY, the rest kept; every written byte kept" \
        all power_cycle_zones -- report "$work/zl2.rep" -- same_report "$work/zl.rep" "$work/zl2.rep" -- \
        written_sums "$work/zl2.rep" "$work/zl2.sum" -- same_sum "$work/zl.sum" "$work/zl2.sum"
      check "zloop: remove id=0" zloop_remove 0
    fi
    # shellcheck disable=SC2086
    if check "zloop -> znbd: znbd-ublk dir= on zloop's directory (adopted with the geometry given)" \
      ublk_start dir="$ZB/0" $ZN_GEO; then
      check "zloop -> znbd: the same blkzone report as zloop's (wps, conditions)" \
        all report "$work/zn.rep" -- same_report "$work/zl.rep" "$work/zn.rep" -- \
        power_cycle_zones -- zone_is 24576 8192 fu -- zone_is 32768 8192 fu
      check "zloop -> znbd: the kernel's zones are the control socket's" ublk_same_zones
      check "zloop -> znbd: every written byte the same as zloop's" all written_sums "$work/zn.rep" "$work/zn.sum" -- same_sum "$work/zl.sum" "$work/zn.sum"
      check "zloop -> znbd: SIGTERM removes the disk and exits 0" ublk_stop
      check "zloop -> znbd: znbd added only its own files" zn_files "$ZB/0"
    fi
  fi
  note "zloop: t=${SECONDS}s"
  # From znbd to zloop: a directory znbd formatted and wrote is added to
  # zloop, which reports what znbd would after a restart and reads the
  # same bytes.
  # shellcheck disable=SC2086
  if check "znbd -> zloop: znbd-ublk dir= formats a new directory" ublk_start dir="$ZB/1" $ZN_GEO; then
    check "znbd: the zones written (conventional, partial, open, finished, full, reset)" fill_zones
    check "znbd: its blkzone report and written bytes recorded" all report "$work/zn1.rep" -- written_sums "$work/zn1.rep" "$work/zn1.sum"
    check "znbd: SIGTERM removes the disk and exits 0" ublk_stop
    check "znbd: the directory holds zloop's zone files and znbd's own" zn_files "$ZB/1"
    if check "znbd -> zloop: zloop add id=1 on znbd's directory" zloop_add 1; then
      check "znbd -> zloop: the same blkzone report as znbd's (wps, conditions)" \
        all report "$work/zl1.rep" -- same_report "$work/zn1.rep" "$work/zl1.rep" -- power_cycle_zones
      check "znbd -> zloop: every written byte the same as znbd's" \
        all written_sums "$work/zl1.rep" "$work/zl1.sum" -- same_sum "$work/zn1.sum" "$work/zl1.sum"
      check "znbd -> zloop: 64 KiB at zone 1's wp through zloop read back" \
        all write_read $((4 * M + 65536)) 65536 "$work/rand" -- zone_is 8192 256 oi
      check "zloop: remove id=1" zloop_remove 1
      if check "zloop -> znbd: znbd-ublk reopens its directory (znbd.meta) after zloop wrote" ublk_start dir="$ZB/1"; then
        check "zloop -> znbd: zloop's write there (zone 1's wp 256 sectors, CLOSED), the rest kept" \
          all zone_is 8192 256 cl -- same_bytes $((4 * M + 65536)) 65536 "$work/rand" -- zone_is 16384 512 cl -- zone_is 24576 8192 fu
        check "zloop -> znbd: SIGTERM removes the disk and exits 0" ublk_stop
      fi
    fi
  fi
  umount "$ZB"
  note "zloop: t=${SECONDS}s"
fi
