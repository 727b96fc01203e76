#!/usr/bin/env bash
# nbdcopy round trip on a plain RAM disk (zoned=false): a random 16 MiB
# file with a zero hole goes into the export and comes back out (to a file
# and to a pipe) with the same sha256; a copy from a sparse file leaves the
# export's unwritten range reading zeros.
. "$(dirname "$0")/../functions.sh"
require nbdcopy

start_frontend size=16M zoned=false
random_file "$tmpdir/in" 16M
dd if=/dev/zero of="$tmpdir/in" bs=1M seek=5 count=2 conv=notrunc status=none
want=$(sha256sum <"$tmpdir/in")

nbdcopy --flush "$tmpdir/in" "$uri" || die "nbdcopy file -> export failed"
nbdcopy "$uri" "$tmpdir/out" || die "nbdcopy export -> file failed"
cmp "$tmpdir/in" "$tmpdir/out" || die "round-tripped file differs"
got=$(sha256sum <"$tmpdir/out")
[ "$got" = "$want" ] || die "sha256 $got, want $want"
got=$(nbdcopy "$uri" - | sha256sum)
[ "$got" = "$want" ] || die "nbdcopy to stdout: sha256 $got, want $want"
note "16 MiB round trip identical (sha256 ${want%% *}), via file and pipe"

# Multi-connection, more requests in flight.
nbdcopy --connections=4 --requests=16 --request-size=65536 "$uri" "$tmpdir/out4" ||
  die "nbdcopy with 4 connections failed"
cmp "$tmpdir/in" "$tmpdir/out4" || die "4-connection copy differs"
note "4-connection copy out identical"

# A new random file over the old contents, with a sparse tail.
random_file "$tmpdir/in2" 8M
truncate -s 16M "$tmpdir/in2"
nbdcopy "$tmpdir/in2" "$uri" || die "nbdcopy of a sparse file failed"
nbdcopy "$uri" "$tmpdir/out2" || die "nbdcopy out (2) failed"
cmp "$tmpdir/in2" "$tmpdir/out2" || die "sparse-tail copy differs (old data left in the tail?)"
note "sparse 16 MiB file (8 MiB data) over old data: identical"

stop_frontend
pass "nbdcopy round trips"
