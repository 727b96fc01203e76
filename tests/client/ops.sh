#!/bin/bash
# nbdzone reset/finish/open/close change what report then shows: reset and
# finish over plain NBD (TRIM, WRITE_ZEROES) and through the control
# socket; open/close through the control socket and refused without it;
# refusals name the zone and exit 1; bad offsets exit 2.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require nbdsh
start_zoned

M=$((1024 * 1024))
expect_cond() { # expect_cond ZONE COND [WP]
  local c w
  c=$(cond_of "$1")
  [ "$c" = "$2" ] || die "zone $1 is $c, expected $2 ($3)"
  if [ -n "${4:-}" ]; then
    w=$(wp_of "$1")
    [ "$w" = "$4" ] || die "zone $1 wp $w, expected $4"
  fi
}
# The blkzone line nbdzone reports for ZONE must show COND.
report_shows() { # report_shows ZONE SHORT-COND WPTR
  local line
  line=$(nbdzone report --control "$ctl" --offset $(($1 * M)) --count 1 "$uri")
  case "$line" in
  *"wptr $3 "*"($2)"*) ;;
  *) die "report of zone $1: '$line', expected ($2) wptr $3" ;;
  esac
}

# reset over NBD (TRIM of whole zones): zones 2 and 3 written, then reset.
nbd_write $((2 * M)) 4096
nbd_write $((3 * M)) 8192
expect_cond 2 IMP_OPEN
nbdzone reset --offset 2M --count 2 "$uri" || die "reset --offset 2M --count 2"
expect_cond 2 EMPTY $((2 * M))
expect_cond 3 EMPTY $((3 * M))
report_shows 2 em 0x000000
report_shows 3 em 0x000000
pass "reset over NBD: zones 2-3 EMPTY, wp at start"

# finish over NBD (WRITE_ZEROES to capacity): an EMPTY and a written zone.
nbd_write $((5 * M)) 4096
nbdzone finish --offset 4M --count 2 "$uri" || die "finish --offset 4M --count 2"
expect_cond 4 FULL
expect_cond 5 FULL
report_shows 4 fu 0x000000
# The data below the old wp survives a finish.
got=$(nbdsh -u "$uri" -c "print(h.pread(4096, $((5 * M))) == b'\xab' * 4096)")
[ "$got" = True ] || die "finish lost the data of zone 5"
pass "finish over NBD: zones 4-5 FULL, written data kept"

# open/close need the control socket.
expect_status 2 nbdzone open --offset 6M "$uri"
case "$out" in *--control*) ;; *) die "open without --control: '$out'" ;; esac
expect_status 2 nbdzone close --offset 6M "$uri"
nbdzone open --control "$ctl" --offset 6M --count 1 "$uri" || die "open zone 6"
expect_cond 6 EXP_OPEN
report_shows 6 oe 0x000000
nbdzone close --control "$ctl" --offset 6M --count 1 "$uri" || die "close zone 6"
expect_cond 6 EMPTY
nbd_write $((6 * M)) 4096
nbdzone close --control "$ctl" --offset 6M --count 1 "$uri" || die "close written zone 6"
expect_cond 6 CLOSED $((6 * M + 4096))
report_shows 6 cl 0x000008
nbdzone finish --control "$ctl" --offset 6M --count 1 "$uri" || die "finish via control"
expect_cond 6 FULL
nbdzone reset --control "$ctl" --offset 6M --count 1 "$uri" || die "reset via control"
expect_cond 6 EMPTY $((6 * M))
pass "open/close/finish/reset through the control socket"

# Refusals: exit 1, the message names the zone and the reason.
expect_status 1 nbdzone close --control "$ctl" --offset 9M --count 1 "$uri"
case "$out" in *"zone 9"*EMPTY*) ;; *) die "close of EMPTY zone 9: '$out'" ;; esac
expect_status 1 nbdzone reset --offset 0 "$uri"
case "$out" in *"zone 0"*conventional*) ;; *) die "reset of conventional zone: '$out'" ;; esac
expect_status 1 nbdzone reset --control "$ctl" --offset 1M "$uri"
case "$out" in *"zone 1"*conventional*) ;; *) die "reset via control of conventional zone: '$out'" ;; esac
expect_status 1 nbdzone finish --offset 0 --count 3 "$uri"
expect_cond 2 EMPTY # refused before anything was done
expect_status 2 nbdzone reset --offset $((2 * M + 512)) "$uri"
case "$out" in *"not the start of a zone"*) ;; *) die "unaligned offset: '$out'" ;; esac
expect_status 2 nbdzone reset --offset 16M "$uri"
expect_status 2 nbdzone reset "$uri"
expect_status 2 nbdzone reset --all --offset 2M "$uri"
pass "refusals exit 1 naming the zone; bad offsets and options exit 2"

# --all over NBD: finish all open/closed zones, then reset all; the
# conventional zone's data survives reset --all.
nbd_write 0 4096
nbd_write $((10 * M)) 4096
nbd_write $((11 * M)) 4096
ctl "close 11" >/dev/null
nbdzone finish --all "$uri" || die "finish --all"
expect_cond 10 FULL
expect_cond 11 FULL
expect_cond 12 EMPTY
nbdzone reset --all "$uri" || die "reset --all"
for z in 4 5 10 11; do expect_cond $z EMPTY; done
got=$(nbdsh -u "$uri" -c "print(h.pread(4096, 0) == b'\xab' * 4096)")
[ "$got" = True ] || die "reset --all lost the data of conventional zone 0"
pass "finish --all and reset --all over NBD; conventional data kept"

# --all through the control socket.
nbd_write $((12 * M)) 4096
nbd_write $((13 * M)) 4096
nbdzone close --all --control "$ctl" "$uri" || die "close --all"
expect_cond 12 CLOSED
expect_cond 13 CLOSED
nbdzone open --all --control "$ctl" "$uri" || die "open --all"
expect_cond 12 EXP_OPEN
expect_cond 13 EXP_OPEN
nbdzone reset --all --control "$ctl" "$uri" || die "reset --all via control"
expect_cond 12 EMPTY
expect_cond 13 EMPTY
pass "close/open/reset --all through the control socket"

# reset --all over NBD with an EXP_OPEN zone with nothing written (looks
# EMPTY through base:allocation) and a READONLY zone (looks FULL): the
# first is reset, the second left READONLY, as null_blk's reset-all does.
nbd_write $((13 * M)) 4096
ctl "readonly 13" >/dev/null
ctl "open 14" >/dev/null
nbdzone reset --all "$uri" || die "reset --all with READONLY and EXP_OPEN zones"
expect_cond 13 READONLY
expect_cond 14 EMPTY $((14 * M))
# An explicit reset of the READONLY zone is refused (exit 1).
expect_status 1 nbdzone reset --offset 13M --count 1 "$uri"
case "$out" in *"zone 13"*) ;; *) die "reset of READONLY zone 13: '$out'" ;; esac
expect_cond 13 READONLY
pass "reset --all skips READONLY and resets an empty EXP_OPEN zone; reset of READONLY refused"
stop_frontend
