# shellcheck shell=bash
# guest-ublk.sh part "tsan": znbd-ublk's threads under ThreadSanitizer.
# ZNBD_UBLK_TSAN is a znbd-ublk built with -fsanitize=thread
# (scripts/build-tsan.sh; scripts/test-all.sh passes its path); without
# it the part is skipped.  Sourced by guest-ublk.sh, on its functions
# (ublk_start, ublk_stop, ublk_same_zones, ctl, check, all).
# - two queues, each a CPU's (blk-mq maps CPU 0 to hardware queue 0 and
#   CPU 1 to 1), on a dir= store of 16 zones of 4 MiB: fio's zbd mode on
#   both CPUs at once (zones 2-5 from CPU 0, 6-9 from CPU 1, crc32c
#   verified) while the control socket's thread opens, closes, finishes
#   and resets zones 10-15 and sends reports and stats, until fio ends;
#   the kernel's zones are the device's afterwards;
# - the same fio run again, SIGKILL of the server once both jobs have
#   written 1 MiB and before either has written all, then znbd-ublk --recover (the same build) takes both
#   queues over: fio ends with no error and its data verified, SIGTERM
#   ends the recovered server with exit status 0;
# - no "ThreadSanitizer" line in the stderr of either server (a race, a
#   lock-order inversion or a thread leak would print one; the killed
#   server's reports were printed as they happened).
T_DIR=$work/tsan.dir
T_GEO=(size=64M zone_size=4M zone_nr_conv=1 dir="$T_DIR")
T_ERRS=()
export TSAN_OPTIONS="suppressions=$top_srcdir/scripts/tsan.supp"

# tsan_fio: fio's zbd mode, one job a CPU, 16 MiB each at QD8 in 4 KiB
# writes (many requests, so the threads meet often), crc32c verified, in the background (T_FIO); output in
# $work/tsan.fio.
tsan_fio() {
  $T fio --filename="$DEV" --direct=1 --zonemode=zbd --ioengine=libaio \
    --iodepth=8 --rw=write --bs=4k --size=16M --verify=crc32c --do_verify=1 \
    --name=cpu0 --cpus_allowed=0 --offset=8M --name=cpu1 --cpus_allowed=1 \
    --offset=24M > "$work/tsan.fio" 2>&1 &
  T_FIO=$!
}
# tsan_fio_ok: both jobs ended with no error, 32 MiB written and read
# back in all.
tsan_fio_ok() {
  local rc=0
  wait "$T_FIO" || rc=$?
  grep -e 'err=' -e 'WRITE:' -e 'READ:' "$work/tsan.fio"
  echo "fio: exit status $rc"
  if [ "$rc" = 0 ] && [ "$(grep -c 'err= *0:' "$work/tsan.fio")" = 2 ] &&
    grep -qE 'WRITE:.*io=32(\.0)?MiB' "$work/tsan.fio" &&
    grep -qE 'READ:.*io=32(\.0)?MiB' "$work/tsan.fio"; then
    return 0
  fi
  cat "$work/tsan.fio"
  return 1
}
# tsan_control: zone operations on zones 10-15, reports and stats on the
# control socket while fio runs (one client process, a connection a
# request); every reply "ok", at least 10.
tsan_control() {
  local n
  n=$(PYTHONPATH=$top_srcdir/tests $T python3 -S "$top_srcdir/tests/control_while.py" \
    "$CTL" "$T_FIO" "open 10" "report 8 4" "close 10" stats "finish 11" "reset 11" \
    "open 12" "finish 12" report "reset 12") || return 1
  echo "$n control requests while fio ran"
  [ "$n" -ge 10 ]
}
# tsan_build: the binary is a ThreadSanitizer build whose runtime starts
# on this kernel (its flags' help, printed before znbd-ublk's own).
tsan_build() {
  TSAN_OPTIONS=help=1 "$UBLK" --help 2>&1 | grep -m 1 "flags for ThreadSanitizer"
}
# tsan_kill_midway: SIGKILL once zones 2 and 6 (the first of each job)
# each hold 1 MiB in their files, while zones 5 and 9 (each job's last)
# are not full: both jobs still have writes to do.
tsan_kill_midway() {
  local a=0 b=0 c d
  for _ in $(seq 3000); do
    a=$(stat -c %s "$T_DIR/seq-000002" 2> /dev/null) &&
      b=$(stat -c %s "$T_DIR/seq-000006" 2> /dev/null) &&
      [ "$a" -ge "$M" ] && [ "$b" -ge "$M" ] && break
    sleep 0.01
  done
  kill -KILL "$UBLK_PID"
  c=$(stat -c %s "$T_DIR/seq-000005" 2> /dev/null || echo 0)
  d=$(stat -c %s "$T_DIR/seq-000009" 2> /dev/null || echo 0)
  wait "$UBLK_PID"
  T_ERRS+=("$(cat "$work/ublk.err")")
  echo "at the kill: zones 2 and 6 hold $a and $b bytes, zones 5 and 9 $c and $d"
  echo "fio still runs: $(kill -0 "$T_FIO" && echo yes)"
  [ "$a" -ge "$M" ] && [ "$b" -ge "$M" ] && [ "$c" -lt $((4 * M)) ] &&
    [ "$d" -lt $((4 * M)) ] && kill -0 "$T_FIO"
}
# tsan_stop: SIGTERM, exit 0, the disk gone (ublk_stop), its stderr kept.
tsan_stop() {
  local rc=0
  ublk_stop || rc=1
  T_ERRS+=("$(cat "$work/ublk.err")")
  return $rc
}
# tsan_clean: no report in any server's stderr.
tsan_clean() {
  local e
  for e in "${T_ERRS[@]}"; do
    if grep -q ThreadSanitizer <<< "$e"; then
      printf '%s\n' "$e" | head -n 60
      return 1
    fi
  done
  echo "${#T_ERRS[@]} servers' stderr, no ThreadSanitizer report"
}

if [ -z "${ZNBD_UBLK_TSAN:-}" ]; then
  skip_check "tsan: znbd-ublk's threads under ThreadSanitizer" \
    "ZNBD_UBLK_TSAN names no ThreadSanitizer build of znbd-ublk (scripts/build-tsan.sh)"
else
  T_PLAIN=$UBLK
  UBLK=$ZNBD_UBLK_TSAN
  rm -rf "$T_DIR"
  check "tsan: $UBLK is a ThreadSanitizer build" tsan_build
  if check "tsan: znbd-ublk (ThreadSanitizer), two queues, dir= of 16 zones of 4 MiB" \
    ublk_start --dev-id 0 --queues 2 "${T_GEO[@]}"; then
    tsan_fio
    check "tsan: the control socket's zone operations while fio runs on both queues" \
      tsan_control
    check "tsan: ... fio verified 16 MiB on each CPU" tsan_fio_ok
    check "tsan: the kernel's zones are the device's" ublk_same_zones
    $T blkzone reset -o 16384 -c 8 "$DEV"
    tsan_fio
    if check "tsan: SIGKILL while fio writes from both CPUs" tsan_kill_midway; then
      check "tsan: znbd-ublk --recover (ThreadSanitizer) takes both queues over" \
        all ublk_start --recover --dev-id 0 --queues 2 "${T_GEO[@]}" -- \
        grep -q "recovered (2 queues" "$work/ublk.err"
      check "tsan: ... fio ends with no error, its data verified" tsan_fio_ok
    fi
    check "tsan: SIGTERM: exit 0, the disk removed" tsan_stop
    check "tsan: no ThreadSanitizer report from either server" tsan_clean
  fi
  UBLK=$T_PLAIN
fi
note "t=${SECONDS}s"
