#!/usr/bin/env bash
# Socket activation (man/znbd.pod, SOCKET ACTIVATION; sd_listen_fds(3)'s
# protocol, as nbdkit follows it): a service manager's listening sockets
# passed as descriptors 3, 4, ... with LISTEN_PID and LISTEN_FDS.
#   - a Unix and a TCP socket passed by an activator (tests/server's own,
#     in Python: it binds port 0, so no port is guessed): znbd serves the
#     same device on both, in the foreground (the activator's child
#     stays the server), the descriptors close-on-exec; a write through
#     one reads back through the other; SIGTERM exits 0 and leaves the
#     Unix socket file, which is the manager's;
#   - with LISTEN_PID another process's it is not activated: it says so
#     and listens on -U as usual;
#   - refused, the server exiting with a message: -U (or -p, -i, --run) with
#     activation, LISTEN_FDS=0 or 17, a descriptor that is not a
#     socket (ENOTSOCK);
#   - systemd's own activator, systemd-socket-activate, where installed:
#     znbd starts on the first connection and serves it.
. "$(dirname "$0")/../functions.sh"
require nbdsh
require_python_nbd
export ZNBD_FRONTEND=mq
server=$(_server_path) || skip "server/znbd is not built"

# activate.py LOG UNIX-PATH|- TCP(yes|no) ENV... -- ARGS: listen, fork, put
# the sockets at 3, 4, set LISTEN_PID (the child's own id unless
# LISTEN_PID is among ENV) and LISTEN_FDS, exec ARGS; prints the TCP
# port and the child's pid.  ENV: NAME=VALUE words, "fd3=file" puts a
# regular file at descriptor 3 instead of the first socket.
cat > "$tmpdir/activate.py" << 'PY'
import os, socket, sys
log, path, tcp = sys.argv[1], sys.argv[2], sys.argv[3] == "yes"
i = sys.argv.index("--")
env_words, args = sys.argv[4:i], sys.argv[i + 1:]
socks = []
if path != "-":
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.bind(path)
    u.listen(16)
    socks.append(u)
port = 0
if tcp:
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.bind(("127.0.0.1", 0))
    t.listen(16)
    port = t.getsockname()[1]
    socks.append(t)
fds = [s.fileno() for s in socks]
extra = dict(w.split("=", 1) for w in env_words)
if extra.pop("fd3", None) == "file":
    fds[0] = os.open(log + ".fd3", os.O_RDWR | os.O_CREAT)
pid = os.fork()
if pid == 0:
    # dup2 clears close-on-exec: the exec'd server gets 3, 4, ...
    moved = [os.dup(fd) for fd in fds]
    for n, fd in enumerate(moved):
        os.dup2(fd, 3 + n)
    env = dict(os.environ, LISTEN_PID=str(os.getpid()), LISTEN_FDS=str(len(fds)))
    env.update(extra)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.execve(args[0], args, env)
print(port, pid)
PY
# activate LOG UNIX TCP [ENV...] -- ARGS: PORT and PID of the server.
activate() {
  read -r PORT PID < <(/usr/bin/python3 "$tmpdir/activate.py" "$@")
  on_exit "kill -KILL $PID 2>/dev/null"
}
# wait_exit PID: until PID exited (10 s at most).
wait_exit() {
  local i
  for _ in $(seq 200); do
    kill -0 "$1" 2> /dev/null || break
    sleep 0.05
  done
  if kill -0 "$1" 2> /dev/null; then
    die "pid $1 still runs after 10 s"
  fi
}

# ---- a Unix and a TCP socket
usock=$tmpdir/activated.sock
activate "$tmpdir/a.log" "$usock" yes -- "$server" --queue-mode=mq size=16M zone_size=4M \
  zone_control="$tmpdir/a.ctl"
