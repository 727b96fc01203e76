#!/bin/bash
# fetch-kernel.sh: put one of today's Debian kernels (6.18.x from
# trixie-backports by preference) into a folder of znbd's, WITHOUT
# installing it, so tests/vm/vm-run can boot it (ZNBD_VM_KERNEL=modern).
# With a series asked for, another one beside it (6.12, Debian 13's own;
# 7, the newest 7.x trixie-backports serves), booted with
# ZNBD_VM_KERNEL=SERIES.
#
#   ZNBD_KERNEL_DIR      where kernels go (default /var/lib/znbd/kernels);
#                        each one as DIR/KVER/{boot/vmlinuz-KVER,
#                        lib/modules/KVER} with a depmod index, and
#                        DIR/KVER/.znbd-kernel once complete
#   ZNBD_KERNEL_SERIES   unset: the modern kernel, the newest 6.18.x,
#                        else the newest 6.x >= 6.16 that can be
#                        downloaded; DIR/modern names it (vm-run's
#                        "modern", the one CI boots).  X.Y or X (6.12,
#                        7.3, 7): the newest kernel of that series, and
#                        nothing else
#   ZNBD_KERNEL_REFRESH=1  look at the archive even if a kernel is there
#
# Why not install it: an installed linux-image becomes the newest
# /boot/vmlinuz-* and so every VM test's default kernel, and it would pull
# initramfs tools into the machine.  Here apt runs with a private state
# (lists, cache, source list) next to the kernels: the machine's apt
# sources, lists and dpkg database are left as they are.  The archive URL
# is the one the machine's own Debian entries use (/etc/apt/sources.list*).
#
# Idempotent; with a kernel already there it touches no network.  Every
# network step is bounded in time.  On failure: one line "fetch-kernel:
# ..." on stderr and exit status 1; tests that need the kernel skip.
set -u
export LC_ALL=C
# shellcheck source=debian-archive.sh
. "$(dirname "$0")/debian-archive.sh"
root=${ZNBD_KERNEL_DIR:-/var/lib/znbd/kernels}
asked=${ZNBD_KERNEL_SERIES:-}
series=${asked:-6.18}
min_minor=16 # 6.16: the oldest series worth a guest of its own
[[ $series =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "fetch-kernel: bad ZNBD_KERNEL_SERIES $series" >&2 && exit 1; }
# wanted KVER: whether a kernel fits what is asked for (the series, or
# for the modern kernel any 6.x >= 6.16).
wanted() {
  if [ -n "$asked" ]; then
    case $1 in "$asked".*) return 0 ;; esac
    return 1
  fi
  awk -F. -v m="$min_minor" '{ exit !($1 == 6 && $2 + 0 >= m) }' <<< "$1"
}
fail() { # also kept in $root/.fetch-failed: ublk.test's skip says why
  echo "fetch-kernel: $*" >&2
  { [ -z "$asked" ] && [ -d "$root" ] && echo "$*" > "$root/.fetch-failed"; } 2> /dev/null
  exit 1
}

