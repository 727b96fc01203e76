#!/usr/bin/env bash
# A short bounded libFuzzer run over the intent record file reader
# (lib/fuzz_redo.c, seeds in lib/fuzz-redo-seeds): 20000 znbd.redo files,
# ASan+UBSan, the parser's result and the records it passes on checked
# against the harness's own decoding (invalid records ignored, valid ones
# all passed on, in order).  Any crash, leak, sanitizer report or
# disagreement fails.  Skips only when clang has no libFuzzer.  `make -C
# lib fuzz-redo` runs it for longer.
. "$(dirname "$0")/../functions.sh"
fuzz_run lib fuzz_redo 20000 4096 "$top_srcdir/lib/fuzz-redo-seeds"
note "$(grep -E '^#[0-9]+.*DONE' "$tmpdir/fuzz.log" | tail -1)"
pass "20000 fuzzed intent record files, no crash, sanitizer report or wrong record"
