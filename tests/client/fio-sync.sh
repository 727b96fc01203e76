#!/bin/bash
# znbd-fio.so with --sync_io=1 completes each request inside fio's queue
# call, as fio's psync engine does, and fio then behaves as it does on a
# block device with psync (both found by fio's t/zbd/test-zbd-support,
# tests 33 and 45):
# - a sequential --zonemode=zbd write pass of --size bytes whose block
#   size does not divide the zone keeps going until --io_size is
#   written: 7 writes of 768 KiB for an io_size of 5 MiB over two 1 MiB
#   zones (asynchronous completions count towards the pass's issued
#   bytes, which end it after 2 MiB: 6 writes);
# - a first write that fails (random writes into an empty sequential zone
#   without --zonemode=zbd) gets fio's hint to use --zonemode=zbd.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require_fio_engine
K=1024
start_frontend size=8M zone_size=1M blocksize=4096 zone_control="$ctl"
wait_ctl
job=(--ioengine=external:"$fio_engine" --uri="$uri" --control="$ctl")

run_fio w33 "${job[@]}" --sync_io=1 --zonemode=zbd --rw=write --offset=0 \
  --size=2M --io_size=5M --bs=768k
w=$(fio_get w33 jobs.0.write.io_bytes)
[ "$w" = $((7 * 768 * K)) ] || die "sync_io=1: $w bytes written, want 7 x 768 KiB"
[ "$(fio_get w33 jobs.0.error)" = 0 ] || die "sync_io=1 write pass: fio error"
pass "sync_io=1: io_size 5 MiB in 768 KiB writes over 2 zones: $w bytes, as with psync"

# fio exits non-zero (the write failed): run it directly.
rc=0
fio --name=w45 "${job[@]}" --sync_io=1 --rw=randwrite --bs=4k --offset=2M \
  --size=1M --randseed=7 >"$tmpdir/w45.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || die "random writes into an empty zone succeeded"
grep -q 'fio: first I/O failed. If .* is a zoned block device, consider --zonemode=zbd' \
  "$tmpdir/w45.log" || {
  cat "$tmpdir/w45.log" >&2
  die "sync_io=1: no first-I/O hint after the failed first write"
}
[ "$(wp_of 2)" = $((2048 * K)) ] || die "zone 2 wp $(wp_of 2) after refused writes"
pass "sync_io=1: a failed first write gets fio's --zonemode=zbd hint; zone 2 unchanged"
stop_frontend
