#!/bin/bash
# In the guest: a lost reply (the control socket's `drop-reply`) seen by
# the kernel's NBD client, whose request timeout (nbd-client -t) must
# notice it.  TAP output.
#   guest-nbd-drop.sh FE...   FE: bio | mq | plugin
# For each front-end and each of READ and WRITE: the server runs with a
# control socket, nbd-client -t 5 attaches one connection, `drop-reply
# every 1 KIND` is set, and one O_DIRECT request of that kind is sent.
# Linux 6.1 (nbd_xmit_timeout() in drivers/block/nbd.c): on a device with
# a timeout the expired request's socket is marked dead (the kernel shuts
# it down, so the server sees the client hang up) and the request is
# requeued; with one connection and no dead_conn_timeout there is no
# other socket (nbd_handle_cmd(): "Dead connection, failed to find a
# fallback"), so the request fails with EIO.  Checked: dd fails with EIO
# by itself (bounded by its own timeout, not timed), the kernel log says
# so, the server's `stats` counted the dropped reply, new I/O on the dead
# device fails too, and after `drop-reply off` the server is still
# serving: a new connection reads the right bytes (for a WRITE: the
# bytes of the write whose reply was lost, as the request was executed).
# shellcheck source=guest-lib.sh
. "$top_srcdir/tests/vm/guest-lib.sh"
[ $# -gt 0 ] || set -- bio mq plugin

TO=5 # nbd-client -t: the kernel's request timeout, seconds
# The dd that must fail is stopped after this many seconds: only a hang
# gets there (the kernel fails it after TO s; it took 6 s under TCG).
HANG=90

check "modprobe nbd" modprobe nbd nbds_max=2
note "kernel $(uname -r), $(nproc) vCPUs"
head -c $((64 * 1024)) /dev/urandom > "$work/old"
head -c $((64 * 1024)) /dev/urandom > "$work/new"

# ctl LINE (guest-lib.sh): one request on the control socket $CTL.
# ctl_is LINE WANT: the reply to LINE is exactly WANT.
ctl_is() {
  local got
  got=$(ctl "$1") || return 1
  echo "$1 -> $got"
  [ "$got" = "$2" ]
}
# ctl_starts LINE PREFIX: the reply to LINE starts with PREFIX.
ctl_starts() {
  local got
  got=$(ctl "$1") || return 1
  echo "$1 -> $got"
  [ "${got#"$2"}" != "$got" ]
}
# dropped_at_least N: stats' dropped_replies >= N.
dropped_at_least() {
  local st n
  st=$(ctl stats) || return 1
  n=$(sed -n 's/.*dropped_replies=\([0-9]*\).*/\1/p' <<< "$st")
  echo "dropped_replies=${n:-?}"
  [ -n "$n" ] && [ "$n" -ge "$1" ]
}
# lost_request KIND: one O_DIRECT 64 KiB request of KIND (read | write)
# at 0, bounded by HANG s; it must fail with EIO, not be stopped.
lost_request() {
  local rc=0 t0=$SECONDS out
  if [ "$1" = read ]; then
    out=$(timeout -k 5 $HANG dd if="$DEV" of=/dev/null bs=64K count=1 iflag=direct 2>&1) || rc=$?
  else
    out=$(timeout -k 5 $HANG dd if="$work/new" of="$DEV" bs=64K count=1 oflag=direct \
      conv=notrunc 2>&1) || rc=$?
  fi
  printf '%s\n' "$out"
  echo "dd status $rc after $((SECONDS - t0)) s"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "dd hung: stopped after $HANG s"
    return 1
  fi
  [ "$rc" != 0 ] || { echo "dd succeeded: the reply was not lost"; return 1; }
  grep -q 'Input/output error' <<< "$out" || { echo "failed, but not with EIO"; return 1; }
}
# timeout_logged: the kernel log shows what 6.1 does when the timeout
# expires on a one-connection device: the socket is marked dead and the
# request requeued ("Connection timed out, retrying (1/1 alive)"), then
# no live socket is found for it ("Dead connection, failed to find a
# fallback": EIO).  All of nbd0's lines are printed.
timeout_logged() {
  local l
  l=$(dmesg | grep "${DEV#/dev/}: ")
  printf '%s\n' "$l"
  grep -q 'Connection timed out, retrying (1/1 alive)' <<< "$l" ||
    { echo "no 'Connection timed out, retrying (1/1 alive)' in the kernel log"; return 1; }
  grep -q 'Dead connection, failed to find a fallback' <<< "$l" ||
    { echo "no 'Dead connection, failed to find a fallback' in the kernel log"; return 1; }
}

drop_checks() { # FE KIND
  local fe=$1 kind=$2 what="$1 $2"
  CTL=$work/ctl-$fe-$kind
  check "$what: start $fe with a control socket" start_server "$fe" size=16M zoned=false \
    blocksize=4096 zone_control="$CTL" || return
  if ! check "$what: nbd-client -C 1 -t $TO" attach 4096 1 -t $TO; then
    stop_server
    return
  fi
  check "$what: 64 KiB written at 0 read back" write_read 0 65536 "$work/old"
  dmesg -C
  check "$what: drop-reply every 1 $kind" \
    ctl_is "drop-reply every 1 $kind" "ok every=1 kinds=$kind dropped_replies=0"
  check "$what: the $kind whose reply is lost fails with EIO by itself (within $HANG s)" \
    lost_request "$kind"
  check "$what: kernel log: connection timed out, socket dead, no fallback" timeout_logged
  check "$what: stats counted the dropped reply (dropped_replies >= 1)" dropped_at_least 1
  check "$what: the socket is dead: a new read fails with EIO" expect_eio dread 0 4096
  check "$what: drop-reply off" ctl_starts "drop-reply off" "ok every=0 kinds=none dropped_replies="
  check "$what: nbd-client -d" detach
  check "$what: $fe is still running" kill -0 "$SERVER_PID"
  if check "$what: a new connection attaches (nbd-client -t $TO)" attach 4096 1 -t $TO; then
    if [ "$kind" = read ]; then
      check "$what: ... and reads the bytes written before" same_bytes 0 65536 "$work/old"
    else
      check "$what: ... and reads the bytes of the write whose reply was lost" \
        same_bytes 0 65536 "$work/new"
    fi
    check "$what: ... and writes and reads back" write_read 65536 65536 "$work/old"
    check "$what: nbd-client -d" detach
  fi
  check "$what: $fe still running, stops cleanly" sh -c "kill -0 $SERVER_PID" &&
    stop_server
}

for fe in "$@"; do
  if ! why=$(frontend_available "$fe"); then
    check "front-end $fe is built" sh -c "echo '$why'; false"
    continue
  fi
  for kind in read write; do
    drop_checks "$fe" "$kind"
    stop_server > /dev/null
    [ "$(nbd_size)" = 0 ] || $T nbd-client -d "$DEV" > /dev/null 2>&1
    note "$fe $kind done at ${SECONDS} s"
  done
done
tap_end
