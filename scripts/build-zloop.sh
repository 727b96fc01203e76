#!/bin/bash
# build-zloop.sh: Linux's zoned loop driver (zloop, drivers/block/zloop.c,
# 6.16 and later) for the kernel scripts/fetch-kernel.sh fetched, which
# Debian does not build (CONFIG_BLK_DEV_ZONED_LOOP unset), so that the
# modern guest can add a dir= directory to a real zloop
# (tests/vm/guest-ublk-zloop.sh).
#
#   ZNBD_KERNEL_DIR   where fetch-kernel.sh put the kernels (default
#                     /var/lib/znbd/kernels); the modern one (DIR/modern,
#                     else the newest) is used
#
# The module is built out of tree from the upstream source Debian built
# the kernel from (the orig tarball of Debian's source package linux, the
# one whose upstream version is the kernel's, found in the archive's
# Sources index through a private apt state, as fetch-kernel.sh does for
# the image): the image's own configuration (boot/config-KVER) taken by
# `make olddefconfig`, `make modules_prepare` with the image's release
# string, then `make M=DIR` on zloop.c alone.  It lands in
# KROOT/lib/modules/KVER/extra/zloop.ko, indexed by `depmod -b`; vm-run
# binds KROOT/lib/modules/KVER to the guest's /lib/modules/KVER, so the
# guest's `modprobe zloop` finds it.
#
# What keeps the module loadable into Debian's kernel: the same upstream
# source and configuration.  Options that depend on the build host's
# tools are re-evaluated by olddefconfig; pahole (dwarves) must be there,
# else DEBUG_INFO_BTF goes, which takes SCHED_CLASS_EXT with it and so
# changes struct task_struct: a module built so would load and corrupt
# memory.  The script refuses when either is lost, checks that the
# module's vermagic is the image's, and links without the image's
# Module.symvers (not in the package; MODVERSIONS is off, so symbols are
# resolved by name at load time).  Debian's patches are not applied;
# none changes what zloop uses.
#
# Only what the build reads is unpacked (no other architectures' code,
# no drivers but drivers/block, no Documentation, ...): 20 s and about
# 200 MB instead of 1.5 GB; the tree is deleted after the build.  About
# 2-3 minutes in all on 2 cores (download of 157 MB, unpack 20 s,
# modules_prepare 70 s, the module 5 s).
#
# Idempotent: nothing to do when modprobe can already find zloop for that
# kernel.  Every network step is bounded in time.  On failure: one line
# "build-zloop: ..." on stderr and exit status 1; the zloop checks then
# skip.
set -u
export LC_ALL=C
# shellcheck source=debian-archive.sh
. "$(dirname "$0")/debian-archive.sh"
root=${ZNBD_KERNEL_DIR:-/var/lib/znbd/kernels}
fail() {
  echo "build-zloop: $*" >&2
  exit 1
}

