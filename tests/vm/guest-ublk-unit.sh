# shellcheck shell=bash
# guest-ublk.sh part "unit": znbd-ublk@.service's restart after a crash
# (systemd/).  The guest has no systemd, so a supervisor loop here does
# what systemd does with the unit file's own lines: ExecStart= (Type=exec,
# its pid MAINPID), then ExecStartPost= with MAINPID set; when the server
# ends, ExecStopPost= with SERVICE_RESULT, EXIT_CODE and EXIT_STATUS set
# as systemd sets them; then, for Restart=on-failure, the whole again
# after RestartSec= unless it ended cleanly or a stop was asked for (a
# stop: SIGTERM to MAINPID).  The unit and its script are the installed
# package's when part "pkg" installed it in this boot, else the build
# tree's (the script and znbd-ublk from there).  Sourced by
# guest-ublk.sh, on its functions (check, all, same_bytes, ...).
# - /etc/znbd/ublk/svc.conf: --dev-id=0, a plain 256 MiB disk (zoned=false)
#   on dir=, which outlives its server; the unit starts: ExecStartPost=
#   reports /dev/ublkb0 served by MAINPID;
# - ext4 on it, mounted, 8 files synced, a writer (dd conv=fsync, 256 KiB
#   files) under way;
# - kill -9 of MAINPID: ExecStopPost= (SERVICE_RESULT=signal) leaves the
#   device, the restart finds it and runs znbd-ublk --recover --dev-id 0,
#   which takes the same disk (same dev_t) back under the mounted file
#   system; the writer goes on and ends with status 0, every synced file
#   and every file the writer completed reads back with the page cache
#   dropped, no I/O error or ext4 error logged, fsck.ext4 clean;
# - a stop (SIGTERM): the server exits 0, ExecStopPost= (success), no
#   restart, no device left;
# - a device whose server died with no restart to come is removed by
#   ExecStopPost= with SERVICE_RESULT=success (recover, then SIGTERM).
# The load is ext4 on a plain disk: no zone append, whose redo after
# --recover man znbd-ublk(1) describes, is involved.
U_NAME=svc
U_DIR=$work/unit.dir
U_MNT=$work/unit.mnt
U_CONF=/etc/znbd/ublk/$U_NAME.conf
U_LOG=$work/unit.log
U_ENV=()
if dpkg-query -W -f='${Status}' znbd-ublk 2> /dev/null | grep -q 'ok installed'; then
  U_FILE=/lib/systemd/system/znbd-ublk@.service
  [ -f "$U_FILE" ] || U_FILE=/usr/lib/systemd/system/znbd-ublk@.service
  U_FROM="the installed package"
else
  # The build tree's unit runs the build tree's script and znbd-ublk.
  U_FILE=$work/znbd-ublk@.service
  sed -E "s|^(Exec[A-Za-z]*=)[^ ]*/znbd-unit |\1$top_builddir/systemd/znbd-unit |" \
    "$top_builddir/systemd/znbd-ublk@.service" > "$U_FILE" 2> /dev/null
  U_ENV=(ZNBD_SBIN="$top_builddir/ublk" ZNBD_CONF_DIR=/etc/znbd)
  U_FROM="the build tree"
fi
note "part unit: znbd-ublk@$U_NAME.service from $U_FROM ($U_FILE)"

