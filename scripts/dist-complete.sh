#!/bin/sh
# make dist's hook: the tarball holds every file git tracks, so that what
# builds and passes its tests in a clone does so from the tarball too.
# Left out on purpose: git's own .gitignore, and bench/results/ (reports
# and pictures of past benchmark runs, 3 MB that nothing builds or runs).
# From a tree that is not a git checkout (a tarball's) there is nothing
# to compare: it says so and succeeds.
#   dist-complete.sh SRCDIR DISTDIR
set -eu
src=$1 dist=$2
if ! command -v git > /dev/null || ! git -C "$src" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  echo "dist-complete: $src is not a git checkout: not compared"
  exit 0
fi
missing=$(git -C "$src" ls-files | grep -v -e '^\.gitignore$' -e '^bench/results/' |
  while IFS= read -r f; do [ -e "$dist/$f" ] || echo "$f"; done)
if [ -n "$missing" ]; then
  echo "dist-complete: tracked files not in the tarball (add them to a Makefile.am's" >&2
  echo "EXTRA_DIST, or to the exceptions in scripts/dist-complete.sh):" >&2
  echo "$missing" | sed 's/^/  /' >&2
  exit 1
fi
echo "dist-complete: every tracked file is in $dist (but .gitignore and bench/results/)"
