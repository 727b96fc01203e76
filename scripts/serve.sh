#!/bin/bash
# Install the build dependencies, build znbd, and serve a default disk in
# the foreground with nbdkit and the zoned plugin, on a Unix socket and on
# localhost TCP.  Ctrl-C (or SIGTERM) stops both.
#
#   scripts/serve.sh                      # default disk
#   scripts/serve.sh zone_max_open=8      # extra key=value words are added
#   ZNBD_PARAMS="size=1G zoned=false" scripts/serve.sh   # replace the default
#
# Environment: ZNBD_SOCKET (default /tmp/znbd.sock), ZNBD_PORT (default
# 10809), ZNBD_CONTROL (the zone control socket of the default disk,
# default /tmp/znbd.ctl), ZNBD_PARAMS (the disk's parameters, replacing
# the default), BUILD (build directory, default build/).
#
# nbdkit listens on one kind of socket per process, so the TCP side is a
# second nbdkit (nbd plugin) forwarding to the Unix socket.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
sock=${ZNBD_SOCKET:-/tmp/znbd.sock}
port=${ZNBD_PORT:-10809}
ctl=${ZNBD_CONTROL:-/tmp/znbd.ctl}
# The default disk: 4 GiB, 64 MiB zones, the first 4 conventional, with
# the zone control socket (nbdzone --control, explicit open/close).
params=${ZNBD_PARAMS:-size=4G zone_size=64M zone_nr_conv=4 zone_control=$ctl}

# The build dependencies and the clients the README uses with the disk.
ZNBD_DEPS=serve "$top/scripts/install-deps.sh"
BUILD=$build "$top/scripts/build.sh"

plugin=$build/zoned.so
[ -e "$plugin" ] || { echo "serve: $plugin was not built" >&2; exit 1; }
run=$(mktemp -d /tmp/znbd-serve.XXXXXX)
pids=()
cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "$sock"
  rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Wait until nbdkit has written its pidfile (it listens by then).
wait_pidfile() {
  local f=$1 pid=$2
  for _ in $(seq 1 100); do
    [ -s "$f" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

rm -f "$sock" # nbdkit 1.32 does not remove a stale socket
# shellcheck disable=SC2086 # params are key=value words
nbdkit -f -U "$sock" -P "$run/unix.pid" "$plugin" $params "$@" &
pids+=($!)
if ! wait_pidfile "$run/unix.pid" "${pids[0]}"; then
  echo "serve: nbdkit did not start (see its error above)" >&2
  exit 1
fi

nbdkit -f -i 127.0.0.1 -p "$port" -P "$run/tcp.pid" nbd socket="$sock" &
pids+=($!)
if ! wait_pidfile "$run/tcp.pid" "${pids[1]}"; then
  echo "serve: could not listen on 127.0.0.1:$port (set ZNBD_PORT)" >&2
  exit 1
fi

echo "znbd: serving zoned.so $params $*"
echo "  nbd+unix:///?socket=$sock"
echo "  nbd://127.0.0.1:$port"
# shellcheck disable=SC2086
for w in $params "$@"; do
  case $w in zone_control=*) echo "  zone control: ${w#zone_control=}  (nbdzone --control PATH)" ;; esac
done
echo "e.g.  nbdinfo 'nbd+unix:///?socket=$sock'     (Ctrl-C stops)"
# Stop when either server exits, or on a signal.
wait -n "${pids[@]}" || true
