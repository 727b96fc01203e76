#!/usr/bin/env bash
# Linux zloop interchange, both ways, through NBD.
#
# 1. A zloop device directory made here with dd and truncate as zloop
#    leaves one (cnv-NNNNNN at the zone size, seq-NNNNNN whose size is the
#    write pointer, a zone finished by the first zloop (6.16) at the zone
#    size, one finished by later zloop at the capacity, no znbd.meta) is
#    served with the geometry given: every zone's wp and condition and every byte
#    read back are the files'; no zone file changed; znbd.meta is written,
#    and a restart needs no geometry.
# 2. The same directory with geometries that do not match (conv zones,
#    zone size, device size, capacity) and with a file zloop refuses (size
#    not a block multiple) is refused with a message naming the file, and
#    nothing is written.
# 3. A directory znbd formats has zloop's layout: the names, mode 0600,
#    conventional files at the zone size, sequential ones at the wp, a
#    finish at the capacity, the file system's block size by default.
# The kernel side (zloop adding the directory) needs a kernel with zloop
# (6.16+), which the test machines do not have.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "persistent devices"

M=$((1 << 20))
# zloop: add capacity_mb=16,zone_size_mb=2,zone_capacity_mb=1,conv_zones=2
geo=(size=16M zone_size=2M zone_capacity=1M zone_nr_conv=2)
zl=$tmpdir/zloop/0
mkdir -p "$zl"
chmod 700 "$zl"
mk() { # mk NAME SIZE-OF-DATA [FINAL-SIZE]: random data, then truncate
  local f=$zl/$1
  : >"$f"
  chmod 600 "$f"
  if [ "$2" -gt 0 ]; then
    head -c "$2" /dev/urandom >"$f"
  fi
  [ -z "${3:-}" ] || truncate -s "$3" "$f"
}
mk cnv-000000 0 $((2 * M))
dd if=/dev/urandom of="$zl/cnv-000000" bs=4096 seek=3 count=5 conv=notrunc status=none
mk cnv-000001 $((2 * M))
mk seq-000002 0
mk seq-000003 $((64 * 1024))
mk seq-000004 $M                 # written to its capacity: FULL
mk seq-000005 12288 $((2 * M))   # finished by zloop 6.16: zone size
mk seq-000006 8192 $M            # finished by later zloop: capacity
mk seq-000007 4096
cp -a "$zl" "$tmpdir/orig"

# -- 2: mismatches first (each must leave the directory as it was)
unchanged() {
  [ ! -e "$zl/znbd.meta" ] || die "a refused start wrote znbd.meta"
  for f in "$tmpdir"/orig/*; do
    cmp -s "$f" "$zl/${f##*/}" || die "a refused start changed ${f##*/}"
  done
}
refused() { # refused NAME key=value...: refused naming NAME, nothing changed
  expect_start_failure "$@"
  unchanged
}
refused "cnv-000001" dir="$zl" size=16M zone_size=2M \
  zone_capacity=1M zone_nr_conv=1
refused "cnv-000000 holds" dir="$zl" size=16M zone_size=1M \
  zone_capacity=1M zone_nr_conv=2
refused "seq-000008" dir="$zl" size=32M zone_size=2M \
  zone_capacity=1M zone_nr_conv=2
refused "seq-000004 holds" dir="$zl" size=16M zone_size=2M \
  zone_capacity=512K zone_nr_conv=2
refused "give 4 zones" dir="$zl" size=8M zone_size=2M \
  zone_capacity=1M zone_nr_conv=2
refused "zloop" dir="$zl"          # no geometry: says what
truncate -s 8292 "$zl/seq-000007"
expect_start_failure "seq-000007 holds 8292 bytes" dir="$zl" "${geo[@]}"
cp -a "$tmpdir/orig/seq-000007" "$zl/seq-000007"
unchanged
# A finished file at the zone size with data past the capacity: the
# capacity given is wrong.
printf x | dd of="$zl/seq-000005" bs=1 seek=$((M + 100)) conv=notrunc status=none
expect_start_failure "seq-000005 holds data at byte $((M + 100))" \
  dir="$zl" "${geo[@]}"
cp -a "$tmpdir/orig/seq-000005" "$zl/seq-000005"
unchanged

