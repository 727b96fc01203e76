# shellcheck shell=bash
# guest-ublk.sh part "recover": user recovery of znbd-ublk
# (UBLK_F_USER_RECOVERY, znbd-ublk --recover).  Sourced by guest-ublk.sh
# after its own checks, on its functions (ublk_stop, ublk_same_zones,
# check, all).
# - a direct write at a wp that znbd-ublk did, but had not completed when
#   it was killed (completion_nsec holds it), is reissued by the kernel
#   to the recovered znbd-ublk, taken there as done: dd exits 0, the wp
#   and the data are the one write's, and the server counts one redone
#   write;
# - a plain disk (zoned=false) with a volatile write cache
#   (write_cache=true), served by two queues, CPU 0's requests on one and
#   CPU 1's on the other: after SIGKILL a read and a flushed write wait,
#   one on each queue; --recover takes both queues over, both requests
#   end without an error, the data flushed before the kill reads back,
#   the 1 MiB written after the last flush reads as zeros (rolled back,
#   as after a power cut: the man page's RECOVERY), and new writes from
#   both CPUs read back;
# - znbd-ublk --dev-id 0 on a dir= store (16 zones of 32 MiB, no open
#   limit: btrfs wants at least 8 active zones) carries a zoned btrfs;
#   --recover of a device whose server lives, or of no device, is refused;
# - files written and synced, then a writer (dd conv=fsync, one file after
#   the other) runs; znbd-ublk is killed with SIGKILL: the disk stays (the
#   same /dev/ublkb0, the same dev_t), the file system stays mounted, and
#   the writer makes no progress while no server runs (I/O waits);
# - znbd-ublk --recover --dev-id 0 on the same dir= takes the device over:
#   the writer goes on and ends without an error, the kernel's zones are
#   the recovered device's, every file synced before and after the kill
#   reads back from the disk (the page cache dropped), btrfs check passes
#   after umount, and the kernel logged no failed request on the disk (a
#   reissued write the dead server had done is taken as done, io.h's
#   redo_writes); SIGTERM then removes the disk.
RDIR=$work/recover.dir
MNT=$work/recover.mnt
GEO=(size=512M zone_size=32M zone_nr_conv=0 dir="$RDIR" zone_control="$CTL")
# recover_run ARG...: znbd-ublk ARG... in the background (UBLK_PID),
# until it prints its disk (DEV: once START_DEV or END_USER_RECOVERY
# returned), which must be /dev/ublkb0, zoned (none with zoned=false).
recover_run() {
  local zoned=host-managed
  case " $* " in *" zoned=false "*) zoned=none ;; esac
  rm -f "$CTL"
  "$UBLK" "$@" > "$work/ublk.out" 2> "$work/ublk.err" &
  UBLK_PID=$!
  timeout 30 sh -c 'until [ -s "$1" ] || ! kill -0 "$2" 2> /dev/null; do sleep 0.1; done' \
    sh "$work/ublk.out" "$UBLK_PID"
  DEV=$(head -n 1 "$work/ublk.out")
  echo "${DEV:-no disk}, pid $UBLK_PID, dev_t $(cat /sys/block/ublkb0/dev 2>&1)"
  cat "$work/ublk.err"
  [ "$DEV" = /dev/ublkb0 ] && [ -b "$DEV" ] &&
    [ "$(cat /sys/block/ublkb0/queue/zoned)" = $zoned ]
}
# recover_refused WORDS ARG...: znbd-ublk ARG... exits 1 at once, saying
# WORDS.
recover_refused() {
  local words=$1 rc=0
  shift
  $T "$UBLK" "$@" > /dev/null 2> "$work/refused.err" || rc=$?
  cat "$work/refused.err"
  [ "$rc" = 1 ] && grep -q "$words" "$work/refused.err"
}
mkfs_mount() {
  modprobe btrfs || return 1
  $T mkfs.btrfs -f -O zoned -m single -d single "$DEV" > "$work/mkfs.out" 2>&1 ||
    { cat "$work/mkfs.out"; return 1; }
  grep -i -e zoned -e 'zone size' "$work/mkfs.out" | head -n 3
  mkdir -p "$MNT" && $T mount -t btrfs "$DEV" "$MNT" && findmnt -n "$MNT"
}
# Eight files of 1 MiB, each different, synced; their sums kept.
synced_files() {
  local i
  for i in $(seq 8); do
    { printf '%08d' "$i" && head -c $((M - 8)) "$work/rand"; } > "$MNT/pre$i" || return 1
  done
  $T sync -f "$MNT" && (cd "$MNT" && sha256sum pre*) > "$work/pre.sums" &&
    wc -l < "$work/pre.sums"
}
# The writer: 256 KiB files w1, w2, ... each with dd conv=fsync, a line in
# writer.done after each, until $work/writer.stop shows up (at most 200);
# its status into writer.rc.
writer_start() {
  rm -f "$work/writer.stop" "$work/writer.done" "$work/writer.rc"
  touch "$work/writer.done"
  start_writer "$MNT" "$work/writer.done" "$work/writer.stop" "$work/writer.out" 200
  WRITER_PID=$WRITER_BG
  echo $WRITER_PID > "$work/writer.pid"
}
writer_count() { wc -l < "$work/writer.done"; }
# writer_reaches N: wait (at most 120 s) until the writer has N files.
writer_reaches() { lines_reach "$work/writer.done" "$WRITER_PID" "$work/writer.out" "$1"; }
# SIGKILL the server: the disk and the mount stay, the writer stalls.
# The count is taken once the writer's next dd is blocked in I/O (state
# D; at most 20 s, then as it is): a dd that finished just before the
# kill could still be counted during the 2 s below in a slow guest.
kill_server() {
  local before after i pid=
  DEVT=$(cat /sys/block/ublkb0/dev)
  kill -KILL "$UBLK_PID" && wait "$UBLK_PID"
  echo "znbd-ublk killed (status $?)"
  for i in $(seq 200); do
    before=$(writer_count)
    pid=$(pgrep -P "$WRITER_PID" -f "of=$MNT/w$((before + 1)) ") &&
      [ "$(awk '{print $3}' "/proc/$pid/stat" 2> /dev/null)" = D ] && break
    sleep 0.1
  done
  echo "writer: file $((before + 1)) being written (dd ${pid:-not found}, state $(awk '{print $3}' "/proc/${pid:-0}/stat" 2> /dev/null))"
  sleep 2 # a window for progress that must not come: measured, not awaited
  after=$(writer_count)
  echo "writer files: $before, 2 s later $after; disk $DEV dev_t $(cat /sys/block/ublkb0/dev)"
  findmnt -n "$MNT" || return 1
  [ -b "$DEV" ] && [ "$(cat /sys/block/ublkb0/dev)" = "$DEVT" ] &&
    [ "$before" = "$after" ] && kill -0 "$WRITER_PID"
}
recovered() {
  recover_run --recover --dev-id 0 "${GEO[@]}" &&
    [ "$(cat /sys/block/ublkb0/dev)" = "$DEVT" ] && findmnt -n "$MNT" &&
    grep -q "recovered" "$work/ublk.err"
}
writer_ends() { writer_stopped "$work/writer.stop" "$WRITER_PID" "$work/writer.done" "$work/writer.out"; }
umount_check() {
  $T umount "$MNT" || return 1
  $T btrfs check "$DEV" > "$work/check.btrfs" 2>&1
  local rc=$?
  tail -n 4 "$work/check.btrfs"
  [ "$rc" = 0 ]
}
# The files synced before the kill, and every file the writer completed.
files_ok() { files_read_back "$MNT" "$work/pre.sums" "$work/writer.done" "$work/rand"; }

