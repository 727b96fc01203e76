#!/usr/bin/env bash
# The README's examples (tests/readme.py, as make check runs them) against
# the programs the Debian packages install, not the build tree's: a
# directory standing for build/ holds only links to the installed files
# (server/znbd to /usr/sbin/znbd, client/nbdzone to /usr/bin/nbdzone,
# zoned.so to nbdkit's plugin directory, znbd-fio.so, tcmu/znbd-tcmu,
# ublk/znbd-ublk), and both the examples ("build/server/znbd ...") and
# scripts/serve.sh's default disk run through it.
#   readme-installed.sh ROOT
# ROOT: where the packages are installed, / after dpkg -i (a root made
# with dpkg -x of every package works too: the same files).
# scripts/test-all.sh runs it with the packages installed by dpkg -i
# into a throwaway overlay of the CI machine's root:
#   scripts/debs-installed.sh build/debs tests/readme-installed.sh /
# Exit status 0 when every README block passes; 77 (skip) without ROOT's
# files or the README's clients.
set -euo pipefail
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
root=${1:?usage: readme-installed.sh ROOT}
root=${root%/}
top=$(cd "$(dirname "$0")/.." && pwd)
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2> /dev/null || gcc -print-multiarch)
for t in nbdsh nbdinfo qemu-io qemu-img fio nbdkit; do
  command -v "$t" > /dev/null || { echo "SKIP: no $t"; exit 77; }
done
shim=$(mktemp -d /tmp/znbd-installed.XXXXXX)
trap 'rm -rf "$shim"' EXIT
link() { # INSTALLED-PATH SHIM-PATH
  [ -e "$root$1" ] || { echo "FAIL: $root$1 is not installed"; exit 1; }
  mkdir -p "$(dirname "$shim/$2")"
  ln -s "$root$1" "$shim/$2"
}
link /usr/sbin/znbd server/znbd
link /usr/bin/nbdzone client/nbdzone
link "/usr/lib/$arch/nbdkit/plugins/nbdkit-zoned-plugin.so" zoned.so
link "/usr/lib/$arch/znbd/znbd-fio.so" znbd-fio.so
link /usr/sbin/znbd-tcmu tcmu/znbd-tcmu
link /usr/sbin/znbd-ublk ublk/znbd-ublk
echo "readme-installed: build/ is $shim: $(cd "$shim" && find . -type l -printf '%p -> %l  ')"
/usr/bin/python3 -c 'import nbd' 2> /dev/null || { echo "SKIP: no python3 nbd module"; exit 77; }
tmp=$(mktemp -d /tmp/znbd-readme.XXXXXX)
trap 'rm -rf "$shim" "$tmp"' EXIT
/usr/bin/python3 "$top/tests/readme.py" "$top/README.md" "$top" "$shim" "$tmp"
