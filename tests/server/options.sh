#!/usr/bin/env bash
# znbd's command line: -r, -e, --run (captive, $uri, exit status), -U -,
# -p/-i (TCP on 127.0.0.1, random port), daemon mode with -P, clean stop
# on SIGTERM and SIGINT (socket and pidfile removed), bad options and
# parameters refused with a message naming them.
. "$(dirname "$0")/../functions.sh"
frontend_available
require nbdinfo
znbd=$top_builddir/server/znbd
mode=--queue-mode=$ZNBD_FRONTEND

# -r: EPERM on writes.
start_frontend size=16M zoned=false -r
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" readonly || die "read-only checks"
stop_frontend

# -e NAME: served under that name (and the default ""), others refused.
start_frontend size=16M zoned=false -e disk1
nbdinfo "nbd+unix:///disk1?socket=$sock" >"$tmpdir/info" || die "export disk1 not served"
grep -q 'export="disk1"' "$tmpdir/info" || die "nbdinfo does not show export disk1"
if nbdinfo "nbd+unix:///other?socket=$sock" >/dev/null 2>&1; then
  die "export 'other' was served"
fi
note "-e disk1: served; 'other' refused"
stop_frontend

# --run: captive, $uri substituted, exit status passed through, socket gone.
out=$("$znbd" $mode --run 'nbdinfo --size "$uri"; echo "uri=$uri"; exit 3' size=8M zoned=false) && rc=0 || rc=$?
[ "$rc" = 3 ] || die "--run: exit status $rc, want 3"
echo "$out" | grep -qx 8388608 || die "--run: nbdinfo --size printed: $out"
s=$(echo "$out" | sed -n 's/^uri=nbd+unix:\/\/\/?socket=//p')
[ -n "$s" ] && [ ! -e "$s" ] || die "--run: temporary socket $s left behind"
note "--run: captive, \$uri=nbd+unix, exit status 3 passed on, socket removed"

