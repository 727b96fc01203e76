# shellcheck shell=bash
# Sourced by the .test scripts that boot today's kernel: modern_kernel
# finds the kernel root folder and version scripts/fetch-kernel.sh put
# into $ZNBD_KERNEL_DIR (DIR/modern, else the newest one there), or
# $ZNBD_VM_KERNEL's (a root folder, a KVER under $ZNBD_KERNEL_DIR, or a
# series there: 6.12, 7).  It sets
# MODERN_ROOT and MODERN_KVER and returns 0, or sets MODERN_WHY and
# returns 1.  Found here and not left to vm-run, so that the guest's
# uname -r can be checked against an independent answer.
modern_kernel() {
  local kdir=${ZNBD_KERNEL_DIR:-/var/lib/znbd/kernels} m why
  MODERN_ROOT= MODERN_KVER= MODERN_WHY=
  local spec=${ZNBD_VM_KERNEL:-modern} series= pat=*
  # A series (6.12, 7): the newest of it fetched.
  [[ $spec =~ ^[0-9]+(\.[0-9]+)?$ ]] && series=$spec pat=$spec.*
  case $spec in
    modern | "$series")
      for m in $(printf '%s\n' "$kdir"/$pat/.znbd-kernel | sort -V); do
        [ -f "$m" ] && [ "${m%/modern/.znbd-kernel}" = "$m" ] && MODERN_ROOT=${m%/.znbd-kernel}
      done
      # modern: the one fetch-kernel.sh fetches by default, if it says so.
      [ -n "$series" ] || [ ! -f "$kdir/modern/.znbd-kernel" ] || MODERN_ROOT=$kdir/modern
      if [ -z "$MODERN_ROOT" ] && [ -n "$series" ]; then
        MODERN_WHY="no $series kernel fetched into $kdir (ZNBD_KERNEL_SERIES=$series scripts/fetch-kernel.sh)"
        return 1
      fi
      if [ -z "$MODERN_ROOT" ]; then
        why=$(cat "$kdir/.fetch-failed" 2> /dev/null)
        MODERN_WHY="no kernel fetched into $kdir (scripts/fetch-kernel.sh${why:+: $why})"
        return 1
      fi
      ;;
    /*) MODERN_ROOT=$ZNBD_VM_KERNEL ;;
    *) MODERN_ROOT=$kdir/$ZNBD_VM_KERNEL ;;
  esac
  MODERN_KVER=$(cd "$MODERN_ROOT/boot" 2> /dev/null && ls -1 vmlinuz-* 2> /dev/null |
    sed 's/^vmlinuz-//' | sort -V | tail -n 1)
  [ -n "$MODERN_KVER" ] || { MODERN_WHY="no kernel in $MODERN_ROOT/boot" && return 1; }
}
# modern_vm_test [VM-TEST-OPTION...] GUEST-SCRIPT [ARG...]: vm-test in a
# guest booted on that kernel, or the whole test skipped (exit 77,
# "1..0 # SKIP why") when there is none.
modern_vm_test() {
  # The caller may have looked already (ublk.test passes the version).
  if [ -z "$MODERN_KVER" ] && ! modern_kernel; then
    echo "1..0 # SKIP $MODERN_WHY"
    exit 77
  fi
  exec "$(dirname "${BASH_SOURCE[0]}")/vm-test" --kernel-root "$MODERN_ROOT" \
    --kernel "$MODERN_KVER" "$@"
}
