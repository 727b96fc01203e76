#!/bin/sh
# Install the Debian packages in DEBS (every *.deb but the debug symbols)
# with dpkg -i on this machine, as root, without changing it: in a
# private mount namespace, into an overlay whose lower layer is the
# machine's root and whose writes go to a tmpfs, all gone when CMD
# ends.  Then CMD runs chrooted there (with the packages installed, the
# machine's other packages as their dependencies, a fresh /tmp and
# /run, and this source tree at its own path), as on a machine where
# they are installed.
#   debs-installed.sh DEBS CMD [ARG...]
# scripts/test-all.sh runs tests/readme-installed.sh so (the README's
# examples on the installed programs).  Needs root, unshare(1) and
# overlayfs; exit status CMD's, or 1 if the install failed.
set -eu
[ $# -ge 2 ] || { echo "usage: debs-installed.sh DEBS CMD [ARG...]" >&2; exit 2; }
debs=$(cd "$1" && pwd)
shift
top=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${ZNBD_IN_NAMESPACE:-}" ]; then
  # The mount point outlives the namespace, empty: removed after.
  t=$(mktemp -d /tmp/znbd-debs-root.XXXXXX)
  rc=0
  ZNBD_IN_NAMESPACE=$t unshare -m --propagation private "$0" "$debs" "$@" || rc=$?
  rmdir "$t"
  exit "$rc"
fi
t=$ZNBD_IN_NAMESPACE
mount -t tmpfs -o mode=0755 tmpfs "$t"
mkdir "$t/upper" "$t/work" "$t/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$t/upper,workdir=$t/work" "$t/root"
r=$t/root
mount --rbind /proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
mount -t tmpfs -o mode=0755 tmpfs "$r/run"
# The tree and the packages where they are (a clone may be under /tmp).
for d in "$top" "$debs"; do
  mkdir -p "$r$d"
  mount --bind "$d" "$r$d"
done
# dpkg -i of every package but the debug symbols.
inst='for f in "$1"/*.deb; do case $f in *-dbgsym_*) ;; *) set -- "$@" "$f" ;; esac; done
shift; [ $# -gt 0 ] || { echo "no package in DEBS"; exit 1; }
echo "debs-installed: dpkg -i $* (into an overlay of /, private to this run)"
exec dpkg --force-unsafe-io -i "$@"'
if ! chroot "$r" /bin/sh -c "$inst" sh "$debs" > "$t/dpkg.log" 2>&1; then
  cat "$t/dpkg.log"
  echo "debs-installed: dpkg -i failed" >&2
  exit 1
fi
grep -e '^debs-installed' -e '^Setting up' "$t/dpkg.log"
# CMD from the top of the tree, without this script's variable.
exec chroot "$r" /usr/bin/env -u ZNBD_IN_NAMESPACE /bin/sh -c 'cd "$1" && shift && exec "$@"' \
  sh "$top" "$@"
