# shellcheck shell=bash
# fio's own zoned test suite, t/zbd/test-zbd-support, through znbd-fio.so
# on the front-end $ZNBD_FRONTEND: sourced by fio-suite-GEOM.sh after it
# sets
#   suite_geometry   key=value words for the front-end (the geometry)
#   suite_opts       options for test-zbd-support (e.g. -o 8), may be ()
#   suite_expect     the suite's tests that must pass, by number
#
# The suite is taken unchanged from the fio source the engine is built
# against ($FIO_SOURCE/t/zbd: test-zbd-support and functions, copied at
# run time, compared byte for byte afterwards) and given the export's URI
# as its device.  Three small pieces (tests/client/zbd-suite/, listed
# with their reasons in man znbd-fio, "FIO'S ZONED TEST SUITE") let it
# drive the engine:
#   fio           where the suite looks for fio (../../fio): the engine
#                 and the URI for every job, --sync_io=1 for psync,
#                 verify state in $tmpdir, time-based jobs capped at
#                 $ZBD_RUNTIME seconds (default 2: the make check budget)
#   bin/blkzone   blkzone for t/zbd/functions, answered by nbdzone
#   prelude.bash  BASH_ENV: the geometry the suite reads from sysfs for a
#                 block device, from fio's functions and the export
# The test fails when a test of suite_expect does not pass, or when the
# suite does not run all its tests; a pass outside suite_expect is only
# noted.  Each run has its own server (Unix socket in $tmpdir).
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require_fio_engine
require nbdinfo
if [ -z "${FIO_SOURCE:-}" ] && [ -f "$top_builddir/client/Makefile" ]; then
  FIO_SOURCE=$(sed -n 's/^FIO_SOURCE = //p' "$top_builddir/client/Makefile")
fi
suite_src=${FIO_SOURCE:-}/t/zbd
[ -n "${FIO_SOURCE:-}" ] && [ -f "$suite_src/test-zbd-support" ] &&
  [ -f "$suite_src/functions" ] ||
  skip "fio's t/zbd/test-zbd-support is not in the fio source (FIO_SOURCE=${FIO_SOURCE:-})"

work=$tmpdir/fio
mkdir -p "$work/t/zbd" "$tmpdir/aux"
cp "$suite_src/test-zbd-support" "$suite_src/functions" "$work/t/zbd/"
cp "$srcdir/zbd-suite/fio" "$work/fio"

start_frontend "${suite_geometry[@]}" blocksize=4096 zone_control="$ctl"
wait_ctl
log=$tmpdir/suite.log
rc=0
env PATH="$srcdir/zbd-suite/bin:$PATH" \
  BASH_ENV="$srcdir/zbd-suite/prelude.bash" \
  ZBD_URI="$uri" ZBD_CONTROL="$ctl" ZBD_ENGINE="$fio_engine" \
  ZBD_NBDZONE="$nbdzone_bin" ZBD_AUX="$tmpdir/aux" \
  ZBD_RUNTIME="${ZBD_RUNTIME:-2}" \
  bash "$work/t/zbd/test-zbd-support" "${suite_opts[@]}" "$uri" \
  >"$log" 2>&1 </dev/null || rc=$?
cat "$log"
for f in test-zbd-support functions; do
  cmp -s "$suite_src/$f" "$work/t/zbd/$f" || die "fio's t/zbd/$f changed during the run"
done

# "Running test 05 ... PASS" (colour codes only on a terminal).
declare -A status=()
while read -r n st; do
  status[$((10#$n))]=$st
done < <(sed -n 's/^Running test \([0-9]*\) \.\.\. \(PASS\|FAIL\|SKIP\).*/\1 \2/p' "$log")
total=$(grep -c '^test[0-9]*()' "$work/t/zbd/test-zbd-support")
[ "${#status[@]}" = "$total" ] ||
  die "the suite reported ${#status[@]} of its $total tests (exit status $rc)"
list() {
  local n out=
  for n in $(printf '%s\n' "${!status[@]}" | sort -n); do
    [ "${status[$n]}" = "$1" ] && out+=" $n"
  done
  echo "${out# }"
}
note "passed: $(list PASS)"
note "failed: $(list FAIL)"
note "skipped: $(list SKIP)"
missing=
for n in "${suite_expect[@]}"; do
  [ "${status[$n]:-}" = PASS ] || missing+=" $n"
done
extra=
for n in $(list PASS); do
  [[ " ${suite_expect[*]} " == *" $n "* ]] || extra+=" $n"
done
[ -z "$extra" ] || note "passed beyond the expected list:$extra"
if [ -n "$missing" ]; then
  for n in $missing; do
    echo "--- test $n: $work/t/zbd/test-zbd-support.log.$n (tail) ---" >&2
    tail -n 25 "$work/t/zbd/test-zbd-support.log.$n" >&2 || true
  done
  die "expected to pass but did not:$missing"
fi
stop_frontend
pass "fio's t/zbd/test-zbd-support: ${#suite_expect[@]} expected tests pass ($(list PASS | wc -w) passed, $(list SKIP | wc -w) skipped, $(list FAIL | wc -w) failed)"
