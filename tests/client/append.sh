#!/bin/bash
# nbdzone append: data from a file or standard input lands at the offset
# printed (bytes, the zone's wp before); eight appends from eight
# processes (eight control connections) to one zone at once never overlap
# and fill it exactly; an append that does not fit, or to a conventional
# zone, exits 1 and changes nothing; usage errors exit 2.  Also -V.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require nbdsh
start_zoned

M=$((1024 * 1024))
K=1024

# -V / --version: the configure version.
want=$(sed -n 's/^AC_INIT(\[znbd\], \[\([^]]*\)\].*/\1/p' "$top_srcdir/configure.ac")
[ -n "$want" ] || die "no version in configure.ac"
got=$(nbdzone -V) || die "nbdzone -V failed"
[ "$got" = "nbdzone $want" ] || die "nbdzone -V: '$got', expected 'nbdzone $want'"
got=$(nbdzone --version) || die "nbdzone --version failed"
[ "$got" = "nbdzone $want" ] || die "nbdzone --version: '$got'"
pass "-V and --version print 'nbdzone $want'"

# Usage: append needs --control and a zone start.
expect_status 2 nbdzone append --offset 2M "$uri" </dev/null
case "$out" in *--control*) ;; *) die "append without --control: '$out'" ;; esac
expect_status 2 nbdzone append --control "$ctl" "$uri" </dev/null
expect_status 2 nbdzone append --control "$ctl" --offset $((2 * M + 4096)) "$uri" </dev/null
case "$out" in *"not the start of a zone"*) ;; *) die "append inside a zone: '$out'" ;; esac
expect_status 2 nbdzone append --control "$ctl" --offset 2M --count 2 "$uri" </dev/null
expect_status 2 nbdzone append --control "$ctl" --offset 2M "$uri" </dev/null
case "$out" in *"no data"*) ;; *) die "empty append: '$out'" ;; esac
expect_status 2 nbdzone report --file /dev/null "$uri"
[ "$(wp_of 2)" = $((2 * M)) ] || die "usage errors changed zone 2: wp $(wp_of 2)"
pass "usage errors exit 2 and change nothing"

# From a file, then from standard input: offsets follow, data read back.
head -c 8192 /dev/urandom >"$tmpdir/a"
head -c 4096 /dev/urandom >"$tmpdir/b"
off=$(nbdzone append --control "$ctl" --offset 2M --file "$tmpdir/a" "$uri") ||
  die "append from a file"
[ "$off" = $((2 * M)) ] || die "first append at $off, expected $((2 * M))"
off=$(nbdzone append --control "$ctl" --offset 2M "$uri" <"$tmpdir/b") ||
  die "append from stdin"
[ "$off" = $((2 * M + 8192)) ] || die "second append at $off, expected $((2 * M + 8192))"
nbdsh -u "$uri" -c "
a = open('$tmpdir/a', 'rb').read()
b = open('$tmpdir/b', 'rb').read()
assert h.pread(8192, $((2 * M))) == a, 'first append data'
assert h.pread(4096, $((2 * M + 8192))) == b, 'second append data'
" || die "appended data differs from the files"
[ "$(wp_of 2)" = $((2 * M + 12288)) ] || die "zone 2 wp $(wp_of 2) after appends"
[ "$(cond_of 2)" = IMP_OPEN ] || die "zone 2 $(cond_of 2) after appends"
pass "append from a file and from stdin: offsets $((2 * M)), $((2 * M + 8192)); data read back"

# Refusals: exit 1, nothing changed.
head -c $((768 * K - 12288 + 4096)) /dev/zero >"$tmpdir/big"
expect_status 1 nbdzone append --control "$ctl" --offset 2M --file "$tmpdir/big" "$uri"
case "$out" in *"zone 2"*"does not fit"*) ;; *) die "append beyond capacity: '$out'" ;; esac
[ "$(wp_of 2)" = $((2 * M + 12288)) ] || die "refused append moved the wp: $(wp_of 2)"
[ "$(cond_of 2)" = IMP_OPEN ] || die "refused append changed the condition: $(cond_of 2)"
expect_status 1 nbdzone append --control "$ctl" --offset 0 --file "$tmpdir/a" "$uri"
case "$out" in *"zone 0"*conventional*) ;; *) die "append to a conventional zone: '$out'" ;; esac
head -c 100 /dev/zero >"$tmpdir/odd"
expect_status 1 nbdzone append --control "$ctl" --offset 2M --file "$tmpdir/odd" "$uri"
case "$out" in *EINVAL*"block size"*) ;; *) die "unaligned append: '$out'" ;; esac
ctl "readonly 5" >/dev/null
expect_status 1 nbdzone append --control "$ctl" --offset 5M --file "$tmpdir/a" "$uri"
case "$out" in *"zone 5"*READONLY*) ;; *) die "append to READONLY: '$out'" ;; esac
[ "$(cond_of 5)" = READONLY ] || die "zone 5 $(cond_of 5) after a refused append"
pass "beyond capacity, conventional, unaligned and READONLY appends exit 1, nothing changed"

# Eight processes append 96 KiB each (8 x 96 KiB = the 768 KiB capacity)
# to zone 3 at the same time.
n=8 chunk=$((96 * K))
for ((i = 0; i < n; i++)); do
  /usr/bin/python3 -c "import sys; sys.stdout.buffer.write(bytes([$i + 1]) * $chunk)" >"$tmpdir/c$i"
done
pids=()
for ((i = 0; i < n; i++)); do
  nbdzone append --control "$ctl" --offset 3M --file "$tmpdir/c$i" "$uri" \
    >"$tmpdir/off$i" 2>"$tmpdir/err$i" &
  pids+=($!)
done
for ((i = 0; i < n; i++)); do
  wait "${pids[$i]}" || die "concurrent append $i failed: $(cat "$tmpdir/err$i")"
done
offs=$(cat "$tmpdir"/off* | sort -n | tr '\n' ' ')
want=
for ((i = 0; i < n; i++)); do want+="$((3 * M + i * chunk)) "; done
[ "$offs" = "$want" ] || die "concurrent appends at '$offs', expected '$want'"
[ "$(cond_of 3)" = FULL ] || die "zone 3 $(cond_of 3) after $n appends filling it"
checks=
for ((i = 0; i < n; i++)); do
  checks+="assert h.pread($chunk, $(cat "$tmpdir/off$i")) == bytes([$i + 1]) * $chunk, 'append $i';"
done
nbdsh -u "$uri" -c "$checks" || die "concurrent appends' data is not at their offsets"
pass "$n concurrent appends to one zone: distinct offsets tiling it, FULL, each one's data at its offset"
stop_frontend
