#!/usr/bin/env bash
# WRITE_ZEROES and NO_HOLE on a plain RAM disk (zoned=false).  NBD spec
# (NBD_CMD_WRITE_ZEROES): by default the server MAY trim to zero the area;
# with NBD_CMD_FLAG_NO_HOLE "the area MUST be fully provisioned".  So
# after write-zeroes with NO_HOLE the range reads zeros and base:allocation
# shows no HOLE there (over written and never-written pages alike), while
# write-zeroes without NO_HOLE may free whole pages (HOLE|ZERO, checked in
# block-status).  znbd's base:allocation must match the plugin's.
#
# Both front-ends go through znbd_dev_write(ZNBD_WRITE_ALLOCATE).
. "$(dirname "$0")/../functions.sh"

start_frontend size=1M zoned=false
page=$(frontend_page_size) nbd_py <<'EOF'
from znbdtest import *
P = int(os.environ["page"])
h = connect()
h.pwrite(pattern(2 * P, 1), 0)
h.zero(2 * P, 0, nbd.CMD_FLAG_NO_HOLE)        # written pages
h.zero(2 * P, 8 * P, nbd.CMD_FLAG_NO_HOLE)    # never-written pages
check_eq(h.pread(16 * P, 0), bytes(16 * P), "NO_HOLE write-zeroes read back as zeros")
ext = extents(h, 0, 16 * P)
holes = [(o, l) for o, l, f in ext if f & HOLE and (o < 2 * P or (o < 10 * P and o + l > 8 * P))]
check_eq(holes, [], "no HOLE extent over NO_HOLE-zeroed pages (extents %r)" % ext)
h.shutdown()
EOF
stop_frontend
pass "write-zeroes with NO_HOLE provisions the range"
