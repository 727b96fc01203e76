#!/usr/bin/env bash
# A short bounded libFuzzer run over the zone control language
# (lib/fuzz_control.c, seeds in lib/fuzz-control-seeds): 20000 inputs,
# ASan+UBSan, the device's zone invariants and the replies checked after
# every request.  Any crash, leak, sanitizer report or broken invariant
# fails.  Skips only when clang has no libFuzzer.  `make -C lib
# fuzz-control` runs it for longer.
. "$(dirname "$0")/../functions.sh"
fuzz_run lib fuzz_control 20000 8192 "$top_srcdir/lib/fuzz-control-seeds"
note "$(grep -E '^#[0-9]+.*DONE' "$tmpdir/fuzz.log" | tail -1)"
pass "20000 fuzzed inputs of control requests, no crash, sanitizer report or broken invariant"
