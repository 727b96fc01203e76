#!/usr/bin/env bash
# A short bounded libFuzzer run over the NBD handshake and request parser
# (server/fuzz.c, seeds in server/fuzz-seeds): 20000 inputs, ASan+UBSan.
# Any crash, leak or sanitizer report fails.  Skips only when clang has no
# libFuzzer.  `make -C server fuzz` runs it for longer.
. "$(dirname "$0")/../functions.sh"
run_libfuzzer server fuzz-nbd server/fuzz-seeds 65536
note "$(grep -c . "$tmpdir/fuzz.log") log lines, $(ls "$tmpdir/corpus" | wc -l) new corpus units"
pass "20000 fuzzed inputs, no crash or sanitizer report"
