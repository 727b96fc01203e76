#!/bin/sh
# Install everything znbd needs to build, serve, test and benchmark, on
# Debian 12 as root.  Idempotent.  ZNBD_DEPS=build installs only what the
# build needs; ZNBD_DEPS=serve adds the clients the README uses with the
# served disk (nbdsh, qemu-img, fio) and fio's source for the fio engine.
set -e
export DEBIAN_FRONTEND=noninteractive
build="autoconf automake libtool make gcc pkg-config perl
  nbdkit nbdkit-plugin-dev libnbd-dev libnbd-bin liburing-dev
  libgnutls28-dev"
test="python3 python3-libnbd fio qemu-utils nbd-client util-linux
  clang libclang-rt-dev clang-format e2fsprogs gnuplot-nox procps
  qemu-system-x86 linux-image-amd64 busybox-static libguestfs-tools
  kmod cpio xz-utils zstd binutils valgrind strace gnutls-bin
  sg3-utils btrfs-progs f2fs-tools xfsprogs open-iscsi tcmu-runner
  flex bison bc libelf-dev libssl-dev dwarves debootstrap
  debhelper lintian systemd man-db"
clients="python3 python3-libnbd qemu-utils fio dpkg-dev"
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
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: need root to install:$missing" >&2
    exit 1
  fi
  apt-get update -q
  apt-get install -y -q --no-install-recommends $missing
fi

# Today's kernel for the VM tests (tests/vm/ublk.test and
# ZNBD_VM_KERNEL=modern): downloaded and unpacked, never installed.
# Optional: without it those tests skip, so a failure here (say, no
# network) does not fail the install.
case ${ZNBD_DEPS:-all} in
build | serve) ;;
*)
  if "$(dirname "$0")/fetch-kernel.sh"; then
    # Linux's zloop for that kernel, which Debian does not build: the
    # modern guest's zloop checks skip without it.
    "$(dirname "$0")/build-zloop.sh" ||
      echo "install-deps: the zloop checks on today's kernel will skip" >&2
    # mkzonefs (Debian 13's zonefs-tools, unpacked, not installed) for
    # the modern guest's zonefs checks, which skip without it.
    "$(dirname "$0")/fetch-tools.sh" ||
      echo "install-deps: the zonefs checks on today's kernel will skip" >&2
  else
    echo "install-deps: the VM tests on today's kernel will skip" >&2
  fi
  # A Debian 13 userland for the guests that run the peer suites
  # (blktests, fstests) and nbdkit 1.42: made once, never installed.
  "$(dirname "$0")/build-root.sh" ||
    echo "install-deps: the tests on the Debian 13 root will skip" >&2
  ;;
esac

# fio's internal headers (for client/znbd-fio.so, the fio ioengine) come
# only with Debian's source package of the installed fio.  apt needs a
# deb-src entry: derived from the machine's own Debian entries (same
# mirrors, suites and keys), never a host name of ours.  The source lands
# in ZNBD_FIO_SRC (default /usr/local/src/fio), which configure finds by
# itself (--with-fio-source=DIR to use another).
fio_src=${ZNBD_FIO_SRC:-/usr/local/src/fio}
case ${ZNBD_DEPS:-all} in build) exit 0 ;; esac
fio_ver=$(dpkg-query -W -f='${Version}' fio)
if [ -f "$fio_src/ioengines.h" ] && [ -f "$fio_src/config-host.h" ] &&
  [ "$(cat "$fio_src/.znbd-fio-version" 2>/dev/null)" = "$fio_ver" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  # Optional: everything but the fio engine builds without it.
  echo "install-deps: not root: fio's source not fetched into $fio_src;" \
    "the fio engine znbd-fio.so will not be built" >&2
  exit 0
fi
if ! grep -rqsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' \
  /etc/apt/sources.list /etc/apt/sources.list.d/; then
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    sed 's/^Types:.*/Types: deb-src/' "$f" \
      >"/etc/apt/sources.list.d/znbd-deb-src-$(basename "$f")"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" \
      >"/etc/apt/sources.list.d/znbd-deb-src-$(basename "$f")"
  done
fi
apt-get update -q
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get source -q "fio=$fio_ver")
rm -rf "$fio_src"
mkdir -p "$(dirname "$fio_src")"
mv "$tmp"/fio-*/ "$fio_src"
# config-host.h, which fio's headers include.
(cd "$fio_src" && ./configure >configure.out 2>&1)
echo "$fio_ver" >"$fio_src/.znbd-fio-version"
