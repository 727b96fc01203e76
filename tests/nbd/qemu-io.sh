#!/usr/bin/env bash
# qemu-io (qemu's NBD block driver) on a plain RAM disk (zoned=false):
# pattern writes and verified reads at sector and page offsets, write
# zeroes, discard, FUA writes, aio writes, and a control read with the
# wrong pattern that must report a verification failure.
. "$(dirname "$0")/../functions.sh"
require qemu-io

start_frontend size=4M zoned=false

qio() { # qio CMD...: run qemu-io commands; fail on errors or bad patterns
  local args=() c
  for c in "$@"; do args+=(-c "$c"); done
  qemu-io -f raw "${args[@]}" "$uri" >"$tmpdir/qio.log" 2>&1 || {
    cat "$tmpdir/qio.log" >&2
    die "qemu-io failed: $*"
  }
  if grep -E -q 'Pattern verification failed|error|failed' "$tmpdir/qio.log"; then
    cat "$tmpdir/qio.log" >&2
    die "qemu-io reported a failure: $*"
  fi
  note "qemu-io: $(echo "$*" | tr '\n' ' ')"
}

qio 'read -P 0 0 4M'
qio 'write -P 0xa5 0 64k' 'read -P 0xa5 0 64k' 'read -P 0 64k 64k'
qio 'write -P 0x3c 512 1536' 'read -P 0xa5 0 512' 'read -P 0x3c 512 1536' 'read -P 0xa5 2048 62k'
qio 'write -z 4k 8k' 'read -P 0xa5 0 512' 'read -P 0x3c 512 1536' 'read -P 0xa5 2k 2k' \
  'read -P 0 4k 8k' 'read -P 0xa5 12k 52k'
qio 'discard 32k 32k' 'read -P 0 32k 32k' 'read -P 0xa5 12k 20k'
qio 'write -f -P 0x77 1M 128k' 'flush' 'read -P 0x77 1M 128k'
qio 'aio_write -P 0x11 2M 64k' 'aio_write -P 0x22 2112k 64k' 'aio_flush' \
  'read -P 0x11 2M 64k' 'read -P 0x22 2112k 64k'
qio 'write -P 0xee 4092k 4k' 'read -P 0xee 4092k 4k' 'read -P 0 4088k 4k'
# A new qemu-io process sees all of it.
qio 'read -P 0xa5 0 512' 'read -P 0 4k 8k' 'read -P 0 32k 32k' 'read -P 0x77 1M 128k' \
  'read -P 0x22 2112k 64k' 'read -P 0xee 4092k 4k'

# Control: reading with the wrong pattern must be reported.
qemu-io -f raw -c 'read -P 0x78 1M 4k' "$uri" >"$tmpdir/ctl.log" 2>&1 || true
grep -q 'Pattern verification failed' "$tmpdir/ctl.log" ||
  die "qemu-io did not detect a wrong pattern: $(cat "$tmpdir/ctl.log")"
note "control: wrong pattern detected"

stop_frontend
pass "qemu-io reads/writes with pattern verification"
