#!/bin/bash
# In the guest: the kernel NBD client (nbd-client -> /dev/nbd0) against one
# front-end started in the guest on a Unix socket, with one and with two
# connections.  TAP output.
#   guest-nbd.sh FE [PART...]   FE: plugin | bio | mq | memory
#   PART: zoned ramdisk kill faults (default: all four)
# zoned:   sequential O_DIRECT whole-zone writes at iodepth 32 (16 on
#          the plugin: see QD; fio zonemode=strided, io_uring and
#          libaio) succeed and verify; a
#          full zone refuses writes and keeps its data; a write ahead of
#          the write pointer fails with EIO and changes no byte and no wp;
#          blkdiscard of a zone resets it; writes crossing the zone
#          capacity or a zone boundary fail; one write the kernel splits
#          fills a zone.  Each group uses zones of its own and sets them up
#          itself (see zoned_checks).
# ramdisk: zoned=false (64 MiB, -b 512): mkfs.ext4, files, fsck -n clean, remount, verify.
# kill:    the server is SIGKILLed while fio writes: fio gets EIO,
#          nbd-client -d detaches, nothing hangs.
# faults:  guest-faults.sh's scenario (badblocks, zone faults, injected
#          delays), the one guest-tcmu.sh runs through SCSI; once, C=1.
# shellcheck source=guest-lib.sh
. "$top_srcdir/tests/vm/guest-lib.sh"
# shellcheck source=guest-faults.sh
. "$top_srcdir/tests/vm/guest-faults.sh"
fe=${1:?front-end}
shift
parts=${*:-zoned ramdisk kill faults}

M=$((1024 * 1024))
ZS=$((4 * M))   # zone size
ZCAP=$((3 * M)) # zone capacity
NZ=16           # zones
ZBS=4096        # zoned export block size (nbd-client -b)
RBS=512         # RAM disk export block size
# fio's queue depth for the zoned writes.  The plugin runs on nbdkit 1.32,
# a thread per request: at most 15 writes of a connection may wait ahead
# of the wp (man nbdkit-zoned-plugin, PIPELINED WRITES), and with two
# connections the write that fills the gap can travel on the other one,
# so 32 in flight can put 16 or more ahead of it on one connection (seen
# under load: EAGAIN on the 16th, EIO on the wire).  With 16 in flight
# at most 15 are ahead of the gap.  znbd parks writes without a thread.
QD=32
[ "$fe" = plugin ] && QD=16

check "modprobe nbd" modprobe nbd nbds_max=2
note "kernel $(uname -r), front-end $fe, $(nproc) vCPUs"
if ! why=$(frontend_available "$fe"); then
  check "front-end $fe is built" sh -c "echo '$why'; false"
  tap_end
  exit 1
fi
head -c $((4 * M)) /dev/urandom > "$work/rand"
head -c $((64 * 1024)) /dev/urandom > "$work/rand2"

# fio_zones NAME ENGINE FIRST-ZONE N: whole-zone (capacity) sequential
# writes of N zones with verification, iodepth $QD.
fio_zones() {
  local name=$1 eng=$2 first=$3 n=$4 out=$work/$1.json rc=0
  $T fio --name="$name" --filename="$DEV" --direct=1 --ioengine="$eng" \
    --iodepth=$QD --rw=write --bs=64k --zonemode=strided --zonerange=$ZS \
    --zonesize=$ZCAP --offset=$((first * ZS)) --size=$((n * ZS)) \
    --io_size=$((n * ZCAP)) --verify=crc32c --do_verify=1 --verify_fatal=1 \
    --output-format=json --output="$out" > "$work/$name.log" 2>&1 || rc=$?
  local w r e
  w=$(jq '.jobs[0].write.io_bytes' "$out" 2> /dev/null)
  r=$(jq '.jobs[0].read.io_bytes' "$out" 2> /dev/null)
  e=$(jq '.jobs[0].error' "$out" 2> /dev/null)
  grep -v '^fio: connected' "$work/$name.log" | head -n 12
  echo "fio $name: status $rc, wrote ${w:-?} bytes, verified ${r:-?} bytes, error ${e:-?}"
  [ "$rc" = 0 ] && [ "$e" = 0 ] && [ "$w" = $((n * ZCAP)) ] && [ "$r" = $((n * ZCAP)) ]
}

