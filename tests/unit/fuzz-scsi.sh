#!/usr/bin/env bash
# A short bounded libFuzzer run over znbd-tcmu's SCSI/ZBC layer
# (tcmu/fuzz.c, seeds in tcmu/fuzz-seeds: sd's probe, zone management and
# I/O): 8000 inputs, ASan+UBSan, with the harness's invariants checked
# after every command (sense format, data-in within the buffers, REPORT
# ZONES equal to the zone table, the zone rules).  Any crash, sanitizer
# report or broken invariant fails.  Skips only when clang has no
# libFuzzer.  `make fuzz-scsi` runs it for longer.
. "$(dirname "$0")/../functions.sh"
fuzz_run tcmu fuzz-scsi 8000 4096 "$top_srcdir/tcmu/fuzz-seeds"
pass "8000 fuzzed command sequences, no crash, sanitizer report or broken invariant"
