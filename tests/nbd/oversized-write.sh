#!/usr/bin/env bash
# A WRITE larger than the advertised maximum block size (33 MiB against
# 32 MiB; libnbd strict mode off so it is sent) on a plain RAM disk
# (zoned=false): the server may refuse it with EINVAL or carry it out, but
# the connection must stay in step (NBD spec: the payload is part of the
# request) — the same handle then reads and writes normally; if it was
# carried out, the data reads back.
#
# Regression test: znbd used to send the EINVAL reply right after the
# request header, before reading (and discarding) the payload; libnbd 1.14
# counts a command as in flight only once its payload is sent, so it saw a
# reply for an unknown cookie and dropped the connection (fixed in 847a296).
. "$(dirname "$0")/../functions.sh"

start_frontend size=64M zoned=false
nbd_py <<'EOF'
from znbdtest import *
h = connect(strict=False)
mx = h.get_block_size(nbd.SIZE_MAXIMUM)
check(0 < mx <= 32 * MiB, "advertised maximum block size %d" % mx)
big = pattern(mx + 1 * MiB, 1)
try:
    h.pwrite(big, 0)
    check_eq(h.pread(len(big), 0), big, "oversized write carried out: data reads back")
except nbd.Error as e:
    check(e.errnum == errno.EINVAL, "oversized write refused with %s (%s)" % (e.errno, e.string))
a = pattern(4 * KiB, 2)
h.pwrite(a, 48 * MiB)
check_eq(h.pread(4 * KiB, 48 * MiB), a, "the same connection still writes and reads")
h.shutdown()
EOF
frontend_alive || die "the server died"
stop_frontend
pass "oversized write keeps the stream in step"
