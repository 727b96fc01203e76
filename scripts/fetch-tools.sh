#!/bin/bash
# fetch-tools.sh: zoned-storage tools the VM tests use that Debian 12 does
# not have, from Debian 13 (trixie), unpacked into a folder of znbd's and
# never installed: zonefs-tools (mkzonefs, for the modern guest's zonefs
# checks, tests/vm/guest-ublk-zonefs.sh).
#
#   ZNBD_TOOLS_DIR   where they go (default /var/lib/znbd/tools): each
#                    package unpacked there with dpkg -x (so mkzonefs is
#                    DIR/usr/sbin/mkzonefs), DIR/.znbd-tools listing them
#
# apt runs with a private state in DIR/.apt (see fetch-kernel.sh: the
# machine's sources, lists and dpkg database stay as they are), on the
# archive the machine's own Debian entries name.  The packages' libraries
# (libblkid1, libuuid1, libc6) are Debian 12's: the script checks that
# the program runs here.  The guest sees the host's file system, so DIR
# is there at the same path.
#
# Idempotent; with the tools there it touches no network.  Every network
# step is bounded in time.  On failure: one line "fetch-tools: ..." on
# stderr and exit status 1; the checks that need the tools skip.
set -u
export LC_ALL=C
# shellcheck source=debian-archive.sh
. "$(dirname "$0")/debian-archive.sh"
dir=${ZNBD_TOOLS_DIR:-/var/lib/znbd/tools}
pkgs="zonefs-tools"
fail() {
  echo "fetch-tools: $*" >&2
  exit 1
}
runs() { "$dir/usr/sbin/mkzonefs" --version > /dev/null 2>&1; }

if [ -f "$dir/.znbd-tools" ] && runs; then
  echo "fetch-tools: have $(cat "$dir/.znbd-tools") in $dir"
  exit 0
fi
for t in apt-get dpkg timeout; do
  command -v $t > /dev/null || fail "$t missing"
done
{ mkdir -p "$dir" 2> /dev/null && [ -w "$dir" ]; } || fail "cannot write $dir (run as root or set ZNBD_TOOLS_DIR)"
debian_archive || fail "no Debian archive entry in /etc/apt/sources.list*"
private_apt "$dir/.apt" "deb trixie" || fail "cannot create $dir/.apt"
private_update Packages || fail "apt-get update of trixie failed ($why)"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX") || fail "mktemp in $dir failed"
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp" # apt-get download runs as _apt where it can
# shellcheck disable=SC2086
(cd "$tmp" && timeout -k 10 300 apt-get "${aptopts[@]}" download $pkgs) > "$tmp/download.log" 2>&1 ||
  fail "$pkgs: download failed ($(grep -m1 -E '^(E|W|Err)' "$tmp/download.log" || tail -n 1 "$tmp/download.log"))"
got=
for deb in "$tmp"/*.deb; do
  dpkg -x "$deb" "$dir" || fail "dpkg -x $deb failed"
  got+="$(basename "$deb" .deb) "
done
runs || fail "$dir/usr/sbin/mkzonefs does not run here: $("$dir/usr/sbin/mkzonefs" --version 2>&1 | head -n 1)"
echo "${got% }" > "$dir/.znbd-tools"
echo "fetch-tools: ${got% } in $dir"
