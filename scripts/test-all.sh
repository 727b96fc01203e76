#!/bin/bash
# Set up and run every znbd test on a fresh Debian 12 machine as root:
# installs the dependencies, builds (plain and with ASan+UBSan), checks
# the formatting, runs `make check` (unit, NBD integration against every
# front-end, server, client), the sanitizer build's tests, the unit tests
# of a build with no front-end dependency (libc alone), a ThreadSanitizer
# build's threaded tests (scripts/check-tsan.sh) and the kernel
# client tests in a qemu guest (`make check-vm`), the peer suites'
# curated lists and nbdkit 1.42 on a Debian 13 root (`make check-root`),
# and builds and checks
# the Debian packages (scripts/build-debs.sh: lintian; installed with
# dpkg -i in the guest and, in a throwaway overlay, here, where the
# README's examples run on their programs) and the release
# tarball (make distcheck, its make check limited to the unit tests and
# tests/'s own: ZNBD_CHECK_DIRS=unit).  The last line is
# "N passed, N failed[, N skipped]"; the exit status is non-zero if any
# test failed.  ZNBD_SKIP_VM=1 leaves the guest tests out (they are then
# counted as skipped).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# The nbd Python module (nbdsh, tests) is Debian's: put /usr/bin first.
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH

"$top/scripts/install-deps.sh" || { echo "install-deps failed"; echo "0 passed, 1 failed"; exit 1; }

# The steps that count as one test each (build, format, ...): one
# "PASS: NAME" or "FAIL: NAME" line each in $steps, counted at the end,
# so a step run in the background counts as well.
steps=$(mktemp)
vm_log=$(mktemp)
trap 'rm -f "$steps" "$vm_log"' EXIT
step() { # step NAME CMD...
  local name=$1; shift
  if "$@"; then echo "PASS: $name" | tee -a "$steps"
  else echo "FAIL: $name" | tee -a "$steps"; fi
}

step build env BUILD="$top/build" "$top/scripts/build.sh"
step check-format make -s -C "$top/build" check-format
# Two lanes, one a core: the guest tests (qemu keeps about one core busy)
# run in the background while the host's tests, the sanitizer build's
# and the libc-only build's run here; one after the other they would
# take some 30 minutes longer.  The guest lane has a test-suite log of
# its own name, and its one check program is built first, so the two
# makes never write the same file in tests/vm (make check passes through
# it with no test).  Its output follows the host lane's in this log.
# The guest lane's ublk.test installs the Debian packages the host lane
# builds first (build/debs): it waits for their build to end, which the
# host lane says in build/debs/.status (tests/vm/ublk.test).  Its part
# tsan runs the ThreadSanitizer build's znbd-ublk, which the host lane
# makes before the packages (scripts/build-tsan.sh), so it is there once
# that wait ends.
debs=$top/build/debs
tsan_ublk=$top/build-tsan/ublk/znbd-ublk
rm -f "$debs/.status"
lane_start=$SECONDS
if [ "${ZNBD_SKIP_VM:-0}" = 1 ]; then
  echo "SKIP: check-vm (ZNBD_SKIP_VM=1)" | tee -a "$steps"
  vm_pid=
else
  make -s -C "$top/build/tests/vm" ublk-features
  (
    ZNBD_DEBS_WAIT=$debs/.status ZNBD_UBLK_TSAN=$tsan_ublk \
      make -C "$top/build" -k check-vm TEST_SUITE_LOG=check-vm.log
    echo "lane: the guest tests took $((SECONDS - lane_start)) s"
  ) > "$vm_log" 2>&1 &
  vm_pid=$!
fi
step build-tsan env TSAN_BUILD="$top/build-tsan" "$top/scripts/build-tsan.sh"
if step packages env BUILD="$top/build" DEBS="$debs" "$top/scripts/build-debs.sh"; then
  echo ok > "$debs/.status"
else
  mkdir -p "$debs" && echo failed > "$debs/.status"
fi
make -C "$top/build" -k check
# Sanitizers: the unit tests and the NBD suite, ASan+UBSan.
step build-sanitizers env BUILD="$top/build-san" "$top/scripts/build.sh" --enable-sanitizers
if [ -f "$top/build-san/Makefile" ]; then
  make -C "$top/build-san/tests/unit" -k check
  make -C "$top/build-san/tests/nbd" -k check