# TCP on 127.0.0.1 with a random port (retry if taken).
ok=
for try in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  "$znbd" $mode -f -p "$port" -P "$tmpdir/tcp.pid" size=8M zoned=false \
    >"$tmpdir/tcp.log" 2>&1 &
  pid=$!
  # Until it serves or exits (a taken port): the bound is only for a
  # server that does neither.
  for i in $(seq 600); do [ -s "$tmpdir/tcp.pid" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
  if [ -s "$tmpdir/tcp.pid" ]; then ok=1; break; fi
  kill -0 $pid 2>/dev/null && { kill -KILL $pid; cat "$tmpdir/tcp.log" >&2; die "-p $port: neither served nor exited in 30 s"; }
  wait $pid || true
done
[ -n "$ok" ] || die "could not listen on any random TCP port"
size=$(nbdinfo --size "nbd://127.0.0.1:$port") || die "nbdinfo over TCP failed"
[ "$size" = 8388608 ] || die "TCP size $size"
kill -INT $pid
wait $pid && rc=0 || rc=$?
[ "$rc" = 0 ] || die "SIGINT: exit status $rc"
[ ! -e "$tmpdir/tcp.pid" ] || die "pidfile left after SIGINT"
note "TCP 127.0.0.1:$port served; SIGINT: status 0, pidfile removed"

# Daemon mode: forks, pidfile names the daemon; SIGTERM removes the socket.
"$znbd" $mode -U "$tmpdir/d.sock" -P "$tmpdir/d.pid" size=8M zoned=false ||
  die "daemon start failed"
for i in $(seq 100); do [ -s "$tmpdir/d.pid" ] && break; sleep 0.05; done
dpid=$(cat "$tmpdir/d.pid")
on_exit "kill $dpid 2>/dev/null"
nbdinfo --size "nbd+unix:///?socket=$tmpdir/d.sock" >/dev/null || die "daemon not serving"
kill -TERM "$dpid"
# (How fast it stops is tests/server/stop.sh's check; 15 s only bounds
# the wait on a loaded machine.)
for i in $(seq 300); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$dpid" 2>/dev/null && die "daemon did not stop on SIGTERM"
[ ! -e "$tmpdir/d.sock" ] || die "socket left after SIGTERM"
note "daemon mode: pidfile written, SIGTERM stops it and removes the socket"

# Daemon mode returns once it serves: with relative -U, -P and
# zone_control= (taken from the starting directory, though the daemon runs
# in /), the pidfile and both sockets answer at once, without waiting.
mkdir "$tmpdir/rel"
(cd "$tmpdir/rel" && "$znbd" $mode -U r.sock -P r.pid size=8M zoned=false \
  zone_control=r.ctl) || die "daemon start with relative paths failed"
[ -s "$tmpdir/rel/r.pid" ] || die "pidfile not there when the parent exited"
rpid=$(cat "$tmpdir/rel/r.pid")
on_exit "kill $rpid 2>/dev/null"
size=$(nbdinfo --size "nbd+unix:///?socket=$tmpdir/rel/r.sock") ||
  die "relative -U: not serving when the parent exited"
[ "$size" = 8388608 ] || die "relative -U: size $size"
"$top_builddir/client/nbdzone" stats --control "$tmpdir/rel/r.ctl" \
  "nbd+unix:///?socket=$tmpdir/rel/r.sock" >"$tmpdir/rel.stats" ||
  die "relative zone_control: no control socket when the parent exited"
kill -TERM "$rpid"
for i in $(seq 300); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$rpid" 2>/dev/null && die "daemon (relative paths) did not stop on SIGTERM"
left=$(ls "$tmpdir/rel")
[ -z "$left" ] || die "left in the starting directory after SIGTERM: $left"
# A start-up failure after the fork is the parent's exit status and message.
if "$znbd" $mode -U "$tmpdir/f.sock" size=8M zoned=false \
  zone_control="$tmpdir/none/f.ctl" 2>"$tmpdir/f.err"; then
  die "daemon with an impossible zone_control exited 0"
fi
grep -q 'zone_control' "$tmpdir/f.err" || die "no message: $(cat "$tmpdir/f.err")"
note "daemon mode: ready on return with relative paths; a late failure exits 1 naming zone_control"

# SIGTERM with a connection open and requests in flight: the client says
# when it is connected and has sent its option (a fixed sleep let a slow
# client connect only after the server had gone).
start_frontend size=16M zoned=false
/usr/bin/python3 - "$sock" "$tmpdir/connected" <<'PY' &
import socket, struct, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.recv(18); s.sendall(struct.pack(">I", 3))
s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) + b"\0" * 6)
open(sys.argv[2], "w").write("sent\n")
time.sleep(60)
PY
cpid=$!
on_exit "kill $cpid 2>/dev/null"
for i in $(seq 600); do [ -s "$tmpdir/connected" ] && break; kill -0 $cpid 2>/dev/null || break; sleep 0.05; done
[ -s "$tmpdir/connected" ] || die "the client did not connect"
s=$sock
stop_frontend || die "server exit status non-zero on SIGTERM with a client connected"
[ ! -e "$s" ] || die "socket left after SIGTERM"
kill $cpid 2>/dev/null || true
note "SIGTERM with a connected client: clean exit, socket removed"

# Refusals name what is wrong.
err=$("$znbd" $mode -f -U "$tmpdir/x" size=8M nosuchkey=1 2>&1) && die "nosuchkey accepted"
echo "$err" | grep -q nosuchkey || die "error does not name nosuchkey: $err"
err=$("$znbd" -f -U "$tmpdir/x" --queue-mode=blk size=8M 2>&1) && die "--queue-mode=blk accepted"
echo "$err" | grep -q queue-mode || die "error does not name --queue-mode: $err"
err=$("$znbd" $mode -f -U "$tmpdir/x" size=8M zoned=false notkv 2>&1) && die "bare word accepted"
echo "$err" | grep -q notkv || die "error does not name the bare word: $err"
note "bad parameter, bad --queue-mode and bare word refused with their names"

# Limits met at start-up name the option or parameter behind them: too
# many workers or hardware queues for the descriptors (2 each), a tag set
# deeper than blk-mq's (and one io_uring's) limit.
(
  ulimit -Sn 256
  expect_start_failure --threads --threads 1000 size=8M zoned=false
  if [ "$ZNBD_FRONTEND" = mq ]; then
    expect_start_failure submit_queues submit_queues=1000 size=8M zoned=false
  fi
)
if [ "$ZNBD_FRONTEND" = mq ]; then
  expect_start_failure hw_queue_depth hw_queue_depth=16381 size=8M zoned=false
fi
note "start-up limits name --threads, submit_queues, hw_queue_depth"
# --version and -V print the package version.
v=$("$znbd" --version) || die "--version failed"
[ "$v" = "znbd $(sed -n 's/^AC_INIT(\[znbd\], *\[\([^]]*\)\].*/\1/p' "$top_srcdir/configure.ac")" ] ||
  die "--version printed '$v'"
[ "$("$znbd" -V)" = "$v" ] || die "-V differs from --version"
note "--version: $v"
pass "command line"
