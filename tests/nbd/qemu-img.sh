#!/usr/bin/env bash
# qemu-img (qemu's NBD block driver) on a plain RAM disk (zoned=false):
# convert a random raw image (with a zero hole) into the export and back
# out, then `qemu-img compare` both ways and a checksum; `qemu-img info`
# sees the right virtual size; compare must notice a changed byte.
. "$(dirname "$0")/../functions.sh"
require qemu-img

start_frontend size=8M zoned=false
random_file "$tmpdir/in.raw" 8M
# A 1 MiB zero range in the middle: qemu-img writes it as zeroes/trims.
dd if=/dev/zero of="$tmpdir/in.raw" bs=1M seek=3 count=1 conv=notrunc status=none

vsize=$(qemu-img info --output=json "$uri" |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["virtual-size"])')
[ "$vsize" = $((8 << 20)) ] || die "qemu-img info: virtual-size $vsize, want 8 MiB"
note "qemu-img info: virtual-size $vsize"

qemu-img convert -n -f raw -O raw "$tmpdir/in.raw" "$uri" || die "qemu-img convert into the export failed"
qemu-img convert -f raw -O raw "$uri" "$tmpdir/out.raw" || die "qemu-img convert out of the export failed"
qemu-img compare -f raw -F raw "$tmpdir/in.raw" "$uri" || die "qemu-img compare file vs export: differ"
qemu-img compare -f raw -F raw "$tmpdir/in.raw" "$tmpdir/out.raw" || die "round-tripped file differs"
a=$(sha256sum <"$tmpdir/in.raw") b=$(sha256sum <"$tmpdir/out.raw")
[ "$a" = "$b" ] || die "sha256 differs: $a vs $b"
note "convert in and out: identical (sha256 ${a%% *})"

# Control: one changed byte in the file must be seen.  The byte is
# inverted, not overwritten with a constant: the file is random, so a
# constant would equal the byte already there once in 256 runs.
old=$(od -An -tu1 -j $((5 << 20)) -N1 "$tmpdir/in.raw" | tr -d ' ')
printf "\\$(printf '%03o' $((old ^ 0xff)))" |
  dd of="$tmpdir/in.raw" bs=1 seek=$((5 << 20)) conv=notrunc status=none
new=$(od -An -tu1 -j $((5 << 20)) -N1 "$tmpdir/in.raw" | tr -d ' ')
[ "$new" = $((old ^ 0xff)) ] || die "could not change the control byte ($old -> $new)"
rc=0
qemu-img compare -f raw -F raw "$tmpdir/in.raw" "$uri" >"$tmpdir/cmp.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || die "qemu-img compare after changing a byte: status $rc, want 1 ($(cat "$tmpdir/cmp.log"))"
note "control: compare reports the difference: $(head -1 "$tmpdir/cmp.log")"

stop_frontend
pass "qemu-img convert/compare"
