# shellcheck shell=bash
# guest-ublk.sh part "appends": kill -9 of znbd-ublk under a mounted
# zoned btrfs whose writers have zone appends in flight, then --recover,
# cycle after cycle, as a user of the man page's RECOVERY would do it.
# Sourced by guest-ublk.sh, on its functions (check, all, note).
# ZNBD_APPEND_CYCLES cycles (default 4): the first half on a disk served
# by one queue, the rest on one served by two queues whose requests are
# each held 2 ms (completion_nsec), so that more of them are done but not
# yet completed when the kill comes.  Each disk: 2 GiB, 16 MiB zones, the
# first 4 conventional, on a dir= store; zoned btrfs on it.  Each cycle:
# - writers: two direct ones (dd oflag=direct, 2 MiB files in 256 KiB
#   writes: zoned btrfs sends its data as REQ_OP_ZONE_APPEND), a buffered
#   one (1 MiB files, conv=fsync) and one of small synced files, each
#   file written whole and synced before the next;
# - SIGKILL after a random 0.3 to 2.3 s (the seed is printed): the disk
#   and the mount stay;
# - znbd-ublk --recover with the same parameters; its disk path is read
#   with `read` from its standard output (a line of its own);
# - the writers go on, then stop: each ends without an error;
# - with the page cache dropped, every file the writers completed reads
#   back as written;
# - the kernel's zone write plugs (debugfs zone_wplugs: the wp the block
#   layer keeps for each zone it writes with plain writes) agree with the
#   device's report, and none lost its wp.
# After the cycles of a disk: btrfs scrub finds no error, btrfs check
# passes after umount, the kernel logged no failed request, no btrfs
# error and no warning, and SIGTERM removes the disk.  Before the fix
# that made a recovered server answer a reissued append with the sector
# the dead server had given it (include/znbd/redo.h), the append ran
# again, took its zone's space twice, and a later append of btrfs ran
# past the zone capacity: a writer saw EIO.
ADIR=$work/appends.dir
AMNT=$work/appends.mnt
ACYCLES=${ZNBD_APPEND_CYCLES:-4}
A_SEED=${ZNBD_APPEND_SEED:-$$}
RANDOM=$A_SEED
head -c $((2 * M)) /dev/urandom > "$work/rand2"
note "appends: $ACYCLES cycles, seed $A_SEED (ZNBD_APPEND_SEED)"

