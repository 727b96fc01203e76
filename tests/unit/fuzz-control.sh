#!/usr/bin/env bash
# A short bounded libFuzzer run over the zone control language
# (lib/fuzz_control.c, seeds in lib/fuzz-control-seeds): 20000 inputs,
# ASan+UBSan, the device's zone invariants and the replies checked after
# every request.  Any crash, leak, sanitizer report or broken invariant
# fails.  Skips only when clang has no libFuzzer.  `make -C lib
# fuzz-control` runs it for longer.
. "$(dirname "$0")/../functions.sh"
run_libfuzzer lib fuzz_control lib/fuzz-control-seeds 8192
note "$(grep -E '^#[0-9]+.*DONE' "$tmpdir/fuzz.log" | tail -1)"
note "$(ls "$tmpdir/corpus" | wc -l) new corpus units"
pass "20000 fuzzed inputs of control requests, no crash, sanitizer report or broken invariant"
