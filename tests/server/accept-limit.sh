#!/usr/bin/env bash
# At the open-file limit the accept loop must back off, not spin: with a
# low `ulimit -n` and more clients than descriptors, the server's CPU time
# stays low while connections wait in the backlog, it logs the condition
# a few times at most, and it serves again once the clients are gone.
# The CPU bound is a resource check (a spinning loop burns a whole core),
# generous enough not to depend on the machine's speed.
. "$(dirname "$0")/../functions.sh"
frontend_available
require nbdinfo

# The server inherits the soft limit; the test's own tools get it back.
hard=$(ulimit -Hn)
ulimit -Sn 24
start_frontend size=8M zoned=false -t 2 # 2 descriptors per worker
ulimit -Sn "$hard"

/usr/bin/python3 - "$sock" "$tmpdir/ready" <<'PY' &
import socket, sys, time
path, ready = sys.argv[1], sys.argv[2]
conns, greeted = [], 0
for i in range(64):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(0.3)
    s.connect(path)
    conns.append(s)
    try:
        if len(s.recv(18)) > 0:
            greeted += 1
    except socket.timeout:
        pass
open(ready, "w").write("%d\n" % greeted)
time.sleep(30)
PY
cpid=$!
on_exit "kill $cpid 2>/dev/null"
for i in $(seq 400); do [ -s "$tmpdir/ready" ] && break; sleep 0.05; done
[ -s "$tmpdir/ready" ] || die "client did not open its connections"
greeted=$(cat "$tmpdir/ready")
[ "$greeted" -lt 64 ] || die "all 64 connections served: the limit was not reached"
note "$greeted of 64 connections greeted under ulimit -n 24"

ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
sleep 2
t1=$(ticks)
used=$((t1 - t0))
note "server CPU over 2 s at the fd limit: $used ticks ($hz per second)"
[ "$used" -lt $((hz / 2)) ] || die "server used $used ticks of CPU in 2 s at the fd limit (spinning)"
lines=$(grep -c 'accept' "$server_log" || true)
[ "$lines" -le 3 ] || die "$lines accept lines in the server log (want at most 3)"

kill "$cpid"
wait "$cpid" 2>/dev/null || true
ok=
for i in $(seq 40); do
  if size=$(nbdinfo --size "$uri" 2>/dev/null); then ok=1; break; fi
  sleep 0.25
done
[ -n "$ok" ] && [ "$size" = 8388608 ] || die "server does not serve after the clients left"
frontend_alive || die "server died"
stop_frontend
pass "fd limit: $used ticks in 2 s, $lines log line(s), serving again"