# a_start ARG...: znbd-ublk ARG... in the background (A_PID); DEV is the
# line it prints once the disk is there, read from a pipe.
a_start() {
  rm -f "$CTL" "$work/a.fifo"
  mkfifo "$work/a.fifo" || return 1
  "$UBLK" "$@" zone_control="$CTL" > "$work/a.fifo" 2> "$work/a.err" &
  A_PID=$!
  DEV=
  read -r -t 60 DEV < "$work/a.fifo"
  echo "znbd-ublk (pid $A_PID) printed '${DEV}'"
  cat "$work/a.err"
  [ "$DEV" = /dev/ublkb0 ] && [ -b "$DEV" ] &&
    [ "$(cat /sys/block/ublkb0/queue/zoned)" = host-managed ]
}
a_mkfs_mount() {
  modprobe btrfs || return 1
  $T mkfs.btrfs -f -O zoned -m single -d single "$DEV" > "$work/a.mkfs" 2>&1 ||
    { cat "$work/a.mkfs"; return 1; }
  mkdir -p "$AMNT" && $T mount -t btrfs "$DEV" "$AMNT" && findmnt -n "$AMNT"
}
# a_writer NAME DIR KIND: files DIR/NAME.1, .2, ... until DIR/stop shows
# up (at most 400), each named in DIR/NAME.done once written and synced;
# KIND direct (2 MiB, O_DIRECT, 256 KiB writes), buffered (1 MiB,
# conv=fsync) or small (12 KiB to 240 KiB, then sync FILE).
a_writer() {
  local i=0 f
  while [ ! -e "$2/stop" ] && [ $i -lt 400 ]; do
    i=$((i + 1))
    f=$2/$1.$i
    case $3 in
      direct) dd if="$work/rand2" of="$f" bs=256k oflag=direct status=none ;;
      buffered) dd if="$work/rand2" of="$f" bs=1M count=1 conv=fsync status=none ;;
      small) head -c $((12288 * (i % 20 + 1))) "$work/rand2" > "$f" && sync "$f" ;;
    esac || { echo "$1: file $i failed"; exit 1; }
    echo "$i" >> "$2/$1.done"
  done
}
# a_writers_start CYCLE: the four writers into $AMNT/cCYCLE.
a_writers_start() {
  local d=$AMNT/c$1 w
  A_DIR=$d
  A_WPIDS=()
  mkdir -p "$d" || return 1
  for w in d1:direct d2:direct b:buffered s:small; do
    touch "$d/${w%%:*}.done"
    a_writer "${w%%:*}" "$d" "${w#*:}" > "$work/a.${w%%:*}.out" 2>&1 < /dev/null &
    A_WPIDS+=($!)
  done
  echo "writers ${A_WPIDS[*]} into $d"
}
a_done() { wc -l < "$A_DIR/$1.done"; }
# a_writers_reach N: each writer has N more files than it had (at most
# 120 s).
a_writers_reach() {
  local w i want=()
  for w in d1 d2 b s; do want+=($(($(a_done $w) + $1))); done
  for i in $(seq 1200); do
    [ "$(a_done d1)" -ge "${want[0]}" ] && [ "$(a_done d2)" -ge "${want[1]}" ] &&
      [ "$(a_done b)" -ge "${want[2]}" ] && [ "$(a_done s)" -ge "${want[3]}" ] &&
      echo "files: d1 $(a_done d1), d2 $(a_done d2), b $(a_done b), s $(a_done s)" && return 0
    sleep 0.1
  done
  echo "files: d1 $(a_done d1), d2 $(a_done d2), b $(a_done b), s $(a_done s); wanted $* more each"
  cat "$work"/a.*.out
  # Where a stalled writer waits: the kernel's blocked tasks, its log.
  echo w > /proc/sysrq-trigger 2> /dev/null
  dmesg | tail -n 60
  return 1
}
# SIGKILL after a random 0.3 to 2.3 s: the disk and the mount stay.
a_kill() {
  local wait_ms=$((300 + RANDOM % 2000))
  sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
  DEVT=$(cat /sys/block/ublkb0/dev)
  kill -KILL "$A_PID" && wait "$A_PID"
  echo "znbd-ublk killed after $wait_ms ms (status $?)"
  findmnt -n "$AMNT" > /dev/null && [ -b "$DEV" ] && [ "$(cat /sys/block/ublkb0/dev)" = "$DEVT" ]
}
# --recover with the disk's parameters; the notes it kept are counted.
a_recover() {
  a_start --recover --dev-id 0 "$@" || return 1
  local kept
  kept=$(sed -n 's/.*; \([0-9]*\) appends the dead server may have done.*/\1/p' "$work/a.err")
  A_KEPT=$((A_KEPT + ${kept:-0}))
  [ "$(cat /sys/block/ublkb0/dev)" = "$DEVT" ] && findmnt -n "$AMNT" > /dev/null &&
    grep -q "recovered" "$work/a.err"
}
# Each writer ends (at most 180 s for all: one whose I/O never completes
# fails the check instead of hanging the guest) with status 0.
a_writers_end() {
  local pid rc bad=0 i
  touch "$A_DIR/stop"
  for pid in "${A_WPIDS[@]}"; do
    for i in $(seq 1800); do
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2> /dev/null; then
      echo "writer $pid has not ended after 180 s"
      bad=1
      continue
    fi
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" = 0 ] || bad=1
  done
  cat "$work"/a.*.out
  echo "writers ended ($([ $bad = 0 ] && echo "each with status 0" || echo "NOT all with status 0")):" \
    "d1 $(a_done d1), d2 $(a_done d2), b $(a_done b), s $(a_done s) files"
  [ $bad = 0 ]
}
# Every file a writer completed, read from the disk (page cache dropped).
a_files_read_back() {
  local w i n bad=0 files=0
  sync && echo 3 > /proc/sys/vm/drop_caches || return 1
  for w in d1 d2 b s; do
    n=$(a_done $w)
    for i in $(seq "$n"); do
      case $w in
        d*) want=$((2 * M)) ;;
        b) want=$M ;;
        s) want=$((12288 * (i % 20 + 1))) ;;
      esac
      files=$((files + 1))
      if ! cmp -s "$A_DIR/$w.$i" <(head -c "$want" "$work/rand2"); then
        echo "$w.$i differs from what was written"
        bad=1
      fi
    done
  done
  echo "$files files read back"
  [ $bad = 0 ] && [ $files -ge 4 ]
}
# The wp of each zone the block layer keeps a write plug for (debugfs
# zone_wplugs: zone, flags, references, wp offset, BIOs waiting), read
# before a report (which would resynchronise a plug that lost its wp),
# against the device's report of that zone, with the file system frozen
# (fsfreeze: its writes done, no new one until it thaws).
a_plugs_agree() {
  local rc=0
  $T fsfreeze -f "$AMNT" || return 1
  a_plugs_frozen || rc=1
  fsfreeze -u "$AMNT"
  return $rc
}
a_plugs_frozen() {
  local plugs=/sys/kernel/debug/block/${DEV#/dev/}/zone_wplugs
  cp "$plugs" "$work/a.plugs" || return 1
  PYTHONPATH=$top_srcdir/tests/vm $T python3 - "$DEV" "$work/a.plugs" << 'PY'
import sys
import zonediff
rep = zonediff.Dev(sys.argv[1]).report()
bad = n = 0
for line in open(sys.argv[2]):
    if line.startswith("Zone no:"):
        # 7.x: "Zone no: 1, flags: 0x0, ref: 1, cond: ACTIVE, wp ofst:
        # 128, pending BIO: 0"
        f = dict(kv.split(": ", 1) for kv in line.strip().split(", "))
        zno, flags, wpo = f["Zone no"], f["flags"], f["wp ofst"]
    else:  # 6.x: "ZONE FLAGS REF WP_OFFSET NR_BIOS"
        zno, flags, _ref, wpo, _nbio = line.split()
    zno, flags, wpo = int(zno), int(flags, 16), int(wpo)
    start, length, wp, _type, cond, _cap = rep[zno]
    dev = length if cond == 14 else wp - start
    n += 1
    if flags & 2:
        print("zone %d: its plug lost the wp (NEED_WP_UPDATE)" % zno)
        bad += 1
    elif wpo != dev:
        print("zone %d: the plug's wp %d, the device's %d" % (zno, wpo, dev))
        bad += 1
print("%d zone write plugs, %d unlike the device's zones" % (n, bad))
sys.exit(1 if bad else 0)
PY
}
A_LOG_FROM=$(dmesg | wc -l)
a_scrub() {
  $T btrfs scrub start -B "$AMNT" > "$work/a.scrub" 2>&1
  local rc=$?
  grep -iE "error|summary|status" "$work/a.scrub"
  [ $rc = 0 ] && ! grep -qiE "(csum|verify|read|super)=[1-9]|uncorrectable: [1-9]" "$work/a.scrub"
}
a_umount_check() {
  $T umount "$AMNT" || return 1
  $T btrfs check "$DEV" > "$work/a.check" 2>&1
  local rc=$?
  tail -n 3 "$work/a.check"
  [ $rc = 0 ]
}
a_stop() {
  local rc=0
  kill -TERM "$A_PID" && wait "$A_PID" || rc=$?
  tail -n 1 "$work/a.err"
  [ $rc = 0 ] && [ ! -e /sys/block/ublkb0 ]
}
# a_disk FIRST LAST QUEUES ARG...: cycles FIRST..LAST on a new disk.
a_disk() {
  local first=$1 last=$2 q=$3 c
  shift 3
  local geo=(size=2G zone_size=16M zone_nr_conv=4 dir="$ADIR.$q" "$@")
  A_KEPT=0
  check "appends: znbd-ublk --queues $q ${*:-(no delay)} on dir=, 2 GiB of 16 MiB zones" \
    a_start --dev-id 0 --queues "$q" "${geo[@]}" || return
  if check "appends: mkfs.btrfs (zoned) and mount" a_mkfs_mount; then
    for c in $(seq "$first" "$last"); do
      check "appends: cycle $c: writers under way" \
        all a_writers_start "$c" -- a_writers_reach 1 || break
      check "appends: cycle $c: SIGKILL, the disk and the mount stay" a_kill || break
      check "appends: cycle $c: --recover takes the same disk over" a_recover "${geo[@]}" || break
      check "appends: cycle $c: the writers go on (2 more files each) and end without an error" \
        all a_writers_reach 2 -- a_writers_end
      check "appends: cycle $c: every file they completed reads back" a_files_read_back
      check "appends: cycle $c: the kernel's zone write plugs agree with the device" a_plugs_agree
      rm -rf "$A_DIR"
    done
    note "appends: $A_KEPT appends' notes kept by the recoveries of this disk"
    check "appends: btrfs scrub finds no error" a_scrub
    check "appends: the kernel's zones are the control socket's" ublk_same_zones 128
    check "appends: umount, btrfs check passes" a_umount_check
  fi
  check "appends: no failed request, btrfs error or kernel warning logged" \
    ublk_log_clean "$A_LOG_FROM"
  check "appends: SIGTERM removes the disk, exit 0" a_stop
  rm -rf "$ADIR.$q"
}
a_disk 1 $((ACYCLES / 2)) 1
a_disk $((ACYCLES / 2 + 1)) "$ACYCLES" 2 completion_nsec=2000000
note "t=${SECONDS}s"
