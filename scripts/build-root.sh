#!/bin/bash
# build-root.sh: a Debian 13 (trixie) userland for the VM tests, made
# once from Debian's archive and kept like the fetched kernels, so that a
# guest can boot on it instead of on this machine's Debian 12
# (tests/vm/vm-run --root debian13, or ZNBD_VM_ROOT=debian13).
#
#   ZNBD_ROOT_DIR       where roots go (default /var/lib/znbd/roots); this
#                       one is DIR/debian13, with DIR/debian13/.znbd-root
#                       written last (the recipe's checksum and what it
#                       holds) and .znbd-packages (every package, version)
#   ZNBD_ROOT_REFRESH=1 build it again even if it is there
#
# What it holds: what the peer suites need to build and run as the file
# systems' and the block layer's developers run them (blktests, fstests),
# at versions that know today's zoned devices: xfsprogs with zoned XFS
# (mkfs.xfs -r zoned=1, xfsprogs 6.15 or later: trixie has 6.13, so it
# comes from forky, the next release, with the one library it lacks),
# btrfs-progs, f2fs-tools, zonefs-tools, fio (3.39), nbdkit (1.42) and
# libnbd, util-linux, udev's udevadm, dmsetup, and the compilers and
# -dev packages znbd, blktests and fstests are built with (in a chroot of
# it, scripts/in-root.sh; scripts/build-for-root.sh builds znbd).
#
# How: debootstrap (minbase) of trixie from the archive the machine's own
# Debian entries name (/etc/apt/sources.list*; no host name is written in
# the tree), then apt-get inside the new root (its own apt state: the
# machine's sources, lists and dpkg database are never touched), with
# trixie-backports and forky listed at priority 100, so that nothing comes
# from them but what is asked for.  Services are never started
# (policy-rc.d).  The root is made in a temporary folder next to it and
# moved into place when complete.
#
# Idempotent: with a complete root of the same recipe there it touches no
# network.  Every network step is bounded in time.  On failure: one line
# "build-root: ..." on stderr (kept in DIR/.build-failed) and exit status
# 1; the tests that need the root skip with that line.
set -u
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=debian-archive.sh
. "$here/debian-archive.sh"
dir=${ZNBD_ROOT_DIR:-/var/lib/znbd/roots}
name=debian13
suite=trixie
fail() {
  echo "build-root: $*" >&2
  { [ -d "$dir" ] && echo "$*" > "$dir/.build-failed"; } 2> /dev/null
  exit 1
}

# From trixie.  Each line says who needs it.
pkgs=(
  # the guest's own tools (vm-stage2 runs bash; guest scripts use these)
  bash coreutils util-linux util-linux-extra kmod procps psmisc file xz-utils zstd gawk bc
  diffutils findutils sed grep e2fsprogs python3 iproute2
  # zoned tools and file systems
  btrfs-progs f2fs-tools zonefs-tools fio sg3-utils dmsetup cryptsetup-bin
  # NBD: nbdkit 1.42 with the plugin, libnbd's tools, the kernel client,
  # nbd-server as blktests' nbd group's reference server, and what znbd's
  # NBD suite calls (qemu-img, qemu-io, psktool)
  nbdkit libnbd-bin python3-libnbd nbd-client nbd-server qemu-utils gnutls-bin
  # blktests: udevadm, parted and genl-ctrl-list (nbd group)
  udev systemd-standalone-sysusers parted libnl-utils
  # fstests' run-time list (its README), less lvm2 and git, and what its
  # tests call beyond it (column and hexdump: blktests' check too)
  acl attr bc dbench dump indent quota sqlite3 uuid-runtime libcap2-bin
  xfsdump perl bsdextrautils xxd keyutils jq lz4 openssl fsverity
  duperemove
  # building znbd (configure: nbdkit, libnbd, liburing, gnutls), blktests
  # (g++ for one helper) ...
  gcc g++ make autoconf automake libtool libtool-bin pkg-config libc6-dev
  linux-libc-dev nbdkit-plugin-dev libnbd-dev liburing-dev libgnutls28-dev
  # ... and fstests (libxfs headers come with xfsprogs, below)
  libacl1-dev libattr1-dev libaio-dev uuid-dev libgdbm-dev
  libgdbm-compat-dev libcap-dev
)
# From forky: zoned XFS (mkfs.xfs -r zoned=1) and its headers.
forky_pkgs=(xfsprogs xfslibs-dev)

root=$dir/$name
# The recipe: this script and the one that chroots; a root made by
# another version of them is made again.
recipe=$(cat "$0" "$here/in-root.sh" | sha256sum | cut -c1-16)
if [ -f "$root/.znbd-root" ] && [ "${ZNBD_ROOT_REFRESH:-0}" != 1 ] &&
  [ "$(sed -n 's/^recipe //p' "$root/.znbd-root")" = "$recipe" ]; then
  echo "build-root: have $root ($(sed -n 's/^made //p' "$root/.znbd-root"))"
  exit 0
fi

for t in debootstrap unshare chroot timeout; do
  command -v $t > /dev/null || fail "$t missing (scripts/install-deps.sh)"
