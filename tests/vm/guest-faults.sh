# In the guest, sourced by guest-nbd.sh (part "faults") and guest-tcmu.sh:
# one fault scenario, the same checks through whichever front-end the
# caller started, so every front-end is seen to apply every fault the
# parameter table says it does.  The caller starts its front-end with
# "${FAULT_PARAMS[@]}" and zone_control="$FAULT_CTL", sets DEV to the
# kernel's disk for it, then calls
#   fault_scenario LABEL
# - badblocks (control socket): a read touching a bad sector fails (EIO
#   through NBD; through SCSI the MEDIUM ERROR's "unrecovered read error"
#   becomes ENODATA, scsi_check_sense() -> DID_MEDIUM_ERROR ->
#   BLK_STS_MEDIUM: the caller sets FAULT_READ_ERR), one beside it reads
#   the data; a write over a bad sector fails and
#   changes no byte; `badblocks del` gives the data back; stats count the
#   failed requests;
# - zone faults: a READONLY zone refuses a write at its wp and still reads
#   (zeros: nothing was written), an OFFLINE zone refuses a read (EIO
#   through NBD; EREMOTEIO through SCSI, FAULT_ZONE_ERR); `online` makes
#   each EMPTY and writable again (on a zoned disk of a kernel with zone
#   write plugging, once the kernel reported the zone again);
# - injected delays (completion_nsec, mbps): reading 1 MiB in 16 requests
#   adds to stats' delay_nsec at least 16 completion delays plus the
#   bandwidth cost of 1 MiB (a lower bound the core counts, so a
#   front-end that skips the mbps part falls short; no clock is read).
# Not here: drop-reply (a lost reply means a timeout of tens of seconds;
# guest-nbd-drop.sh and guest-tcmu-crash.sh each run it) and zone operation
# latencies (no zone operation passes the NBD kernel client).
# shellcheck shell=bash

# 32 MiB, 4 MiB zones, zones 0-1 conventional.  mbps=16 makes 1 MiB cost
# 62.5 ms, four times the 16 completion delays below.
FAULT_MBPS=16
FAULT_CNSEC=1000000
FAULT_PARAMS=(size=32M zone_size=4M zone_nr_conv=2 "completion_nsec=$FAULT_CNSEC"
  "mbps=$FAULT_MBPS")
FAULT_CTL=$work/faults.sock
FAULT_READ_ERR=${FAULT_READ_ERR:-Input/output error}
# A zone's READONLY or OFFLINE refusal: EIO through NBD; through SCSI
# the DATA PROTECT sense becomes EREMOTEIO (man/znbd-tcmu.pod).
FAULT_ZONE_ERR=${FAULT_ZONE_ERR:-Input/output error}
_FZ=$((4 << 20))

# One control socket request (guest-lib.sh's ctl on $FAULT_CTL).
fault_ctl() { CTL=$FAULT_CTL ctl "$1"; }
# fault_ctl_ok LINE: the control socket answers LINE with "ok...".
fault_ctl_ok() {
  local r
  r=$(fault_ctl "$1") || return 1
  echo "$1 -> $r"
  [ "${r#ok}" != "$r" ]
}
# fault_stat NAME: one counter of the control socket's stats line.
fault_stat() {
  fault_ctl stats | tr ' ' '\n' | sed -n "s/^$1=//p"
}
# fault_zone N FIELD: FIELD (cond, wp) of zone N in the control report.
fault_zone() {
  fault_ctl "report $1 1" | grep '^zone=' | tr ' ' '\n' | sed -n "s/^$2=//p"
}
# fault_counter_grew NAME BEFORE MIN: NAME is now at least BEFORE + MIN.
fault_counter_grew() {
  local now
  now=$(fault_stat "$1")
  echo "$1: $2 before, ${now:-?} now (want at least +$3)"
  [ -n "$now" ] && [ "$now" -ge $(($2 + $3)) ]
}
fault_zone_is() { # N COND [WP]: the control socket's report of zone N
  local c w
  c=$(fault_zone "$1" cond) w=$(fault_zone "$1" wp)
  echo "zone $1: cond $c, wp $w"
  [ "$c" = "$2" ] && { [ -z "${3:-}" ] || [ "$w" = "$3" ]; }
}
fault_fails_with() { # MSG CMD...: CMD fails, saying MSG
  local msg=$1 out rc=0
  shift
  out=$("$@" 2>&1) || rc=$?
  printf '%s\n' "$out"
  [ "$rc" != 0 ] && grep -q -- "$msg" <<< "$out"
}
fault_read_1m() { # 16 O_DIRECT reads of 64 KiB from byte 0
  $T dd if="$DEV" of=/dev/null bs=64K count=16 iflag=direct status=none
}

