#!/usr/bin/env bash
# What scripts/serve.sh starts (the README's serve command; its default
# disk, this test's front-end: TEST.mq is serve.sh's default, TEST.bio and
# TEST.plugin its ZNBD_FRONTEND=bio|plugin) survives clients killed
# (SIGKILL) in the middle of I/O: fio with 32 reads of 256 KiB in flight on
# the Unix socket, on TCP, and with reads and writes mixed.  After each
# kill the disk still serves on both sockets with the data written before
# (a conventional and a sequential zone), a write at the wp succeeds, and
# in the end SIGTERM stops serve.sh and its servers and removes the socket.
# nbdkit 1.32.4/1.32.5 without --threads=1 abort here (man
# nbdkit-zoned-plugin, BUGS).  serve.sh runs with ZNBD_SERVE_BUILD=no: the
# build tree under test is served as it is, nothing installed or built.
. "$(dirname "$0")/../functions.sh"
require_python_nbd
require fio
[ "$ZNBD_FRONTEND" != memory ] || skip "serve.sh serves znbd or zoned.so, not nbdkit memory"
frontend_available

serve_env=(ZNBD_SERVE_BUILD=no "BUILD=$top_builddir" "ZNBD_FRONTEND=$ZNBD_FRONTEND"
  "ZNBD_SOCKET=$tmpdir/znbd.sock" "ZNBD_CONTROL=$tmpdir/znbd.ctl")
if [ "$ZNBD_SANITIZERS" = yes ]; then
  # As functions.sh's _nbdkit_env: nbdkit must load ASan before the plugin.
  serve_env+=("LD_PRELOAD=$(gcc -print-file-name=libasan.so)"
    "ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
fi
serve_pid=
on_exit '[ -z "$serve_pid" ] || kill -TERM "$serve_pid" 2>/dev/null'

# Start serve.sh on a random TCP port (another one if it is taken) and
# wait until it prints its URIs (both sockets listen by then).
started=
for try in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 40000))
  env "${serve_env[@]}" "ZNBD_PORT=$port" "$top_srcdir/scripts/serve.sh" \
    >"$tmpdir/serve.log" 2>&1 </dev/null &
  serve_pid=$!
  for ((i = 0; i < 600; i++)); do
    grep -q '^e\.g\.' "$tmpdir/serve.log" && { started=1; break; }
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.05
  done
  [ -z "$started" ] || break
  kill -TERM "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=
  grep -q -i -E 'in use|could not listen' "$tmpdir/serve.log" || break
  note "port $port taken, trying another"
done
[ -n "$started" ] || die "serve.sh did not serve: $(cat "$tmpdir/serve.log")"
servers=$(pgrep -P "$serve_pid" | tr '\n' ' ')
note "serve.sh: $(grep '^serve:' "$tmpdir/serve.log" | tail -n 1); servers: $servers"
[ -n "$servers" ] || die "serve.sh runs no server"
unix_uri="nbd+unix:///?socket=$tmpdir/znbd.sock"
tcp_uri="nbd://127.0.0.1:$port"
export unix_uri tcp_uri

# The data every round checks: 1 MiB in conventional zone 0, 1 MiB at
# the start of zone 4 (the first sequential zone: its wp moves to 1 MiB).
nbd_py <<'EOF'
from znbdtest import *
h = connect(u=os.environ["unix_uri"])
h.pwrite(pattern(1 * MiB, 1), 0)
h.pwrite(pattern(1 * MiB, 2), 256 * MiB)
h.flush()
h.shutdown()
say("1 MiB in zone 0 and 1 MiB at zone 4's start written and flushed")
EOF

# victim NAME URI RW: fio (threads, so SIGKILL ends every job at once)
# with 32 requests of 256 KiB in flight on the conventional zones 1-3,
# until it is killed.  Returns once fio has reported I/O done
# (--status-interval), i.e. while it is in the middle of I/O.
victim() {
  local name=$1 u=$2 rw=$3 i
  fio --thread --name="$name" --ioengine=nbd --uri="$u" --rw="$rw" --bs=256k \
    --iodepth=32 --offset=64M --size=192M --time_based --runtime=600 \
    --status-interval=1 >"$tmpdir/$name.log" 2>&1 </dev/null &
  victim_pid=$!
  for ((i = 0; i < 1200; i++)); do
    grep -q -E '(read|write): IOPS=[1-9]' "$tmpdir/$name.log" && return 0
    kill -0 "$victim_pid" 2>/dev/null || break
    sleep 0.05
  done
  cat "$tmpdir/$name.log" >&2
  die "victim $name did no I/O"
}

round=0
for spec in unix:randread tcp:randread unix:randrw tcp:randrw; do
  round=$((round + 1))
  via=${spec%%:*} rw=${spec#*:}
  if [ "$via" = unix ]; then u=$unix_uri; else u=$tcp_uri; fi
  victim "victim$round" "$u" "$rw"
  kill -KILL "$victim_pid"
  wait "$victim_pid" 2>/dev/null || true
  for p in $serve_pid $servers; do
    kill -0 "$p" 2>/dev/null ||
      die "round $round ($via, $rw): process $p of serve.sh died after the client was killed: $(tail -n 5 "$tmpdir/serve.log")"
  done
  round=$round nbd_py <<'EOF' || die "round $round ($via, $rw): the disk does not serve its data"
from znbdtest import *
r = int(os.environ["round"])
for name in ("unix_uri", "tcp_uri"):
    h = connect(u=os.environ[name])
    check_eq(h.pread(1 * MiB, 0), pattern(1 * MiB, 1), "round %d, %s: zone 0's data intact" % (r, name))
    check_eq(h.pread(1 * MiB, 256 * MiB), pattern(1 * MiB, 2), "round %d, %s: zone 4's data intact" % (r, name))
    h.shutdown()
# Zone 4's wp moved only by these writes: 1 MiB + 64 KiB per round.
h = connect(u=os.environ["unix_uri"])
off = 256 * MiB + 1 * MiB + (r - 1) * 64 * KiB
x = pattern(64 * KiB, 10 + r)
h.pwrite(x, off)
check_eq(h.pread(64 * KiB, off), x, "round %d: a write at zone 4's wp succeeds and reads back" % r)
h.shutdown()
EOF
  note "round $round: fio $rw on $via killed mid-I/O; the disk serves its data on both sockets"
done

kill -TERM "$serve_pid"
rc=0
wait "$serve_pid" || rc=$?
serve_pid=
[ "$rc" = 143 ] || die "serve.sh exited with status $rc on SIGTERM, want 143: $(tail -n 5 "$tmpdir/serve.log")"
for p in $servers; do
  for ((i = 0; i < 200; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  ! kill -0 "$p" 2>/dev/null || die "server $p still runs after serve.sh stopped"
done
[ ! -e "$tmpdir/znbd.sock" ] || die "serve.sh left its socket behind"
if grep -E -q 'ERROR: AddressSanitizer|runtime error:|Assertion' "$tmpdir/serve.log"; then
  cat "$tmpdir/serve.log" >&2
  die "serve.sh's log has an assertion or a sanitizer report"
fi
pass "serve.sh survives 4 clients killed mid-I/O (Unix and TCP, reads and writes)"