# Every group of checks below works on zones of its own and writes the
# state it needs itself (the server is fresh for each CONNS, so its zones
# start EMPTY): a failed or expected-to-fail (TODO) check never changes
# the outcome of another.  The setup writes go one request at a time
# (seq_fill), so they reach the server in order on every front-end and
# with any number of connections; only the checks that are about
# concurrent writes (fio, one write split by the kernel) have many in
# flight.
#
#   zones 0-3, 4-7  fio io_uring, fio libaio      zone 12  full zone
#   zone 8          write ahead of the wp         zone 13  blkdiscard = reset
#   zone 9          zone capacity                 zone 14  one write split
#   zones 10-11     crossing a zone boundary               into several
zoned_checks() { # CONNS
  local c=$1 z
  # zone_write_timeout=5000: a write parked ahead of the wp waits up to
  # 5 s for the writes before it, so a slow guest (TCG on a loaded host)
  # cannot turn the kernel's reordering into an EIO; the write that must
  # fail (zone 8 below) fails after those 5 s.
  check "zoned C=$c: start $fe" start_server "$fe" size=$((NZ * ZS / M))M zone_size=4M \
    zone_capacity=3M blocksize=$ZBS zone_write_timeout=5000 || return
  if ! check "zoned C=$c: nbd-client -b $ZBS -C $c" attach $ZBS "$c"; then
    stop_server
    return
  fi
  # With two connections the kernel spreads one sequential stream over
  # both sockets, so in-order writes can reach the server out of order:
  # every front-end parks a write ahead of the wp until the wp reaches it
  # (pipeline_zoned_writes, the default).
  check "zoned C=$c: fio io_uring iodepth $QD writes zones 0-3 to capacity, verify" \
    fio_zones "zw-io_uring-C$c" io_uring 0 4
  check "zoned C=$c: fio libaio iodepth $QD writes zones 4-7 to capacity, verify" \
    fio_zones "zw-libaio-C$c" libaio 4 4

  # A full zone refuses writes and keeps its data.
  z=$((12 * ZS))
  if check "zoned C=$c: zone 12 filled to capacity in order (one 256 KiB write at a time)" \
    seq_fill $z $ZCAP "$work/rand"; then
    check "zoned C=$c: zone 12 is full: a write at its start fails with EIO" \
      expect_eio dwrite $z 4096 "$work/rand2"
    check "zoned C=$c: ... and zone 12 still holds its data" same_bytes $z $ZCAP "$work/rand"
  fi

  # A write ahead of the write pointer: zone 8, wp at 8 KiB.
  z=$((8 * ZS))
  check "zoned C=$c: 8 KiB at the start of empty zone 8 succeed" dwrite $z 8192 "$work/rand"
  check "zoned C=$c: a random 4 KiB write ahead of the wp (zone 8 + 64 KiB) fails with EIO" \
    expect_eio dwrite $((z + 65536)) 4096 "$work/rand2"
  check "zoned C=$c: ... and changed nothing there (reads back zeros)" zero_bytes $((z + 65536)) 4096
  check "zoned C=$c: ... nor before the wp" same_bytes $z 8192 "$work/rand"
  check "zoned C=$c: ... nor the wp: a write at 8 KiB still succeeds" \
    dwrite $((z + 8192)) 4096 "$work/rand2"
  check "zoned C=$c: ... and reads back" same_bytes $((z + 8192)) 4096 "$work/rand2"
  check "zoned C=$c: blkdiscard of zone 8 (wp at 12 KiB)" $T blkdiscard -o $z -l $ZS "$DEV"
  check "zoned C=$c: zone 8 rewritten from its start" dwrite $z 4096 "$work/rand2"

  # blkdiscard resets a (full) zone; it can be rewritten from its start.
  z=$((13 * ZS))
  if check "zoned C=$c: zone 13 filled to capacity in order" seq_fill $z $ZCAP "$work/rand"; then
    check "zoned C=$c: blkdiscard of full zone 13" $T blkdiscard -o $z -l $ZS "$DEV"
    check "zoned C=$c: zone 13 reads zeros after the reset" zero_bytes $z $ZCAP
    check "zoned C=$c: zone 13 rewritten from its start (64 KiB)" dwrite $z 65536 "$work/rand2"
    check "zoned C=$c: ... reads back" same_bytes $z 65536 "$work/rand2"
    check "zoned C=$c: zone 13's wp is at 64 KiB: a write at 128 KiB fails with EIO" \
      expect_eio dwrite $((z + 131072)) 4096 "$work/rand2"
  fi

  # Zone capacity: zone 9 filled to capacity - 8 KiB.
  z=$((9 * ZS))
  if check "zoned C=$c: zone 9 filled in order up to capacity - 8 KiB" \
    seq_fill $z $((ZCAP - 8192)) "$work/rand"; then
    check "zoned C=$c: zone 9: a 16 KiB write crossing the capacity fails with EIO" \
      expect_eio dwrite $((z + ZCAP - 8192)) 16384 "$work/rand2"
    check "zoned C=$c: ... and changed nothing (zeros at the wp)" zero_bytes $((z + ZCAP - 8192)) 8192
    check "zoned C=$c: zone 9: the last 8 KiB up to the capacity succeed" \
      dwrite $((z + ZCAP - 8192)) 8192 "$work/rand2"
    check "zoned C=$c: zone 9: a write between capacity and zone end fails with EIO" \
      expect_eio dwrite $((z + ZCAP)) 4096 "$work/rand2"
  fi
  check "zoned C=$c: a write crossing from zone 10 into zone 11 fails with EIO" \
    expect_eio dwrite $((11 * ZS - 4096)) 8192 "$work/rand"
  check "zoned C=$c: ... and changed nothing in zone 11 (zeros)" zero_bytes $((11 * ZS)) 4096

  # One O_DIRECT write of the whole capacity: the kernel splits it into
  # several requests (max_sectors_kb) that are in flight together.
  z=$((14 * ZS))
  check "zoned C=$c: zone 14: one 3 MiB write (several requests at once) fills it, reads back" \
    write_read $z $ZCAP "$work/rand"

  check "zoned C=$c: nbd-client -d" detach
  check "zoned C=$c: $fe still running, stops cleanly" stop_server_alive
}
stop_server_alive() {
  kill -0 "$SERVER_PID" || { echo "the server died:"; cat "$SERVER_LOG"; return 1; }
  stop_server
}