kroot=
for m in $(printf '%s\n' "$root"/*/.znbd-kernel | sort -V); do
  [ -f "$m" ] && kroot=${m%/.znbd-kernel}
done
# The modern kernel, when fetch-kernel.sh named it.
[ ! -f "$root/modern/.znbd-kernel" ] || kroot=$(readlink -f "$root/modern")
[ -n "$kroot" ] || fail "no kernel fetched into $root (scripts/fetch-kernel.sh)"
kver=$(cd "$kroot/boot" 2> /dev/null && ls -1 vmlinuz-* 2> /dev/null | sed 's/^vmlinuz-//' | sort -V | tail -n 1)
[ -n "$kver" ] || fail "no kernel in $kroot/boot"
mods=$kroot/lib/modules/$kver
have=$(modinfo -b "$kroot" -k "$kver" -F filename zloop 2> /dev/null)
if [ -n "$have" ] && [ -f "$have" ]; then
  echo "build-zloop: have $have"
  exit 0
fi
config=$kroot/boot/config-$kver
[ -f "$config" ] || fail "$kver: no $config"
grep -q '^CONFIG_BLK_DEV_ZONED=y' "$config" || fail "$kver: built without CONFIG_BLK_DEV_ZONED"
for t in apt-get apt-cache /usr/lib/apt/apt-helper timeout make gcc flex bison bc pahole depmod modinfo xz; do
  command -v $t > /dev/null || fail "$t missing (scripts/install-deps.sh installs it)"
done
[ -f /usr/include/gelf.h ] || fail "libelf-dev missing (scripts/install-deps.sh installs it)"
[ -f /usr/include/openssl/evp.h ] || fail "libssl-dev missing (scripts/install-deps.sh installs it)"
[ -w "$mods" ] || fail "cannot write $mods (run as root)"

# The upstream version: KVER up to its first + or - (6.18.15+deb13-amd64:
# 6.18.15; a .0 release's tarball is named X.Y).
up=${kver%%[+-]*}
debian_archive || fail "no Debian archive entry in /etc/apt/sources.list*"
apt_dir=$root/.apt-src
private_apt "$apt_dir" "deb-src trixie-backports" "deb-src bookworm-backports" ||
  fail "cannot create $apt_dir"
private_update Sources || fail "apt-get update of the source indexes failed ($why)"
# "DIRECTORY SHA256 FILE" of the orig tarball of a linux source package
# whose upstream version is $up (or X.Y for X.Y.0).
read -r pool sha file < <(apt-cache "${aptopts[@]}" showsrc linux 2> /dev/null | awk -v up="$up" '
  BEGIN { alt = up; sub(/\.0$/, "", alt) }
  /^Package: / { pkg = $2; v = ""; dir = ""; sums = 0 }
  /^Version: / { v = $2; sub(/^[0-9]+:/, "", v); sub(/-[^-]*$/, "", v) }
  /^Directory: / { dir = $2 }
  /^[A-Z]/ && !/^Checksums-Sha256:/ { sums = 0 }
  /^Checksums-Sha256:/ { sums = 1; next }
  sums && $3 ~ /\.orig\.tar\.xz$/ && pkg == "linux" && (v == up || v == alt) { o = $1 " " $3 }
  /^$/ { if (o != "" && dir != "") { print dir, o; exit } o = "" }
  END { if (o != "" && dir != "") print dir, o }' | head -n 1)
[ -n "${file:-}" ] || fail "no source package linux $up in the archive's Sources (trixie-backports, bookworm-backports)"

tmp=$(mktemp -d "$root/.zloop.XXXXXX") || fail "mktemp in $root failed"
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
t0=$SECONDS
echo "build-zloop: downloading $file"
timeout -k 10 900 /usr/lib/apt/apt-helper "${aptopts[@]}" download-file "$uri/$pool/$file" "$tmp/$file" "SHA256:$sha" > "$tmp/download.log" 2>&1 ||
  fail "download of $uri/$pool/$file failed: $(grep -m1 -A1 -E "^(E|Err)" "$tmp/download.log" | tr -s "\n " "  ")"
t1=$SECONDS
top=$(tar -tJf "$tmp/$file" 2> /dev/null | head -n 1)
top=${top%%/*}
[ -n "$top" ] || fail "$file: cannot list it"
# Kconfig reads every Kconfig file, modules_prepare the x86 tree, include,
# scripts and tools/objtool; zloop.c includes only include/.
if ! tar -xJf "$tmp/$file" -C "$tmp" --anchored --wildcards \
  --exclude="$top/drivers/[!b]*.[chS]" --exclude="$top/drivers/b[!l]*.[chS]" \
  --exclude="$top/arch/[!xK]*.[chS]" --exclude="$top/arch/[!xK]*.dts*" \
  --exclude="$top/Documentation/*/*" --exclude="$top/Documentation/*.rst" \
  --exclude="$top/sound/*.[ch]" --exclude="$top/net/*.[ch]" --exclude="$top/fs/*.[ch]" \
  --exclude="$top/tools/testing/*" --exclude="$top/tools/perf/*" --exclude="$top/samples/*.[ch]" 2> "$tmp/tar.log"; then
  fail "unpacking $file failed: $(head -n 1 "$tmp/tar.log")"
fi
rm -f "$tmp/$file"
src=$tmp/$top
[ -f "$src/drivers/block/zloop.c" ] || fail "$file has no drivers/block/zloop.c (Linux before 6.16?)"
t2=$SECONDS
cp "$config" "$src/.config"
mk() { make -C "$src" -s KERNELRELEASE="$kver" "$@" >> "$tmp/build.log" 2>&1; }
mk olddefconfig || fail "make olddefconfig failed: $(grep -m1 -iE 'error|fatal' "$tmp/build.log")"
for o in DEBUG_INFO_BTF SCHED_CLASS_EXT MODULE_SIG SMP PREEMPT_DYNAMIC; do
  if grep -q "^CONFIG_$o=y" "$config" && ! grep -q "^CONFIG_$o=y" "$src/.config"; then
    fail "make olddefconfig dropped CONFIG_$o (is pahole installed?): the module would not fit the image"
  fi
done
mk -j"$(nproc)" modules_prepare || fail "make modules_prepare failed: $(grep -m1 -iE 'error|fatal' "$tmp/build.log")"
t3=$SECONDS
mkdir "$tmp/m" && cp "$src/drivers/block/zloop.c" "$tmp/m/" && echo 'obj-m := zloop.o' > "$tmp/m/Kbuild" ||
  fail "cannot set up $tmp/m"
mk M="$tmp/m" KBUILD_MODPOST_WARN=1 modules || fail "building zloop.ko failed: $(grep -m1 -iE 'error' "$tmp/build.log")"
want=$(modinfo -b "$kroot" -k "$kver" -F vermagic null_blk 2> /dev/null)
got=$(modinfo -F vermagic "$tmp/m/zloop.ko" 2> /dev/null)
[ -n "$want" ] && [ "$got" = "$want" ] || fail "zloop.ko's vermagic '$got' is not the image's '$want'"
mkdir -p "$mods/extra" && cp "$tmp/m/zloop.ko" "$mods/extra/.zloop.ko.new" &&
  mv "$mods/extra/.zloop.ko.new" "$mods/extra/zloop.ko" || fail "cannot install zloop.ko into $mods/extra"
depmod -b "$kroot" "$kver" || fail "depmod -b $kroot $kver failed"
[ "$(modinfo -b "$kroot" -k "$kver" -F filename zloop 2> /dev/null)" = "$mods/extra/zloop.ko" ] ||
  fail "modinfo does not find $mods/extra/zloop.ko after depmod"
echo "build-zloop: $mods/extra/zloop.ko for $kver from $file (download $((t1 - t0)) s, unpack $((t2 - t1)) s, build $((SECONDS - t2)) s, of which modules_prepare $((t3 - t2)) s)"
