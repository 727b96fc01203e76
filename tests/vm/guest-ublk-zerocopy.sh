# shellcheck shell=bash
# guest-ublk.sh part "zerocopy": znbd-ublk --zero-copy on, off and
# auto (UBLK_F_AUTO_BUF_REG, Linux 6.16).  Sourced by guest-ublk.sh,
# on its functions.  On a kernel whose ublk driver lacks that feature
# (its feature mask, from ublk-features), such as 6.12: on is refused
# with a message naming it, auto and off serve by user copy, and the
# zero-copy checks are skipped.  Otherwise, on a dir= disk of 16 zones
# of 4 MiB (one conventional, 0xff past the wp):
# - on: znbd-ublk says zero copy; fio's zbd mode writes 16 MiB at QD8 and
#   verifies them (READ_FIXED and WRITE_FIXED on the requests' own
#   pages); a read across a zone's wp gives the written bytes then 0xff
#   (the fill goes to the pages by user copy); a write in the
#   conventional zone reads back;
# - off: no zero copy; the same fio run verifies;
# - auto: zero copy on a dir= disk, none on a RAM disk;
# - on refused for a RAM disk, with a message naming dir=;
# - on a full file system, a write whose file write fails with ENOSPC
#   fails so and leaves its zone as null_blk leaves one whose copy failed
#   (wp where it was, IMP_OPEN, the bytes cut off the file, the data below
#   the wp intact).
ZDIR=$work/zc.dir
# zc_start MODE [KEY=VALUE...]: a zoned znbd-ublk --zero-copy MODE.
zc_start() {
  local mode=$1
  shift
  rm -rf "$ZDIR"
  ublk_start --zero-copy "$mode" size=64M zone_size=4M zone_nr_conv=1 "$@"
}
zc_said() { # yes|no: znbd-ublk said zero copy, or did not
  local said=no
  grep -q "zero copy" "$work/ublk.err" && said=yes
  echo "zero copy said: $said"
  [ $said = "$1" ]
}
# 64 KiB at zone 2's wp, then a read of 128 KiB from its start: the 64
# KiB, then 0xff bytes.
zc_past_wp() {
  dwrite $((8 * M)) 65536 "$work/rand" || return 1
  cmp -n 65536 <(dread $((8 * M)) 131072) "$work/rand" &&
    cmp <(dread $((8 * M + 65536)) 65536) <(head -c 65536 /dev/zero | tr '\0' '\377') &&
    echo "the written bytes, then 0xff past the wp"
}
# A write of 512 KiB (one request: a split one's other part would be
# failed by the kernel's zone write plug with EIO, which the whole write
# would report) after zone 2's data fails with ENOSPC.
zc_enospc() {
  local rc=0
  dwrite $((9 * M)) $((512 * 1024)) "$work/rand" > "$work/enospc.out" 2>&1 || rc=$?
  cat "$work/enospc.out"
  [ $rc != 0 ] && grep -q "No space left on device" "$work/enospc.out"
}
zc_file_size() { # ZONE BYTES: the zone's file is BYTES long
  local n
  n=$(stat -c %s "$work/small/d/seq-$(printf %06d "$1")") || return 1
  echo "seq-$(printf %06d "$1"): $n bytes"
  [ "$n" = "$2" ]
}
zc_refused() { # WORD: --zero-copy on refused (status 1), naming WORD
  local rc=0
  $T "$UBLK" --zero-copy on size=16M zoned=false > /dev/null 2> "$work/zc.err" || rc=$?
  cat "$work/zc.err"
  [ $rc = 1 ] && grep -q "$1" "$work/zc.err"
}
# UBLK_F_AUTO_BUF_REG (bit 11 of the driver's feature mask).
zc_kernel=yes
mask=$("$top_builddir/tests/vm/ublk-features" 2> /dev/null) || mask=0
[ $((mask & 0x800)) = 0 ] && zc_kernel=no
note "UBLK_F_AUTO_BUF_REG in the feature mask ($mask): $zc_kernel"
if [ $zc_kernel = no ]; then
  check "zerocopy: --zero-copy on refused: no UBLK_F_AUTO_BUF_REG in this kernel" \
    zc_refused UBLK_F_AUTO_BUF_REG
  if check "zerocopy: --zero-copy auto, dir=" zc_start auto dir="$ZDIR" zone_read_past_wp=ones; then
    check "zerocopy: no zero copy (user copy)" zc_said no
    check "zerocopy: 64 KiB in the conventional zone read back" write_read $M 65536 "$work/rand"
    check "zerocopy: a read across the wp: the data, then 0xff" zc_past_wp
    check "zerocopy: SIGTERM removes the disk" ublk_stop
  fi
  skip_check "zerocopy: zero copy" "the kernel's ublk driver has no UBLK_F_AUTO_BUF_REG (Linux 6.16)"
  note "t=${SECONDS}s"
  return 0
