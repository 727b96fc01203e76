# Helpers for the nbdzone tests, sourced after ../functions.sh.
#
#   nbdzone ARGS...          the built client
#   ctl REQUEST              one request on the zone control socket $ctl
#                            (independent of nbdzone: plain Python socket);
#                            prints the reply, fails unless it starts "ok"
#   nbd_write OFF LEN        write LEN bytes of 0xab at byte OFF with nbdsh
#   cond_of ZONE, wp_of ZONE the condition name / absolute byte wp ("-":
#                            none) of ZONE from the control socket (exact,
#                            independent of nbdzone)
#   zline START LEN CAP WPTR COND TYPE
#                            one expected blkzone-format line; sizes in
#                            512-byte sectors, COND em|oi|oe|cl|ro|fu|of|nw,
#                            TYPE 1 or 2
#   expect_status N CMD...   run CMD, which must exit with status N; its
#                            stdout+stderr land in $out
nbdzone_bin=$top_builddir/client/nbdzone
[ -x "$nbdzone_bin" ] || skip "client/nbdzone is not built"
nbdzone() { "$nbdzone_bin" "$@"; }

ctl=$tmpdir/ctl

ctl() {
  /usr/bin/python3 - "$ctl" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
sys.stdout.write(data.decode())
sys.exit(0 if data.startswith(b"ok") else 1)
PY
}

wait_ctl() {
  local i
  for ((i = 0; i < 100; i++)); do
    [ -S "$ctl" ] && return 0
    sleep 0.05
  done
  die "the zone control socket $ctl did not appear (zone_control=)"
}

nbd_write() {
  nbdsh -u "$uri" -c "h.pwrite(b'\xab' * $2, $1)" ||
    die "nbdsh write of $2 bytes at $1 failed"
}

cond_of() { ctl "report $1 1" | sed -n 's/.* cond=\([A-Z_]*\)$/\1/p'; }
wp_of() { ctl "report $1 1" | sed -n 's/.* wp=\([0-9-]*\) .*/\1/p'; }

declare -A _cond_num=([nw]=0 [em]=1 [oi]=2 [oe]=3 [cl]=4 [ro]=13 [fu]=14 [of]=15)
zline() {
  local type_text=CONVENTIONAL
  [ "$6" = 2 ] && type_text=SEQ_WRITE_REQUIRED
  printf '  start: 0x%09x, len 0x%06x, cap 0x%06x, wptr 0x%06x reset:0 non-seq:0, zcond:%2u(%s) [type: %u(%s)]\n' \
    "$1" "$2" "$3" "$4" "${_cond_num[$5]}" "$5" "$6" "$type_text"
}

expect_status() {
  local want=$1 rc=0
  shift
  out=$("$@" 2>&1) || rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "$out" >&2
    die "'$*' exited $rc, expected $want"
  fi
}

# The zoned front-end every test uses unless it needs another geometry:
# 16 zones of 1 MiB, capacity 768 KiB, zones 0-1 conventional, the last
# zone 512 KiB.
start_zoned() {
  start_frontend size=15872K zone_size=1M zone_capacity=768K zone_nr_conv=2 \
    zone_control="$ctl" "$@"
  wait_ctl
}

# fio through the engine (client/znbd-fio.c):
#   require_fio_engine       skip unless znbd-fio.so was built
#   zfio NAME ARGS...        fio --name=NAME with the engine on $uri, JSON
#                            output in $tmpdir/NAME.json (run_fio: dies if
#                            fio fails); fio_get NAME KEY reads it
#   zone_summary             one line "COND COND ..." of all zones from the
#                            control socket
fio_engine=$top_builddir/znbd-fio.so
# In a sanitizer build the engine is instrumented and fio is not: preload
# ASan into fio, as the helpers do for nbdkit.
if [ "${ZNBD_SANITIZERS:-no}" = yes ]; then
  fio() {
    env "LD_PRELOAD=$(gcc -print-file-name=libasan.so)" \
      "ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
      "$(type -P fio)" "$@"
  }
fi
require_fio_engine() {
  require fio
  [ -f "$fio_engine" ] || skip "znbd-fio.so is not built (configure found no fio source)"
}
zfio() {
  local name=$1
  shift
  run_fio "$name" --ioengine=external:"$fio_engine" --uri="$uri" "$@"
}
zone_summary() {
  ctl report | sed -n 's/.* cond=\([A-Z_]*\)$/\1/p' | tr '\n' ' '
}
