#!/bin/sh
# The core stands on libc alone: configure in ${MIN_BUILD:-build-min}/
# with no pkg-config module and no TCMU header found, so that only lib/,
# the SCSI layer (tcmu/scsi.c), znbd-ublk's request handler (ublk/io.c)
# and the unit tests are built; every unit test program is built and
# scsi_test and ublk_test run (the plain build runs them all; this proves
# what they need, in as little CI time as it can).  Fails if the build
# fails, either test fails, or configure would build a component whose
# dependency was hidden.
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
grep -A8 'components:' configure.out
# Every front-end must be left out, as the components table says.
for c in 'plugin/' 'server/' 'NBD over TLS' 'client/' 'tcmu/' 'ublk/'; do
  grep -A8 'components:' configure.out | grep -F "$c" | grep -q ' no (' || {
    echo "check-minimal: $c would be built without its dependency" >&2
    exit 1
  }
done
make -s -j"$(nproc)" -C lib
make -s -j"$(nproc)" -C tcmu
make -s -j"$(nproc)" -C ublk
# `make check` builds every program of check_PROGRAMS before it runs TESTS.
make -s -j"$(nproc)" -C tests/unit check TESTS="scsi_test ublk_test"
grep -q '^:test-result: PASS' tests/unit/scsi_test.trs
grep -q '^:test-result: PASS' tests/unit/ublk_test.trs
echo "check-minimal: lib/ and every unit test built on libc alone; scsi_test and ublk_test passed"
