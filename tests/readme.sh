#!/usr/bin/env bash
# The README's shell examples, run in order against a fresh default disk
# of scripts/serve.sh, each command checked for its exit status and the
# output the README shows (tests/readme.py says how).
. "$(dirname "$0")/functions.sh"
require nbdsh nbdinfo qemu-io qemu-img fio
require_python_nbd
[ -x "$top_builddir/server/znbd" ] || skip "server/znbd is not built"
[ -e "$top_builddir/znbd-fio.so" ] || skip "znbd-fio.so is not built (no fio source)"
/usr/bin/python3 "$top_srcdir/tests/readme.py" "$top_srcdir/README.md" \
  "$top_srcdir" "$top_builddir" "$tmpdir"
