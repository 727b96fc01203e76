#!/bin/bash
# nbdzone map's plain text (stdout not a terminal, and NO_COLOR set) for
# zones put in known conditions: one letter per zone, the open/active
# counts against the limits, the legend.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require nbdsh
start_zoned zone_max_open=4

M=$((1024 * 1024))
nbd_write $((2 * M)) 4096              # zone 2 IMP_OPEN
nbd_write $((3 * M)) $((768 * 1024))   # zone 3 FULL (whole capacity)
nbd_write $((7 * M)) 4096              # zone 7, closed below
nbdzone open --offset 4M --count 1 --control "$ctl" "$uri" || die open
nbdzone readonly --offset 5M --count 1 --control "$ctl" "$uri" || die readonly
nbdzone offline --offset 6M --count 1 --control "$ctl" "$uri" || die offline
nbdzone close --offset 7M --count 1 --control "$ctl" "$uri" || die close
want='16 zones, one cell per 1 zone; open 2/max_open 4, active 3/max_active 0 (0: no limit)
       0 ##iFeRXC........
# conventional  . EMPTY  F FULL  C CLOSED  i IMP_OPEN  e EXP_OPEN  R READONLY  X OFFLINE'
got=$(nbdzone map --control "$ctl" "$uri")
[ "$got" = "$want" ] || die "map:
$got
expected:
$want"
got=$(NO_COLOR=1 script -qec "$nbdzone_bin map --control '$ctl' '$uri'" /dev/null 2>/dev/null | tr -d '\r') ||
  got=$(NO_COLOR=1 nbdzone map --control "$ctl" "$uri")
[ "$got" = "$want" ] || die "map with NO_COLOR on a terminal:
$got"
expect_status 2 nbdzone report --watch "$uri"
pass "map: one letter per zone by condition, counts and legend"

# --svg: the same map as a picture: one cell per zone with its condition.
nbdzone map --svg "$tmpdir/map.svg" --control "$ctl" "$uri" || die "map --svg"
v=$(/usr/bin/python3 - "$tmpdir/map.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
cells = [t.text for t in ET.parse(sys.argv[1]).getroot().iter(ns + "title")][1:]
print(" ".join(c.split()[2] for c in cells))
PY
) || die "map.svg does not parse"
[ "$v" = "conventional conventional IMP_OPEN FULL EXP_OPEN READONLY OFFLINE CLOSED EMPTY EMPTY EMPTY EMPTY EMPTY EMPTY EMPTY EMPTY" ] ||
  die "map.svg cells: $v"
expect_status 2 nbdzone map --svg "$tmpdir/x.svg" --watch "$uri"
pass "map --svg: one titled cell per zone"
