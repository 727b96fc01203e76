#!/bin/bash
# fio --zonemode=zbd through znbd-fio.so: three passes over all 16 zones,
# fio resetting each full zone before writing it again (a pass without
# the reset would fail on the write pointer), every block verified with
# crc32c, at iodepth 1 and 32; once with the control socket (exact state,
# resets through it) and once without (x-znbd:zone or base:allocation,
# resets by TRIM).  Then the device is all FULL and fio's byte counts are
# exact.  Also two jobs as threads of one process, and a plain export
# (random writes, fio-emulated zones).
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

# Two jobs as threads of one process (each with its own connections),
# each looping twice over its half of the zones.
ctl "reset all" >/dev/null
zfio threads --control="$ctl" --zonemode=zbd --rw=write --bs=16k --iodepth=8 \
  --thread --numjobs=2 --size=8M --offset_increment=8M --loops=2 \
  --verify=crc32c --do_verify=1
for j in 0 1; do
  [ "$(fio_get threads jobs.$j.error)" = 0 ] || die "thread job $j: fio error"
  [ "$(fio_get threads jobs.$j.write.io_bytes)" = $((2 * 8 * M)) ] ||
    die "thread job $j wrote $(fio_get threads jobs.$j.write.io_bytes) bytes"
done
[ "$(zone_summary)" = "$all_full" ] || die "thread jobs: zones after fio: $(zone_summary)"
pass "two jobs as threads, 2 passes over 8 zones each, verified"

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

# A plain RAM disk: the engine reports no zones; random writes verified,
# and --zonemode=zbd with fio's own emulated zones (--zonesize) works too.
start_frontend size=8M zoned=false
zfio plain --rw=randwrite --bs=4k --iodepth=16 --verify=crc32c --do_verify=1
[ "$(fio_get plain jobs.0.error)" = 0 ] || die "plain export: fio error"
[ "$(fio_get plain jobs.0.write.io_bytes)" = $((8 * M)) ] ||
  die "plain export: wrote $(fio_get plain jobs.0.write.io_bytes) bytes"
[ "$(fio_get plain jobs.0.read.io_bytes)" = $((8 * M)) ] ||
  die "plain export: verified $(fio_get plain jobs.0.read.io_bytes) bytes"
zfio emul --zonemode=zbd --zonesize=1M --rw=write --bs=16k --iodepth=8 \
  --verify=crc32c --do_verify=1
[ "$(fio_get emul jobs.0.error)" = 0 ] || die "plain export, emulated zones: fio error"
[ "$(fio_get emul jobs.0.write.io_bytes)" = $((8 * M)) ] ||
  die "plain export, emulated zones: wrote $(fio_get emul jobs.0.write.io_bytes) bytes"
stop_frontend
pass "plain export: random writes and fio-emulated zones, 8 MiB each, verified"
