#!/usr/bin/env bash
# A short bounded libFuzzer run over znbd-ublk's request handler
# (ublk/fuzz.c, seeds in ublk/fuzz-seeds): 20000 inputs of ublk
# descriptors, ASan+UBSan; a copy outside the request's buffer or more
# bytes done than it holds aborts.  Any crash, leak or sanitizer report
# fails.  Skips only when clang has no libFuzzer.  `make -C ublk fuzz`
# runs it for longer.
. "$(dirname "$0")/../functions.sh"
fuzz_run ublk fuzz-ublk 20000 65536 "$top_srcdir/ublk/fuzz-seeds"
pass "20000 fuzzed inputs of ublk descriptors, no crash or sanitizer report"