fi
# The core on libc alone: lib/ and the unit tests built, scsi_test run, with every
# front-end's dependency hidden (scripts/check-minimal.sh).
step build-minimal env MIN_BUILD="$top/build-min" "$top/scripts/check-minimal.sh"
# ThreadSanitizer on the threaded paths a host runs: the unit tests
# (parked writes, the control socket's threads), znbd mq's shared tags,
# bio's two workers, the control socket under I/O (scripts/check-tsan.sh,
# on the build made above; znbd-ublk's queue threads are the guest's,
# ublk.test part tsan).
step check-tsan env TSAN_BUILD="$top/build-tsan" "$top/scripts/check-tsan.sh"
# The README's examples on the programs the packages install: dpkg -i
# into a throwaway overlay of this machine's root (scripts/debs-installed.sh).
step readme-installed "$top/scripts/debs-installed.sh" "$debs" tests/readme-installed.sh /
# The release tarball builds, installs and passes its tests out of tree;
# its make check runs tests/unit and tests/'s own tests (the full suite
# ran above on the same sources; `make distcheck` alone runs it all).
step distcheck make -s -C "$top/build" distcheck ZNBD_CHECK_DIRS=unit \
  DISTCHECK_CONFIGURE_FLAGS=--enable-all-components
echo "lane: the host tests took $((SECONDS - lane_start)) s"
# The guests on the Debian 13 root (the peer suites' curated lists,
# ZNBD_BLKTESTS and ZNBD_FSTESTS, skipped without them) and nbdkit 1.42,
# here once the host's tests are done, beside the guest lane.
if [ "${ZNBD_SKIP_VM:-0}" != 1 ]; then
  root_start=$SECONDS
  make -C "$top/build" -k check-root TEST_SUITE_LOG=check-root.log
  echo "lane: the Debian 13 root's tests took $((SECONDS - root_start)) s"
fi
if [ -n "$vm_pid" ]; then
  wait "$vm_pid"
  echo "== the guest tests (make check-vm, run beside the host's):"
  cat "$vm_log"
fi
extra_pass=$(grep -c '^PASS: ' "$steps")
extra_fail=$(grep -c '^FAIL: ' "$steps")
extra_skip=$(grep -c '^SKIP: ' "$steps")

# Count every automake test result (.trs) of both builds (not of the
# trees distcheck and the package build make inside build/: their steps
# count once).
trs_files() { find "$top/build" "$top/build-san" \( -path "$top/build/znbd-*" -o \
  -path "$top/build/debs" \) -prune -o -name '*.trs' -print 2>/dev/null; }
count() { cat /dev/null $(trs_files) | grep -c "^:test-result: $1" ; }
pass=$(( $(count PASS) + $(count XFAIL) + extra_pass ))
fail=$(( $(count FAIL) + $(count XPASS) + $(count ERROR) + extra_fail ))
skip=$(( $(count SKIP) + extra_skip ))
# why_failed LOG: its failing lines first (CI's output may keep only the
# head and the tail of a long report), a dead guest's kernel report
# (vm-run's), then its last lines.
why_failed() {
  grep -a -E '^(not ok|Bail out!)' "$1" | head -n 5
  grep -a -m1 -A30 "the kernel's first report" "$1"
  echo "[its last lines:]"
  tail -n 25 "$1"
}
if [ "$fail" -gt 0 ]; then
  echo "failed tests (their logs, each with its last lines, so CI's output alone says why):"
  for log in $(grep -l -E '^:test-result: (FAIL|XPASS|ERROR)' \
    $(trs_files) /dev/null | sed 's/\.trs$/.log/'); do
    echo "== $log"
    why_failed "$log" | sed 's/^/   /'
  done
  [ "$extra_fail" -eq 0 ] || echo "($extra_fail failed steps: build, format or sanitizer build, above)"
fi
xfail=$(count XFAIL)
[ "$xfail" -eq 0 ] || echo "($xfail expected failures (XFAIL, known and explained in their logs) are counted as passed)"
if [ "$skip" -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"
else echo "$pass passed, $fail failed"; fi
[ "$fail" -eq 0 ]
