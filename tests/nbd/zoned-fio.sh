#!/usr/bin/env bash
# Pipelined zoned writes: fio's nbd engine writes four 4 MiB zones
# sequentially (--zonemode=strided, one pass) in 4 KiB blocks at iodepth
# 32.  The front-end may run the requests out of order (nbdkit's worker
# threads); with pipeline_zoned_writes=true a write ahead of the wp waits
# for it, so every write succeeds, the zones end FULL and the data
# verifies.  zone_write_timeout is set far above any scheduling delay, so
# a loaded machine cannot turn a wait into a failure.  With
# pipeline_zoned_writes=false a write ahead of the wp fails with EIO
# without waiting for the gap to be filled: checked with it as the only
# request in flight and a 10-minute zone_write_timeout (a wait would end
# the test by its timeout).  Whether the fio job then fails depends on
# how the front-end's threads happen to order its writes (nbdkit's worker
# threads reorder them in most runs, not all), so that is only reported.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "zones"
require fio nbdinfo

Z=$((4 * 1024 * 1024))
job=(--ioengine=nbd --uri=unset --rw=write --bs=4k --iodepth=32
  --zonemode=strided --zonesize=4M --zonerange=4M --offset=0 --size=16M
  --verify=crc32c --do_verify=1)

start_frontend size=32M zone_size=4M pipeline_zoned_writes=true zone_write_timeout=600000
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

start_frontend size=32M zone_size=4M pipeline_zoned_writes=false zone_write_timeout=600000
nbd_py <<'EOF'
from znbdtest import *
h = connect()
h.pwrite(pattern(8 * KiB, 1), 0)
# A write 4 KiB ahead of zone 0's wp, the only request in flight: it must
# fail now, not wait for a write that would fill the gap (none is sent
# before it completes).
c = h.aio_pwrite(pattern(4 * KiB, 2), 12 * KiB)
while h.aio_peek_command_completed() != c:
    h.poll(-1)
expect_errno(errno.EIO, "a write ahead of the wp, the only request in flight, completes",
             h.aio_command_completed, c)
check_eq(h.pread(8 * KiB, 0), pattern(8 * KiB, 1), "data before the wp unchanged")
check_eq(h.pread(4 * KiB, 12 * KiB), bytes(4 * KiB), "nothing written ahead of the wp")
h.pwrite(pattern(4 * KiB, 3), 8 * KiB)
check_eq(h.pread(4 * KiB, 8 * KiB), pattern(4 * KiB, 3), "the wp did not move: a write at 8 KiB succeeds")
h.shutdown()
EOF
stop_frontend
start_frontend size=32M zone_size=4M pipeline_zoned_writes=false
job[1]=--uri=$uri
rc=0
fio --output-format=json --output="$tmpdir/strict.json" --name=strict \
  "${job[@]}" --do_verify=0 >"$tmpdir/strict.log" 2>&1 || rc=$?
frontend_alive || die "the server died"
stop_frontend
if [ "$rc" -ne 0 ]; then
  grep -q 'Input/output error' "$tmpdir/strict.log" || die "fio failed (status $rc) but not with EIO"
  note "pipeline_zoned_writes=false: fio iodepth 32 failed (writes reordered): $(grep -m1 'Input/output error' "$tmpdir/strict.log")"
else
  note "pipeline_zoned_writes=false: fio iodepth 32 succeeded (writes stayed in order this run; not asserted)"
fi
pass "fio iodepth 32 sequential zoned writes: pipelined ok; strict mode fails a write ahead of the wp at once"