fs_files() { # write files with checksums into /mnt/t
  mkdir -p /mnt/t/dir &&
    head -c $((3 * M)) /dev/urandom > /mnt/t/big &&
    head -c 262147 /dev/urandom > /mnt/t/odd &&
    for i in $(seq 1 20); do echo "file $i $RANDOM" > /mnt/t/dir/f$i; done &&
    (cd /mnt/t && find . -type f ! -name lost+found -print0 | sort -z | xargs -0 sha256sum) > "$work/sums" &&
    echo "$(wc -l < "$work/sums") files written"
}
drop_caches() {
  sync && echo 3 > /proc/sys/vm/drop_caches && blockdev --flushbufs "$DEV"
}
ramdisk_checks() { # CONNS
  local c=$1
  check "ramdisk C=$c: start $fe zoned=false" start_server "$fe" size=64M zoned=false \
    blocksize=$RBS || return
  if ! check "ramdisk C=$c: nbd-client -b $RBS -C $c" attach $RBS "$c"; then
    stop_server
    return
  fi
  mkdir -p /mnt/t
  check "ramdisk C=$c: mkfs.ext4" $T mkfs.ext4 -q -F "$DEV"
  check "ramdisk C=$c: mount" $T mount -t ext4 "$DEV" /mnt/t &&
    check "ramdisk C=$c: write files, checksum" fs_files
  check "ramdisk C=$c: umount" $T umount /mnt/t
  drop_caches
  check "ramdisk C=$c: fsck.ext4 -n -f is clean" $T fsck.ext4 -n -f "$DEV"
  check "ramdisk C=$c: remount" $T mount -t ext4 "$DEV" /mnt/t &&
    check "ramdisk C=$c: files read back with the same checksums" \
      sh -c "cd /mnt/t && sha256sum --quiet -c '$work/sums' && echo all match"
  check "ramdisk C=$c: umount" $T umount /mnt/t
  check "ramdisk C=$c: nbd-client -d" detach
  check "ramdisk C=$c: $fe still running, stops cleanly" stop_server_alive
}

fio_saw_eio() { # STATUS NAME
  local e
  cat "$work/$2.log"
  e=$(jq -r '.jobs[0].error' "$work/$2.json" 2> /dev/null)
  echo "fio exit status $1, job error ${e:-none}"
  [ "$1" != 0 ] && { [ "$e" = 5 ] || grep -q 'Input/output error' "$work/$2.log"; }
}

# writes_done: writes the block device has completed (its stat file).
writes_done() { awk '{ print $5 }' "/sys/block/${DEV#/dev/}/stat"; }
# wait_writes BASE N PID: until N writes more than BASE completed, while
# PID runs (a bound of 120 s only stops a client that never writes).
wait_writes() {
  local i n
  for ((i = 0; i < 1200; i++)); do
    n=$(($(writes_done) - $1))
    [ "$n" -lt "$2" ] || { echo "$n writes completed"; return 0; }
    kill -0 "$3" 2> /dev/null || { echo "fio exited:"; cat "$work/killed.log"; return 1; }
    sleep 0.1
  done
  echo "only $n writes completed in 120 s"
  return 1
}

