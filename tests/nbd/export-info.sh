#!/usr/bin/env bash
# What a plain RAM disk (zoned=false) tells clients at handshake: the
# export description is the device's machine-readable geometry line
# ("znbd model=none size=BYTES blocksize=BYTES", include/znbd/dev.h) for
# blocksize 512 and 4096, and the block size constraints are sane (minimum
# = blocksize, preferred a power of 2 >= it, maximum a multiple of the
# minimum of at least 1 MiB).
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "export description"

for bs in 512 4096; do
  start_frontend size=3M zoned=false blocksize=$bs
  bs=$bs nbd_py <<'EOF'
from znbdtest import *
bs = int(os.environ["bs"])
h = nbd.NBD()
h.set_full_info(True)
h.connect_uri(uri)
check_eq(h.get_export_description(), "znbd model=none size=%d blocksize=%d" % (3 * MiB, bs),
         "export description (blocksize=%d)" % bs)
mn, pref, mx = (h.get_block_size(k) for k in (nbd.SIZE_MINIMUM, nbd.SIZE_PREFERRED, nbd.SIZE_MAXIMUM))
check_eq(mn, bs, "minimum block size")
check(pref >= bs and pref & (pref - 1) == 0, "preferred block size %d" % pref)
check(mx >= 1 * MiB and mx % mn == 0, "maximum block size %d" % mx)
h.shutdown()
EOF
  stop_frontend
done
pass "export description and block sizes"
