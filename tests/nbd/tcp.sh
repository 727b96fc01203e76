#!/usr/bin/env bash
# The same plain RAM disk (zoned=false) served over TCP on 127.0.0.1 at a
# random port (ZNBD_TCP=1): the server listens on the loopback address
# only, and libnbd, nbdinfo, nbdcopy and qemu-io work through
# nbd://127.0.0.1:PORT with the data intact.
. "$(dirname "$0")/../functions.sh"
require ss nbdcopy qemu-io nbdinfo

ZNBD_TCP=1 start_frontend size=4M zoned=false
port=${uri##*:}
ss -ltnH "sport = :$port" >"$tmpdir/ss" || die "ss failed"
[ -s "$tmpdir/ss" ] || die "nothing listens on port $port"
if grep -v -q '127.0.0.1:' "$tmpdir/ss"; then
  cat "$tmpdir/ss" >&2
  die "the server listens on something other than 127.0.0.1:$port"
fi
note "listening on $(awk '{print $4}' "$tmpdir/ss" | tr '\n' ' ')only"

[ "$(nbdinfo --size "$uri")" = $((4 << 20)) ] || die "nbdinfo --size over TCP"
random_file "$tmpdir/in" 4M
nbdcopy "$tmpdir/in" "$uri" || die "nbdcopy into the export over TCP failed"
nbdcopy "$uri" "$tmpdir/out" || die "nbdcopy out of the export over TCP failed"
cmp "$tmpdir/in" "$tmpdir/out" || die "TCP round trip differs"
note "nbdcopy round trip over $uri identical"
nbd_py <<'EOF'
from znbdtest import *
h = connect()
a = pattern(64 * KiB, 9)
h.pwrite(a, 1 * MiB, nbd.CMD_FLAG_FUA)
check_eq(h.pread(64 * KiB, 1 * MiB), a, "libnbd over TCP")
h.shutdown()
EOF
qemu-io -f raw -c 'write -P 0x5c 2M 64k' -c 'read -P 0x5c 2M 64k' "$uri" >"$tmpdir/qio" 2>&1 ||
  die "qemu-io over TCP failed: $(cat "$tmpdir/qio")"
! grep -q 'Pattern verification failed' "$tmpdir/qio" || die "qemu-io pattern mismatch over TCP"
note "qemu-io over TCP"
stop_frontend
pass "TCP on loopback"
