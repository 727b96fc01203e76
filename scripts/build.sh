#!/bin/sh
# Configure and build znbd out of tree in ${BUILD:-build}/ (extra
# arguments go to configure).  Reconfigures only when needed.  Every
# component is required (--enable-all-components): after
# scripts/install-deps.sh a missing one is an error, not a quiet skip.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
# Regenerate when configure.ac changed too: a merge may add auxiliary files
# (e.g. tap-driver.sh) that only autoreconf --install provides.
if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
  "$top/autogen.sh"
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
  "$top/configure" -q --enable-all-components "$@"
fi
make -s -j"$(nproc)"
