#!/bin/bash
# Several fio jobs of one run on one export through znbd-fio.so, as the
# engine is documented to be used (no --filename): they share one zone
# state.  A writer fills a zone and a reader started after it
# (--wait_for) reads the whole zone back; without the shared state the
# reader saw an empty zone and read nothing.  Then a trim in a
# --zonemode=zbd job is fio's zone reset: fio's own write pointer goes
# back to the zone start, so the write job after it starts there and the
# server's zone (nbdzone report) holds exactly what it wrote; a trim sent
# as a bare NBD TRIM left fio's wp mid-zone and that write failed.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require_fio_engine
K=1024
M=$((1024 * K))
start_frontend size=8M zone_size=1M zone_control="$ctl" zone_write_timeout=600000
wait_ctl
job=(--ioengine=external:"$fio_engine" --uri="$uri" --zonemode=zbd --bs=64k)

run_fio w "${job[@]}" --rw=write --offset=2M --size=1M \
  --name=r --wait_for=w "${job[@]}" --rw=read --offset=2M --size=1M
[ "$(fio_get w jobs.0.error)" = 0 ] || die "writer: fio error"
[ "$(fio_get w jobs.1.error)" = 0 ] || die "reader: fio error"
w=$(fio_get w jobs.0.write.io_bytes)
r=$(fio_get w jobs.1.read.io_bytes)
[ "$w" = $M ] || die "writer wrote $w bytes, want $M"
[ "$r" = $M ] || die "reader after the writer read $r bytes, want $M (zone state not shared)"
[ "$(cond_of 2)" = FULL ] || die "zone 2 after the writer: $(cond_of 2)"
pass "writer then --wait_for reader without --filename: $w bytes written, $r read back"

# Half of zone 0, a trim of the whole zone, then 256 KiB written again.
run_fio t "${job[@]}" --rw=write --offset=0 --size=1M --io_size=512k \
  --name=trim --wait_for=t "${job[@]}" --rw=trim --bs=1M --offset=0 --size=1M \
  --name=again --wait_for=trim "${job[@]}" --rw=write --offset=0 --size=1M \
  --io_size=256k
for j in 0 1 2; do
  [ "$(fio_get t jobs.$j.error)" = 0 ] || die "trim run: job $j: fio error $(fio_get t jobs.$j.error)"
done
[ "$(fio_get t jobs.0.write.io_bytes)" = $((512 * K)) ] || die "first write: $(fio_get t jobs.0.write.io_bytes) bytes"
[ "$(fio_get t jobs.1.trim.io_bytes)" = $M ] || die "trim: $(fio_get t jobs.1.trim.io_bytes) bytes"
[ "$(fio_get t jobs.2.write.io_bytes)" = $((256 * K)) ] || die "write after the trim: $(fio_get t jobs.2.write.io_bytes) bytes"
# nbdzone's report (blkzone format, sectors): wp at 256 KiB, open.
got=$(nbdzone report --control="$ctl" --offset=0 --count=1 "$uri")
want=$(zline 0 2048 2048 512 oi 2)
[ "$got" = "$want" ] || die "zone 0 after trim + write: '$got', want '$want'"
[ "$(wp_of 0)" = $((256 * K)) ] || die "zone 0 wp $(wp_of 0), want $((256 * K))"
pass "trim in --zonemode=zbd resets the zone in fio too: 512 KiB, trim, 256 KiB written, wp at 256 KiB"
stop_frontend
