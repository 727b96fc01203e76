#!/bin/sh
# make check-tsan: a ThreadSanitizer build (clang -fsanitize=thread) of
# the library, the server and the unit tests in ${TSAN_BUILD:-build-tsan}/
# (scripts/build-tsan.sh), then the unit tests and a short fio run against znbd --queue-mode=mq
# whose hardware queue's tags are shared by two workers
# (tests/server/tags.sh fails on any race report in the server log),
# then znbd bio with two workers serving overlapping reads and writes
# from two connections: no report may remain once scripts/tsan.supp
# has taken out the page bytes' race (that file says why it is benign),
# then znbd mq serving I/O while the control socket takes zone
# operations, reports and stats.  The unit tests cover parked writes
# (zone_dev_test: writes waiting for the wp, woken by the sweeper) and
# the control socket's own threads (control_test).  znbd-ublk's queue
# threads (ublk/queue.c) need the kernel's ublk driver, so they run only
# in a guest (tests/vm/ublk.test, part tsan, on this build's znbd-ublk);
# ublk_test runs its request handler, which has no thread.
# store_test is left out: its RSS bounds do not hold with TSan's shadow
# memory; its concurrency check runs in the normal build.  So are the
# unit tests that run one thread, which TSan has nothing to check in:
# zone_model_test (random operations, two minutes under TSan), and
# scsi_test, ring_test, ublk_test and refusal_test (the front-ends'
# request layers on buffers), which are not built (check_PROGRAMS), so
# neither are their front-ends' libraries.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
build=${TSAN_BUILD:-$top/build-tsan}
TSAN_BUILD=$build "$top/scripts/build-tsan.sh"
cd "$build"
# check_PROGRAMS as make expands it (conditional parts included).
# shellcheck disable=SC2016
units=$(printf 'tsan-units:\n\t@echo $(check_PROGRAMS)\n' |
  make -s -C tests/unit -f Makefile -f - tsan-units | tr ' ' '\n' |
  grep -v -e '^store_test$' -e '^zone_model_test$' -e '^scsi_test$' \
    -e '^ring_test$' -e '^ublk_test$' -e '^refusal_test$' -e '^$' | tr '\n' ' ')
export TSAN_OPTIONS="suppressions=$top/scripts/tsan.supp${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
TSAN_OPTIONS="halt_on_error=1 $TSAN_OPTIONS" \
  make -s -C tests/unit check TESTS="$units" check_PROGRAMS="$units"
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
echo "check-tsan: overlapping reads and writes on two workers: no race report"

# The control socket while I/O runs: znbd mq, two workers, 16 zones of
# 1 MiB, the first 8 conventional under fio's random reads and writes,
# while a client sends zone operations, reports and stats (each its own
# connection, lib/control_server.c) on the others until fio has ended.
"$build/server/znbd" -f -U "$tmp/sock2" -P "$tmp/pid2" --queue-mode=mq -t 2 \
  size=16M zone_size=1M zone_nr_conv=8 zone_control="$tmp/ctl" \
  >"$tmp/log2" 2>&1 &
srv=$!
i=0
until [ -S "$tmp/sock2" ] && [ -S "$tmp/ctl" ] && [ -s "$tmp/pid2" ]; do
  i=$((i + 1))
  [ "$i" -lt 300 ] || { cat "$tmp/log2"; echo "check-tsan: znbd did not start" >&2; exit 1; }
  sleep 0.1
done
timeout 120 fio --name=ctl-io --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/sock2" \
  --rw=randrw --bs=4k --iodepth=16 --numjobs=2 --size=8M --time_based \
  --runtime=3 >"$tmp/fio2.log" 2>&1 &
fio=$!
rc=0
n=$(PYTHONPATH=$top/tests python3 "$top/tests/control_while.py" "$tmp/ctl" "$fio" \
  "open 9" "report 8 4" "close 9" stats "finish 10" "reset 10" "open 11" \
  "finish 11" report "reset all") || rc=$?
fio_rc=0
wait "$fio" || fio_rc=$?
kill "$srv" 2>/dev/null || :
wait "$srv" || :
if [ "$rc" != 0 ] || [ "$fio_rc" != 0 ] || [ "${n:-0}" -lt 10 ] ||
  grep -q ThreadSanitizer "$tmp/log2"; then
  cat "$tmp/fio2.log" "$tmp/log2" >&2
  echo "check-tsan: control socket under I/O: client status $rc, fio status $fio_rc," \
    "${n:-0} requests, or a race report above" >&2
  exit 1
fi
rm -rf "$tmp"
echo "check-tsan: $n control requests while fio ran on two mq workers: no race report"
