#!/usr/bin/env bash
# A short bounded libFuzzer run over the NBD handshake and request parser
# (server/fuzz.c, seeds in server/fuzz-seeds): 20000 inputs, ASan+UBSan.
# Any crash, leak or sanitizer report fails.  Skips only when clang has no
# libFuzzer.  `make -C server fuzz` runs it for longer.
. "$(dirname "$0")/../functions.sh"
require clang
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}\n' \
  >"$tmpdir/t.c"
clang -fsanitize=fuzzer "$tmpdir/t.c" -o "$tmpdir/t" 2>/dev/null ||
  skip "clang lacks libFuzzer (-fsanitize=fuzzer); install libclang-rt-dev"
make -s -C "$top_builddir/server" fuzz-nbd >"$tmpdir/build.log" 2>&1 ||
  { cat "$tmpdir/build.log"; die "building fuzz-nbd failed"; }
mkdir "$tmpdir/corpus"
cd "$tmpdir"
"$top_builddir/server/fuzz-nbd" -runs=20000 -max_len=65536 -seed=1 \
  "$tmpdir/corpus" "$top_srcdir/server/fuzz-seeds" >"$tmpdir/fuzz.log" 2>&1 ||
  { tail -40 "$tmpdir/fuzz.log"; die "fuzzer found a crash"; }
grep -E '^Done [0-9]+ runs' "$tmpdir/fuzz.log" || die "fuzzer did not finish"
note "$(grep -c . "$tmpdir/fuzz.log") log lines, $(ls "$tmpdir/corpus" | wc -l) new corpus units"
pass "20000 fuzzed inputs, no crash or sanitizer report"
