#!/bin/bash
# nbdzone report of a 16,384-zone export: correct line count and values,
# and the time it takes, printed (not asserted; targets are checked by
# benchmarks, see GUIDE.md).
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require nbdsh
M=$((1024 * 1024))
start_frontend size=16G zone_size=1M zone_nr_conv=4 zone_control="$ctl"
wait_ctl
# A write in every 1000th sequential zone.
nbdsh -u "$uri" -c "
for z in range(1000, 16384, 1000):
    h.pwrite(b'\xab' * 4096 * (z // 1000), z * $M)
" || die "writes"

time_it() { # time_it NAME ARGS...: run nbdzone, print seconds
  local name=$1 t0 t1
  shift
  t0=$EPOCHREALTIME
  nbdzone "$@" >"$tmpdir/$name" || die "nbdzone $* failed"
  t1=$EPOCHREALTIME
  /usr/bin/python3 -c "print('%.3f' % ($t1 - $t0))"
}
secs=$(time_it report report "$uri")
note "timing: nbdzone report, 16384 zones, default source: ${secs}s"
secs=$(time_it reportcontrol report --control "$ctl" "$uri")
note "timing: nbdzone report --control, 16384 zones: ${secs}s"
secs=$(time_it capacity capacity "$uri")
note "timing: nbdzone capacity, 16384 zones: ${secs}s"
n=$(wc -l <"$tmpdir/report")
[ "$n" -eq 16384 ] || die "report printed $n lines, expected 16384"
# zone 5000: start 5000*2048 sectors, wp 5 pages = 40 sectors, IMP_OPEN
# (shown CLOSED when inferred from base:allocation).
src=$(nbdzone report -v --count 1 "$uri" 2>&1 >/dev/null | sed -n 's/.*zone state from \([^ ,]*\).*/\1/p')
c=cl
[ "$src" = x-znbd:zone ] && c=oi
line=$(sed -n 5001p "$tmpdir/report")
want=$(zline $((5000 * 2048)) 0x800 0x800 40 $c 2)
[ "$line" = "$want" ] || die "zone 5000 ($src): '$line', expected '$want'"
line=$(sed -n 5001p "$tmpdir/reportcontrol")
want=$(zline $((5000 * 2048)) 0x800 0x800 40 oi 2)
[ "$line" = "$want" ] || die "zone 5000 (--control): '$line', expected '$want'"
line=$(sed -n 16384p "$tmpdir/report")
want=$(zline $((16383 * 2048)) 0x800 0x800 0 em 2)
[ "$line" = "$want" ] || die "last zone: '$line', expected '$want'"
cmp -s <(sed 's/(oi)/(cl)/; s/zcond: 2/zcond: 4/' "$tmpdir/report") \
  <(sed 's/(oi)/(cl)/; s/zcond: 2/zcond: 4/' "$tmpdir/reportcontrol") ||
  die "report and report --control disagree beyond open/closed"
[ "$(cat "$tmpdir/capacity")" = "0x002000000" ] || die "capacity $(cat "$tmpdir/capacity")"
pass "16384-zone report: 16384 lines, zones 5000 and 16383 exact, capacity 0x2000000"
stop_frontend
