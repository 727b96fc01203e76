#!/bin/sh
# The ThreadSanitizer build (clang -fsanitize=thread) in
# ${TSAN_BUILD:-build-tsan}/: the library, znbd (server/) and, when
# configure found liburing, znbd-ublk (ublk/).  scripts/check-tsan.sh
# runs the host's threaded tests on it; znbd-ublk's queue threads need
# the kernel's ublk driver, so tests/vm/ublk.test's part tsan runs this
# build's znbd-ublk in a guest (ZNBD_UBLK_TSAN).  scripts/test-all.sh
# makes it before the packages, whose end the guest lane's ublk.test
# waits for, so the guest finds it built.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=${TSAN_BUILD:-$top/build-tsan}
if [ ! -x "$top/configure" ]; then
  "$top/autogen.sh"
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ -n "$(find "$top/configure" -newer Makefile)" ]; then
  "$top/configure" -q CC=clang CFLAGS="-g -O1 -fsanitize=thread" \
    LDFLAGS="-fsanitize=thread"
fi
make -s -j"$(nproc)" -C lib
make -s -j"$(nproc)" -C server
make -s -j"$(nproc)" -C ublk
