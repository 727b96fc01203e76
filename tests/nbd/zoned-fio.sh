#!/usr/bin/env bash
# Pipelined zoned writes: fio's nbd engine writes four 4 MiB zones
# sequentially (--zonemode=strided, one pass) in 4 KiB blocks at iodepth
# 32.  The front-end may run the requests out of order (nbdkit's worker
# threads); with pipeline_zoned_writes=true a write ahead of the wp waits
# for it, so every write succeeds, the zones end FULL and the data
# verifies.  With pipeline_zoned_writes=false the same job fails on the
# plugin (nbdkit reorders; a drive would refuse too); on znbd's own server
# the outcome depends on its dispatch order and is only reported.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "zones"
require fio nbdinfo

Z=$((4 * 1024 * 1024))
job=(--ioengine=nbd --uri=unset --rw=write --bs=4k --iodepth=32
  --zonemode=strided --zonesize=4M --zonerange=4M --offset=0 --size=16M
  --verify=crc32c --do_verify=1)

start_frontend size=32M zone_size=4M pipeline_zoned_writes=true
job[1]=--uri=$uri
run_fio pipelined "${job[@]}"
w=$(fio_get pipelined jobs.0.write.io_bytes)
e=$(fio_get pipelined jobs.0.error)
[ "$w" = $((4 * Z)) ] || die "fio wrote $w bytes, want $((4 * Z))"
[ "$e" = 0 ] || die "fio reported error $e"
note "pipeline_zoned_writes=true: 16 MiB in 4 KiB writes at iodepth 32, verified"
line() { printf '%10d  %10d  %3d  %s\n' "$1" "$2" "$3" "$4"; }
{
  line 0 $((4 * Z)) 0 data
  line $((4 * Z)) $((4 * Z)) 3 hole,zero
} >"$tmpdir/want"
nbdinfo --map "$uri" >"$tmpdir/got"
cmp -s "$tmpdir/want" "$tmpdir/got" || {
  diff -u "$tmpdir/want" "$tmpdir/got" >&2
  die "zones 0-3 not written to their ends"
}
note "nbdinfo --map: zones 0-3 written to the end, 4-7 empty"
stop_frontend

# Whether nbdkit's worker threads reorder two writes of one run is up to
# the scheduler (about 1 run in 20 kept every write in order under load),
# so the strict case gets up to 3 runs, each on a fresh device, and must
# fail with EIO in at least one.
for try in 1 2 3; do
  start_frontend size=32M zone_size=4M pipeline_zoned_writes=false
  job[1]=--uri=$uri
  rc=0
  fio --output-format=json --output="$tmpdir/strict.json" --name=strict \
    "${job[@]}" --do_verify=0 >"$tmpdir/strict.log" 2>&1 || rc=$?
  frontend_alive || die "the server died"
  stop_frontend
  [ "$rc" -eq 0 ] || break
done
if [ "$ZNBD_FRONTEND" = plugin ]; then
  [ "$rc" -ne 0 ] || die "pipeline_zoned_writes=false: fio succeeded 3 times at iodepth 32; expected out-of-order writes to fail"
  grep -q 'Input/output error' "$tmpdir/strict.log" ||
    die "fio failed (status $rc) but not with EIO"
  note "pipeline_zoned_writes=false: fio failed (status $rc, run $try): $(grep -m1 'Input/output error' "$tmpdir/strict.log")"
else
  note "pipeline_zoned_writes=false on $ZNBD_FRONTEND: fio status $rc (not asserted)"
fi
pass "fio iodepth 32 sequential zoned writes: pipelined ok, strict mode checked"