# in_flight: requests the block device has taken and not completed.
in_flight() {
  local n
  n=$(awk '{ print $1 + $2 }' "/sys/block/${DEV#/dev/}/inflight")
  echo "$n requests in flight"
  [ "$n" -gt 0 ]
}
# none_in_flight: in_flight drops to 0 within 10 s (completions of the
# requests a disconnect fails may run a moment after nbd-client returns).
none_in_flight() {
  local i
  for ((i = 0; i < 100; i++)); do
    in_flight > /dev/null || { in_flight; return 0; }
    sleep 0.1
  done
  in_flight
  return 1
}

# The server dies under load.  With a request timeout (nbd-client -t),
# requests in flight fail when it expires; without one the kernel (since
# 5.x) keeps them for ever, and nbd-client -d must release them.  (fio
# itself may end sooner: a request it submits after the kill finds the
# socket dead and fails at once, nbd_handle_cmd(), and fio stops on that
# error whether or not others are still in flight.  So the requests are
# counted in the block layer, not inferred from fio.)
kill_checks() { # CONNS TIMEOUT-S|none
  local c=$1 to=$2 fpid t0 t1 rc=0 topt=() what
  if [ "$to" = none ]; then what="C=$c, no -t"; else what="C=$c, -t $to"; topt=(-t "$to"); fi
  check "kill $what: start $fe zoned=false" start_server "$fe" size=64M zoned=false \
    blocksize=4096 || return
  if ! check "kill $what: nbd-client -C $c ${topt[*]}" attach 4096 "$c" "${topt[@]}"; then
    stop_server
    return
  fi
  local w0
  w0=$(writes_done)
  timeout -k 5 90 fio --name=killed --filename="$DEV" --direct=1 --ioengine=libaio \
    --iodepth=32 --rw=randwrite --bs=4k --time_based --runtime=60 \
    --output-format=json --output="$work/killed.json" > "$work/killed.log" 2>&1 &
  fpid=$!
  check "kill $what: fio is writing (the device completed 64 of its writes)" \
    wait_writes "$w0" 64 "$fpid"
  check "kill $what: SIGKILL the server" kill -KILL "$SERVER_PID"
  wait "$SERVER_PID" 2> /dev/null
  SERVER_PID=
  t0=$SECONDS
  if [ "$to" = none ]; then
    sleep 5
    check "kill $what: 5 s later requests are still in flight (no request timeout)" in_flight
    check "kill $what: nbd-client -d detaches" detach
    check "kill $what: ... and releases them" none_in_flight
  fi
  wait $fpid || rc=$?
  t1=$SECONDS
  # How long that took is printed, not asserted (TCG on a loaded host):
  # what counts is that fio ended by itself, before its timeout killed it.
  check "kill $what: fio ended by itself ($((t1 - t0)) s after the kill), not by its timeout" \
    test "$rc" != 124 -a "$rc" != 137
  check "kill $what: fio failed with EIO" fio_saw_eio "$rc" killed
  if [ "$to" != none ]; then
    check "kill $what: a new read fails with EIO at once" expect_eio dread 0 4096
    check "kill $what: nbd-client -d detaches" detach
  fi
  check "kill $what: nbd-client -c: not connected" sh -c "! $T nbd-client -c $DEV"
}

faults_checks() {
  check "faults: start $fe" start_server "$fe" "${FAULT_PARAMS[@]}" \
    zone_control="$FAULT_CTL" blocksize=$ZBS || return
  if ! check "faults: nbd-client -b $ZBS" attach $ZBS 1; then
    stop_server
    return
  fi
  fault_scenario "nbd $fe"
  check "faults: nbd-client -d" detach
  check "faults: $fe still running, stops cleanly" stop_server_alive
}

for part in $parts; do
  for c in 1 2; do
    case $part in
      zoned)
        if [ "$fe" = memory ]; then
          skip_check "zoned C=$c" "nbdkit memory has no zones"
        else
          zoned_checks "$c"
        fi
        ;;
      ramdisk) ramdisk_checks "$c" ;;
      kill)
        kill_checks "$c" 5
        # Kernel behaviour, not the server's: once is enough.
        [ "$c" = 2 ] || [ "$fe" != plugin ] || kill_checks "$c" none
        ;;
      faults)
        if [ "$fe" = memory ]; then
          skip_check "faults" "nbdkit memory has no faults"
        elif [ "$c" = 1 ]; then
          faults_checks
        fi
        ;;
      *) check "known part $part" false ;;
    esac
    stop_server > /dev/null
    [ "$(nbd_size)" = 0 ] || $T nbd-client -d "$DEV" > /dev/null 2>&1
    note "$part C=$c done at ${SECONDS} s"
  done
done
tap_end
