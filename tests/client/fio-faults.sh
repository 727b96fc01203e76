#!/bin/bash
# A READONLY and an OFFLINE zone (set through the control socket, as
# null_blk's zone_readonly/zone_offline) under fio --zonemode=zbd through
# znbd-fio.so: fio stops with an I/O error (with the control socket its
# reset of the READONLY zone is refused; without it, by TRIM, the reset is
# ignored and the write fails), the server keeps running, the two zones
# keep their conditions, the open/active counters match the zones'
# conditions, and once both zones are brought back online a full verified
# fio pass runs clean.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require_fio_engine
start_frontend size=16M zone_size=1M zone_control="$ctl" zone_write_timeout=600000
wait_ctl

# consistent: zones 5 and 9 READONLY and OFFLINE, the others in a state a
# write can leave, and the stats counters agree with the report.
consistent() {
  local -a c
  read -r -a c <<<"$(zone_summary)"
  [ "${#c[@]}" = 16 ] || die "$1: report has ${#c[@]} zones"
  [ "${c[5]}" = READONLY ] || die "$1: zone 5 is ${c[5]}, expected READONLY"
  [ "${c[9]}" = OFFLINE ] || die "$1: zone 9 is ${c[9]}, expected OFFLINE"
  local i imp=0 closed=0
  for i in "${!c[@]}"; do
    [ "$i" = 5 ] || [ "$i" = 9 ] && continue
    case "${c[$i]}" in
    EMPTY | FULL) ;;
    IMP_OPEN) imp=$((imp + 1)) ;;
    CLOSED) closed=$((closed + 1)) ;;
    *) die "$1: zone $i is ${c[$i]}" ;;
    esac
  done
  local st
  st=$(ctl stats)
  case "$st" in
  *" imp_open=$imp exp_open=0 closed=$closed "*"readonly=1 offline=1 active=$((imp + closed)) "*) ;;
  *) die "$1: stats '$st' disagree with the report (imp_open=$imp closed=$closed)" ;;
  esac
}

for mode in control nbd; do
  args=()
  [ "$mode" = control ] && args=(--control="$ctl")
  ctl "reset all" >/dev/null
  ctl "readonly 5" >/dev/null
  ctl "offline 9" >/dev/null
  rc=0
  fio --name=faults --ioengine=external:"$fio_engine" --uri="$uri" "${args[@]}" \
    --zonemode=zbd --rw=write --bs=64k --iodepth=8 >"$tmpdir/$mode.log" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || die "$mode: fio exited 0 over a READONLY and an OFFLINE zone"
  grep -q 'Input/output error' "$tmpdir/$mode.log" ||
    die "$mode: fio failed without an I/O error: $(cat "$tmpdir/$mode.log")"
  frontend_alive || die "$mode: the server died"
  consistent "$mode"
  pass "$mode: fio stops with EIO ($(grep -m1 -o 'func=[^,]*' "$tmpdir/$mode.log")); zones 5/9 READONLY/OFFLINE, counters consistent"
  ctl "online 5" >/dev/null
  ctl "online 9" >/dev/null
done

ctl "reset all" >/dev/null
zfio after --control="$ctl" --zonemode=zbd --rw=write --bs=64k --iodepth=8 \
  --verify=crc32c --do_verify=1
[ "$(fio_get after jobs.0.error)" = 0 ] || die "fio after online: error"
[ "$(fio_get after jobs.0.write.io_bytes)" = $((16 * 1024 * 1024)) ] ||
  die "fio after online wrote $(fio_get after jobs.0.write.io_bytes) bytes"
[ "$(zone_summary)" = "$(printf 'FULL %.0s' {1..16})" ] || die "after online: $(zone_summary)"
pass "zones back online: a verified fio pass over all 16 zones runs clean"
stop_frontend