# -- 1: adopted with the right geometry
start_frontend dir="$zl" "${geo[@]}" zone_control="$tmpdir/ctl1"
[ -s "$zl/znbd.meta" ] || die "no znbd.meta after adopting"
for f in "$tmpdir"/orig/*; do
  cmp -s "$f" "$zl/${f##*/}" || die "adopting changed ${f##*/}"
done
check_zloop() { # the device reads as the files say
  zl=$zl orig=$tmpdir/orig ctl=$1 nbd_py <<'EOF'
from znbdtest import *
import re
zl, orig, ctl = os.environ["zl"], os.environ["orig"], os.environ["ctl"]
Z, CAP = 2 * MiB, MiB
h = connect()
check_eq(h.get_size(), 16 * MiB, "size")
check_eq(h.get_block_size(nbd.SIZE_MINIMUM), os.statvfs(zl).f_bsize,
         "block size: the file system's, as zloop takes it")
want = {2: ("EMPTY", 0), 3: ("CLOSED", 64 * KiB), 4: ("FULL", CAP),
        5: ("FULL", CAP), 6: ("FULL", CAP), 7: ("CLOSED", 4 * KiB)}
for n in range(2, 8):
    r = control(ctl, "report %d 1" % n)
    m = re.search(r"wp=(\S+) .*cond=(\S+)", r)
    check(m is not None, "report %d: %s" % (n, r))
    # A FULL zone's wp is at the zone end (null_blk's finish): its
    # capacity is what counts here.
    wp = CAP if m.group(2) == "FULL" else int(m.group(1)) - n * Z
    check_eq((m.group(2), wp), want[n], "zone %d" % n)
def data(name, n):
    with open(os.path.join(orig, name), "rb") as f:
        b = f.read(n)
    return b + bytes(n - len(b))
for z, name in enumerate(["cnv-000000", "cnv-000001"]):
    check_eq(h.pread(Z, z * Z), data(name, Z), "%s bytes" % name)
for z in range(2, 8):
    name = "seq-%06d" % z
    check_eq(h.pread(CAP, z * Z), data(name, CAP), "%s bytes" % name)
h.shutdown()
EOF
}
check_zloop "$tmpdir/ctl1"
stop_frontend
# Restarted without geometry: znbd.meta has it.
start_frontend dir="$zl" zone_control="$tmpdir/ctl2"
check_zloop "$tmpdir/ctl2"
# Writes keep zloop's layout: wp = file size, finish at the capacity,
# reset to 0.
ctl=$tmpdir/ctl2 nbd_py <<'EOF'
from znbdtest import *
ctl = os.environ["ctl"]
h = connect()
h.pwrite(pattern(8 * KiB, 3), 3 * 2 * MiB + 64 * KiB)
h.flush()
check(control(ctl, "finish 7").startswith("ok"), "finish 7")
check(control(ctl, "reset 5").startswith("ok"), "reset 5")
h.shutdown()
EOF
stop_frontend
size_of() { stat -c %s "$zl/$1"; }
[ "$(size_of seq-000003)" = $((72 * 1024)) ] || die "seq-000003: $(size_of seq-000003) bytes, want the wp"
[ "$(size_of seq-000007)" = $M ] || die "finished seq-000007: $(size_of seq-000007) bytes, want the capacity"
[ "$(size_of seq-000005)" = 0 ] || die "reset seq-000005: $(size_of seq-000005) bytes"
cmp -s -n $((64 * 1024)) "$tmpdir/orig/seq-000003" "$zl/seq-000003" ||
  die "seq-000003 lost its zloop data"
pass "a zloop directory is adopted with its geometry; mismatches are refused naming the file"

# -- 3: a directory znbd formats, as zloop lays them out
nd=$tmpdir/zloop/1
start_frontend dir="$nd" "${geo[@]}" zone_control="$tmpdir/ctl3"
ctl=$tmpdir/ctl3 nbd_py <<'EOF'
from znbdtest import *
ctl = os.environ["ctl"]
h = connect()
h.pwrite(pattern(12 * KiB, 1), 2 * 2 * MiB)
h.pwrite(pattern(4 * KiB, 2), 3 * 2 * MiB)
check(control(ctl, "finish 3").startswith("ok"), "finish 3")
h.pwrite(pattern(8 * KiB, 3), 4096)
h.shutdown()
EOF
stop_frontend
bs=$(stat -f -c %S "$nd")
[ "$(sed -n 's/^blocksize=//p' "$nd/znbd.meta")" = "$bs" ] ||
  die "znbd.meta: blocksize $(sed -n 's/^blocksize=//p' "$nd/znbd.meta"), the file system's is $bs"
want="cnv-000000 $((2 * M))
cnv-000001 $((2 * M))
seq-000002 12288
seq-000003 $M
seq-000004 0
seq-000005 0
seq-000006 0
seq-000007 0"
got=$(cd "$nd" && for f in cnv-* seq-*; do echo "$f $(stat -c %s "$f")"; done)
[ "$got" = "$want" ] || die "layout: got
$got
want
$want"
modes=$(cd "$nd" && stat -c %a cnv-* seq-* | sort -u)
[ "$modes" = 600 ] || die "zone file modes: $modes"
cmp -s -n 8192 <(dd if="$nd/cnv-000000" bs=4096 skip=1 count=2 status=none) \
  <(PYTHONPATH="$top_srcdir/tests" /usr/bin/python3 -c '
import sys; from znbdtest import pattern
sys.stdout.buffer.write(pattern(8192, 3))') || die "cnv-000000 bytes"
pass "a znbd directory has zloop's layout (names, sizes, modes, block size $bs)"
