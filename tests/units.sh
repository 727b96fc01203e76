#!/usr/bin/env bash
# The systemd units (systemd/) pass `systemd-analyze verify`: their
# syntax, every directive known, the dependencies (sockets.target, ...)
# found, the commands they run executable and the man pages they name
# there.  They are checked as make builds them, with the one change that
# their script (znbd-unit) is the build tree's and the man pages the
# built ones (make install puts both elsewhere); the template is checked
# as systemd-analyze instantiates it.  Skips (77) without systemd-analyze
# or when configure installs no units.  The installed units are checked
# as installed by the package test in the guest (tests/vm/guest-ublk-pkg.sh).
. "$(dirname "$0")/functions.sh"
require systemd-analyze man
unit_dir=$top_builddir/systemd
[ -f "$unit_dir/znbd-ublk@.service" ] || skip "the units are not built in $unit_dir"
[ -x "$unit_dir/znbd-unit" ] || die "$unit_dir/znbd-unit is not built"
mkdir -p "$tmpdir/units" "$tmpdir/man/man1"
for u in znbd.socket znbd.service znbd-ublk@.service; do
  src=$unit_dir/$u
  [ -f "$src" ] || src=$top_srcdir/systemd/$u
  sed -E "s|^(Exec[A-Za-z]*=)[^ ]*/znbd-unit |\1$unit_dir/znbd-unit |" "$src" > "$tmpdir/units/$u"
  grep -q "^Exec.*=$unit_dir/znbd-unit " "$tmpdir/units/$u" || grep -q '^ListenStream=' "$tmpdir/units/$u" ||
    die "$u: no Exec line runs znbd-unit"
done
ln -s "$top_builddir"/man/*.1 "$tmpdir/man/man1/"
out=$(cd "$tmpdir/units" && MANPATH=$tmpdir/man SYSTEMD_LOG_LEVEL=notice \
  systemd-analyze verify ./znbd.socket ./znbd.service ./znbd-ublk@.service 2>&1) ||
  die "systemd-analyze verify failed: $out"
[ -z "$out" ] || die "systemd-analyze verify said: $out"
pass "systemd-analyze verify: znbd.socket, znbd.service, znbd-ublk@.service (as znbd-ublk@i.service): no complaint"
# What the units say is what the servers need.
grep -qx 'ExecStart=.*/znbd-unit ublk-start %i' "$tmpdir/units/znbd-ublk@.service" &&
  grep -qx 'ExecStopPost=.*/znbd-unit ublk-stop-post %i' "$tmpdir/units/znbd-ublk@.service" &&
  grep -qx 'Restart=on-failure' "$tmpdir/units/znbd-ublk@.service" ||
  die "znbd-ublk@.service does not restart through znbd-unit"
grep -qx 'Requires=znbd.socket' "$tmpdir/units/znbd.service" || die "znbd.service does not require its socket"
pass "znbd-ublk@ restarts on failure through znbd-unit; znbd.service requires znbd.socket"

# znbd.service's command: znbd-unit execs znbd with znbd.conf's words
# (comments, blank lines and blanks at the ends left out, a blank inside
# a word kept), in the process the service manager started, so socket
# activation holds (here under systemd-socket-activate).
server=$(_server_path) || skip "server/znbd is not built"
require systemd-socket-activate nbdinfo
mkdir -p "$tmpdir/conf/ublk" "$tmpdir/a dir"
cat > "$tmpdir/conf/znbd.conf" << CONF
# a comment

  --queue-mode=mq
size=16M	
zone_size=4M
zone_control=$tmpdir/a dir/ctl
CONF
systemd-socket-activate -l "$tmpdir/nbd.sock" env ZNBD_CONF_DIR="$tmpdir/conf" \
  ZNBD_SBIN="$(dirname "$server")" "$unit_dir/znbd-unit" znbd > "$tmpdir/sa.log" 2>&1 &
sa_pid=$!
on_exit "kill -KILL $sa_pid 2>/dev/null"
for _ in $(seq 200); do [ -S "$tmpdir/nbd.sock" ] && break; sleep 0.05; done
desc=$(nbdinfo --json "nbd+unix:///?socket=$tmpdir/nbd.sock") || die "nbdinfo: $(cat "$tmpdir/sa.log")"
grep -q '"export-size": 16777216' <<< "$desc" && grep -q 'zone_size=4194304' <<< "$desc" ||
  die "not the disk of znbd.conf: $desc"
[ -S "$tmpdir/a dir/ctl" ] || die "no control socket at '$tmpdir/a dir/ctl' (a word with a blank)"
[ "$(cat "/proc/$sa_pid/comm")" = znbd ] || die "znbd-unit did not exec znbd in the activated process"
kill -TERM "$sa_pid"
wait "$sa_pid" || die "znbd exited $? after SIGTERM"
pass "znbd-unit znbd: znbd.conf's words, socket-activated: 16 MiB of 4 MiB zones, control socket in 'a dir'"

# znbd-ublk@NAME's configuration is refused before anything is done
# when it lacks what a restart needs (the kernel side runs in the guest:
# tests/vm/guest-ublk-unit.sh).
ublk_refused() { # WORDS CONF-LINES...: ublk-start NAME fails saying WORDS
  local words=$1 rc=0
  shift
  printf '%s\n' "$@" > "$tmpdir/conf/ublk/t.conf"
  ZNBD_CONF_DIR=$tmpdir/conf ZNBD_SBIN=/nonexistent ZNBD_RUN_DIR=$tmpdir/run \
    "$unit_dir/znbd-unit" ublk-start t > "$tmpdir/refused.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] && grep -q -- "$words" "$tmpdir/refused.out" ||
    die "ublk-start with $* : status $rc, $(cat "$tmpdir/refused.out")"
}
ublk_refused "needs a line --dev-id=N" size=64M zone_size=4M
ublk_refused "give the device number as one line --dev-id=N" "--dev-id 0" size=64M
ublk_refused "needs a line --dev-id=N" --dev-id=x size=64M
ublk_refused "is the unit's to add" --dev-id=0 --recover size=64M
ZNBD_CONF_DIR=$tmpdir/conf "$unit_dir/znbd-unit" ublk-start none > "$tmpdir/refused.out" 2>&1 &&
  die "ublk-start of a name without a file succeeded"
grep -q "ublk/none.conf: no such file" "$tmpdir/refused.out" || die "$(cat "$tmpdir/refused.out")"
pass "znbd-unit ublk-start refuses a file without --dev-id=N, with --recover, and no file"
