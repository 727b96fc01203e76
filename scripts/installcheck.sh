#!/bin/sh
# make installcheck (and so make distcheck): what `make install` put
# under DESTDIR runs.  Each installed program says its version or usage,
# nbdkit loads the plugin by path, the units' Exec*= scripts are
# installed and executable, and a program using libznbdclient builds
# with the installed pkg-config file and headers and runs against the
# installed shared library.  One line per check; fails at the first
# that fails.
#   installcheck.sh PARTS DESTDIR BINDIR SBINDIR LIBDIR PKGLIBEXECDIR PLUGINDIR UNITDIR
# PARTS: the components configure built, of plugin znbd znbd-tcmu
# znbd-ublk client units (the top Makefile.am).
set -eu
parts=" $1 " d=$2 bindir=$3 sbindir=$4 libdir=$5 libexec=$6 plugindir=$7 unitdir=$8
fail() {
  echo "installcheck: FAIL: $*" >&2
  exit 1
}
ok() { echo "installcheck: ok: $*"; }
has() { case $parts in *" $1 "*) return 0 ;; esac; return 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if has znbd; then
  v=$("$d$sbindir/znbd" --version) || fail "znbd --version"
  ok "$v"
fi
if has znbd-ublk; then
  "$d$sbindir/znbd-ublk" --help | grep -q '^usage: znbd-ublk' || fail "znbd-ublk --help"
  ok "znbd-ublk --help"
fi
if has znbd-tcmu; then
  if "$d$sbindir/znbd-tcmu" 2> "$tmp/tcmu.err"; then
    fail "znbd-tcmu without a name should print its usage and fail"
  fi
  grep -q 'usage: znbd-tcmu' "$tmp/tcmu.err" || fail "znbd-tcmu's usage"
  ok "znbd-tcmu prints its usage"
fi
if has plugin; then
  nbdkit --dump-plugin "$d$plugindir/nbdkit-zoned-plugin.so" | grep -qx 'name=zoned' ||
    fail "nbdkit --dump-plugin $d$plugindir/nbdkit-zoned-plugin.so"
  ok "nbdkit loads $plugindir/nbdkit-zoned-plugin.so (name=zoned)"
fi
if has units; then
  for u in znbd.socket znbd.service znbd-ublk@.service; do
    [ -f "$d$unitdir/$u" ] || fail "no $unitdir/$u"
    sed -n 's/^Exec[A-Za-z]*=\([^ ]*\).*/\1/p' "$d$unitdir/$u" | while IFS= read -r x; do
      [ -x "$d$x" ] || fail "$u runs $x, which is not installed"
    done
  done
  ok "the units in $unitdir, and the script they run in $libexec"
fi
if has client; then
  v=$("$d$bindir/nbdzone" --version) || fail "nbdzone --version"
  ok "$v"
  # libznbdclient, as a program outside the tree uses it.
  cat > "$tmp/t.c" << 'C'
#include <stdio.h>
#include <string.h>
#include <znbdclient.h>
int
main(void)
{
  char err[256];
  struct znbdc *h = znbdc_open("nbd+unix:///?socket=/nonexistent", NULL,
                               err, sizeof err);
  const char *name = znbdc_source_name(ZNBDC_SRC_ZONECTX);
  printf("%s; %s\n", h ? "connected?" : err, name);
  return h == NULL && strcmp(name, "x-znbd:zone") == 0 ? 0 : 1;
}
C
  flags=$(PKG_CONFIG_PATH=$d$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$d \
    pkg-config --cflags --libs znbdclient) || fail "pkg-config znbdclient"
  # shellcheck disable=SC2086
  ${CC:-cc} -o "$tmp/t" "$tmp/t.c" $flags || fail "a program with libznbdclient does not build"
  out=$(LD_LIBRARY_PATH=$d$libdir "$tmp/t") || fail "the libznbdclient program: $out"
  ok "libznbdclient: built with pkg-config ($flags), ran: $out"
fi
