#!/usr/bin/env bash
# -v logs every refused request with its reason, as the plugin does:
# command, length, offset, errno name and, on a zoned device, the zone's
# condition and write pointer.  Without -v nothing is logged.
. "$(dirname "$0")/../functions.sh"
frontend_available
require_python_nbd
M=$((1 << 20))
refuse() { # a write ahead of zone 1's wp, then an unaligned read
  /usr/bin/python3 - "$uri" <<'PY'
import nbd, sys
h = nbd.NBD()
h.set_strict_mode(0)
h.connect_uri(sys.argv[1])
for what, f in (("write ahead of the wp", lambda: h.pwrite(b"x" * 4096, (4 << 20) + 8192)),
                ("unaligned read", lambda: h.pread(100, 4096 + 3))):
    try:
        f()
        sys.exit(what + " succeeded")
    except nbd.Error:
        pass
h.shutdown()
PY
}
start_frontend size=16M zone_size=4M zone_nr_conv=0
refuse || die "requests not refused"
stop_frontend
if grep -q 'WRITE' "$server_log"; then
  cat "$server_log" >&2
  die "refused write logged without -v"
fi
note "without -v: no log line"

start_frontend size=16M zone_size=4M zone_nr_conv=0 -v
refuse || die "requests not refused"
stop_frontend
cat "$server_log"
grep -E "WRITE: 4096 bytes at $((4 * M + 8192)): .*EIO.*zone 1 at $((4 * M)): EMPTY, wp $((4 * M))" \
  "$server_log" >/dev/null || die "-v: no line for the refused write with its zone"
grep -E "READ: 100 bytes at 4099: EINVAL: .*not aligned" "$server_log" >/dev/null ||
  die "-v: no line for the unaligned read"
pass "-v logs refused requests with errno, zone condition and wp"
