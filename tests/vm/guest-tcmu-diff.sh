# Sourced by guest-tcmu.sh (its functions and variables in scope).
#
# 1. The sense bytes of every zone error as a SCSI initiator sees them
#    (sg_raw, fixed format: byte 2 sense key, 12 ASC, 13 ASCQ) and the
#    errno the kernel turns them into for user space.
# 2. A differential run: a few thousand random zone operations through
#    /dev/sdX (znbd-tcmu) and through Linux null_blk with the same
#    geometry, compared result by result and zone report by zone report
#    (zonediff.py); only the differences zonediff.py lists as explained
#    (and znbd-tcmu(1) documents) are allowed.

# sense_is KEY ASC ASCQ DATA CDB...: sg_raw sends CDB (hex bytes) to
# $DEV with DATA: "-" none, "rN" N bytes in, "wN" N zero bytes out.  The
# fixed-format sense it prints must carry KEY/ASC/ASCQ (hex).
sense_is() {
  local key=$1 asc=$2 ascq=$3 data=$4 out hex
  shift 4
  local opts=()
  case $data in
    r*) opts=(-r "${data#r}") ;;
    w*) opts=(-s "${data#w}" -i /dev/zero) ;;
  esac
  out=$($T sg_raw -v "${opts[@]}" "$DEV" "$@" 2>&1)
  printf '%s\n' "$out" | grep -i -e 'sense' -e 'status'
  # The raw sense's hex bytes: 70 00 KEY ... ASC (12) ASCQ (13).
  hex=$(printf '%s\n' "$out" | sed -n '/Raw sense data/,$p' | sed 1d |
    grep -oE '\b[0-9a-f]{2}\b' | head -14 | tr '\n' ' ')
  echo "sense bytes: $hex"
  local b
  read -r -a b <<< "$hex"
  [ "${b[0]}" = 70 ] && [ "${b[2]}" = "$key" ] && [ "${b[12]}" = "$asc" ] &&
    [ "${b[13]}" = "$ascq" ]
}
# lba16 LBA BLOCKS: the 8+4 bytes of a 16-byte READ/WRITE CDB's fields.
lba16() { printf '%016x%08x0000' "$1" "$2" | sed 's/../& /g'; }
# errno_is NAME PY-STATEMENT: the statement, run on an O_DIRECT fd of
# $DEV (fd, os, fcntl, struct, m and m3 = aligned 4 and 12 KiB), fails with
# errno NAME.
errno_is() {
  $T python3 - "$DEV" "$1" "$2" << 'EOF'
import errno, fcntl, mmap, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_DIRECT)
m = mmap.mmap(-1, 4096)
m3 = memoryview(mmap.mmap(-1, 12288))
try:
    exec(sys.argv[3])
    print("no error"); sys.exit(1)
except OSError as e:
    print("errno", errno.errorcode[e.errno], e.strerror)
    sys.exit(0 if errno.errorcode[e.errno] == sys.argv[2] else 1)
EOF
}
BLKOPEN='fcntl.ioctl(fd, 0x40101286, struct.pack("=QQ", '

ZS=$((4 << 20))
NZ=16
BS=512
start_tcmu diff0 size=64M zone_size=4M zone_nr_conv=2 zone_max_open=4
z() { echo $(($1 * ZS / BS)); } # first LBA of zone N
WR16='8a 00' # WRITE(16)
RD16='88 00' # READ(16)
check "sense: WRITE(16) off the wp -> 05/21/04 (unaligned write)" \
  sense_is 05 21 04 w512 $WR16 $(lba16 $(($(z 3) + 8)) 1)
check "... and user space gets EREMOTEIO" errno_is EREMOTEIO "os.pwrite(fd, m, $((3 * ZS + 4096)))"
check "sense: WRITE(16) across a sequential zone's end -> 05/21/05 (write boundary)" \
  sense_is 05 21 05 w8192 $WR16 $(lba16 $(($(z 4) - 8)) 16)