# unit_line KEY: the unit's KEY= value, %i as the instance name.
unit_line() { sed -n "s/^$1=//p" "$U_FILE" | head -n 1 | sed "s/%i/$U_NAME/g"; }
# The supervisor: systemd's handling of the unit, as above.  It appends
# "start PID", "ready", "stop-post RESULT", "restart" and "end" lines to
# $U_LOG.events, the commands' output to $U_LOG.
supervise() {
  local start post stoppost rsec rc result code status pid
  read -ra start <<< "$(unit_line ExecStart)"
  read -ra post <<< "$(unit_line ExecStartPost)"
  read -ra stoppost <<< "$(unit_line ExecStopPost)"
  rsec=$(unit_line RestartSec)
  [ "$(unit_line Restart)" = on-failure ] || { echo "end no-restart-policy" >> "$U_LOG.events"; return 1; }
  while :; do
    env "${U_ENV[@]}" "${start[@]}" >> "$U_LOG" 2>&1 &
    pid=$!
    echo "$pid" > "$U_LOG.pid"
    echo "start $pid" >> "$U_LOG.events"
    if env "${U_ENV[@]}" MAINPID="$pid" "${post[@]}" >> "$U_LOG" 2>&1; then
      echo "ready $pid" >> "$U_LOG.events"
    else
      echo "start-post-failed $pid" >> "$U_LOG.events"
      kill -TERM "$pid" 2> /dev/null
    fi
    rc=0
    wait "$pid" || rc=$?
    if [ "$rc" = 0 ]; then
      result=success code=exited status=0
    elif [ "$rc" -gt 128 ]; then
      result=signal code=killed status=$(kill -l $((rc - 128)))
    else
      result=exit-code code=exited status=$rc
    fi
    # A stop asked for: SIGTERM, and a clean exit is a success.
    env "${U_ENV[@]}" SERVICE_RESULT=$result EXIT_CODE=$code EXIT_STATUS="$status" \
      "${stoppost[@]}" >> "$U_LOG" 2>&1
    echo "stop-post $result $code $status" >> "$U_LOG.events"
    if [ $result = success ] || [ -e "$U_LOG.stop" ]; then
      echo "end" >> "$U_LOG.events"
      return 0
    fi
    sleep "${rsec:-0.1}" # RestartSec=, as systemd waits before a restart
    echo "restart" >> "$U_LOG.events"
  done
}
# unit_ready N: the Nth "ready" event came (at most 60 s).
unit_ready() {
  local i
  for i in $(seq 600); do
    [ "$(grep -c '^ready ' "$U_LOG.events")" -ge "$1" ] && break
    grep -q -e '^end' -e '^start-post-failed' "$U_LOG.events" && break
    sleep 0.1
  done
  tail -n 4 "$U_LOG"
  [ "$(grep -c '^ready ' "$U_LOG.events")" -ge "$1" ]
}
unit_start() {
  rm -f "$U_LOG" "$U_LOG.events" "$U_LOG.stop" "$U_LOG.pid" "$U_LOG.sup"
  touch "$U_LOG.events"
  # Its own output file: bash's job messages ("Killed") not in a check's.
  supervise >> "$U_LOG.sup" 2>&1 &
  SUP_PID=$!
  unit_ready 1 || return 1
  U_PID=$(cat "$U_LOG.pid")
  DEV=/dev/ublkb0
  echo "served by $U_PID: $(cat /sys/block/ublkb0/dev 2>&1)"
  grep -q "^$U_NAME: /dev/ublkb0 (device 0), served by pid $U_PID" "$U_LOG" && [ -b "$DEV" ] &&
    [ "$(cat /sys/block/ublkb0/queue/zoned)" = none ]
}
unit_conf() {
  mkdir -p /etc/znbd/ublk &&
    printf '%s\n' "# part unit of guest-ublk.sh" --dev-id=0 size=256M zoned=false \
      "dir=$U_DIR" "zone_control=$CTL" > "$U_CONF"
}
unit_mkfs() {
  $T mkfs.ext4 -q -F "$DEV" && mkdir -p "$U_MNT" && $T mount -t ext4 "$DEV" "$U_MNT" && findmnt -n "$U_MNT"
}
unit_files() {
  local i
  for i in $(seq 8); do
    { printf '%08d' "$i" && head -c $((M - 8)) "$work/rand"; } > "$U_MNT/pre$i" || return 1
  done
  $T sync -f "$U_MNT" && (cd "$U_MNT" && sha256sum pre*) > "$work/unit.sums" && wc -l < "$work/unit.sums"
}
# The writer: 256 KiB files w1, w2, ... (dd conv=fsync), a line in
# unit.done after each, until unit.wstop shows up (at most 300 files).
unit_writer() {
  rm -f "$work/unit.wstop"
  : > "$work/unit.done"
  start_writer "$U_MNT" "$work/unit.done" "$work/unit.wstop" "$work/unit.writer" 300
  UW_PID=$WRITER_BG
}
unit_written() { wc -l < "$work/unit.done"; }
# unit_writer_reaches N: the writer has N files (at most 120 s).
unit_writer_reaches() { lines_reach "$work/unit.done" "$UW_PID" "$work/unit.writer" "$1"; }
unit_kill() {
  U_DEVT=$(cat /sys/block/ublkb0/dev)
  echo "kill -9 of znbd-ublk $U_PID under $(unit_written) writer files; dev_t $U_DEVT"
  kill -KILL "$U_PID"
}
# The restart: ExecStopPost= left the device, the new ExecStart= recovered
# it (the same disk, the file system still mounted).
unit_recovered() {
  unit_ready 2 || return 1
  local pid
  pid=$(cat "$U_LOG.pid")
  cat "$U_LOG.events"
  grep -q "^stop-post signal killed KILL$" "$U_LOG.events" &&
    grep -q "device 0 stays for the restart's --recover" "$U_LOG" &&
    grep -q "device 0 exists: znbd-ublk --recover takes it back" "$U_LOG" &&
    grep -q "/dev/ublkb0 recovered" "$U_LOG" && [ "$pid" != "$U_PID" ] &&
    [ "$(cat /sys/block/ublkb0/dev)" = "$U_DEVT" ] && findmnt -n "$U_MNT" > /dev/null &&
    U_PID=$pid
}
unit_writer_ends() { writer_stopped "$work/unit.wstop" "$UW_PID" "$work/unit.done" "$work/unit.writer"; }
unit_read_back() { files_read_back "$U_MNT" "$work/unit.sums" "$work/unit.done" "$work/rand"; }
U_LOG_FROM=$(dmesg | wc -l)
unit_log_clean() {
  local bad
  bad=$(dmesg | tail -n +$((U_LOG_FROM + 1)) |
    grep -E 'I/O error, dev ublkb0|EXT4-fs (error|warning)|Buffer I/O error|WARNING:|BUG:')
  [ -z "$bad" ] || { printf '%s\n' "$bad"; return 1; }
  echo "no I/O error, ext4 error or kernel warning logged"
}
unit_umount_fsck() {
  $T umount "$U_MNT" && $T fsck.ext4 -n -f "$DEV" > "$work/unit.fsck" 2>&1
  local rc=$?
  tail -n 2 "$work/unit.fsck"
  [ "$rc" = 0 ]
}
# A stop: SIGTERM to MAINPID; ExecStopPost= sees a success; no restart.
unit_stop() {
  touch "$U_LOG.stop"
  kill -TERM "$(cat "$U_LOG.pid")"
  wait "$SUP_PID"
  tail -n 3 "$U_LOG.events"
  [ "$(tail -n 2 "$U_LOG.events" | head -n 1)" = "stop-post success exited 0" ] &&
    [ "$(tail -n 1 "$U_LOG.events")" = end ] &&
    [ ! -e /sys/class/ublk-char/ublkc0 ] && [ ! -e /sys/block/ublkb0 ]
}
# A device left by a server that died, no restart to come: ExecStopPost=
# with SERVICE_RESULT=success removes it.
unit_orphan_removed() {
  local post
  read -ra post <<< "$(unit_line ExecStopPost)"
  "$UBLK" --dev-id 0 size=256M zoned=false dir="$U_DIR" > "$work/orphan.out" 2>&1 &
  local pid=$!
  timeout 30 sh -c 'until [ -s "$1" ] || ! kill -0 "$2"; do sleep 0.1; done' sh "$work/orphan.out" "$pid"
  kill -KILL "$pid" && wait "$pid"
  [ -e /sys/class/ublk-char/ublkc0 ] || { echo "no device left by the killed server"; return 1; }
  env "${U_ENV[@]}" SERVICE_RESULT=success EXIT_CODE=exited EXIT_STATUS=0 "${post[@]}"
  local rc=$?
  echo "ExecStopPost: status $rc"
  [ "$rc" = 0 ] && [ ! -e /sys/class/ublk-char/ublkc0 ] && [ ! -e /sys/block/ublkb0 ]
}

