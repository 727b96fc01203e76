# shellcheck shell=bash
# Sourced: a power cut under a mounted zoned btrfs, the steps any
# front-end's scenario takes on $DEV with its control socket $CTL
# (guest-lib.sh's ctl and device_zones, $NZ zones).  File A is written
# and synced, file B written with O_DIRECT and no sync: its data reached
# the device, unflushed, and its metadata did not.  The cut must roll
# B's zone back; A must survive it and btrfs check must pass.
head -c $((2 << 20)) /dev/urandom > "$work/A"
head -c $((2 << 20)) /dev/urandom > "$work/B"
pc_mkfs_a_b() {
  mkdir -p "$work/mnt"
  $T mkfs.btrfs -f -O zoned -d single -m single "$DEV" > "$work/mkfs.out" 2>&1 ||
    { cat "$work/mkfs.out"; return 1; }
  $T mount -t btrfs "$DEV" "$work/mnt" && $T cp "$work/A" "$work/mnt/A" && $T sync &&
    $T dd if="$work/B" of="$work/mnt/B" bs=1M oflag=direct status=none || return 1
  # The zones as the cut finds them (B written, not flushed).
  device_zones > "$work/pc.before"
}
pc_cut() {
  local r
  r=$(ctl power-cut)
  echo "$r"
  [[ $r == ok* ]] || return 1
  device_zones > "$work/pc.after"
  diff "$work/pc.before" "$work/pc.after" | grep '^[<>]' | head -8
  # Some zone's wp went back (B's data), none forward.
  diff "$work/pc.before" "$work/pc.after" | grep -q '^<' &&
    paste -d ' ' "$work/pc.before" "$work/pc.after" |
    awk '$2 != "-" && $5 > $2 { bad = 1 } END { exit bad }'
}
# umount with I/O errors under it: btrfs aborts its transaction (EIO)
# and the umount completes.
pc_umount() {
  $T umount "$work/mnt" || { umount -l "$work/mnt"; return 1; }
  dmesg | grep -i -m 3 -e 'BTRFS.*error' -e 'BTRFS.*abort'
  ! grep -q " $work/mnt " /proc/mounts
}
pc_remount() {
  $T mount -t btrfs "$DEV" "$work/mnt" || return 1
  echo 3 > /proc/sys/vm/drop_caches
  cmp "$work/A" "$work/mnt/A" && echo "A: 2 MiB byte-identical"
}
pc_note_b() {
  local n
  if [ -e "$work/mnt/B" ]; then
    n=$(stat -c %s "$work/mnt/B")
    if cmp -s "$work/B" "$work/mnt/B"; then
      echo "B: $n bytes, byte-identical"
    else
      echo "B: $n bytes, not as written ($(cmp "$work/B" "$work/mnt/B" 2>&1 | head -1))"
    fi
  else
    echo "B: gone"
  fi
}
pc_check() {
  $T umount "$work/mnt" || return 1
  $T btrfs check "$DEV" > "$work/fsck.out" 2>&1 || { cat "$work/fsck.out"; return 1; }
  grep -m 2 -e 'found .* bytes used' -e 'no error found' "$work/fsck.out"
}