blkzone finish -o "$(z 4)" -c 1 "$DEV"
check "sense: a write into a FULL zone -> 05/24/00 (invalid field in CDB)" \
  sense_is 05 24 00 w512 $WR16 $(lba16 $(z 4) 1)
check "sense: READ(16) across a conventional and a sequential zone -> 05/21/06" \
  sense_is 05 21 06 r8192 $RD16 $(lba16 $(($(z 2) - 8)) 16)
check "sense: OPEN ZONE of a conventional zone -> 05/24/00" \
  sense_is 05 24 00 - 94 03 $(lba16 0 0)
# max open 4: zones 5-8 explicitly open, then no resources for more.
for i in 5 6 7 8; do blkzone open -o "$(z $i)" -c 1 "$DEV"; done
check "sense: OPEN ZONE past max_open -> 07/55/0E (insufficient zone resources)" \
  sense_is 07 55 0e - 94 03 $(lba16 $(z 9) 0)
check "... and user space gets ETOOMANYREFS (BLK_STS_ZONE_OPEN_RESOURCE)" \
  errno_is ETOOMANYREFS "${BLKOPEN}$(z 10), $(z 1)))"
check "sense: a write to an EMPTY zone then -> 07/55/0E" \
  sense_is 07 55 0e w512 $WR16 $(lba16 $(z 11) 1)
check "... and user space gets ETOOMANYREFS" errno_is ETOOMANYREFS "os.pwrite(fd, m, $((11 * ZS)))"
blkzone reset "$DEV"
ctl "readonly 12" | sed 's/^/# /'
ctl "offline 13" | sed 's/^/# /'
check "sense: a write into a READONLY zone -> 07/27/08 (zone is read only)" \
  sense_is 07 27 08 w512 $WR16 $(lba16 $(z 12) 1)
check "... and user space gets EREMOTEIO" errno_is EREMOTEIO "os.pwrite(fd, m, $((12 * ZS)))"
check "sense: a read of an OFFLINE zone -> 07/2C/0E (zone is offline)" \
  sense_is 07 2c 0e r512 $RD16 $(lba16 $(z 13) 1)
check "... and user space gets EREMOTEIO" errno_is EREMOTEIO "os.preadv(fd, [m], $((13 * ZS)))"
ctl "badblocks add $(($(z 14) + 16))-$(($(z 14) + 23))" | sed 's/^/# /'
check "sense: a read of a bad block -> 03/11/00 (unrecovered read error)" \
  sense_is 03 11 00 r4096 $RD16 $(lba16 $(($(z 14) + 16)) 8)
check "... and user space gets ENODATA (BLK_STS_MEDIUM)" errno_is ENODATA "os.preadv(fd, [m], $((14 * ZS + 8192)))"
check "sense: a write of a bad block -> 03/0C/00 (write error)" \
  sense_is 03 0c 00 w12288 $WR16 $(lba16 $(z 14) 24)
check "... and user space gets EIO" errno_is EIO "os.pwrite(fd, m3, $((14 * ZS)))"
check "sense: an opcode znbd-tcmu does not serve -> 05/20/00 (invalid command operation code)" \
  sense_is 05 20 00 r512 37 00 00 00 00 00 00 00 02 00
opcodes_listed() {
  $T sg_opcodes "$DEV" > "$work/opcodes" 2>&1
  cat "$work/opcodes"
  grep -qE '^ *95 +0 +16 ' "$work/opcodes" && grep -qE '^ *94 +3 +16 ' "$work/opcodes" &&
    grep -qE '^ *8a +16 ' "$work/opcodes" && [ "$(grep -cE '^ *[0-9a-f]{2} ' "$work/opcodes")" = 23 ]
}
check "REPORT SUPPORTED OPERATION CODES: sg_opcodes lists the 23 commands served" opcodes_listed
stop_tcmu diff0
check "znbd-tcmu diff0 stops with status 0" test "$rc" = 0