if [ ! -f "$U_FILE" ]; then
  check "unit: znbd-ublk@.service is built or installed" sh -c "echo 'no $U_FILE'; false"
elif check "unit: /etc/znbd/ublk/$U_NAME.conf, and the unit starts: ExecStartPost reports /dev/ublkb0" \
  all unit_conf -- unit_start; then
  if check "unit: ext4 made and mounted, 8 files synced" all unit_mkfs -- unit_files; then
    unit_writer
    check "unit: a writer (dd conv=fsync, 256 KiB files) under way" unit_writer_reaches 2
    check "unit: kill -9 of the server (MAINPID)" unit_kill
    check "unit: the restart recovers the same disk under the mounted file system" unit_recovered
    check "unit: the writer goes on (3 more files)" unit_writer_reaches $(($(unit_written) + 3))
    check "unit: the writer ends without an error" unit_writer_ends
    check "unit: every synced and written file reads back, the page cache dropped" unit_read_back
    check "unit: umount, fsck.ext4 -n -f clean" unit_umount_fsck
    check "unit: no I/O error, ext4 error or kernel warning logged" unit_log_clean
  fi
  check "unit: a stop: exit 0, ExecStopPost sees a success, no restart, no device left" unit_stop
  check "unit: ExecStopPost (success) removes a device whose server died" unit_orphan_removed
fi
rm -f "$U_CONF"
note "t=${SECONDS}s"
