#!/usr/bin/env bash
# fio's nbd engine (libnbd) at iodepth 32 with --verify=crc32c on a plain
# RAM disk (zoned=false): 4 KiB random writes then verified reads, mixed
# 512 B-256 KiB sequential writes then verified reads, a second
# verify-only pass on a new connection (the data stayed), and a control:
# after trimming 1 MiB the verify-only pass must fail, so the
# verification really looks at the data.
. "$(dirname "$0")/../functions.sh"
require fio

start_frontend size=64M zoned=false
common=(--ioengine=nbd --uri="$uri" --iodepth=32 --verify=crc32c --verify_fatal=1)

check_job() { # check_job NAME BYTES: no error, BYTES written and verified
  local e w r
  e=$(fio_get "$1" jobs.0.error)
  w=$(fio_get "$1" jobs.0.write.io_bytes)
  r=$(fio_get "$1" jobs.0.read.io_bytes)
  [ "$e" = 0 ] || die "fio $1: error $e"
  [ "$w" = "$2" ] || die "fio $1: wrote $w bytes, want $2"
  [ "$r" = "$2" ] || die "fio $1: verified $r bytes, want $2"
  note "fio $1: wrote and verified $w bytes ($(fio_get "$1" jobs.0.write.iops) write IOPS)"
}

run_fio rand4k "${common[@]}" --rw=randwrite --bs=4k --offset=0 --size=32M
check_job rand4k $((32 << 20))

run_fio seqmix "${common[@]}" --rw=write --bsrange=512-256k --offset=32M --size=32M
check_job seqmix $((32 << 20))

# Verify again from a fresh connection, without writing.
run_fio reverify "${common[@]}" --rw=randwrite --bs=4k --offset=0 --size=32M --verify_only=1
[ "$(fio_get reverify jobs.0.error)" = 0 ] || die "verify-only pass failed"
[ "$(fio_get reverify jobs.0.read.io_bytes)" = $((32 << 20)) ] || die "verify-only pass read $(fio_get reverify jobs.0.read.io_bytes)"
note "verify-only pass on a new connection: 32 MiB intact"

# Control: damage 1 MiB, the same verify-only pass must now fail.
nbd_py <<'EOF'
from znbdtest import *
h = connect()
h.trim(1 * MiB, 4 * MiB)
check_eq(h.pread(4096, 4 * MiB), bytes(4096), "1 MiB at 4 MiB trimmed")
h.shutdown()
EOF
if fio --output-format=json --output="$tmpdir/control.json" --name=control "${common[@]}" \
  --rw=randwrite --bs=4k --offset=0 --size=32M --verify_only=1 >"$tmpdir/control.log" 2>&1; then
  die "fio verify passed over a trimmed range: verification is not checking data"
fi
grep -q 'verify: bad magic header' "$tmpdir/control.log" "$tmpdir/control.json" ||
  die "fio control run failed, but not with a verify error: $(cat "$tmpdir/control.log")"
note "control: verify-only fails after the trim ($(grep -h -m1 'verify:' "$tmpdir/control.log" "$tmpdir/control.json" | head -1))"

stop_frontend
pass "fio nbd engine, iodepth 32, crc32c verify"
