#!/usr/bin/env bash
# Structured reads: unwritten ranges come back as OFFSET_HOLE chunks,
# written ones as OFFSET_DATA, DF gives one chunk, simple replies carry
# the zeros; then 64 pipelined writes and reads in one send each.
. "$(dirname "$0")/../functions.sh"
frontend_available
start_frontend size=64M zoned=false
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" holes pipeline ||
  die "structured read checks failed"
stop_frontend
start_frontend size=64M zoned=false completion_nsec=200000
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" pipeline ||
  die "pipelined requests with completion_nsec=200000 failed"
stop_frontend
pass "holes, DF and pipelined requests"
