#!/bin/sh
# The core stands on libc alone: configure in ${MIN_BUILD:-build-min}/
# with no pkg-config module and no TCMU header found, so that only lib/,
# the SCSI layer (tcmu/scsi.c) and the unit tests are built, then run the
# unit test programs (scsi_test included; the libFuzzer runs are the
# plain build's).  Fails if the build fails, a unit test fails, or a
# component whose dependency was hidden got built anyway.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${MIN_BUILD:-$top/build-min}
if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ]; then
  "$top/autogen.sh"
fi
mkdir -p "$build"
cd "$build"
# PKG_CONFIG_LIBDIR to an empty directory: nbdkit, libnbd, liburing and
# GnuTLS are not found; the cache variable hides <linux/target_core_user.h>.
mkdir -p empty-pkgconfig
PKG_CONFIG_LIBDIR=$build/empty-pkgconfig \
  "$top/configure" ac_cv_header_linux_target_core_user_h=no \
  >configure.out 2>&1 || { cat configure.out; exit 1; }
grep -A7 'components:' configure.out || true
make -s -j"$(nproc)"
for absent in zoned.so server/znbd client/nbdzone tcmu/znbd-tcmu; do
  if [ -e "$absent" ]; then
    echo "check-minimal: $absent was built without its dependency" >&2
    exit 1
  fi
done
make -s -C tests/unit check TESTS='$(check_PROGRAMS)'
grep -q '^:test-result: PASS' tests/unit/scsi_test.trs
echo "check-minimal: lib/, scsi_test and the unit tests built and passed on libc alone"
