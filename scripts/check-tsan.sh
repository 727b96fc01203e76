#!/bin/sh
# make check-tsan: a ThreadSanitizer build (clang -fsanitize=thread) of
# the library, the server and the unit tests in ${TSAN_BUILD:-build-tsan}/,
# then the unit tests and a short fio run against znbd --queue-mode=mq
# whose hardware queue's tags are shared by two workers
# (tests/server/tags.sh fails on any race report in the server log).
# store_test is left out: its RSS bounds do not hold with TSan's shadow
# memory; its concurrency check runs in the normal build.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=${TSAN_BUILD:-$top/build-tsan}
if [ ! -x "$top/configure" ]; then
  "$top/autogen.sh"
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
  "$top/configure" -q CC=clang CFLAGS="-g -O1 -fsanitize=thread" \
    LDFLAGS="-fsanitize=thread"
fi
make -s -j"$(nproc)" -C lib
make -s -j"$(nproc)" -C server
units=$(make -s -C tests/unit -pn 2>/dev/null |
  sed -n 's/^check_PROGRAMS = //p' | sed 's/\$(EXEEXT)//g' | tr ' ' '\n' |
  grep -v -e '^store_test$' -e '^$' | tr '\n' ' ')
TSAN_OPTIONS="halt_on_error=1${TSAN_OPTIONS:+ $TSAN_OPTIONS}" \
  make -s -C tests/unit check TESTS="$units"
ZNBD_SERVER=$build/server/znbd top_builddir=$build \
  bash "$top/tests/server/tags.sh"
