#!/bin/bash
# nbdzone's control-socket commands against a live server: stats counters
# move, badblocks add makes a read fail with EIO and del heals it,
# readonly/offline/online change the zone condition, drop-reply shows and
# changes its setting, power-cut without write_cache is refused with the
# server's reason and exit 1; --json output parses.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require nbdsh
start_zoned

M=$((1024 * 1024))
stat_of() { nbdzone stats --control "$ctl" "$uri" | sed -n "s/^$1= *//p"; }

# stats: the counters of a scan move with the zone state.
[ "$(stat_of zones)" = 16 ] || die "stats zones: $(stat_of zones)"
[ "$(stat_of empty)" = 14 ] || die "stats empty: $(stat_of empty)"
nbd_write $((2 * M)) 4096
[ "$(stat_of imp_open)" = 1 ] || die "stats imp_open after a write: $(stat_of imp_open)"
[ "$(stat_of empty)" = 13 ] || die "stats empty after a write: $(stat_of empty)"
json=$(nbdzone stats --json --control "$ctl" "$uri")
v=$(/usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["zones"], d["imp_open"], d["badblock_errors"])' "$json") ||
  die "stats --json does not parse: $json"
[ "$v" = "16 1 0" ] || die "stats --json: $v"
pass "stats: counts follow a write; --json parses"

# badblocks: sectors 4096-4103 (byte 2 MiB, zone 2) fail reads with EIO.
nbdzone badblocks add 4096-4103,4200 --control "$ctl" "$uri" || die "badblocks add"
l=$(nbdzone badblocks list --control "$ctl" "$uri" | tr '\n' ' ')
[ "$l" = "4096-4103 4200 " ] || die "badblocks list: '$l'"
j=$(nbdzone badblocks list --json --control "$ctl" "$uri")
[ "$j" = '{"units": "512-byte sectors", "badblocks": ["4096-4103", "4200"]}' ] ||
  die "badblocks list --json: $j"
r=$(nbdsh -u "$uri" -c '
import errno
try:
    h.pread(4096, 2 * 1024 * 1024)
    print("read ok")
except nbd.Error as e:
    print("EIO" if e.errno in (errno.EIO, "EIO") else "errno %s" % e.errno)
')
[ "$r" = EIO ] || die "read of a bad sector: $r"
[ "$(stat_of badblock_errors)" = 1 ] || die "badblock_errors: $(stat_of badblock_errors)"
nbdzone badblocks del 4096-4103,4200 --control "$ctl" "$uri" || die "badblocks del"
[ -z "$(nbdzone badblocks list --control "$ctl" "$uri")" ] || die "badblocks list not empty after del"
nbdsh -u "$uri" -c 'assert h.pread(4096, 2 * 1024 * 1024) == b"\xab" * 4096' ||
  die "read after badblocks del"
expect_status 1 nbdzone badblocks add 99999999 --control "$ctl" "$uri"
case "$out" in *"error EINVAL"*) ;; *) die "badblocks past the end: '$out'" ;; esac
pass "badblocks add/list/del: EIO on a bad sector, healed by del; past the end refused"

# Zone faults.
nbdzone readonly --offset 3M --count 1 --control "$ctl" "$uri" || die readonly
[ "$(cond_of 3)" = READONLY ] || die "zone 3 is $(cond_of 3) after readonly"
nbdzone offline --offset 4M --control "$ctl" --count 1 "$uri" || die offline
[ "$(cond_of 4)" = OFFLINE ] || die "zone 4 is $(cond_of 4) after offline"
[ "$(stat_of readonly) $(stat_of offline)" = "1 1" ] || die "stats readonly/offline"
nbdzone online --offset 3M --count 2 --control "$ctl" "$uri" || die online
[ "$(cond_of 3) $(cond_of 4)" = "EMPTY EMPTY" ] || die "zones 3-4 after online"
expect_status 1 nbdzone readonly --offset 0 --count 1 --control "$ctl" "$uri"
case "$out" in *"zone 0"*"refused"*) ;; *) die "readonly of a conventional zone: '$out'" ;; esac
pass "readonly/offline/online change the condition; conventional refused"

# drop-reply: the setting round-trips.
[ "$(nbdzone drop-reply --control "$ctl" "$uri" | sed -n 's/^every= *//p')" = 0 ] ||
  die "drop-reply off at start"
nbdzone drop-reply every 1000 read --control "$ctl" "$uri" >/dev/null || die "drop-reply every"
s=$(nbdzone drop-reply --json --control "$ctl" "$uri")
v=$(/usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["every"], d["kinds"])' "$s") ||
  die "drop-reply --json: $s"
[ "$v" = "1000 read" ] || die "drop-reply setting: $v"
nbdzone drop-reply off --control "$ctl" "$uri" >/dev/null || die "drop-reply off"
expect_status 1 nbdzone drop-reply every 0 --control "$ctl" "$uri"
case "$out" in *"drop-reply every 0 refused: error EINVAL"*) ;; *) die "drop-reply every 0: '$out'" ;; esac
pass "drop-reply shows, sets and clears; bad N refused"

# power-cut without write_cache: the server's reason, exit 1.
expect_status 1 nbdzone power-cut --control "$ctl" "$uri"
case "$out" in *"error EINVAL power-cut needs write_cache=true"*) ;; *) die "power-cut: '$out'" ;; esac
expect_status 2 nbdzone stats "$uri"
expect_status 2 nbdzone stats extra --control "$ctl" "$uri"
pass "power-cut refused with the server's reason; usage errors exit 2"
