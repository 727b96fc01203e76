#!/bin/sh
# Build znbd's Debian packages the way a user would from a release: make
# dist in the build tree (${BUILD:-build}, built first if it is not),
# unpack the tarball, `dpkg-buildpackage -us -uc -b` in it, and lintian
# on the result, which fails on any error (the warnings and notes kept
# are overridden with their reasons in debian/*.lintian-overrides).  The
# packages land in ${DEBS:-$BUILD/debs} (the unpacked source under
# src/); the last lines list them with their sizes.  DEB_BUILD_OPTIONS
# is nocheck unless given (CI runs the tests on its own build).
# Needs dpkg-dev, debhelper and lintian (scripts/install-deps.sh) and, for
# the fio engine, fio's configured source (debian/README.source).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
debs=${DEBS:-$build/debs}
[ -f "$build/Makefile" ] || BUILD=$build "$top/scripts/build.sh"
rm -f "$build"/znbd-*.tar.gz
make -s -C "$build" dist > "$build/dist.log" 2>&1 || { cat "$build/dist.log"; exit 1; }
tarball=$(ls "$build"/znbd-*.tar.gz)
rm -rf "$debs"
mkdir -p "$debs/src"
tar xzf "$tarball" -C "$debs/src"
cd "$debs/src"/znbd-*/
echo "build-debs: dpkg-buildpackage -us -uc -b in $PWD (log: $debs/build.log)"
if ! DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-nocheck} \
  dpkg-buildpackage -us -uc -b -j"$(nproc)" > "$debs/build.log" 2>&1; then
  tail -n 40 "$debs/build.log"
  echo "build-debs: dpkg-buildpackage failed" >&2
  exit 1
fi
mv ../*.deb ../*.changes ../*.buildinfo "$debs/"
cd "$debs"
echo "build-debs: lintian (errors fail the build; overrides with reasons in debian/)"
rc=0
lintian --fail-on error --display-level '>=pedantic' --show-overrides ./*.changes \
  > lintian.log 2>&1 || rc=$?
grep -v 'running with root privileges' lintian.log || true
[ "$rc" = 0 ] || { echo "build-debs: lintian found errors (exit status $rc)" >&2; exit 1; }
echo "build-debs: the packages ($(cd src/znbd-* && dpkg-parsechangelog -SVersion)):"
for f in ./*.deb; do printf '  %8d  %s\n' "$(stat -c %s "$f")" "${f#./}"; done