# A complete kernel of what is asked for already there: nothing to do.
have=
for m in "$root"/*/.znbd-kernel; do
  [ -f "$m" ] || continue
  k=$(basename "$(dirname "$m")")
  wanted "$k" && have=$k
done
if [ -n "$have" ] && [ "${ZNBD_KERNEL_REFRESH:-0}" != 1 ]; then
  # A modern kernel fetched before DIR/modern existed is the modern one.
  [ -n "$asked" ] || [ -e "$root/modern" ] || ln -sfn "$have" "$root/modern"
  echo "fetch-kernel: have $have in $root"
  exit 0
fi

for t in apt-get apt-cache dpkg depmod timeout; do
  command -v $t > /dev/null || fail "$t missing"
done
{ mkdir -p "$root" 2> /dev/null && [ -w "$root" ]; } || fail "cannot write $root (run as root or set ZNBD_KERNEL_DIR)"

debian_archive || fail "no Debian archive entry in /etc/apt/sources.list*"

apt_dir=$root/.apt
# trixie for Debian 13's own kernel (6.12).
private_apt "$apt_dir" "deb trixie-backports" "deb bookworm-backports" "deb trixie" || fail "cannot create $apt_dir"

if [ -n "$asked" ]; then
  echo "fetch-kernel: looking for Linux $asked.x in trixie-backports, bookworm-backports, trixie"
else
  echo "fetch-kernel: looking for Linux $series.x (else 6.x >= 6.$min_minor) in trixie-backports, bookworm-backports, trixie"
fi
private_update Packages || fail "apt-get update of trixie-backports failed ($why)"

# Candidates: linux-image-X.Y.Z+debNN-amd64 (not cloud, rt, dbg or
# unsigned) that fit, the preferred series first, newest first within
# each.
field() { apt-cache "${aptopts[@]}" show --no-all-versions "$1" 2> /dev/null | sed -n "s/^$2: //p" | head -n 1; }
cands=$(apt-cache "${aptopts[@]}" pkgnames linux-image- 2> /dev/null |
  grep -E '^linux-image-[0-9]+\.[0-9]+\.[0-9]+[^-]*-amd64$' | sed 's/^linux-image-//' |
  while read -r k; do wanted "$k" && echo "$k"; done |
  awk -F. -v s="$series" '{ k = $0; print ((($1 "." $2) == s) ? 1 : 0), $1, $2, $3 + 0, k }' |
  sort -k1,1nr -k2,2nr -k3,3nr -k4,4nr | cut -d' ' -f5)
[ -n "$cands" ] || fail "no linux-image-${asked:-6.x (x >= $min_minor)}.* amd64 in trixie-backports, bookworm-backports or trixie"

tmp=$(mktemp -d "$root/.fetch.XXXXXX") || fail "mktemp in $root failed"
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp" # apt-get download runs as _apt where it can
got='' why=''
for kver in $cands; do
  img=linux-image-$kver
  [ -n "$(field "$img" Filename)" ] || continue # only in dpkg's status
  # Full image (boot/vmlinuz + modules) or, from 6.19, a metapackage over
  # linux-binary-KVER (the kernel) + linux-modules-KVER.
  if field "$img" Depends | grep -q "linux-binary-$kver"; then
    pkgs="linux-binary-$kver linux-modules-$kver"
    # These two lack modules.order and modules.builtin (seen with 7.3.4),
    # so modprobe cannot tell a built-in module from a missing one: take
    # linux-base-KVER too (the image depends on it) when it is listed.
    [ -z "$(field "linux-base-$kver" Filename)" ] || pkgs+=" linux-base-$kver"
  else
    pkgs=$img
  fi
  ok=1
  for p in $pkgs; do [ -n "$(field "$p" Filename)" ] || ok=0; done
  if [ "$ok" = 0 ]; then
    why="$pkgs: not all in the archive"
    continue
  fi
  size=0
  for p in $pkgs; do size=$((size + $(field "$p" Size))); done
  echo "fetch-kernel: downloading $pkgs ($((size / 1048576)) MiB)"
  rm -f "$tmp"/*.deb
  t0=$SECONDS
  # shellcheck disable=SC2086
  if ! (cd "$tmp" && timeout -k 10 1200 apt-get "${aptopts[@]}" download $pkgs) > "$tmp/download.log" 2>&1; then
    why="$pkgs: download failed ($(grep -m1 -E '^(E|W|Err)' "$tmp/download.log" || tail -n 1 "$tmp/download.log"))"
    echo "fetch-kernel: $why; trying an older one" >&2
    continue
  fi
  echo "fetch-kernel: downloaded in $((SECONDS - t0)) s"
  got=$kver
  break
done
[ -n "$got" ] || fail "no ${asked:-6.x} kernel could be downloaded: ${why:-none listed}"
kver=$got

kroot=$tmp/root
for deb in "$tmp"/*.deb; do
  dpkg -x "$deb" "$kroot" || fail "dpkg -x $deb failed"
done
rm -f "$tmp"/*.deb
# Trixie's packages may put modules under usr/lib; vm-run and depmod -b
# look under lib/modules.
if [ ! -d "$kroot/lib/modules/$kver" ] && [ -d "$kroot/usr/lib/modules/$kver" ]; then
  mkdir -p "$kroot/lib/modules"
  mv "$kroot/usr/lib/modules/$kver" "$kroot/lib/modules/$kver"
fi
[ -d "$kroot/lib/modules/$kver/kernel" ] || fail "$kver: no modules in the package"
if [ ! -f "$kroot/boot/vmlinuz-$kver" ]; then
  mkdir -p "$kroot/boot"
  for v in "$kroot/lib/modules/$kver/vmlinuz" "$kroot/usr/lib/linux-image-$kver/vmlinuz"; do
    [ -f "$v" ] && cp "$v" "$kroot/boot/vmlinuz-$kver" && break
  done
fi
[ -f "$kroot/boot/vmlinuz-$kver" ] || fail "$kver: no vmlinuz in the package"
# The same layout keeps the configuration (what blktests, build-zloop.sh
# and people read to see what the kernel has) and System.map beside it.
for f in config System.map; do
  [ -f "$kroot/boot/$f-$kver" ] || [ ! -f "$kroot/lib/modules/$kver/$f" ] ||
    cp "$kroot/lib/modules/$kver/$f" "$kroot/boot/$f-$kver" || fail "cannot copy $f"
done
depmod -b "$kroot" "$kver" || fail "depmod -b for $kver failed"
echo "$pkgs $(du -sm "$kroot" | cut -f1) MiB, fetched $(date -u +%Y-%m-%dT%H:%MZ)" > "$kroot/.znbd-kernel"
rm -rf "${root:?}/$kver"
mv "$kroot" "$root/$kver" || fail "cannot move the kernel to $root/$kver"
[ -n "$asked" ] || ln -sfn "$kver" "$root/modern" || fail "cannot link $root/modern"
rm -f "$root/.fetch-failed"
echo "fetch-kernel: Linux $kver in $root/$kver"
