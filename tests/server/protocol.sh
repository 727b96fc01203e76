#!/usr/bin/env bash
# Protocol limits of doc/proto.md checked with the raw client: export
# names over 4096 bytes refused with NBD_REP_ERR_INVALID; BLOCK_STATUS
# with an unaligned offset and length answered (first extent at the
# offset); base:allocation never sends adjacent extents with equal flags,
# also where zones meet.
. "$(dirname "$0")/../functions.sh"
frontend_available
start_frontend size=64M zoned=false
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" longname bs_unaligned ||
  die "long names / unaligned BLOCK_STATUS"
stop_frontend
start_frontend size=64M zone_size=8M zone_nr_conv=0
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" bs_merge ||
  die "base:allocation extents with equal flags not merged"
stop_frontend
pass "long export names, unaligned BLOCK_STATUS, merged extents"
