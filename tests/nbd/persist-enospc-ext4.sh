#!/usr/bin/env bash
# A dir= device on a full ext4 file system (a loop-mounted 16 MiB image):
# a write to a conventional zone that does not fit fails with ENOSPC,
# with write_cache=false (the zone file's fallocate is refused) and with
# write_cache=true (the undo journal's record is refused first; it used
# to come back as EIO), and leaves no allocation behind: ext4 keeps what
# a refused fallocate managed to allocate, so the server punches the
# holes it allocated back, and the file's allocated bytes (st_blocks)
# and its contents are what they were.  Needs root, mkfs.ext4 and loop
# devices: the test skips (77) without them.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "persistent devices"
require mkfs.ext4

fs=$tmpdir/fs
mkdir -p "$fs"
truncate -s 16M "$tmpdir/ext4.img"
mkfs.ext4 -q -F "$tmpdir/ext4.img" >/dev/null 2>&1 || skip "mkfs.ext4 failed"
mount -o loop "$tmpdir/ext4.img" "$fs" 2>/dev/null ||
  skip "cannot loop-mount an ext4 image (needs root and loop devices)"
on_exit "umount -l '$fs'"

for wc in false true; do
  dev=$fs/dev-$wc
  rm -rf "$fs"/dev-*
  start_frontend dir="$dev" size=32M zone_size=4M zone_nr_conv=1 \
    zone_prealloc=false write_cache=$wc zone_control="$tmpdir/ctl-$wc"
  dev=$dev nbd_py <<'EOF'
from znbdtest import *
dev = os.environ["dev"]
Z = 4 * MiB
cnv = "%s/cnv-000000" % dev
h = connect()
h.pwrite(pattern(64 * KiB, 1), 0)  # flushed data in the conventional zone
h.flush()
# Fill the file system with sequential writes until one is refused.
chunk = 256 * KiB
for i in range(7 * 16):
    try:
        h.pwrite(pattern(chunk, 2), Z + i * chunk)
    except nbd.Error as e:
        check_eq(e.errnum, errno.ENOSPC, "filling write refused with ENOSPC")
        break
else:
    raise TestFailure("a 16 MiB file system took 28 MiB")
h.flush()
before = os.stat(cnv).st_blocks
# 3 MiB over holes of the conventional zone: more than is left.
expect_errno(errno.ENOSPC, "a conventional write that does not fit",
             h.pwrite, pattern(3 * MiB, 3), 1 * MiB)
check_eq(os.stat(cnv).st_blocks, before,
         "no allocation left behind in cnv-000000 (512-byte blocks)")
check_eq(h.pread(64 * KiB, 0), pattern(64 * KiB, 1), "flushed data kept")
check_eq(h.pread(3 * MiB, 1 * MiB), bytes(3 * MiB), "the range still zeros")
h.shutdown()
EOF
  stop_frontend
done
pass "a full ext4 fails a conventional write with ENOSPC and keeps no allocation"
