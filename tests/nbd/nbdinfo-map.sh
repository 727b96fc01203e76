#!/usr/bin/env bash
# nbdinfo on a plain RAM disk (zoned=false): --size, --can/--is answers,
# and `nbdinfo --map` / `--map --totals` output compared byte for byte with
# the text expected from known writes and trims.
. "$(dirname "$0")/../functions.sh"
require nbdinfo
P=$(frontend_page_size)
size=$((64 * P))

start_frontend size=$size zoned=false

[ "$(nbdinfo --size "$uri")" = "$size" ] || die "nbdinfo --size: $(nbdinfo --size "$uri"), want $size"
for c in flush fua trim zero multi-conn cache; do
  nbdinfo --can "$c" "$uri" || die "nbdinfo --can $c: false"
done
! nbdinfo --is readonly "$uri" || die "nbdinfo --is readonly: true for a writable export"
note "size $size, can flush/fua/trim/zero/multi-conn/cache, not read-only"

line() { printf '%10d  %10d  %3d  %s\n' "$1" "$2" "$3" "$4"; }
check_map() { # check_map WHAT: compare nbdinfo --map with $tmpdir/want
  nbdinfo --map "$uri" >"$tmpdir/got" || die "nbdinfo --map failed"
  if ! cmp -s "$tmpdir/want" "$tmpdir/got"; then
    diff -u "$tmpdir/want" "$tmpdir/got" >&2 || true
    die "nbdinfo --map after $1"
  fi
  note "nbdinfo --map exact after $1 ($(wc -l <"$tmpdir/got") lines)"
}

line 0 "$size" 3 hole,zero >"$tmpdir/want"
check_map "nothing written"

page=$P nbd_py <<'EOF'
from znbdtest import *
P = int(os.environ["page"])
h = connect()
h.pwrite(pattern(P, 1), 2 * P)          # page 2
h.pwrite(pattern(3 * P, 2), 8 * P)      # pages 8-10
h.trim(P, 9 * P)                         # page 9 freed
h.pwrite(pattern(P, 3), 63 * P)          # last page
h.pwrite(pattern(P, 4), 20 * P)
h.zero(P, 20 * P)                        # page 20 written then zeroed: freed
h.shutdown()
EOF
{
  line 0 $((2 * P)) 3 hole,zero
  line $((2 * P)) "$P" 0 data
  line $((3 * P)) $((5 * P)) 3 hole,zero
  line $((8 * P)) "$P" 0 data
  line $((9 * P)) "$P" 3 hole,zero
  line $((10 * P)) "$P" 0 data
  line $((11 * P)) $((52 * P)) 3 hole,zero
  line $((63 * P)) "$P" 0 data
} >"$tmpdir/want"
check_map "writes, a trim and a zero"

nbdinfo --map --totals "$uri" >"$tmpdir/got" || die "nbdinfo --map --totals failed"
{
  printf '%10d %5.1f%% %3d %s\n' $((4 * P)) 6.25 0 data
  printf '%10d %5.1f%% %3d %s\n' $((60 * P)) 93.75 3 hole,zero
} >"$tmpdir/want"
if ! cmp -s "$tmpdir/want" "$tmpdir/got"; then
  diff -u "$tmpdir/want" "$tmpdir/got" >&2 || true
  die "nbdinfo --map --totals"
fi
note "nbdinfo --map --totals exact: $(tr '\n' ';' <"$tmpdir/got")"
stop_frontend
pass "nbdinfo output exact"
