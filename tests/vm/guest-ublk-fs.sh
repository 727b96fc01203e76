# shellcheck shell=bash
# guest-ublk.sh's part fs (sourced; its functions ublk_start, ublk_stop,
# ublk_same_zones and guest-lib.sh's): znbd-ublk under the kernel's zoned
# file systems, on a dir= store served by two hardware queues whose
# threads poll (--poll-us; the other parts run without).
# - 512 MiB, 8 MiB zones, 4 conventional (f2fs keeps its metadata
#   there), max open 8, --queues 2 --poll-us 100: fio's zbd mode
#   verifies; zoned btrfs
#   and f2fs are made, mounted, written, checked (btrfs check, fsck.f2fs)
#   and read back after a remount; the kernel's zones stay the control
#   socket's;
# - after a stop, znbd on the same dir= serves the same zones over NBD,
#   and znbd-ublk started again on it mounts f2fs with the file intact;
# - a power cut under a mounted zoned btrfs (write_cache=true): the
#   unflushed zone rolls back, the disk fails reads with EIO, btrfs
#   aborts, and znbd-ublk started again on the same dir= gives a btrfs
#   that mounts, holds the synced file and passes btrfs check.
# shellcheck disable=SC2034 # NZ: guest-lib.sh's same_zones reads it
FS=$work/fs
NZ=64
FSGEO=(size=512M zone_size=8M zone_nr_conv=4 zone_max_open=8)
for m in btrfs f2fs; do modprobe "$m"; done
mkdir -p "$FS"
two_queues() { # the disk has 2 hardware queues (blk-mq's sysfs)
  local n
  n=$(ls -d "/sys/block/${DEV#/dev/}/mq/"* | wc -l)
  echo "$n hardware queues"
  [ "$n" = 2 ]
}
if check "fs: znbd-ublk --queues 2 --poll-us 100, 64 zones of 8 MiB on dir=" \
  ublk_start --queues 2 --depth 32 --poll-us 100 "${FSGEO[@]}" dir="$FS"; then
  check "fs: blk-mq has 2 hardware queues" two_queues
  check "fs: fio zbd, 64 MiB at QD8 over zones 4-11, crc32c verified" fio_zbd_verify 32M 64
  check "fs: the kernel's zones are the control socket's after fio" ublk_same_zones $NZ
  note "t=${SECONDS}s"
  check "fs: mkfs.btrfs -O zoned, mount, write, btrfs check, remount, read back" \
    fs_check btrfs "btrfs check" mkfs.btrfs -f -O zoned -d single -m single
  check "fs: the kernel's zones are the control socket's after btrfs" ublk_same_zones $NZ
  note "t=${SECONDS}s"
  check "fs: mkfs.f2fs -m, mount, write, fsck.f2fs, remount, read back" \
    fs_check f2fs "fsck.f2fs" mkfs.f2fs -f -m
  check "fs: the kernel's zones are the control socket's after f2fs" ublk_same_zones $NZ
  kernel_report_as_dir "$DEV" > "$work/blkzone.txt"
  check "fs: SIGTERM removes the disk and exits 0" ublk_stop
  # The polling threads found some of their requests without sleeping.
  found_polling() {
    local n
    n=$(sed -n 's/.* requests, \([0-9]*\) found by polling$/\1/p' "$work/ublk.err")
    echo "${n:-no} requests found by polling"
    [ "${n:-0}" -gt 0 ]
  }
  check "fs: ... after finding requests by polling (--poll-us)" found_polling
  check "fs: nbdzone report over NBD (znbd on the same dir=) equals blkzone's" \
    nbdzone_same "$FS" $NZ "$work/blkzone.txt"
  f2fs_again() {
    mkdir -p "$work/mnt"
    $T mount -t f2fs "$DEV" "$work/mnt" || return 1
    cmp "$work/f8" "$work/mnt/f8" && echo "8 MiB read back" && $T umount "$work/mnt"
  }
  if check "fs: znbd-ublk again on the same dir=" ublk_start "${FSGEO[@]}" dir="$FS"; then
    check "fs: ... f2fs mounts and the file reads back" f2fs_again
    check "fs: ... SIGTERM removes the disk and exits 0" ublk_stop
  fi
fi
note "t=${SECONDS}s"

# ------------------------------------------------ power cut under btrfs
# write_cache=true: the control socket's power-cut undoes every write no
# FLUSH covered, and from then on every request fails with EIO until
# znbd-ublk starts again (man/znbd-ublk.pod).  The steps are
# guest-powercut.sh's.
PC=$work/pc
mkdir -p "$PC"
# shellcheck source=guest-powercut.sh
. "$top_srcdir/tests/vm/guest-powercut.sh"
if check "power cut: znbd-ublk write_cache=true on dir=" \
  ublk_start "${FSGEO[@]}" write_cache=true dir="$PC"; then
  check "power cut: zoned btrfs, A written and synced, B written O_DIRECT unsynced" pc_mkfs_a_b
  check "... power-cut through the control socket rolls B's zone back" pc_cut
  check "... then a read of the disk fails with EIO" expect_eio dread 0 4096
  check "... umount completes, btrfs having aborted on EIO" pc_umount
  check "... SIGTERM removes the disk and exits 0" ublk_stop
  if check "... znbd-ublk again on the same dir=: zones as the control socket's" \
    all ublk_start "${FSGEO[@]}" write_cache=true dir="$PC" -- ublk_same_zones $NZ; then
    check "... mount again: A reads back byte-identical" pc_remount
    note "$(pc_note_b)"
    check "... umount, btrfs check passes" pc_check
    check "... SIGTERM removes the disk and exits 0" ublk_stop
  fi
fi
note "t=${SECONDS}s"
