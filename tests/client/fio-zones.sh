#!/bin/bash
# fio through znbd-fio.so on zone geometries and limits other than the
# plain case: zone capacity below the zone size with a zone size that is
# not a power of 2 and conventional zones first (two verified passes, the
# device's zones then FULL, conventional zones untouched in type); the
# device's open-zone limit (zone_max_open=4) with fio's --max_open_zones
# below it (random writes run clean and leave at most 2 zones open) and
# above it (fio refuses to start, naming the limit).
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require_fio_engine
K=1024

# 12 zones of 1536 KiB (not a power of 2), capacity 1 MiB, 2 conventional.
start_frontend size=18M zone_size=1536K zone_capacity=1M zone_nr_conv=2 \
  zone_control="$ctl" zone_write_timeout=600000
wait_ctl
zfio npo2 --control="$ctl" --zonemode=zbd --rw=write --bs=32k --iodepth=16 \
  --loops=2 --verify=crc32c --do_verify=1
e=$(fio_get npo2 jobs.0.error)
w=$(fio_get npo2 jobs.0.write.io_bytes)
r=$(fio_get npo2 jobs.0.read.io_bytes)
# Each pass: 2 conventional zones of 1536 KiB, 10 sequential zones of 1 MiB.
want=$((2 * (2 * 1536 * K + 10 * 1024 * K)))
[ "$e" = 0 ] || die "npo2/zcap: fio error $e"
[ "$w" = "$want" ] || die "npo2/zcap: wrote $w bytes, want $want"
[ "$r" = "$want" ] || die "npo2/zcap: verified $r bytes, want $want"
got=$(zone_summary)
want_zones="NOT_WP NOT_WP $(printf 'FULL %.0s' {1..10})"
[ "$got" = "$want_zones" ] || die "npo2/zcap: zones '$got', want '$want_zones'"
pass "zone size 1536 KiB, capacity 1 MiB, 2 conventional zones: 2 passes, $want bytes written and verified"
stop_frontend

# The open limit: 16 zones of 1 MiB, at most 4 open.
start_frontend size=16M zone_size=1M zone_max_open=4 zone_control="$ctl" \
  zone_write_timeout=600000
wait_ctl
zfio below --control="$ctl" --zonemode=zbd --rw=randwrite --bs=16k \
  --iodepth=8 --max_open_zones=2 --size=16M --io_size=4M --randrepeat=0
e=$(fio_get below jobs.0.error)
w=$(fio_get below jobs.0.write.io_bytes)
[ "$e" = 0 ] || die "--max_open_zones=2: fio error $e"
[ "$w" = $((4 * 1024 * K)) ] || die "--max_open_zones=2: wrote $w bytes"
open=$(ctl stats | sed -n 's/.* imp_open=\([0-9]*\) exp_open=\([0-9]*\) .*/\1 \2/p')
read -r imp exp <<<"$open"
[ $((imp + exp)) -le 2 ] || die "--max_open_zones=2 left $imp implicitly + $exp explicitly open zones"
pass "--max_open_zones=2 under the device's 4: 4 MiB of random writes, $((imp + exp)) zones left open"

rc=0
fio --name=above --ioengine=external:"$fio_engine" --uri="$uri" \
  --control="$ctl" --zonemode=zbd --rw=randwrite --bs=16k \
  --max_open_zones=8 --size=16M --io_size=1M >"$tmpdir/above.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || die "--max_open_zones=8 above the device's 4: fio exited 0"
grep -q 'max_open_zones (8) is larger than max (4)' "$tmpdir/above.log" ||
  die "--max_open_zones=8: no limit message: $(cat "$tmpdir/above.log")"
pass "--max_open_zones=8 above the device's 4: fio refuses ($(grep -m1 'larger than max' "$tmpdir/above.log"))"
stop_frontend
