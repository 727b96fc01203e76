#!/bin/bash
# fio --zonemode=zbd through znbd-fio.so: three passes over all 16 zones,
# fio resetting each full zone before writing it again (a pass without
# the reset would fail on the write pointer), every block verified with
# crc32c, at iodepth 1 and 32; once with the control socket (exact state,
# resets through it) and once without (x-znbd:zone or base:allocation,
# resets by TRIM).  Then the device is all FULL and fio's byte counts are
# exact.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require_fio_engine
start_frontend size=16M zone_size=1M zone_control="$ctl" zone_write_timeout=600000
wait_ctl

all_full="$(printf 'FULL %.0s' {1..16})"
M=$((1024 * 1024))
for depth in 1 32; do
  ctl "reset all" >/dev/null
  zfio d$depth --control="$ctl" --zonemode=zbd --rw=write --bs=16k \
    --iodepth=$depth --loops=3 --verify=crc32c --do_verify=1
  w=$(fio_get d$depth jobs.0.write.io_bytes)
  r=$(fio_get d$depth jobs.0.read.io_bytes)
  e=$(fio_get d$depth jobs.0.error)
  [ "$e" = 0 ] || die "iodepth $depth: fio error $e"
  [ "$w" = $((3 * 16 * M)) ] || die "iodepth $depth: wrote $w bytes, want $((3 * 16 * M))"
  [ "$r" = $((3 * 16 * M)) ] || die "iodepth $depth: verified $r bytes, want $((3 * 16 * M))"
  [ "$(zone_summary)" = "$all_full" ] || die "iodepth $depth: zones after fio: $(zone_summary)"
  pass "iodepth $depth, control socket: 3 passes x 16 MiB written and verified, all zones FULL"
done

# Without the control socket: state from NBD, resets by TRIM.
ctl "reset all" >/dev/null
zfio nbd --zonemode=zbd --rw=write --bs=16k --iodepth=32 --loops=3 \
  --verify=crc32c --do_verify=1
w=$(fio_get nbd jobs.0.write.io_bytes)
e=$(fio_get nbd jobs.0.error)
[ "$e" = 0 ] || die "without control: fio error $e"
[ "$w" = $((3 * 16 * M)) ] || die "without control: wrote $w bytes"
[ "$(zone_summary)" = "$all_full" ] || die "without control: zones after fio: $(zone_summary)"
pass "iodepth 32, no control socket (resets by TRIM): 3 passes written and verified"
stop_frontend