# The kernel log since this part began (ublk_log_clean).
LOG_FROM=$(dmesg | wc -l)
# A write the killed server did but never completed: znbd-ublk holds
# every request 3 s before it completes it (completion_nsec), so once
# zone 1's file has the 64 KiB of a direct write at its wp (the write is
# done) and dd still waits, SIGKILL lands between the two.  The kernel
# reissues the write to the recovered server (REISSUE), where it is
# below the wp: taken as done, dd ends with status 0 and the zone is as
# the one write left it.  The write may first wait behind reads held as
# long: ublk_drv scans the disk's partitions after START_DEV returns
# (ublk_partition_scan_work), several reads one after the other, so the
# wait for zone 1's file is 20 s, not one hold; the kill still comes
# within 50 ms of the write, inside its own 3 s hold.
redo_kill() {
  local i size dd_waits=no
  dwrite "$z1" 65536 "$work/rand" > "$work/redo.dd" 2>&1 &
  DD_PID=$!
  for i in $(seq 400); do
    size=$(stat -c %s "$RDIR2/seq-000001" 2> /dev/null)
    [ "$size" = 65536 ] && break
    sleep 0.05
  done
  kill -0 $DD_PID 2> /dev/null && dd_waits=yes
  kill -KILL "$UBLK_PID"
  wait "$UBLK_PID"
  echo "zone 1's file: ${size:-no} bytes at the kill; dd still waiting: $dd_waits"
  [ "$size" = 65536 ] && [ $dd_waits = yes ]
}
redo_dd_ends() {
  local rc=0
  wait "$DD_PID" || rc=$?
  cat "$work/redo.dd"
  echo "dd: exit status $rc"
  [ "$rc" = 0 ]
}
redo_counted() {
  grep "redone by the kernel" "$work/ublk.err"
  grep -q " requests, 1 writes and 0 appends redone" "$work/ublk.err"
}
RDIR2=$work/redo.dir
REDO_GEO=(size=64M zone_size=4M dir="$RDIR2" zone_control="$CTL")
if check "recover: znbd-ublk --dev-id 0 on dir= (16 zones of 4 MiB), each request held 3 s" \
  recover_run --dev-id 0 "${REDO_GEO[@]}" completion_nsec=3000000000; then
  check "recover: SIGKILL once a 64 KiB direct write at zone 1's wp is done, before it completes" redo_kill
  check "recover: --recover (no delay) takes the disk over" \
    recover_run --recover --dev-id 0 "${REDO_GEO[@]}"
  check "recover: the reissued write completes, dd exits 0" redo_dd_ends
  # CLOSED: a new server's dir= store has no open zone, as zloop brings a
  # partly written zone back (its wp from its file's size).
  check "recover: zone 1's wp at 128 sectors (closed), its data the write's" \
    all zone_is 8192 128 cl -- same_bytes "$z1" 65536 "$work/rand"
  check "recover: SIGTERM removes the disk, exit 0" ublk_stop
  check "recover: ... having taken one reissued write as done" redo_counted
