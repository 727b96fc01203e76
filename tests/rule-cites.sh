#!/usr/bin/env bash
# Every zone rule of doc/zone-rules.md (a line starting with `name`) is
# cited by at least one test: a file of tests/ names it in backticks, as
# the doc asks code and tests to cite rules (rule `open-check`), or a row
# of tests/unit/zone_table_test.c opens with it ({"open-check: ...", a
# row name that test checks against the doc).  A bare word is not a
# citation: "counters" or "power-cut" also name other things.  Fails
# naming each rule no test cites.  This file and the READMEs of tests/
# (tables, not tests) are not looked at.
set -u
top=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
doc=$top/doc/zone-rules.md
rules=$(sed -n 's/^`\([a-z0-9-]*\)`.*/\1/p' "$doc")
if [ -z "$rules" ]; then
  echo "FAIL: no rule found in $doc"
  exit 1
fi
files=$(find "$top/tests" -type f \( -name '*.c' -o -name '*.h' -o -name '*.sh' \
  -o -name '*.py' -o -name '*.test' \) ! -name rule-cites.sh ! -name tree-refs.sh |
  sort)
missing=
n=0
for r in $rules; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  if ! grep -qF -e "\`$r\`" $files &&
    ! grep -qF -e "{\"$r:" "$top/tests/unit/zone_table_test.c"; then
    missing="$missing $r"
  fi
done
if [ -n "$missing" ]; then
  echo "FAIL: zone rules of doc/zone-rules.md that no test cites (cite one"
  echo "as \`name\` in the test that checks it):"
  for r in $missing; do echo "  $r"; done
  exit 1
fi
echo "PASS: all $n zone rules of doc/zone-rules.md are cited by a test"
