# shellcheck shell=bash
# Sourced by the .test scripts that run a peer suite (blktests, fstests)
# in a guest booted on the Debian 13 root (scripts/build-root.sh):
#
#   root_prepare     the root is there, and znbd is built for it (in a
#                    chroot of it, scripts/build-in-root.sh) into
#                    $top_builddir/debian13: sets ROOT_BUILD; returns 1
#                    with ROOT_WHY if there is no root, 2 if the build
#                    failed (its log's last lines in ROOT_WHY)
#   suite_prepare NAME VAR
#                    the suite NAME (blktests, fstests) from the variable
#                    VAR (ZNBD_BLKTESTS, ZNBD_FSTESTS): a NAME-*.tar.gz
#                    tarball, a folder holding one (the newest), or an
#                    unpacked tree; unpacked into and built (make, in a
#                    chroot of the root) in $top_builddir/tests/vm/NAME,
#                    once per tarball or tree: sets SUITE_DIR and
#                    SUITE_ID (the tarball's name, whose suffix is the
#                    upstream commit); returns 1 with SUITE_WHY if there
#                    is none, 2 if the build failed
#   suite_skip WHY   "1..0 # SKIP WHY" and exit (the test counts as
#                    skipped, as when the guest cannot boot)
#
# Upstream keeps the suites at https://github.com/osandov/blktests and
# https://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git (the README).
: "${top_builddir:?}" "${top_srcdir:?}"
ROOT_NAME=debian13
ROOT_DIR=${ZNBD_ROOT_DIR:-/var/lib/znbd/roots}/$ROOT_NAME

suite_skip() {
  echo "1..0 # SKIP $*"
  exit 0
}

root_prepare() {
  local log=$top_builddir/tests/vm/build-$ROOT_NAME.log why
  ROOT_BUILD=$top_builddir/$ROOT_NAME ROOT_WHY=
  if [ ! -f "$ROOT_DIR/.znbd-root" ]; then
    why=$(cat "$ROOT_DIR/../.build-failed" 2> /dev/null)
    ROOT_WHY="no Debian 13 root in $ROOT_DIR (scripts/build-root.sh${why:+: $why})"
    return 1
  fi
  # One build at a time (tests may run in parallel); make does nothing
  # when the build is current.
  if ! flock "$top_builddir/tests/vm" env BUILD="$ROOT_BUILD" \
    "$top_srcdir/scripts/build-in-root.sh" "$ROOT_NAME" > "$log" 2>&1; then
    ROOT_WHY="building znbd in a chroot of $ROOT_DIR failed: $(tail -n 5 "$log" | tr '\n' ' ')"
    return 2
  fi
}

suite_prepare() {
  local name=$1 src=${!2:-} tarball= tree= dest id
  SUITE_DIR= SUITE_ID= SUITE_WHY=
  [ -n "$src" ] || { SUITE_WHY="$2 is not set (a $name tarball or folder)" && return 1; }
  if [ -f "$src" ]; then
    tarball=$src
  elif [ -f "$src/check" ]; then
    tree=$src
  elif [ -d "$src" ]; then
    tarball=$(ls -1 "$src/$name"-*.tar.gz 2> /dev/null | sort -V | tail -n 1)
  fi
  [ -n "$tarball$tree" ] || { SUITE_WHY="no $name-*.tar.gz or $name tree at $2=$src" && return 1; }
  if [ -n "$tarball" ]; then
    id=$(basename "$tarball" .tar.gz)
  else
    id=$name-$(git -C "$tree" rev-parse --short=12 HEAD 2> /dev/null || basename "$tree")
  fi
  dest=$top_builddir/tests/vm/$name
  SUITE_DIR=$dest/$id SUITE_ID=$id
  if [ ! -f "$SUITE_DIR/.znbd-suite" ]; then
    (
      flock 9
      [ -f "$SUITE_DIR/.znbd-suite" ] && exit 0
      rm -rf "$SUITE_DIR" && mkdir -p "$SUITE_DIR" || exit 1
      if [ -n "$tarball" ]; then
        # git archive tarballs hold one top folder.
        tar -xzf "$tarball" -C "$SUITE_DIR" --strip-components=1 || exit 1
      else
        cp -a "$tree/." "$SUITE_DIR/" || exit 1
      fi
      "$top_srcdir/scripts/in-root.sh" --bind "$SUITE_DIR" "$ROOT_NAME" \
        sh -c 'cd "$1" && make -j"$(nproc)"' make "$SUITE_DIR" > "$dest/build.log" 2>&1 || exit 1
      echo "$id" > "$SUITE_DIR/.znbd-suite"
    ) 9> "$dest.lock"
  fi
  [ -f "$SUITE_DIR/.znbd-suite" ] && return 0
  SUITE_WHY="unpacking or building $id in a chroot of $ROOT_DIR failed: $(tail -n 5 "$dest/build.log" 2> /dev/null | tr '\n' ' ')"
  return 2
}
