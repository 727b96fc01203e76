#!/bin/sh
# Install everything znbd needs to build, serve, test and benchmark, on
# Debian 12 as root.  Idempotent.  ZNBD_DEPS=build installs only what the
# build needs; ZNBD_DEPS=serve adds the clients the README uses with the
# served disk (nbdsh, qemu-img, fio).
set -e
export DEBIAN_FRONTEND=noninteractive
build="autoconf automake libtool make gcc pkg-config perl
  nbdkit nbdkit-plugin-dev libnbd-dev libnbd-bin liburing-dev"
test="python3 python3-libnbd fio qemu-utils nbd-client util-linux
  clang libclang-rt-dev clang-format e2fsprogs gnuplot-nox procps
  qemu-system-x86 linux-image-amd64 busybox-static libguestfs-tools
  kmod cpio xz-utils binutils"
clients="python3 python3-libnbd qemu-utils fio"
case ${ZNBD_DEPS:-all} in
build) pkgs="$build" ;;
serve) pkgs="$build $clients" ;;
*) pkgs="$build $clients $test" ;;
esac
missing=
for p in $pkgs; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' ||
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: need root to install:$missing" >&2
  exit 1
fi
apt-get update -q
apt-get install -y -q --no-install-recommends $missing
