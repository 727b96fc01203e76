# shellcheck shell=bash
# guest-ublk.sh's part coherence (sourced; its ublk_start, ublk_stop,
# zone_is and guest-lib.sh's): a zone changed behind the kernel's back.
# Since Linux 6.10 the block layer keeps each zone's write pointer in a
# zone write plug (block/blk-zoned.c) and sends a write there without
# asking the device; a reset or finish through the control socket moves
# the device's wp under it.  What must happen, and what is measured:
# the kernel's next write at its stale wp is refused (EIO) and changes
# nothing on the device; it never hangs; a write at the device's own wp
# may fail until the plug learns the zone again; after blkzone report
# (a report zones, which the plug takes the wp from) or a reset through
# the kernel, writes at the device's wp succeed and read back.  Results
# in man/znbd-ublk.pod, "ZONES CHANGED BEHIND THE KERNEL".
co_write() { # OFF: 64 KiB of $work/rand at OFF; prints how it went
  if dwrite "$1" 65536 "$work/rand" 2> "$work/co.err"; then
    echo "write at $1: ok"
  else
    echo "write at $1: $(sed 's/.*: //' "$work/co.err")"
    return 1
  fi
}
co_ctl() { # LINE: the control socket answers LINE with ok
  local r
  r=$(ctl "$1")
  echo "$1 -> $r"
  [ "${r#ok}" != "$r" ]
}
co_states() { # SECTOR OFF WP COND: after the out-of-band change, a write
  # at the kernel's stale wp OFF fails with EIO and the zone at SECTOR is
  # still as the control socket left it (WP sectors from its start, COND
  # a number as in blkzone's zcond), read from the control socket so
  # that the kernel is not asked (a report would refresh its plug)
  local r z
  r=$(co_write "$2")
  echo "$r"
  z=$(NZ=16 device_zones | awk -v s="$1" '$1 == s')
  echo "the device's zone: $z"
  [[ $r == *"Input/output error"* ]] && [ "$z" = "$1 $3 $4" ]
}
# The write at the device's wp before the kernel looked at the zone
# again: the plug may still hold the old wp, or have marked the zone
# after the failed write; it fails or succeeds, the kernel's choice, so
# it is noted, not asserted (man/znbd-ublk.pod); it must not hang ($T).
co_note_direct() { # SECTOR OFF
  local r
  r=$(co_write "$2")
  note "before a report: $r; the device's zone: $(NZ=16 device_zones | awk -v s="$1" '$1 == s')"
}
# After blkzone report (the plug takes the wp from it), 64 KiB at the
# device's wp, wherever the step before left it, succeed and read back.
co_after_report() { # SECTOR
  local wp
  wp=$(zone_field "$1" wptr) || return 1
  co_write $(($1 * 512 + wp * 512)) && zone_is "$1" $((wp + 128)) oi &&
    same_bytes $(($1 * 512 + wp * 512)) 65536 "$work/rand"
}
z2=$((8 * M)) z3=$((12 * M)) # zones 2 and 3; sectors 16384 and 24576
if check "coherence: znbd-ublk, 16 zones of 4 MiB" ublk_start; then
  check "coherence: 64 KiB at zone 2's wp through the kernel" \
    all co_write $z2 -- zone_is 16384 128 oi
  check "coherence: reset zone 2 through the control socket" co_ctl "reset 2"
  check "coherence: a write at the kernel's stale wp fails with EIO; zone 2 stays EMPTY" \
    co_states 16384 $((z2 + 65536)) 0 1
  co_note_direct 16384 $z2
  check "coherence: after blkzone report, a write at the device's wp succeeds and reads back" \
    co_after_report 16384
  check "coherence: 64 KiB at zone 3's wp, then finish zone 3 through the control socket" \
    all co_write $z3 -- co_ctl "finish 3"
  check "coherence: a write at the kernel's stale wp in the FULL zone fails with EIO" \
    co_states 24576 $((z3 + 65536)) 8192 14
  check "coherence: the data written before the finish reads back" same_bytes $z3 65536 "$work/rand"
  check "coherence: blkzone reset, then a write at the zone's start succeeds" \
    all blkzone reset -o 24576 -c 1 "$DEV" -- co_write $z3 -- zone_is 24576 128 oi
  check "coherence: the kernel's zones are the control socket's" ublk_same_zones
  check "coherence: SIGTERM removes the disk and exits 0" ublk_stop
fi