fi
note "t=${SECONDS}s"

# ------------------------------- a plain disk, two queues, a write cache
PDIR=$work/plain.dir
PLAIN=(size=64M zoned=false write_cache=true dir="$PDIR" zone_control="$CTL")
# on_cpu CPU OFF [fsync]: 1 MiB of rand at OFF, direct, from CPU (its
# requests go to that CPU's hardware queue); with fsync, flushed too.
on_cpu() {
  $T taskset -c "$1" dd if="$work/rand" of=/dev/ublkb0 bs=1M count=1 seek="$2" \
    oflag=direct,seek_bytes conv=notrunc${3:+,$3} status=none
}
# Two queues, each a CPU's, and a write-back cache.  Which queue serves
# which CPU is blk-mq's choice (7.x maps CPU 0 to hctx1): queue_of CPU.
queue_of() { grep -lx "$1" /sys/block/ublkb0/mq/*/cpu_list | awk -F/ '{ print $(NF - 1) }'; }
plain_device() {
  local q=/sys/block/ublkb0
  echo "hardware queues: $(ls $q/mq | tr '\n' ' ')(CPUs $(cat $q/mq/0/cpu_list); $(cat $q/mq/1/cpu_list)), cache: $(cat $q/queue/write_cache)"
  [ "$(ls $q/mq | wc -l)" = 2 ] && [ -n "$(queue_of 0)" ] && [ -n "$(queue_of 1)" ] &&
    [ "$(queue_of 0)" != "$(queue_of 1)" ] && [ "$(cat $q/queue/write_cache)" = "write back" ]
}
# Requests wait, without a server, in the block layer, each still holding
# its tag of its hardware queue: on 6.18 on the disk's requeue list
# (__ublk_abort_rq); on 6.12, which quiesces the queue when the server
# dies, in a hardware queue's dispatch list or a CPU's queue.
# requeued OP...: each OP (READ, WRITE) is held there;
# tag_held N: a tag of hardware queue N is taken.
requeued() {
  local d=/sys/kernel/debug/block/ublkb0 op
  cat $d/requeue_list $d/hctx*/dispatch $d/hctx*/cpu*/*_rq_list 2> /dev/null | cut -c 1-100 > "$work/held.lists"
  cat "$work/held.lists"
  for op in "$@"; do grep -q "op=$op" "$work/held.lists" || return 1; done
}
tag_held() {
  local t
  t=$(cut -d: -f2 /sys/kernel/debug/block/ublkb0/hctx$1/tags_bitmap | tr -d ' 0\n')
  [ -n "$t" ] && echo "hctx$1: a tag taken" && return 0
  echo "hctx$1: no tag taken"
  return 1
}
flushed_pair() { on_cpu 0 0 fsync && on_cpu 1 $M fsync; }
# SIGKILL, then a read (CPU 1) and a flushed write (CPU 0) that wait,
# each holding a tag of its CPU's queue.
plain_kill() {
  kill -KILL "$UBLK_PID" && wait "$UBLK_PID"
  echo "znbd-ublk killed (status $?)"
  DEVT=$(cat /sys/block/ublkb0/dev)
  $T taskset -c 1 dd if=/dev/ublkb0 of="$work/held.read" bs=1M count=1 iflag=direct \
    status=none 2> "$work/held.read.err" &
  HELD_READ=$!
  on_cpu 0 $((3 * M)) fsync 2> "$work/held.write.err" &
  HELD_WRITE=$!
  # Wait for both to be held in the block layer (at most 30 s).
  for _ in $(seq 300); do
    requeued READ WRITE > /dev/null && break
    sleep 0.1
  done
  kill -0 $HELD_READ && kill -0 $HELD_WRITE && echo "a read and a write wait" &&
    [ -b /dev/ublkb0 ] && requeued READ WRITE && tag_held "$(queue_of 0)" && tag_held "$(queue_of 1)"
}
held_end() {
  local r=0 w=0
  wait $HELD_READ || r=$?
  wait $HELD_WRITE || w=$?
  cat "$work/held.read.err" "$work/held.write.err"
  echo "the read: exit status $r; the write: exit status $w"
  [ $r = 0 ] && [ $w = 0 ] && cmp "$work/held.read" "$work/rand"
}
plain_recovered() {
  recover_run --recover --dev-id 0 "${PLAIN[@]}" &&
    [ "$(cat /sys/block/ublkb0/dev)" = "$DEVT" ] && grep -q "recovered (2 queues" "$work/ublk.err"
}
if check "recover: a plain disk (zoned=false, write_cache=true) on dir=, two queues" \
  all recover_run --dev-id 0 --queues 2 "${PLAIN[@]}" -- plain_device; then
  check "recover: 1 MiB from CPU 0 and 1 MiB from CPU 1, each flushed" \
    all flushed_pair -- same_bytes 0 $M "$work/rand" -- same_bytes $M $M "$work/rand"
  check "recover: 1 MiB more at 2 MiB, not flushed, reads back" \
    all on_cpu 0 $((2 * M)) -- same_bytes $((2 * M)) $M "$work/rand"
  check "recover: SIGKILL: a write (CPU 0) and a read (CPU 1) wait, each on its CPU's queue" plain_kill
  check "recover: --recover takes both queues of the same disk over" plain_recovered
  check "recover: the read and the write end without an error, the read's bytes right" held_end
  check "recover: the flushed data reads back; the write after the last flush reads as zeros" \
    all same_bytes 0 $M "$work/rand" -- same_bytes $M $M "$work/rand" -- \
    zero_bytes $((2 * M)) $M -- same_bytes $((3 * M)) $M "$work/rand"
  check "recover: new writes from both CPUs, flushed, read back" \
    all on_cpu 1 $((2 * M)) fsync -- on_cpu 0 $((4 * M)) fsync -- \
    same_bytes $((2 * M)) $M "$work/rand" -- same_bytes $((4 * M)) $M "$work/rand"
  check "recover: SIGTERM removes the recovered plain disk, exit 0" ublk_stop
fi
note "t=${SECONDS}s"

if check "recover: znbd-ublk --dev-id 0 on dir= (16 zones of 32 MiB)" \
  recover_run --dev-id 0 "${GEO[@]}"; then
  check "recover: --recover of a device whose server lives is refused" \
    recover_refused "is served by process $UBLK_PID" --recover --dev-id 0 size=512M zone_size=32M
  check "recover: --recover of no device is refused" \
    recover_refused "no ublk device 5" --recover --dev-id 5 size=512M zone_size=32M
  if check "recover: mkfs.btrfs (zoned) and mount" mkfs_mount; then
    note "t=${SECONDS}s"
    check "recover: 8 files of 1 MiB written and synced" synced_files
    writer_start
    check "recover: a writer (dd conv=fsync, 256 KiB files) under way" writer_reaches 2
    check "recover: SIGKILL: the disk and the mount stay, the writer waits" kill_server
    check "recover: znbd-ublk --recover --dev-id 0 takes the same disk over" recovered
    check "recover: the writer goes on (3 more files)" writer_reaches $(($(writer_count) + 3))
    check "recover: the writer ends without an error" writer_ends
    check "recover: the kernel's zones are the recovered device's" ublk_same_zones
    check "recover: every synced file reads back, the page cache dropped" files_ok
    note "t=${SECONDS}s"
    check "recover: umount, btrfs check passes" umount_check
    check "recover: no I/O error, btrfs error or kernel warning logged" ublk_log_clean "$LOG_FROM"
  fi
  check "recover: SIGTERM removes the recovered disk and exits 0" ublk_stop
fi