fi
if command -v fio > /dev/null; then
  if check "zerocopy: --zero-copy on, dir=" zc_start on dir="$ZDIR" zone_read_past_wp=ones; then
    check "zerocopy: znbd-ublk says zero copy" zc_said yes
    check "zerocopy: fio zbd, 16 MiB at QD8, crc32c verified" fio_zbd_verify 16M 16
    check "zerocopy: a read across the wp: the data, then 0xff" zc_past_wp
    check "zerocopy: 64 KiB in the conventional zone read back" write_read $M 65536 "$work/rand"
    check "zerocopy: SIGTERM removes the disk" ublk_stop
  fi
  if check "zerocopy: --zero-copy off, dir=" zc_start off dir="$ZDIR"; then
    check "zerocopy: no zero copy" zc_said no
    check "zerocopy: fio zbd, 16 MiB at QD8, crc32c verified" fio_zbd_verify 16M 16
    check "zerocopy: SIGTERM removes the disk" ublk_stop
  fi
  if check "zerocopy: --zero-copy auto, dir=" zc_start auto dir="$ZDIR"; then
    check "zerocopy: zero copy" zc_said yes
    check "zerocopy: SIGTERM removes the disk" ublk_stop
  fi
  if check "zerocopy: --zero-copy auto, RAM" zc_start auto; then
    check "zerocopy: no zero copy" zc_said no
    check "zerocopy: SIGTERM removes the disk" ublk_stop
  fi
  check "zerocopy: --zero-copy on refused for a RAM disk" zc_refused dir=
  # A full file system under the zone files: the write whose file write
  # fails (io_uring's ENOSPC) fails with ENOSPC and leaves its zone as
  # null_blk leaves one whose copy failed: wp where it was, IMP_OPEN;
  # its bytes are cut off the file, the data below the wp reads back.
  if check "zerocopy: dir= on a tmpfs of 5.25 MiB (zone_prealloc=false), zero copy" \
    all mkdir -p "$work/small" -- mount -t tmpfs -o size=5376k small "$work/small" -- \
    zc_start on dir="$work/small/d" zone_prealloc=false; then
    check "zerocopy: 4 MiB fill zone 1" dwrite $((4 * M)) $((4 * M)) <(head -c $((4 * M)) /dev/urandom)
    check "zerocopy: 1 MiB at zone 2's wp" dwrite $((8 * M)) $M "$work/rand"
    check "zerocopy: the next 512 KiB find the file system full: ENOSPC" zc_enospc
    check "zerocopy: zone 2's wp where it was (2048 sectors), IMP_OPEN; its file that long" \
      all zone_is 16384 2048 oi -- zc_file_size 2 $M
    check "zerocopy: the data below the wp reads back" same_bytes $((8 * M)) $M "$work/rand"
    check "zerocopy: SIGTERM removes the disk" ublk_stop
    umount "$work/small"
  fi
else
  skip_check "zerocopy: fio" "no fio in the guest"
fi
note "t=${SECONDS}s"
