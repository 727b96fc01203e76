#!/usr/bin/env bash
# A short bounded libFuzzer run over the NBD handshake and request parser
# (server/fuzz.c, seeds in server/fuzz-seeds): 20000 inputs, ASan+UBSan.
# Any crash, leak or sanitizer report fails.  Skips only when clang has no
# libFuzzer.  `make -C server fuzz` runs it for longer.
. "$(dirname "$0")/../functions.sh"
fuzz_run server fuzz-nbd 20000 65536 "$top_srcdir/server/fuzz-seeds"
pass "20000 fuzzed inputs, no crash or sanitizer report"
