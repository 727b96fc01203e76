#!/bin/bash
# libznbdclient (client/znbdclient.h) against a live front-end: geometry,
# report from each source, zone operations, reset by TRIM, append, errno
# of refusals (libclient_test.c has the checks), then a plain RAM disk.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
prog=$builddir/libclient_test
[ -x "$prog" ] || skip "tests/client/libclient_test is not built"
start_zoned zone_max_open=4 zone_max_active=6
"$prog" zoned "$uri" "$ctl" || die "libclient_test zoned"
stop_frontend
pass "zoned export"
start_frontend size=1M zoned=false
"$prog" plain "$uri" || die "libclient_test plain"
stop_frontend
pass "plain export"
