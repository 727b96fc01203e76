#!/usr/bin/env bash
# The tree stands alone: no file may point outside it.  Fails on
#   - a path into the team's notes directory next to the tree,
#   - an absolute path of one machine (under /wor[k], /hom[e], /roo[t]),
#   - a tracker number ("issue" and a number), which means nothing to a
#     reader without that tracker,
#   - a zone rule cited by number ("rule" or "rules" and a number): rules
#     have names (doc/zone-rules.md).
# It greps the files git tracks, new ones once added (bench/results/
# included: reports must not name a machine's paths either; generated
# files of an in-tree build are not looked at), so it needs a git
# checkout; from a release tarball it skips (exit 77).  Patterns are written so this file
# does not match them itself.
set -u
top=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
if ! command -v git >/dev/null || ! git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIP: $top is not a git checkout"
  exit 77
fi
pattern='\.\./shared|/(wor[k]|hom[e]|roo[t])/|[Ii]ssue #?[0-9]+|[Rr]ules? [0-9]'
# .ci/run alone may name the peer suites beside the clone.
hits=$(git -C "$top" grep -nIE "$pattern" -- . ':!.ci/run')
if [ -n "$hits" ]; then
  echo "FAIL: references that point outside the tree (cite doc/, man/ or a"
  echo "public source instead; zone rules by name from doc/zone-rules.md):"
  echo "$hits"
  exit 1
fi
echo "PASS: $(git -C "$top" ls-files | wc -l) tracked files, no reference outside the tree"
