#!/bin/sh
# make check-tsan: a ThreadSanitizer build (clang -fsanitize=thread) of
# the library, the server and the unit tests in ${TSAN_BUILD:-build-tsan}/,
# then the unit tests and a short fio run against znbd --queue-mode=mq
# whose hardware queue's tags are shared by two workers
# (tests/server/tags.sh fails on any race report in the server log),
# then znbd bio with two workers serving overlapping reads and writes
# from two connections: no report may remain once scripts/tsan.supp
# has taken out the page bytes' race (that file says why it is benign).
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
export TSAN_OPTIONS="suppressions=$top/scripts/tsan.supp${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
TSAN_OPTIONS="halt_on_error=1 $TSAN_OPTIONS" \
  make -s -C tests/unit check TESTS="$units"
ZNBD_SERVER=$build/server/znbd top_builddir=$build \
  bash "$top/tests/server/tags.sh"

# Overlapping requests on two workers: 2 fio jobs x 16 in flight, random
# 4 KiB reads and writes over the same 256 KiB for 3 s.
tmp=$(mktemp -d /tmp/znbd-tsan.XXXXXX)
"$build/server/znbd" -f -U "$tmp/sock" -P "$tmp/pid" --queue-mode=bio -t 2 \
  size=16M zoned=false >"$tmp/log" 2>&1 &
srv=$!
i=0
until [ -S "$tmp/sock" ] && [ -s "$tmp/pid" ]; do
  i=$((i + 1))
  [ "$i" -lt 300 ] || { cat "$tmp/log"; echo "check-tsan: znbd did not start" >&2; exit 1; }
  sleep 0.1
done
rc=0
timeout 120 fio --name=overlap --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/sock" \
  --rw=randrw --bs=4k --iodepth=16 --numjobs=2 --size=256k --time_based \
  --runtime=3 >"$tmp/fio.log" 2>&1 || rc=$?
kill "$srv" 2>/dev/null || :
wait "$srv" || :
if [ "$rc" != 0 ] || grep -q ThreadSanitizer "$tmp/log"; then
  cat "$tmp/fio.log" "$tmp/log" >&2
  echo "check-tsan: overlapping requests: fio status $rc, or a race report above" >&2
  exit 1
fi
rm -rf "$tmp"
echo "check-tsan: overlapping reads and writes on two workers: no race report"
