#!/bin/bash
# build-in-root.sh [ROOT]: build znbd for a guest root made by
# scripts/build-root.sh (default debian13), in a chroot of it
# (scripts/in-root.sh), so that its programs and nbdkit plugin are linked
# against that root's libraries (nbdkit 1.42, libnbd 1.22, liburing 2.9)
# and run in a guest booted on it (tests/vm/vm-run --root).
#
#   BUILD   the build tree (default build/ROOT at the top of the source
#           tree, beside the machine's own build); the guest sees it at
#           the same path
#
# Every component is required, as in scripts/build.sh, except the fio
# engine (it needs the root's fio source; the guest tests use fio itself).
# configure and the Makefile.in files are made here, outside the chroot,
# when missing or older than what they are made from (the root's
# automake is another version, which the generated files do not name),
# so both builds share them.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-debian13}
build=${BUILD:-$top/build/$root}
stale=
[ -x "$top/configure" ] && [ ! "$top/configure.ac" -nt "$top/configure" ] || stale=configure
while read -r am; do
  [ "$am" -nt "${am%.am}.in" ] && stale=$am
done < <(cd "$top" && git ls-files '*Makefile.am' 2> /dev/null | sed "s|^|$top/|")
[ -z "$stale" ] || "$top/autogen.sh"
mkdir -p "$build"
build=$(cd "$build" && pwd)
binds="--bind $top"
case $build/ in
  "$top"/*) ;;
  *) binds="$binds --bind $build" ;;
esac
# shellcheck disable=SC2086
exec "$top/scripts/in-root.sh" $binds "$root" sh -c '
  set -e
  cd "$1"
  if [ ! -f Makefile ] || [ "$2/configure" -nt Makefile ]; then
    "$2/configure" -q --enable-all-components --with-fio-source=no
  fi
  make -s -j"$(nproc)"' build-in-root "$build" "$top"
