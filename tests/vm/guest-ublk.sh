#!/bin/bash
# In a guest booted on today's kernel (ublk.test; vm-run --kernel-root):
# what the next steps of the kernel tests stand on.  TAP output.
#   guest-ublk.sh KVER [PART...]
# PARTs (default: all, in this order): base (this file's checks below)
# and the scenarios kept in files of their own, each a guest-ublk-PART.sh
# sourced here so that one boot serves them all; run one alone while
# working on it (tests/vm/README.md).
# - the guest runs KVER (the fetched kernel, not Debian 12's 6.1);
# - null_blk zoned through configfs: blkzone report lists the zones, a
#   write at a zone's wp moves it, one off the wp fails and changes
#   neither the wp nor the data, a reset empties the zone; the block
#   layer's zone write plugging (6.10+, absent from 6.1) is there;
# - ublk_drv (absent from Debian's 6.1): /dev/ublk-control appears and
#   the driver's feature mask has ZONED and USER_COPY, which a zoned
#   ublk server needs;
# - znbd-ublk (ublk/) as a zoned /dev/ublkbN: the kernel's zone report
#   is the control socket's, a write at the wp reads back, one off it
#   fails with EIO and changes nothing, blkzone reset empties a zone,
#   fio --zonemode=zbd verifies, SIGTERM removes the disk, exit 0;
# - the kernel NBD client on znbd --queue-mode=bio (zoned, in the guest):
#   a write at the wp reads back, one ahead of the wp fails with EIO and
#   changes nothing.
# shellcheck source=guest-lib.sh
. "$top_srcdir/tests/vm/guest-lib.sh"
want=${1:?usage: guest-ublk.sh KVER [PART...]}
shift
all_parts="base fs coherence recover appends latency zerocopy zcap zloop zonefs pkg unit tsan"
parts=${*:-$all_parts}
for part in $parts; do
  case " $all_parts " in
    *" $part "*) ;;
    *) echo "guest-ublk.sh: unknown part $part (known: $all_parts)" >&2 && exit 2 ;;
  esac
done
M=$((1024 * 1024))
head -c $((1 * M)) /dev/urandom > "$work/rand"

runs_kernel() {
  echo "uname -r: $(uname -r)"
  [ "$(uname -r)" = "$want" ]
}
check "the guest runs the fetched kernel $want" runs_kernel
want_part() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }

# ------------------------------------------------------------ null_blk zoned
# 16 zones of 4 MiB, none conventional, memory-backed.
nb=/sys/kernel/config/nullb/modern
nullb_create() { # [ATTR=VALUE...]: more configfs attributes, or others
  local a
  modprobe null_blk nr_devices=0 && mkdir "$nb" || return 1
  for a in size=64 memory_backed=1 zoned=1 zone_size=4 zone_nr_conv=0 "$@" power=1; do
    echo "${a#*=}" > "$nb/${a%%=*}" || { echo "cannot set $a"; return 1; }
  done
  # The disk takes the configfs item's name (6.1: nullbN, the only one
  # with nr_devices=0).
  DEV=
  for d in /sys/block/modern /sys/block/nullb*; do
    [ -e "$d" ] && DEV=/dev/${d##*/} && break
  done
  [ -n "$DEV" ] && [ -b "$DEV" ] || { echo "no null_blk disk appeared"; return 1; }
  echo "$DEV: $(cat "/sys/block/${DEV#/dev/}/queue/zoned"), $(cat "/sys/block/${DEV#/dev/}/queue/nr_zones") zones"
}
zone_field() { # SECTOR wptr|zcond: the zone's wp (sectors from its start) or condition
  local line
  line=$(blkzone report -o "$1" -c 1 "$DEV") || return 1
  case $2 in
    wptr) echo $((0x$(sed -n 's/.*wptr 0x\([0-9a-f]*\).*/\1/p' <<< "$line"))) ;;
    zcond) sed -n 's/.*zcond: *[0-9]*(\([a-z]*\)).*/\1/p' <<< "$line" ;;
  esac
}
zone_is() { # SECTOR WP COND
  local wp cond
  wp=$(zone_field "$1" wptr) && cond=$(zone_field "$1" zcond) || return 1
  echo "zone at sector $1: wp $wp, condition $cond"
  [ "$wp" = "$2" ] && [ "$cond" = "$3" ]
}
report_lists() { # N: N zones, all empty
  local out
  out=$(blkzone report "$DEV") || return 1
  printf '%s\n' "$out" | head -n 2
  [ "$(grep -c 'start:' <<< "$out")" = "$1" ] && [ "$(grep -c 'zcond: *1(em)' <<< "$out")" = "$1" ]
}
# null_blk reads what was never written as 0xff bytes, not zeros (6.1
# too): compare with the last zone, which no check writes.
unwritten_bytes() { # OFF LEN
  cmp -n "$2" <(dread "$1" "$2") <(dread $((15 * 4 * M)) "$2") && echo "$2 bytes at $1 read as never written"
}
write_fails() { # OFF LEN FILE
  if dwrite "$@"; then
    echo "the write succeeded"
    return 1
  fi
  echo "the write failed, as it must"
}
z1=$((4 * M)) # zone 1, byte offset; sector 8192
if want_part base && check "null_blk: a zoned disk (64 MiB, 4 MiB zones) made through configfs" nullb_create; then
  check "null_blk: blkzone report lists 16 zones, all empty" report_lists 16
  check "null_blk: zone write plugging is there (debugfs zone_wplugs)" \
    test -e "/sys/kernel/debug/block/${DEV#/dev/}/zone_wplugs"
  check "null_blk: 64 KiB at zone 1's wp" dwrite $z1 65536 "$work/rand"
  check "null_blk: ... moved its wp to 128 sectors (implicitly open)" zone_is 8192 128 oi
  check "null_blk: a write 1 MiB ahead of the wp fails" write_fails $((z1 + M)) 4096 "$work/rand"
  check "null_blk: ... and moved nothing (wp 128 sectors, unwritten bytes there)" \
    all zone_is 8192 128 oi -- unwritten_bytes $((z1 + M)) 4096
  check "null_blk: the data at zone 1's start reads back" same_bytes $z1 65536 "$work/rand"
  check "null_blk: blkzone reset empties zone 1" \
    all blkzone reset -o 8192 -c 1 "$DEV" -- zone_is 8192 0 em -- unwritten_bytes $z1 65536
  echo 0 > "$nb/power"
  rmdir "$nb"
