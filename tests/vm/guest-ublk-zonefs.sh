# shellcheck shell=bash
# guest-ublk.sh's part zonefs (sourced there): the zonefs file system
# (fs/zonefs, a module of the fetched kernel) made by mkzonefs (Debian
# 13's zonefs-tools, which scripts/fetch-tools.sh unpacks into
# $ZNBD_TOOLS_DIR: Debian 12 has none) on a znbd-ublk disk and on a zloop
# disk of the same geometry: 16 zones of 4 MiB, 2 conventional (the
# first holds the super block, the second is cnv/0), so 14 sequential
# files seq/0..13.  In each: files in cnv and seq written and read back,
# a seq file's size is its zone's wp, and after umount and mount again
# the sizes and bytes are there.
# shellcheck source=guest-ublk-zloop.sh
want_part zloop || . "$top_srcdir/tests/vm/guest-ublk-zloop.sh"
MKZONEFS=${ZNBD_TOOLS_DIR:-/var/lib/znbd/tools}/usr/sbin/mkzonefs
ZMNT=$work/zonefs

zonefs_mount() {
  mount -t zonefs "$DEV" "$ZMNT" || return 1
  echo "cnv: $(ls "$ZMNT/cnv" | wc -l) files, seq: $(ls "$ZMNT/seq" | wc -l) files"
  [ "$(ls "$ZMNT/cnv" | wc -l)" = 1 ] && [ "$(ls "$ZMNT/seq" | wc -l)" = 14 ]
}
zonefs_make() { $T "$MKZONEFS" -f "$DEV" | tail -n 3 && zonefs_mount; }
# seq/0: 1 MiB then 256 KiB more, appended with O_DIRECT (zonefs takes
# only direct, appending writes on a sequential file); cnv/0: 512 KiB at
# 1 MiB through the page cache, synced.
zonefs_write() {
  $T dd if="$work/rand" of="$ZMNT/seq/0" bs=256K count=4 oflag=direct,append conv=notrunc status=none &&
    $T dd if="$work/rand" of="$ZMNT/seq/0" bs=256K count=1 oflag=direct,append conv=notrunc status=none &&
    $T dd if="$work/rand" of="$ZMNT/cnv/0" bs=512K count=1 seek=2 conv=notrunc,fsync status=none &&
    stat -c '%n: %s bytes' "$ZMNT/seq/0" "$ZMNT/seq/1"
}
zonefs_same() { # the bytes written, read back with O_DIRECT; seq/0's size
  local size
  size=$(stat -c %s "$ZMNT/seq/0")
  echo "seq/0: $size bytes"
  [ "$size" = $((M + 262144)) ] &&
    cmp <($T dd if="$ZMNT/seq/0" bs=256K iflag=direct status=none) <(cat "$work/rand" <(head -c 262144 "$work/rand")) &&
    cmp -n 524288 <($T dd if="$ZMNT/cnv/0" bs=512K skip=2 count=1 iflag=direct status=none) "$work/rand" &&
    echo "seq/0 and cnv/0 read back"
}
zonefs_wp() { # seq/0 is zone 2: wp 2560 sectors, as the file's size
  local wp
  wp=$(zone_field 16384 wptr) || return 1
  echo "zone 2 (seq/0): wp $wp sectors"
  [ "$wp" = 2560 ]
}
zonefs_remount() { umount "$ZMNT" && zonefs_mount && zonefs_same; }
zonefs_checks() { # NAME: on $DEV, mkzonefs'd and mounted
  check "zonefs on $1: files written in seq/0 (O_DIRECT appends) and cnv/0" zonefs_write
  check "zonefs on $1: ... read back" zonefs_same
  check "zonefs on $1: seq/0's zone wp is its size (2560 sectors)" zonefs_wp
  check "zonefs on $1: umount, mount again: the same sizes and bytes" zonefs_remount
  check "zonefs on $1: umount" umount "$ZMNT"
}

if ! want_part zonefs; then
  :
elif [ ! -x "$MKZONEFS" ]; then
  skip_check "zonefs: mkzonefs on znbd-ublk and zloop" "no $MKZONEFS (scripts/fetch-tools.sh)"
elif check "zonefs: modprobe zonefs" modprobe zonefs; then
  mkdir -p "$ZMNT"
  if check "zonefs: znbd-ublk, 16 zones of 4 MiB, 2 conventional" \
    ublk_start size=64M zone_size=4M zone_nr_conv=2 zone_max_open=4; then
    if check "zonefs on znbd-ublk: mkzonefs -f, mount: cnv/0 and seq/0..13" zonefs_make; then
      zonefs_checks znbd-ublk
    fi
    check "zonefs: SIGTERM removes the znbd-ublk disk and exits 0" ublk_stop
  fi
  if ! modinfo -F filename zloop > /dev/null 2>&1; then
    skip_check "zonefs on zloop" "no zloop module for $(uname -r) (scripts/build-zloop.sh builds it)"
  elif check "zonefs: zloop and a tmpfs base_dir" zloop_ready; then
    if check "zonefs: zloop add id=0, 16 zones of 4 MiB, 2 conventional" zloop_add 0 2; then
      if check "zonefs on zloop: mkzonefs -f, mount: cnv/0 and seq/0..13" zonefs_make; then
        zonefs_checks zloop
      fi
      check "zonefs: zloop remove id=0" zloop_remove 0
    fi
    umount "$ZB"
  fi
fi