for _ in $(seq 200); do [ -S "$tmpdir/a.ctl" ] && break; sleep 0.05; done
[ -S "$tmpdir/a.ctl" ] || { cat "$tmpdir/a.log"; die "no control socket: the server did not start"; }
uuri="nbd+unix:///?socket=$usock"
turi="nbd://127.0.0.1:$PORT"
size=$(nbdinfo --size "$uuri") || die "nbdinfo over the activated Unix socket"
[ "$size" = 16777216 ] || die "size over the Unix socket: $size, not 16777216"
size=$(nbdinfo --size "$turi") || die "nbdinfo over the activated TCP socket"
[ "$size" = 16777216 ] || die "size over TCP: $size, not 16777216"
pass "one device on both passed sockets (Unix, TCP port $PORT): 16777216 bytes"
# Foreground: the activator's child is the server (no fork).
[ "$(cat "/proc/$PID/comm")" = znbd ] || die "pid $PID is $(cat "/proc/$PID/comm"), not znbd"
for fd in 3 4; do
  flags=$(awk '/^flags:/ {print $2}' "/proc/$PID/fdinfo/$fd")
  [ $((8#$flags & 8#2000000)) != 0 ] || die "descriptor $fd is not close-on-exec (flags $flags)"
done
pass "the server is the activated process itself, descriptors 3 and 4 close-on-exec"
/usr/bin/nbdsh -u "$turi" -c 'h.pwrite(b"\x5a" * 4096, 4 << 20)' || die "write at zone 1's wp over TCP"
got=$(/usr/bin/nbdsh -u "$uuri" -c 'import sys; sys.stdout.write(h.pread(4096, 4 << 20).hex()[:8])') ||
  die "read over the Unix socket"
[ "$got" = 5a5a5a5a ] || die "read back $got, not 5a5a5a5a"
pass "a write over TCP reads back over the Unix socket"
kill -TERM "$PID"
wait_exit "$PID"
grep -q 'znbd:' "$tmpdir/a.log" && note "server log: $(tr '\n' ' ' < "$tmpdir/a.log")"
check_server_log "$tmpdir/a.log"
[ -S "$usock" ] || die "the activated Unix socket file was removed: it is the manager's"
pass "SIGTERM: the server exits, the manager's socket file stays"

# ---- LISTEN_PID of another process: not activated, -U as usual (-f:
# not activated, znbd would fork into the background, and PID, its
# parent, would be gone at once while the server went on)
activate "$tmpdir/b.log" - yes LISTEN_PID=1 -- "$server" -f -U "$tmpdir/b.sock" size=1M zoned=false
for _ in $(seq 200); do [ -S "$tmpdir/b.sock" ] && break; sleep 0.05; done
[ "$(nbdinfo --size "nbd+unix:///?socket=$tmpdir/b.sock")" = 1048576 ] ||
  { cat "$tmpdir/b.log"; die "with LISTEN_PID=1 znbd should serve on -U"; }
grep -q 'LISTEN_PID=1 is not this process' "$tmpdir/b.log" || die "no note about LISTEN_PID=1: $(cat "$tmpdir/b.log")"
[ "$(cat "/proc/$PID/comm" 2> /dev/null)" = znbd ] || die "pid $PID is not the server"
kill -TERM "$PID"
wait_exit "$PID"
[ ! -S "$tmpdir/b.sock" ] || die "the server left its -U socket after SIGTERM"
pass "LISTEN_PID of another process: a note, and -U served"

# ---- refusals
refused() { # WORDS LOG: the server exited 1 saying WORDS
  wait_exit "$PID"
  grep -q -- "$1" "$2" || die "expected '$1' in: $(cat "$2")"
  note "refused: $(cat "$2")"
}
activate "$tmpdir/c.log" "$tmpdir/c.sock" no -- "$server" -U "$tmpdir/other.sock" size=1M zoned=false
refused "-U, -p, -i and --run cannot be used" "$tmpdir/c.log"
activate "$tmpdir/d.log" - yes -- "$server" -p 10809 size=1M zoned=false
refused "-U, -p, -i and --run cannot be used" "$tmpdir/d.log"
activate "$tmpdir/e.log" - yes LISTEN_FDS=0 -- "$server" size=1M zoned=false
refused "LISTEN_FDS=0: want 1 to 16" "$tmpdir/e.log"
activate "$tmpdir/f.log" - yes LISTEN_FDS=17 -- "$server" size=1M zoned=false
refused "LISTEN_FDS=17: want 1 to 16" "$tmpdir/f.log"
activate "$tmpdir/g.log" - yes fd3=file -- "$server" size=1M zoned=false
refused "descriptor 3: Socket operation on non-socket" "$tmpdir/g.log"
[ ! -S "$tmpdir/other.sock" ] || die "-U was listened on despite the refusal"
pass "refused: -U and -p with activation, LISTEN_FDS 0 and 17, a file as descriptor 3"

# ---- systemd's activator
if command -v systemd-socket-activate > /dev/null; then
  sa_sock=$tmpdir/sa.sock
  systemd-socket-activate -l "$sa_sock" "$server" size=2M zoned=false > "$tmpdir/sa.log" 2>&1 &
  sa_pid=$!
  on_exit "kill -KILL $sa_pid 2>/dev/null"
  for _ in $(seq 200); do [ -S "$sa_sock" ] && break; sleep 0.05; done
  size=$(nbdinfo --size "nbd+unix:///?socket=$sa_sock") || die "nbdinfo through systemd-socket-activate: $(cat "$tmpdir/sa.log")"
  [ "$size" = 2097152 ] || die "size $size through systemd-socket-activate"
  # It execs the server in its own process.
  [ "$(cat "/proc/$sa_pid/comm")" = znbd ] || die "systemd-socket-activate's process is not znbd"
  kill -TERM "$sa_pid"
  wait "$sa_pid" || die "znbd under systemd-socket-activate: exit status $?"
  pass "systemd-socket-activate: znbd started on the first connection, 2097152 bytes"
else
  note "systemd-socket-activate is not installed: that part is not run"
fi