fi

# ---------------------------------------------------------------------- ublk
ublk_features() {
  local f=$top_builddir/tests/vm/ublk-features mask
  [ -x "$f" ] || { echo "$f is not built (make check builds it)"; return 1; }
  mask=$("$f") || return 1
  # UBLK_F_USER_COPY (bit 7) and UBLK_F_ZONED (bit 8).
  echo "feature mask $mask"
  [ $((mask & 0x180)) = $((0x180)) ]
}
check "ublk: modprobe ublk_drv makes /dev/ublk-control" \
  sh -c 'modprobe ublk_drv && test -c /dev/ublk-control && ls -l /dev/ublk-control'
check "ublk: the feature mask has ZONED and USER_COPY" ublk_features

# ----------------------------------------------------------------- znbd-ublk
# znbd-ublk (ublk/) on 16 zones of 4 MiB, the first conventional, max
# open 4, with its control socket: the kernel's zones are the device's,
# the wp rules hold through the block layer, fio's zbd mode verifies,
# SIGTERM removes the disk.
UBLK=$top_builddir/ublk/znbd-ublk
CTL=$work/ublk.ctl
ublk_start() { # [KEY=VALUE...]: another device than the zoned one
  local i zoned=true geometry=given
  [ -x "$UBLK" ] || { echo "$UBLK is not built"; return 1; }
  rm -f "$CTL"
  [ $# != 0 ] || { set -- size=64M zone_size=4M zone_nr_conv=1 zone_max_open=4 && geometry=default; }
  case " $* " in *" zoned=false "*) zoned=false ;; esac
  "$UBLK" "$@" zone_control="$CTL" > "$work/ublk.out" 2> "$work/ublk.err" &
  UBLK_PID=$!
  # It prints /dev/ublkbN once START_DEV returned (the disk is added).
  for i in $(seq 300); do
    DEV=$(head -n 1 "$work/ublk.out")
    [ -n "$DEV" ] && break
    kill -0 $UBLK_PID 2> /dev/null || { cat "$work/ublk.err"; return 1; }
    sleep 0.1
  done
  local q=/sys/block/${DEV#/dev/}/queue
  echo "$DEV: $(cat $q/zoned), $(($(cat /sys/block/${DEV#/dev/}/size) / 2048)) MiB"
  [ -b "$DEV" ] || return 1
  if [ $zoned = false ]; then
    [ "$(cat $q/zoned)" = none ]
  else
    echo "$(cat $q/nr_zones) zones of $(cat $q/chunk_sectors) sectors, max open $(cat $q/max_open_zones)"
    [ "$(cat $q/zoned)" = host-managed ] || return 1
    # The default geometry's values; a caller's own are its to check.
    [ $geometry = given ] || { [ "$(cat $q/nr_zones)" = 16 ] &&
      [ "$(cat $q/chunk_sectors)" = 8192 ] && [ "$(cat $q/max_open_zones)" = 4 ]; }
  fi
}
# The differential run's length: thousands of operations, each compared
# result by result and zone by zone.
DIFF_OPS=5000
# ublk_diff REF DUT: zonediff.py, after the same 4 MiB into both
# conventional zones; the block layer splits writes at max_sectors_kb
# and a split write that fails gives its last piece's errno: the same
# splits on both (guest-tcmu-diff.sh).
ublk_diff() {
  local d
  head -c $((4 * M)) /dev/urandom > "$work/conv"
  for d in "$1" "$2"; do
    echo 64 > "/sys/block/${d#/dev/}/queue/max_sectors_kb" &&
      DEV=$d dwrite 0 $((4 * M)) "$work/conv" || return 1
  done
  timeout -k 5 600 python3 "$top_srcdir/tests/vm/zonediff.py" --ops $DIFF_OPS --seed 7 \
    --log "$work/zonediff.log" "$1" "$2" > "$work/zonediff.out" 2>&1
  local r=$?
  cat "$work/zonediff.out"
  [ "$r" = 0 ] && grep -qE "^$DIFF_OPS ops: .* 0 unexplained" "$work/zonediff.out"
}
# The kernel's zone report (BLKREPORTZONE, tests/vm/zonediff.py) equals
# the control socket's: start, length, capacity, type, condition, and
# the wp of every sequential zone.
report_ublk() { # 16 zones: one conventional, 15 empty
  local out
  out=$(blkzone report "$DEV") || return 1
  printf '%s\n' "$out" | head -n 2
  [ "$(grep -c 'start:' <<< "$out")" = 16 ] && [ "$(grep -c 'CONVENTIONAL' <<< "$out")" = 1 ] &&
    [ "$(grep -c 'zcond: *1(em)' <<< "$out")" = 15 ]
}
ublk_same_zones() { # [N]: N zones (default 16)
  PYTHONPATH=$top_srcdir/tests:$top_srcdir/tests/vm $T python3 - "$DEV" "$CTL" "${1:-16}" << 'PY'
import sys
import zonediff
from znbdtest import control
conds = {"NOT_WP": 0, "EMPTY": 1, "IMP_OPEN": 2, "EXP_OPEN": 3, "CLOSED": 4,
         "READONLY": 13, "FULL": 14, "OFFLINE": 15}
kernel = [(z[0], z[1], z[5], z[3], z[4], None if z[3] == 1 else z[2])
          for z in zonediff.Dev(sys.argv[1]).report()]
dev = []
for line in control(sys.argv[2], "report 0 %d" % len(kernel)).splitlines():
    f = dict(w.split("=", 1) for w in line.split() if "=" in w)
    if "zone" in f:
        conv = f["type"] == "CONVENTIONAL"
        dev.append((int(f["start"]) // 512, int(f["len"]) // 512,
                    int(f["cap"]) // 512, 1 if conv else 2, conds[f["cond"]],
                    None if conv else int(f["wp"]) // 512))
print("%d zones from the kernel, %d from the control socket; zone 1: %s"
      % (len(kernel), len(dev), kernel[1:2]))
for k, d in zip(kernel, dev):
    if k != d:
        print("kernel %s != device %s" % (k, d))
sys.exit(0 if kernel == dev and len(kernel) == int(sys.argv[3]) else 1)
PY
}
# ublk_log_clean SINCE: the kernel log after its line SINCE (dmesg | wc
# -l then) has no failed request on ublkb0, no btrfs error and no kernel
# warning.
ublk_log_clean() {
  local bad
  bad=$(dmesg | tail -n +$(($1 + 1)) |
    grep -E 'I/O error, dev ublkb0|BTRFS (error|critical|warning)|WARNING:|BUG:')
  [ -z "$bad" ] || { printf '%s\n' "$bad"; return 1; }
  echo "$(dmesg | tail -n +$(($1 + 1)) | grep -c ublkb0) kernel lines on ublkb0, none an error"
}
ublk_stop() {
  local rc=0
  kill -TERM $UBLK_PID && wait $UBLK_PID || rc=$?
  tail -n 2 "$work/ublk.err"
  echo "exit status $rc"
  [ "$rc" = 0 ] && [ ! -e "$DEV" ] && [ ! -e "/sys/block/${DEV#/dev/}" ]
}
note "t=${SECONDS}s"
if want_part base && check "znbd-ublk: a zoned /dev/ublkbN (16 zones of 4 MiB, max open 4)" ublk_start; then
  check "znbd-ublk: blkzone report lists 16 zones" report_ublk
  check "znbd-ublk: the kernel's zones are the control socket's" ublk_same_zones
  check "znbd-ublk: 64 KiB at zone 1's wp read back" write_read $z1 65536 "$work/rand"
  check "znbd-ublk: ... moved its wp to 128 sectors (implicitly open)" zone_is 8192 128 oi
  check "znbd-ublk: a write 1 MiB ahead of the wp fails with EIO" \
    expect_eio dwrite $((z1 + M)) 4096 "$work/rand"
  check "znbd-ublk: ... and moved nothing (wp 128 sectors, zeros there)" \
    all zone_is 8192 128 oi -- zero_bytes $((z1 + M)) 4096
  check "znbd-ublk: 64 KiB anywhere in the conventional zone read back" \
    write_read $((2 * M)) 65536 "$work/rand"
  check "znbd-ublk: the kernel's zones are still the control socket's" ublk_same_zones
  check "znbd-ublk: blkzone reset empties zone 1" \
    all blkzone reset -o 8192 -c 1 "$DEV" -- zone_is 8192 0 em -- zero_bytes $z1 65536
  if command -v fio > /dev/null; then
    check "znbd-ublk: fio zbd, 32 MiB at QD8 over zones 2-9, crc32c verified" \
      fio_zbd_verify 8M 32
    check "znbd-ublk: the kernel's zones are the control socket's after fio" ublk_same_zones
  else
    skip_check "znbd-ublk: fio zbd" "no fio in the guest"
  fi
  check "znbd-ublk: SIGTERM removes the disk and exits 0" ublk_stop
fi
# null_blk of the same geometry as the reference (zonediff.py, as
# guest-tcmu-diff.sh runs it): the same results and zones after each of
# DIFF_OPS random operations.  Memory-backed null_blk reads what was never
# written as 0xff bytes: znbd-ublk does too past the wp
# (zone_read_past_wp=ones), and the conventional zone gets the same
# bytes on both first.
if want_part base && check "znbd-ublk: null_blk of the same geometry (1 conventional, max open 4)" \
  nullb_create zone_nr_conv=1 zone_max_open=4; then
  NB_DEV=$DEV
  if check "znbd-ublk: the same geometry, reading 0xff past the wp" \
    ublk_start size=64M zone_size=4M zone_nr_conv=1 zone_max_open=4 zone_read_past_wp=ones; then
    check "znbd-ublk: $DIFF_OPS random zone operations: the same results and zones as null_blk" \
      ublk_diff "$NB_DEV" "$DEV"
    check "znbd-ublk: SIGTERM removes that disk and exits 0" ublk_stop
  fi
  echo 0 > "$nb/power"
  rmdir "$nb"
fi
# zoned=false: a plain disk; a discard and a write of zeros read back as
# zeros, the bytes around them stay.
if want_part base && check "znbd-ublk: a plain /dev/ublkbN (zoned=false, 16 MiB)" ublk_start zoned=false size=16M; then
  check "znbd-ublk: 1 MiB at 1 MiB read back" write_read $M $M "$work/rand"
  check "znbd-ublk: blkdiscard of 256 KiB and a write of zeros over the next 256 KiB" \
    all $T blkdiscard -o $M -l 262144 "$DEV" -- $T blkdiscard -z -o $((M + 262144)) -l 262144 "$DEV"
  plain_after() {
    zero_bytes $M 524288 && cmp -n $((M / 2)) <(dread $((M + M / 2)) $((M / 2))) <(tail -c $((M / 2)) "$work/rand") &&
      echo "the last 512 KiB are the data written"
  }
  check "znbd-ublk: ... read back as zeros, the rest unchanged" plain_after
  check "znbd-ublk: SIGTERM removes the plain disk and exits 0" ublk_stop
fi
note "t=${SECONDS}s"

# ----------------------------------------------------------------------- NBD
if ! want_part base; then
  :
elif DEV=/dev/nbd0 && ! why=$(frontend_available bio); then
  check "znbd is built" sh -c "echo '$why'; false"
elif check "nbd: modprobe nbd" modprobe nbd nbds_max=1 &&
  check "nbd: start znbd bio, 16 zones of 4 MiB" start_server bio size=64M zone_size=4M blocksize=4096 &&
  check "nbd: nbd-client -b 4096 -C 1" attach 4096 1; then
  check "nbd: 64 KiB at zone 0's wp read back" write_read 0 65536 "$work/rand"
  check "nbd: a write ahead of zone 1's wp fails with EIO" expect_eio dwrite $((z1 + 65536)) 4096 "$work/rand"
  check "nbd: ... and changed nothing there (zeros)" zero_bytes $((z1 + 65536)) 4096
  check "nbd: nbd-client -d" detach
fi
stop_server > /dev/null

# The scenarios in files of their own, on the functions above.
for part in $parts; do
  [ "$part" = base ] && continue
  note "part $part at t=${SECONDS}s"
  # shellcheck disable=SC1090
  . "$top_srcdir/tests/vm/guest-ublk-$part.sh"
done
tap_end