done
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot)"
mkdir -p "$dir" || fail "cannot create $dir"
debian_archive || fail "no Debian archive entry in /etc/apt/sources.list*"

t0=$SECONDS
tmp=$(mktemp -d "$dir/.build.XXXXXX") || fail "mktemp in $dir failed"
trap 'rm -rf "$tmp"' EXIT
new=$tmp/$name
echo "build-root: debootstrap $suite into $new"
# shellcheck disable=SC2086
if ! timeout -k 10 1800 debootstrap --variant=minbase ${key:+--keyring="$key"} \
  "$suite" "$new" "$uri" > "$tmp/debootstrap.log" 2>&1; then
  tail -n 5 "$tmp/debootstrap.log" >&2
  fail "debootstrap $suite failed ($(grep -m1 -E '^(E|W):' "$tmp/debootstrap.log" || tail -n 1 "$tmp/debootstrap.log"))"
fi
echo "build-root: debootstrap took $((SECONDS - t0)) s"

# Its apt: trixie first; trixie-backports and forky only where asked.
# The keyring debootstrap checked with, for all three suites.
[ -z "$key" ] || cp "$key" "$new/etc/apt/trusted.gpg.d/znbd-archive.gpg" ||
  fail "cannot copy $key"
# Forky's Release in the archive may be past its Valid-Until (seen:
# dated 2026-10-30, valid until 2026-11-06, a month later): apt 3 then
# refuses the whole suite.  Its signature is still checked.
for s in "$suite" "$suite-backports" "[check-valid-until=no] forky"; do
  case $s in
    \[*) echo "deb ${s%% *} $uri ${s#* } main" ;;
    *) echo "deb $uri $s main" ;;
  esac
done > "$new/etc/apt/sources.list"
cat > "$new/etc/apt/preferences.d/znbd" << 'EOF'
Package: *
Pin: release n=forky
Pin-Priority: 100

Package: *
Pin: release n=trixie-backports
Pin-Priority: 100
EOF
cat > "$new/etc/apt/apt.conf.d/90znbd" << 'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Retries "2";
Acquire::http::Timeout "30";
Acquire::https::Timeout "30";
Dpkg::Use-Pty "false";
EOF
# No service starts in a chroot being built (udev, nbd-server, ...).
printf '#!/bin/sh\nexit 101\n' > "$new/usr/sbin/policy-rc.d"
chmod 0755 "$new/usr/sbin/policy-rc.d"

inroot() { # CMD...: in the new root, with the archive reachable
  "$here/in-root.sh" --write --net -e DEBIAN_FRONTEND=noninteractive "$new" "$@"
}
t1=$SECONDS
inroot timeout -k 10 300 apt-get -q update > "$tmp/apt.log" 2>&1 ||
  fail "apt-get update in the root failed ($(grep -m1 -E '^(E|W|Err):' "$tmp/apt.log"))"
forky_args=()
for p in "${forky_pkgs[@]}"; do forky_args+=("$p/forky"); done
if ! inroot timeout -k 10 2400 apt-get -q -y install "${pkgs[@]}" "${forky_args[@]}" >> "$tmp/apt.log" 2>&1; then
  tail -n 5 "$tmp/apt.log" >&2
  fail "apt-get install in the root failed ($(grep -m1 -E '^E:' "$tmp/apt.log" || tail -n 1 "$tmp/apt.log"))"
fi
inroot apt-get -q clean
echo "build-root: packages installed in $((SECONDS - t1)) s"

# fstests' users (its README: fsgqa, fsgqa2, 123456-fsgqa) and group.
for u in fsgqa fsgqa2 123456-fsgqa; do
  inroot useradd -m "$u" > /dev/null 2>&1 || fail "useradd $u failed"
done
inroot groupadd fsgqa > /dev/null 2>&1 || true

# What the suites need, asked of the programs themselves.
ver() { inroot dpkg-query -W -f='${Version}' "$1"; }
inroot sh -c 'mkfs.xfs 2>&1 | grep -q "zoned="' ||
  fail "mkfs.xfs $(ver xfsprogs) has no -r zoned= (zoned XFS)"
for p in fio nbdkit xfsprogs btrfs-progs f2fs-tools util-linux libnbd-bin zonefs-tools; do
  v=$(ver $p) || fail "$p is not installed in the root"
  got+="$p $v, "
done
inroot dpkg --compare-versions "$(ver fio)" ge 3.39 || fail "fio $(ver fio) is older than 3.39"
inroot dpkg-query -W -f='${Package} ${Version}\n' > "$new/.znbd-packages"
# The guest has loopback only: localhost is all it resolves.
rm -f "$new/etc/resolv.conf"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$new/etc/hosts"
{
  echo "recipe $recipe"
  echo "made $(date -u +%Y-%m-%dT%H:%MZ) from $suite in $((SECONDS - t0)) s, $(du -sm "$new" | cut -f1) MiB"
  echo "holds ${got%, }"
} > "$new/.znbd-root"
rm -rf "$root"
mv "$new" "$root" || fail "cannot move the root to $root"
rm -f "$dir/.build-failed"
echo "build-root: $root: $(sed -n 's/^holds //p' "$root/.znbd-root")"
echo "build-root: made in $((SECONDS - t0)) s"
