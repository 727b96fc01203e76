#!/usr/bin/env bash
# NBD spec, "Command flags": NBD_CMD_FLAG_FUA "is valid for all commands,
# provided NBD_FLAG_SEND_FUA has been negotiated, in which case the server
# MUST accept all commands with this bit set (even by ignoring the bit)".
# Existing clients do set it on reads.  So READ, FLUSH, CACHE and
# BLOCK_STATUS with FUA must succeed (plain RAM disk, zoned=false, libnbd
# strict mode off).
#
# Regression test: znbd used to refuse them with EINVAL (server/proto.c
# validate() allowed FUA only on WRITE, TRIM and WRITE_ZEROES; fixed in
# 847a296).
. "$(dirname "$0")/../functions.sh"

start_frontend size=1M zoned=false
nbd_py <<'EOF'
from znbdtest import *
h = connect(strict=False)
check(h.can_fua(), "export advertises FUA")
a = pattern(4 * KiB, 1)
h.pwrite(a, 0)
check_eq(h.pread(4 * KiB, 0, nbd.CMD_FLAG_FUA), a, "READ with FUA")
h.flush(nbd.CMD_FLAG_FUA)
say("FLUSH with FUA")
h.cache(4 * KiB, 0, nbd.CMD_FLAG_FUA)
say("CACHE with FUA")
got = []
h.block_status(8 * KiB, 0, lambda m, o, e, err: got.append(list(e)) or 0, nbd.CMD_FLAG_FUA)
check(len(got) == 1 and got[0][1] == 0, "BLOCK_STATUS with FUA: first extent data (%r)" % got)
h.shutdown()
EOF
stop_frontend
pass "FUA accepted on every command"
