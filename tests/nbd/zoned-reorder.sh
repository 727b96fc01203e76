#!/usr/bin/env bash
# Clients that reorder zoned writes.  qemu's NBD client keeps at most 16
# requests in flight and sends queued ones out of order once it is full
# (0..15, then 18, 17, 16, ...); with pipeline_zoned_writes (the default)
# a write that reaches the server ahead of its zone's write pointer is
# parked until the writes before it land, on every front-end.
#   1. qemu-io: 64 queued 64 KiB aio writes into an empty zone, read back.
#   2. qemu-img bench -w at depth 17 into a zoned export: one zone written
#      by one stream of 64 KiB writes, which must end FULL.
# Then with pipeline_zoned_writes=false the same queue of writes fails
# (the check that the first part tests something).
. "$(dirname "$0")/../functions.sh"
require qemu-io
require qemu-img

queue64() { # queue64 OFF_KIB: 64 aio writes of 64 KiB, patterns 1..64
  local args=() i
  for i in $(seq 0 63); do
    args+=(-c "aio_write -P $((i + 1)) $(($1 + i * 64))k 64k")
  done
  args+=(-c aio_flush)
  for i in $(seq 0 63); do
    args+=(-c "read -P $((i + 1)) $(($1 + i * 64))k 64k")
  done
  qemu-io -f raw "${args[@]}" "$uri" >"$tmpdir/qio.log" 2>&1
}

start_frontend size=64M zone_size=8M zone_write_timeout=60000
queue64 0 || { tail -20 "$tmpdir/qio.log" >&2; die "qemu-io exited with an error"; }
if grep -E -q 'Pattern verification failed|error|failed' "$tmpdir/qio.log"; then
  grep -E 'Pattern verification failed|error|failed' "$tmpdir/qio.log" | head >&2
  die "qemu-io: queued writes into a zone failed"
fi
note "qemu-io: 64 queued 64 KiB writes into an empty zone, all read back"

# bench: 64 KiB writes, 17 in flight (one more than qemu's client sends
# at once, so it reorders), 128 requests from 8M: exactly zone 1, which
# must end FULL.  (Deeper queues stall qemu 7.2's client: see the man
# page, PIPELINED WRITES.)
qemu-img bench -f raw -w -t none -d 17 -c 128 -s 64k -o 8M --pattern=0xab "$uri" \
  >"$tmpdir/bench.log" 2>&1 || { cat "$tmpdir/bench.log" >&2; die "qemu-img bench -w -d 17 failed"; }
qemu-io -f raw -c "read -P 0xab 8M 8M" "$uri" >"$tmpdir/rd.log" 2>&1
grep -q -E 'Pattern verification failed|error|failed' "$tmpdir/rd.log" &&
  { cat "$tmpdir/rd.log" >&2; die "zone 1 does not hold the bench's data"; }
# base:allocation: the whole zone is data below the wp (FULL).
nbdinfo --map "$uri" >"$tmpdir/map"
grep -q -E "^ *8388608 +8388608 +0" "$tmpdir/map" || { cat "$tmpdir/map" >&2; die "zone 1 not written to its end"; }
stop_frontend
note "qemu-img bench -w -d 17 -c 128 -s 64k: zone 1 written to its end"

start_frontend size=64M zone_size=8M pipeline_zoned_writes=false
queue64 0 || true
grep -q -E 'error|failed' "$tmpdir/qio.log" ||
  die "without pipelining, reordered queued writes did not fail"
stop_frontend
note "pipeline_zoned_writes=false: reordered writes fail"
pass "reordering clients on a zoned export"
