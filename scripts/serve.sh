#!/bin/bash
# Install the build dependencies, build znbd, and serve a default disk in
# the foreground on a Unix socket and on localhost TCP.  Ctrl-C (or
# SIGTERM) stops it.
#
#   scripts/serve.sh                      # default disk, served by znbd (mq)
#   scripts/serve.sh zone_max_open=8      # extra key=value words are added
#   ZNBD_PARAMS="size=1G zoned=false" scripts/serve.sh   # replace the default
#   ZNBD_FRONTEND=plugin scripts/serve.sh # the same disk with nbdkit + zoned.so
#
# Environment: ZNBD_FRONTEND (mq, the default, or bio: server/znbd
# --queue-mode=...; plugin: nbdkit with zoned.so), ZNBD_SOCKET (default
# /tmp/znbd.sock), ZNBD_PORT (default 10809), ZNBD_CONTROL (the zone
# control socket of the default disk, default /tmp/znbd.ctl), ZNBD_PARAMS
# (the disk's parameters, replacing the default), BUILD (build directory,
# default build/), ZNBD_SERVE_BUILD=no (neither install nor build: serve
# what BUILD already holds).
#
# Why znbd by default: nbdkit 1.32.4 and 1.32.5 (Debian 12 ships 1.32.5)
# abort ("raw_send_socket: Assertion `sock >= 0' failed") when a client
# goes away while several of its replies are still being sent, with every
# plugin, and the disk goes with the process.  znbd serves the same disk
# and keeps running.  With ZNBD_FRONTEND=plugin on such an nbdkit, both
# nbdkit processes get --threads=1 (one worker thread per connection:
# requests of one connection no longer overlap, which avoids the race);
# man nbdkit-zoned-plugin, BUGS, says more.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
fe=${ZNBD_FRONTEND:-mq}
sock=${ZNBD_SOCKET:-/tmp/znbd.sock}
port=${ZNBD_PORT:-10809}
ctl=${ZNBD_CONTROL:-/tmp/znbd.ctl}
# The default disk: 4 GiB, 64 MiB zones, the first 4 conventional, with
# the zone control socket (nbdzone --control, explicit open/close).
params=${ZNBD_PARAMS:-size=4G zone_size=64M zone_nr_conv=4 zone_control=$ctl}

case $fe in
mq | bio | plugin) ;;
*)
  echo "serve: ZNBD_FRONTEND=$fe: not mq, bio or plugin" >&2
  exit 1
  ;;
esac

if [ "${ZNBD_SERVE_BUILD:-yes}" != no ]; then
  # The build dependencies and the clients the README uses with the disk.
  ZNBD_DEPS=serve "$top/scripts/install-deps.sh"
  BUILD=$build "$top/scripts/build.sh"
fi

run=$(mktemp -d /tmp/znbd-serve.XXXXXX)
pids=()
# Stop the servers: SIGTERM, and SIGKILL for one still running 10 s later
# (a server must not keep serve.sh from exiting).
cleanup() {
  trap - EXIT INT TERM
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    # tail --pid returns when process p has exited.
    timeout 10 tail -s 0.1 --pid="$p" -f /dev/null || {
      echo "serve: server $p did not stop on SIGTERM within 10 s: killing it" >&2
      kill -KILL "$p" 2>/dev/null || true
    }
  done
  wait 2>/dev/null || true
  rm -f "$sock"
  rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Wait until a server has written its pidfile (it listens by then).
wait_pidfile() {
  local f=$1 pid=$2
  for _ in $(seq 1 300); do
    [ -s "$f" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

if [ "$fe" = plugin ]; then
  plugin=$build/zoned.so
  [ -e "$plugin" ] || { echo "serve: $plugin was not built" >&2; exit 1; }
  nbdkit_opts=()
  if "$top/scripts/nbdkit-racy.sh"; then
    nbdkit_opts=(--threads=1)
    echo "serve: $(nbdkit --version) aborts when a client dies with replies pending: serving with --threads=1"
  fi
  rm -f "$sock" # nbdkit 1.32 does not remove a stale socket
  # shellcheck disable=SC2086 # params are key=value words
  nbdkit "${nbdkit_opts[@]}" -f -U "$sock" -P "$run/unix.pid" "$plugin" $params "$@" &
  pids+=($!)
  if ! wait_pidfile "$run/unix.pid" "${pids[0]}"; then
    echo "serve: nbdkit did not start (see its error above)" >&2
    exit 1
  fi
  # nbdkit listens on one kind of socket per process, so the TCP side is
  # a second nbdkit (nbd plugin) forwarding to the Unix socket.
  nbdkit "${nbdkit_opts[@]}" -f -i 127.0.0.1 -p "$port" -P "$run/tcp.pid" nbd socket="$sock" &
  pids+=($!)
  if ! wait_pidfile "$run/tcp.pid" "${pids[1]}"; then
    echo "serve: could not listen on 127.0.0.1:$port (set ZNBD_PORT)" >&2
    exit 1
  fi
  what="nbdkit${nbdkit_opts[*]:+ ${nbdkit_opts[*]}} zoned.so"
else
  znbd=$build/server/znbd
  [ -x "$znbd" ] || { echo "serve: $znbd was not built" >&2; exit 1; }
  # One process listens on both sockets.
  # shellcheck disable=SC2086 # params are key=value words
  "$znbd" -f -U "$sock" -i 127.0.0.1 -p "$port" -P "$run/znbd.pid" \
    --queue-mode="$fe" $params "$@" &
  pids+=($!)
  if ! wait_pidfile "$run/znbd.pid" "${pids[0]}"; then
    echo "serve: znbd did not start (see its error above; a TCP port in use: set ZNBD_PORT)" >&2
    exit 1
  fi
  what="znbd --queue-mode=$fe"
fi

echo "serve: $what $params $*"
echo "  nbd+unix:///?socket=$sock"
echo "  nbd://127.0.0.1:$port"
# shellcheck disable=SC2086
for w in $params "$@"; do
  case $w in zone_control=*) echo "  zone control: ${w#zone_control=}  (nbdzone --control PATH)" ;; esac
done
echo "e.g.  nbdinfo 'nbd+unix:///?socket=$sock'     (Ctrl-C stops)"
# Run until a signal stops us, or a server exits: say so, with its status.
rc=0
wait -n "${pids[@]}" || rc=$?
echo "serve: a server exited (status $rc); stopping" >&2
exit "$rc"
