# shellcheck shell=bash
# guest-ublk.sh part "pkg": znbd's Debian packages installed and used
# in the guest (its root is the host's under a tmpfs overlay, so dpkg's
# database and every dependency are the host's, and what dpkg -i writes
# goes with the guest).  The packages come from $ZNBD_DEBS (default
# $top_builddir/debs, where scripts/build-debs.sh puts them); without any
# the part is one skipped check.  Sourced by guest-ublk.sh, on its
# functions (check, all, skip_check, ...).
# - dpkg -i of every package but the debug symbols: each is "install ok
#   installed", their files there;
# - what they installed runs (scripts/installcheck.sh on the installed
#   paths): znbd and nbdzone say their version, nbdkit loads the plugin,
#   the units' scripts are there, a program builds with pkg-config
#   znbdclient and runs on the installed libznbdclient.so.0;
# - `nbdkit zoned size=...`, by name, serves the disk (nbdkit's plugin
#   directory), its size and zones seen by nbdinfo;
# - systemd-analyze verify of the installed units, their commands and
#   man pages as installed;
# - doc/ci.md's recipe, each block run as it is written (tests/readme.py
#   --no-serve): modprobe, the znbd-ublk line giving a host-managed
#   /dev/ublkb0, the mkfs.btrfs and fio zbd jobs, and the NBD job with
#   the znbd-fio engine.
P_DEBS=${ZNBD_DEBS:-$top_builddir/debs}
P_LIST=()
for f in "$P_DEBS"/*.deb; do
  case $f in *-dbgsym_*) ;; *) [ -f "$f" ] && P_LIST+=("$f") ;; esac
done
P_ARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2> /dev/null || gcc -print-multiarch)
pkg_install() {
  local f p bad=0
  # man-db's trigger rebuilds its whole index (minutes under TCG); off,
  # as the answer no to man-db/auto-update turns it off.  The pages are
  # installed all the same.
  rm -f /var/lib/man-db/auto-update
  # No fsync per file (the root is a tmpfs overlay that goes with the
  # guest).  Bounded at 600 s, not the 120 s of other commands: ldconfig's
  # trigger reads every library over 9p, 1-2 min under TCG on a loaded host.
  timeout -k 5 600 dpkg --force-unsafe-io -i "${P_LIST[@]}" > "$work/dpkg.out" 2>&1 ||
    { cat "$work/dpkg.out"; return 1; }
  grep -E '^(Setting up|Unpacking)' "$work/dpkg.out" | grep Setting
  for f in "${P_LIST[@]}"; do
    p=$(dpkg-deb -f "$f" Package)
    [ "$(dpkg-query -W -f='${Status}' "$p")" = "install ok installed" ] || { echo "$p is not installed" && bad=1; }
    while IFS= read -r x; do
      [ -e "$x" ] || { echo "$p: $x missing" && bad=1; }
    done < <(dpkg -L "$p")
  done
  [ $bad = 0 ]
}
pkg_runs() {
  local unitdir=/lib/systemd/system
  [ -f $unitdir/znbd.socket ] || unitdir=/usr/lib/systemd/system
  sh "$top_srcdir/scripts/installcheck.sh" "plugin znbd znbd-tcmu znbd-ublk client units" "" \
    /usr/bin /usr/sbin "/usr/lib/$P_ARCH" /usr/libexec/znbd "/usr/lib/$P_ARCH/nbdkit/plugins" "$unitdir"
}
# nbdkit finds the plugin by its name.
pkg_nbdkit_zoned() {
  local out
  out=$($T nbdkit -U - zoned size=64M zone_size=4M zone_nr_conv=1 \
    --run 'nbdinfo --size "$uri" && nbdinfo "$uri" | grep description') || return 1
  echo "$out"
  [ "$(head -n 1 <<< "$out")" = 67108864 ] && grep -q 'nr_zones=16 nr_conv=1' <<< "$out"
}
pkg_units_verify() {
  local d=/lib/systemd/system out
  [ -f $d/znbd.socket ] || d=/usr/lib/systemd/system
  out=$(SYSTEMD_LOG_LEVEL=notice $T systemd-analyze verify $d/znbd.socket $d/znbd.service \
    "$d/znbd-ublk@.service" 2>&1) || { echo "$out"; return 1; }
  [ -z "$out" ] || { echo "$out"; return 1; }
  echo "systemd-analyze verify: znbd.socket, znbd.service, znbd-ublk@.service in $d: no complaint"
}
pkg_ci_recipe() {
  mkdir -p "$work/ci.tmp" "$work/ci.build"
  timeout -k 5 900 python3 "$top_srcdir/tests/readme.py" --no-serve "$top_srcdir/doc/ci.md" \
    "$top_srcdir" "$work/ci.build" "$work/ci.tmp" > "$work/ci.out" 2>&1
  local rc=$?
  cat "$work/ci.out"
  [ "$rc" = 0 ] && grep -q '^PASS: .* ci.md blocks' "$work/ci.out"
}

if [ "${#P_LIST[@]}" = 0 ]; then
  skip_check "pkg: the Debian packages" "none in $P_DEBS (scripts/build-debs.sh)"
elif check "pkg: dpkg -i of the ${#P_LIST[@]} packages in $P_DEBS" pkg_install; then
  note "t=${SECONDS}s"
  check "pkg: the installed programs, plugin, units and libznbdclient run (installcheck.sh)" pkg_runs
  check "pkg: nbdkit zoned size=64M zone_size=4M, by name, serves 16 zones" pkg_nbdkit_zoned
  check "pkg: systemd-analyze verify of the installed units" pkg_units_verify
  note "t=${SECONDS}s"
  check "pkg: doc/ci.md's recipe, block by block, with the installed packages" pkg_ci_recipe
fi
note "t=${SECONDS}s"
