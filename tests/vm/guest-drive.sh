#!/bin/bash
# In the guest: NBD exports served on the host and attached by qemu's own
# NBD client as virtio disks (vm-run --drive file=nbd+unix:///?socket=...).
#   guest-drive.sh NAME:KIND...   NAME: vda, vdb, ...; KIND: ramdisk | zoned
# ramdisk: 4 MiB of random data written and read back at the start and at
#          the end of the disk.
# zoned:   (4 MiB zones, 512-byte blocks) in-order writes succeed and read
#          back; a write ahead of the write pointer fails with EIO and
#          changes nothing; a whole zone written in one write; a full zone
#          refuses writes and keeps its data; blkdiscard (discard=unmap ->
#          NBD TRIM) resets it.
# TAP output.
# shellcheck source=guest-lib.sh
. "$top_srcdir/tests/vm/guest-lib.sh"
M=$((1024 * 1024))
ZS=$((4 * M))
check "modprobe virtio_blk" modprobe virtio_blk
head -c $((4 * M)) /dev/urandom > "$work/rand"
head -c 4096 /dev/urandom > "$work/rand2"
for spec in "$@"; do
  DEV=/dev/${spec%%:*}
  kind=${spec#*:}
  d=${DEV#/dev/}
  for ((i = 0; i < 50; i++)); do [ -b "$DEV" ] && break; sleep 0.1; done
  if ! check "$d ($kind): present" sh -c "test -b $DEV && echo $DEV: \$(blockdev --getsize64 $DEV) bytes, \
logical block \$(cat /sys/block/$d/queue/logical_block_size), discard max \$(cat /sys/block/$d/queue/discard_max_bytes)"; then
    continue
  fi
  size=$(blockdev --getsize64 "$DEV")
  case $kind in
    ramdisk)
      check "$d: 4 MiB written at 1 MiB" dwrite $M $((4 * M)) "$work/rand"
      check "$d: ... read back" same_bytes $M $((4 * M)) "$work/rand"
      check "$d: 4 MiB written at the end" dwrite $((size - 4 * M)) $((4 * M)) "$work/rand"
      check "$d: ... read back" same_bytes $((size - 4 * M)) $((4 * M)) "$work/rand"
      check "$d: the first MiB still reads zeros" zero_bytes 0 $M
      ;;
    zoned)
      # Each group has zones of its own and writes the state it needs
      # (the exports are fresh: every zone starts EMPTY), so no check
      # depends on another one's outcome.
      z=$((2 * ZS))
      check "$d: 64 KiB at the start of zone 2 (in order)" dwrite $z 65536 "$work/rand"
      check "$d: ... read back" same_bytes $z 65536 "$work/rand"
      check "$d: a write ahead of the wp (zone 2 + 1 MiB) fails with EIO" \
        expect_eio dwrite $((z + M)) 4096 "$work/rand2"
      check "$d: ... and changed nothing" zero_bytes $((z + M)) 4096
      check "$d: a write at the wp (zone 2 + 64 KiB) succeeds" dwrite $((z + 65536)) 4096 "$work/rand2"
      check "$d: ... read back" same_bytes $((z + 65536)) 4096 "$work/rand2"
      check "$d: zone 3 written whole in one 4 MiB write, reads back" \
        write_read $((3 * ZS)) $ZS "$work/rand"
      z=$((4 * ZS))
      if check "$d: zone 4 filled in order (one 256 KiB write at a time)" seq_fill $z $ZS "$work/rand"; then
        check "$d: zone 4 is full: a write at its start fails with EIO" \
          expect_eio dwrite $z 4096 "$work/rand2"
        check "$d: ... and zone 4 still holds its data" same_bytes $z $ZS "$work/rand"
        check "$d: blkdiscard of zone 4" $T blkdiscard -o $z -l $ZS "$DEV"
        check "$d: zone 4 reads zeros after the reset" zero_bytes $z $ZS
        check "$d: zone 4 rewritten from its start after the reset" dwrite $z 4096 "$work/rand2"
        check "$d: ... read back" same_bytes $z 4096 "$work/rand2"
      fi
      ;;
    *) check "known kind $kind" false ;;
  esac
done
tap_end
