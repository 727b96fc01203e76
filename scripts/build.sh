#!/bin/sh
# Configure and build znbd out of tree in ${BUILD:-build}/ (extra
# arguments go to configure).  Reconfigures only when needed.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
[ -x "$top/configure" ] || "$top/autogen.sh"
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
  "$top/configure" -q "$@"
fi
make -s -j"$(nproc)"
