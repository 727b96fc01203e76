#!/usr/bin/env bash
# Malformed handshakes and requests from a raw-socket client (rawnbd.py):
# unknown client flags, wrong magics, unknown/oversized/short options,
# zero-length, unaligned, past-the-end, unknown and oversized requests, a
# client killed mid-write.  After each the server must still serve, and a
# rejected write must change nothing.
. "$(dirname "$0")/../functions.sh"
frontend_available
start_frontend size=64M zoned=false
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" handshake requests midwrite ||
  die "raw-socket checks failed"
frontend_alive || die "server died"
stop_frontend
pass "malformed handshakes and requests answered, server still serving"