# ------------------------------------------------- differential run
# null_blk as fio's t/zbd/run-tests-against-nullb sets it up, in the
# geometry of the disk below; memory_backed so reads return data.
NB=/sys/kernel/config/nullb/zd0
nullb_up() {
  modprobe null_blk nr_devices=0 || return 1
  mkdir "$NB" && echo 512 > "$NB/blocksize" && echo 64 > "$NB/size" &&
    echo 1 > "$NB/memory_backed" && echo 0 > "$NB/completion_nsec" &&
    echo 1 > "$NB/zoned" && echo 4 > "$NB/zone_size" &&
    echo 2 > "$NB/zone_nr_conv" && echo 4 > "$NB/zone_max_open" &&
    echo 1 > "$NB/power" || return 1
  local n
  n=$(cd /sys/block && ls -d nullb* zd0 2> /dev/null | head -1)
  [ -n "$n" ] || return 1
  NBDEV=/dev/$n
  # No udev in the guest: the node from sysfs.
  [ -b "$NBDEV" ] || { IFS=: read -r ma mi < "/sys/block/$n/dev" && mknod "$NBDEV" b "$ma" "$mi"; }
  echo "null_blk $NBDEV: $(cat /sys/block/$n/queue/zoned), $(cat /sys/block/$n/queue/nr_zones) zones"
  # The block layer splits a write at max_sectors_kb (null_blk 127,
  # znbd-tcmu 1024) and a split write that fails returns the errno of
  # its last piece (bio_chain()): the same splits on both, so that
  # results compare.
  local q
  for q in "$n" "$d"; do
    echo 64 > "/sys/block/$q/queue/max_sectors_kb" &&
      grep -qx 64 "/sys/block/$q/queue/max_sectors_kb" || return 1
  done
}
DIFF_OPS=${DIFF_OPS:-3000}
# 3000 operations took about 60 s at host load 1 and over 120 s (the
# common command timeout) at load 8: the run has a bound of its own.
zone_diff() {
  timeout -k 5 "${DIFF_TIMEOUT:-600}" python3 "$top_srcdir/tests/vm/zonediff.py" --ops "$DIFF_OPS" --seed ${DIFF_SEED:-7} \
    --log "$work/zonediff.log" "$NBDEV" "$DEV" > "$work/zonediff.out" 2>&1
  local r=$?
  cat "$work/zonediff.out"
  [ "$r" = 0 ] && grep -qE "^$DIFF_OPS ops: .* 0 unexplained" "$work/zonediff.out"
}
# The run must have met the rules it is meant to test, on the SCSI disk.
diff_saw() { grep -qE "^# $1 -> $2: [1-9]" "$work/zonediff.out"; }
# zone_read_past_wp=ones: memory-backed null_blk reads 0xFF past the wp
# (nullb_fill_pattern() in drivers/block/null_blk/main.c).
start_tcmu zd1 size=64M zone_size=4M zone_nr_conv=2 zone_max_open=4 zone_read_past_wp=ones
check "null_blk zoned with the same geometry (64 MiB, 4 MiB zones, 2 conventional, max open 4)" nullb_up
note "t=${SECONDS}s"
check "differential run: $DIFF_OPS random zone operations, 0 unexplained differences" zone_diff
note "t=${SECONDS}s"
check "... writes were refused with EREMOTEIO" diff_saw write EREMOTEIO
check "... opens were refused with ETOOMANYREFS" diff_saw open ETOOMANYREFS
check "... writes, reads, opens, closes, finishes and resets succeeded" \
  sh -c "$(declare -f diff_saw); work=$work; for o in write read open close finish reset; do diff_saw \$o 'ok.*' || exit 1; done"
stop_tcmu zd1
check "znbd-tcmu zd1 stops with status 0" test "$rc" = 0
echo 0 > "$NB/power" && rmdir "$NB"
