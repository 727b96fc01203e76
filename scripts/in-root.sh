#!/bin/bash
# in-root.sh [OPTION...] ROOT CMD [ARG...]: run CMD as root in a chroot of
# a guest root folder made by scripts/build-root.sh, on this machine's
# kernel, and exit with its status.  What it is for: building znbd and the
# peer suites against the root's libraries (the guest then runs them), and
# running user-space tests (nbdkit, the NBD suite) with the root's
# programs, without booting a guest.
#
#   ROOT          a folder, or a name under $ZNBD_ROOT_DIR (default
#                 /var/lib/znbd/roots), e.g. debian13
#   --bind DIR    DIR (a host folder) read-write at the same path inside;
#                 repeatable (the source tree, a build tree, a suite)
#   -e VAR=VALUE  environment for CMD; repeatable (CMD gets a clean one:
#                 PATH, HOME, LANG, TERM and these)
#   --write       change ROOT itself (build-root.sh's package installs);
#                 without it ROOT is the lower layer of an overlay whose
#                 upper layer is a tmpfs, so nothing CMD writes outside
#                 the --bind folders stays, and two runs may share ROOT
#   --net         the machine's /etc/resolv.conf and /etc/hosts inside
#                 (apt-get talking to the archive); nothing else needs it
#
# Everything happens in a mount namespace of its own (unshare -m): /proc,
# /sys, /dev (the machine's, bound), a fresh /tmp and /run, and the binds
# disappear with CMD and whatever it left running there.
set -u
prog=in-root
# The work happens in a mount namespace of its own: this script again,
# started by unshare with the same arguments.
if [ -z "${IN_ROOT_NS:-}" ]; then
  command -v unshare > /dev/null || { echo "$prog: unshare missing (util-linux)" >&2 && exit 125; }
  IN_ROOT_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
unset IN_ROOT_NS
die() {
  echo "$prog: $*" >&2
  exit 125
}
write=0 net=0 binds=() envs=()
while [ $# -gt 0 ]; do
  case $1 in
    --bind) binds+=("${2:?}"); shift 2 ;;
    -e) envs+=("${2:?}"); shift 2 ;;
    --write) write=1; shift ;;
    --net) net=1; shift ;;
    --) shift; break ;;
    -*) die "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || die "usage: in-root.sh [--bind DIR]... [-e VAR=VALUE]... [--write] [--net] ROOT CMD [ARG...]"
root=$1
shift
case $root in
  /*) ;;
  *) root=${ZNBD_ROOT_DIR:-/var/lib/znbd/roots}/$root ;;
esac
[ -x "$root/bin/sh" ] || die "no root at $root (scripts/build-root.sh)"
[ "$(id -u)" = 0 ] || die "needs root (chroot, mount)"
for e in "${envs[@]}"; do
  [[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "bad -e $e"
done
for b in "${binds[@]}"; do
  [ -d "$b" ] || die "no folder $b to bind"
done

# The root as the chroot will see it.
mnt=$(mktemp -d "${TMPDIR:-/tmp}/in-root.XXXXXX") || die "mktemp failed"
top_mnt=$mnt
if [ "$write" = 1 ]; then
  mount --bind "$root" "$mnt" || die "cannot bind $root"
else
  mount -t tmpfs -o mode=0755 in-root-upper "$mnt" || die "cannot mount a tmpfs"
  mkdir -p "$mnt/upper" "$mnt/work" "$mnt/root"
  mount -t overlay -o "lowerdir=$root,upperdir=$mnt/upper,workdir=$mnt/work" in-root "$mnt/root" ||
    die "cannot mount an overlay over $root"
  mnt=$mnt/root
fi
mount -t proc proc "$mnt/proc" || die "cannot mount proc"
mount -t sysfs sysfs "$mnt/sys" || die "cannot mount sysfs"
mount --rbind /dev "$mnt/dev" || die "cannot bind /dev"
mount -t tmpfs -o mode=1777 tmp "$mnt/tmp" || die "cannot mount /tmp"
mount -t tmpfs -o mode=0755 run "$mnt/run" || die "cannot mount /run"
if [ "$net" = 1 ]; then
  for f in /etc/resolv.conf /etc/hosts; do
    [ -f "$f" ] || continue
    # A symlink (to systemd-resolved's file, say) is replaced by a file.
    if [ -L "$mnt$f" ] || [ ! -e "$mnt$f" ]; then
      rm -f "$mnt$f" && : > "$mnt$f" || die "cannot create $f"
    fi
    mount --bind "$f" "$mnt$f" || die "cannot bind $f"
  done
fi
for b in "${binds[@]}"; do
  b=$(readlink -f "$b")
  mkdir -p "$mnt$b" && mount --bind "$b" "$mnt$b" || die "cannot bind $b"
done
chroot "$mnt" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin \
  HOME=/root LANG=C.UTF-8 TERM=dumb "${envs[@]}" "$@"
rc=$?
umount -R -l "$top_mnt" && rmdir "$top_mnt"
exit $rc