fault_scenario() {
  local fe=$1 bb delayed dnsec cost
  head -c 65536 /dev/urandom > "$work/f64k"
  head -c 4096 /dev/urandom > "$work/f4k"
  check "$fe faults: 64 KiB written to a conventional zone read back" \
    write_read 0 65536 "$work/f64k"

  # badblocks: sectors 16-23 (bytes 8192-12287) and 40 (byte 20480).
  bb=$(fault_stat badblock_errors)
  check "$fe faults: badblocks add 16-23,40" fault_ctl_ok "badblocks add 16-23,40"
  check "$fe faults: a read of a bad sector fails ($FAULT_READ_ERR)" \
    fault_fails_with "$FAULT_READ_ERR" dread 8192 4096
  check "$fe faults: the block before the bad ones reads its data" \
    same_bytes 0 4096 "$work/f64k"
  check "$fe faults: a write over a bad sector fails with EIO" \
    expect_eio dwrite 20480 4096 "$work/f4k"
  check "$fe faults: stats counted both failed requests" \
    fault_counter_grew badblock_errors "${bb:-0}" 2
  check "$fe faults: badblocks del 16-23,40" fault_ctl_ok "badblocks del 16-23,40"
  check "$fe faults: ... the 64 KiB read back unchanged (the failed write wrote nothing)" \
    same_bytes 0 65536 "$work/f64k"

  # Zone faults on sequential zones 2 and 3.
  check "$fe faults: readonly 2" fault_ctl_ok "readonly 2"
  check "$fe faults: a write at the READONLY zone's wp fails ($FAULT_ZONE_ERR)" \
    fault_fails_with "$FAULT_ZONE_ERR" dwrite $((2 * _FZ)) 4096 "$work/f4k"
  check "$fe faults: ... the zone is READONLY and reads zeros (nothing written)" \
    all fault_zone_is 2 READONLY -- zero_bytes $((2 * _FZ)) 4096
  check "$fe faults: offline 3" fault_ctl_ok "offline 3"
  check "$fe faults: a read of the OFFLINE zone fails ($FAULT_ZONE_ERR)" \
    fault_fails_with "$FAULT_ZONE_ERR" dread $((3 * _FZ)) 4096
  check "$fe faults: online 2, online 3" all fault_ctl_ok "online 2" -- fault_ctl_ok "online 3"
  # A zoned disk on a kernel with zone write plugging (6.10+) fails every
  # write to a zone after one failed there until it reads the zone again
  # (block/blk-zoned.c): `online` changed it behind the kernel's back, so
  # a user reports it first (man/znbd-ublk.pod, ZONES CHANGED BEHIND THE
  # KERNEL).  6.1 takes the write without.
  if wplug_kernel && [ "$(cat "/sys/block/${DEV#/dev/}/queue/zoned")" != none ]; then
    check "$fe faults: ... blkzone report of zone 2 (zone write plugging)" \
      blkzone report -o $((2 * _FZ / 512)) -c 1 "$DEV"
  fi
  check "$fe faults: ... zone 2 takes a write at its wp again" \
    write_read $((2 * _FZ)) 4096 "$work/f4k"
  check "$fe faults: ... zone 3 is EMPTY and reads zeros" \
    all fault_zone_is 3 EMPTY $((3 * _FZ)) -- zero_bytes $((3 * _FZ)) 4096

  # Injected delays: 16 completion delays and 1 MiB at FAULT_MBPS MiB/s.
  delayed=$(fault_stat delayed_requests) dnsec=$(fault_stat delay_nsec)
  cost=$((16 * FAULT_CNSEC + 1000000000 / FAULT_MBPS))
  check "$fe faults: 1 MiB read in 16 requests" fault_read_1m
  check "$fe faults: ... each request got its completion delay" \
    fault_counter_grew delayed_requests "${delayed:-0}" 16
  check "$fe faults: ... delay_nsec grew by 16 completion delays + 1 MiB at mbps=$FAULT_MBPS ($cost ns)" \
    fault_counter_grew delay_nsec "${dnsec:-0}" "$cost"
}
