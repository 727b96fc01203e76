#!/usr/bin/env bash
# The x-znbd:zone metadata context: nbdinfo --map=x-znbd:zone shows every
# zone's type, condition and write pointer (include/znbd/zonectx.h), one
# or two extents per zone, after writes and zone control operations;
# REQ_ONE gives one extent; the context is not offered on a RAM disk.
. "$(dirname "$0")/../functions.sh"
frontend_available
require nbdinfo
require_python_nbd
M=$((1 << 20))
start_frontend size=64M zone_size=4M zone_nr_conv=2 zone_readonly=12 \
  zone_offline=13 zone_control="$tmpdir/ctl"
ctl() { /usr/bin/python3 - "$tmpdir/ctl" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
r = s.makefile().readline().strip()
print(r)
sys.exit(0 if r.startswith("ok") else 1)
PY
}
/usr/bin/python3 - <<PY || die "writes failed"
import nbd
h = nbd.NBD(); h.connect_uri("$uri")
h.pwrite(b"a" * 8192, 8 * $M)            # zone 2: IMP_OPEN, wp +8K
h.pwrite(b"b" * (4 * $M), 12 * $M)       # zone 3: FULL
h.pwrite(b"c" * 4096, 16 * $M)           # zone 4: closed below
PY
ctl "close 4" >/dev/null || die "control: close 4"
ctl "open 5" >/dev/null || die "control: open 5"
nbdinfo --map=x-znbd:zone "$uri" >"$tmpdir/map" || die "nbdinfo --map=x-znbd:zone failed"
cat "$tmpdir/map"
exp() { printf '%10d  %10d  %4d\n' "$@"; }
{
  exp 0 $((8 * M)) 16              # conventional: NOT_WP | type 1
  exp $((8 * M)) 8192 $((0x22))    # IMP_OPEN below the wp
  exp $((8 * M + 8192)) $((4 * M - 8192)) $((0x122))
  exp $((12 * M)) $((4 * M)) $((0x2e))   # FULL
  exp $((16 * M)) 4096 $((0x24))         # CLOSED
  exp $((16 * M + 4096)) $((4 * M - 4096)) $((0x124))
  exp $((20 * M)) $((4 * M)) $((0x123))  # EXP_OPEN, wp at start
  exp $((24 * M)) $((24 * M)) $((0x121)) # EMPTY zones 6-11
  exp $((48 * M)) $((4 * M)) $((0x2d))   # READONLY
  exp $((52 * M)) $((4 * M)) $((0x2f))   # OFFLINE
  exp $((56 * M)) $((8 * M)) $((0x121))
} >"$tmpdir/want"
# nbdinfo prints "offset length status[  description]" and joins equal
# neighbours (the server sends one extent per zone: checked below).
awk '{printf "%10d  %10d  %4d\n", $1, $2, $3}' "$tmpdir/map" >"$tmpdir/got"
diff "$tmpdir/want" "$tmpdir/got" || die "x-znbd:zone map differs (want, got)"
note "x-znbd:zone: conv, IMP_OPEN+wp, FULL, CLOSED+wp, EXP_OPEN, EMPTY, READONLY, OFFLINE as expected"

/usr/bin/python3 - <<PY || die "REQ_ONE / offset checks failed"
import nbd
h = nbd.NBD(); h.add_meta_context("x-znbd:zone"); h.connect_uri("$uri")
got = []
def cb(ctx, off, ents, err):
    got.append((ctx, off, list(ents)))
h.block_status(4 * $M, 8 * $M + 4096, cb, nbd.CMD_FLAG_REQ_ONE)
assert got == [("x-znbd:zone", 8 * $M + 4096, [4096, 0x22])], got
got.clear()
h.block_status(10 * $M, 8 * $M, cb)
want = [8192, 0x22, 4 * $M - 8192, 0x122, 4 * $M, 0x2e, 4096, 0x24,
        2 * $M - 4096, 0x124]
assert got == [("x-znbd:zone", 8 * $M, want)], got
got.clear()
h.block_status(64 * $M, 0, cb)
ext = got[0][2]
starts = [sum(ext[0:i:2]) for i in range(0, len(ext), 2)]
zones = [0x10, 0x10, 0x22, 0x122, 0x2e, 0x24, 0x124, 0x123] + [0x121] * 6 + \
        [0x2d, 0x2f, 0x121, 0x121]
assert ext[1::2] == zones, ext
assert starts[3] == 8 * $M + 8192 and starts[6] == 16 * $M + 4096, starts
assert sum(ext[0::2]) == 64 * $M
print("whole device: %d extents, one per zone plus one per valid wp" % (len(ext) // 2))
print("REQ_ONE: one 4096-byte extent up to the wp; 10 MiB from 8 MiB: "
      "5 extents clipped at the end")
PY
stop_frontend

start_frontend size=16M zoned=false
/usr/bin/python3 - <<PY || die "RAM disk offered x-znbd:zone"
import nbd
h = nbd.NBD(); h.add_meta_context("x-znbd:zone"); h.connect_uri("$uri")
assert not h.can_meta_context("x-znbd:zone")
print("RAM disk: x-znbd:zone not offered")
PY
stop_frontend
pass "x-znbd:zone metadata context"
