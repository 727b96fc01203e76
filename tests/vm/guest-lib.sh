# shellcheck shell=bash
# Helpers for scripts that run inside the vm-run guest (sourced).
#
# TAP output (automake's tap-driver reads it; one result per check):
#   check DESC CMD...        run CMD; "ok N - DESC" or "not ok N - DESC"
#                            followed by its output as "# " lines; with
#                            $TODO set, a failure is "not ok ... # TODO
#                            $TODO" (XFAIL: known and explained)
#   skip_check DESC REASON   "ok N - DESC # SKIP REASON"
#   note TEXT...             a "# " diagnostic line
#   tap_end                  print the plan "1..N"; returns 1 if any failed
#   expect_eio CMD...        succeeds iff CMD fails with "Input/output error"
#   all CMD... [-- CMD...]   each in turn; the first failure stops (one check)
#
# Front-ends (started in the guest, on a Unix socket in $work):
#   start_server FE key=value...  FE: plugin (nbdkit + zoned.so), bio, mq
#                            (server/znbd --queue-mode=FE), memory (nbdkit
#                            memory, a stand-in that only takes size=).
#                            Sets SOCK, SERVER_PID.
#   stop_server              SIGTERM, then SIGKILL after 5 s
#   attach BS CONNS [OPT..]  nbd-client -unix $SOCK /dev/nbd0 -b BS -C CONNS OPT..
#   detach                   nbd-client -d /dev/nbd0, wait until it is free
#
# Block I/O on $DEV (/dev/nbd0 unless set), all O_DIRECT, offsets and
# lengths in bytes:
#   dwrite OFF LEN FILE      write the first LEN bytes of FILE at OFF
#                            (one write; the kernel may split it into
#                            several requests in flight at once)
#   write_read OFF LEN FILE  dwrite, then same_bytes of the same range
#   seq_fill OFF LEN FILE    as dwrite, in writes of at most 256 KiB one
#                            at a time: each reaches the server as one
#                            request after the previous one completed, so
#                            they arrive in order on any number of
#                            connections (zone setup)
#   dread OFF LEN            copy LEN bytes at OFF to stdout
#   same_bytes OFF LEN FILE  the LEN bytes at OFF equal FILE's first LEN
#   zero_bytes OFF LEN       the LEN bytes at OFF are all zero
#   nonzero_bytes OFF LEN    ... are not all zero
#   fio_zbd_verify OFF MIB   fio --zonemode=zbd: MIB MiB of sequential
#                            64 KiB writes from byte OFF at QD8 (libaio),
#                            verified with crc32c; passes when fio saw no
#                            error and wrote and read all MIB MiB
#
# Environment (from vm-test): top_builddir, top_srcdir (absolute host paths,
# visible read-only in the guest), ZNBD_PLUGIN / ZNBD_SERVER to override.
: "${top_builddir:?top_builddir must be set}"
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
export LC_ALL=C
DEV=${DEV:-/dev/nbd0}
work=$(mktemp -d /tmp/guest.XXXXXX)
# Every command that talks to a device is bounded: a hung kernel path must
# show up as a failed check, not eat the whole guest timeout.
T="timeout -k 5 ${GUEST_CMD_TIMEOUT:-120}"

_tap_n=0
_tap_failed=0
note() { echo "# $*"; }
check() {
  local desc=$1 rc=0 out
  shift
  # In this shell (so start_server can set SERVER_PID), output to a file.
  "$@" > "$work/check.out" 2>&1 < /dev/null || rc=$?
  out=$(cat "$work/check.out")
  _tap_n=$((_tap_n + 1))
  if [ "$rc" = 0 ]; then
    echo "ok $_tap_n - $desc"
    [ -z "$out" ] || printf '%s\n' "$out" | tail -n 5 | sed 's/^/#   /'
  else
    if [ -n "${TODO:-}" ]; then
      # A known, explained failure: XFAIL for automake, not a pass.
      echo "not ok $_tap_n - $desc # TODO $TODO"
    else
      echo "not ok $_tap_n - $desc"
      _tap_failed=$((_tap_failed + 1))
    fi
    echo "#   exit status $rc of: $*"
    [ -z "$out" ] || printf '%s\n' "$out" | tail -n 30 | sed 's/^/#   /'
    if [ -n "${SERVER_PID:-}" ] && [ -s "${SERVER_LOG:-}" ]; then
      echo "#   server log (last lines):"
      tail -n 8 "$SERVER_LOG" | sed 's/^/#   | /'
    fi
  fi
  return "$rc"
}
skip_check() {
  _tap_n=$((_tap_n + 1))
  echo "ok $_tap_n - $1 # SKIP $2"
}
tap_end() {
  echo "1..$_tap_n"
  [ "$_tap_failed" = 0 ]
}
# CMD must fail, and with EIO ("Input/output error" from dd, fio's err=5).
expect_eio() {
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  printf '%s\n' "$out"
  if [ "$rc" = 0 ]; then
    echo "expected an I/O error, but the command succeeded"
    return 1
  fi
  if ! grep -q -e 'Input/output error' -e 'err= *5' <<< "$out"; then
    echo "failed (status $rc), but not with EIO"
    return 1
  fi
  echo "failed with EIO, as it must"
}

# ------------------------------------------------------------------ servers
plugin_path() {
  local p
  for p in "${ZNBD_PLUGIN:-}" "$top_builddir/zoned.so" "$top_builddir/plugin/.libs/zoned.so"; do
    if [ -n "$p" ] && [ -f "$p" ]; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
server_path() {
  local p=${ZNBD_SERVER:-$top_builddir/server/znbd}
  [ -x "$p" ] && echo "$p"
}
# frontend_available FE: print why not and return 1 if FE is not built.
frontend_available() {
  case $1 in
    plugin) plugin_path > /dev/null || { echo "zoned.so is not built in $top_builddir"; return 1; } ;;
    bio | mq) server_path > /dev/null || { echo "server/znbd is not built in $top_builddir"; return 1; } ;;
    memory) command -v nbdkit > /dev/null || { echo "nbdkit missing"; return 1; } ;;
    *) echo "unknown front-end $1"; return 1 ;;
  esac
}

_nserver=0
SERVER_PID=
start_server() {
  local fe=$1 pidfile a i
  shift
  _nserver=$((_nserver + 1))
  SOCK=$work/sock$_nserver
  pidfile=$work/pid$_nserver
  SERVER_LOG=$work/server$_nserver.log
  local cmd=()
  case $fe in
    plugin) cmd=(nbdkit -f -U "$SOCK" -P "$pidfile" "$(plugin_path)" "$@") ;;
    bio | mq) cmd=("$(server_path)" -f -U "$SOCK" -P "$pidfile" --queue-mode="$fe" "$@") ;;
    memory)
      cmd=(nbdkit -f -U "$SOCK" -P "$pidfile" memory)
      for a in "$@"; do
        case $a in size=*) cmd+=("$a") ;; esac
      done
      ;;
    *) echo "unknown front-end $fe"; return 1 ;;
  esac
  echo "${cmd[*]}"
  "${cmd[@]}" > "$SERVER_LOG" 2>&1 < /dev/null &
  SERVER_PID=$!
  for ((i = 0; i < 300; i++)); do
    [ -s "$pidfile" ] && [ -S "$SOCK" ] && return 0
    if ! kill -0 "$SERVER_PID" 2> /dev/null; then
      SERVER_PID=
      echo "the server exited before serving:"
      cat "$SERVER_LOG"
      return 1
    fi
    sleep 0.1
  done
  echo "the server did not serve within 30 s:"
  cat "$SERVER_LOG"
  return 1
}
stop_server() {
  local i pid=$SERVER_PID
  [ -n "$pid" ] || return 0
  SERVER_PID=
  kill -TERM "$pid" 2> /dev/null
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2> /dev/null; then
    echo "server $pid ignored SIGTERM for 5 s; killing it"
    kill -KILL "$pid"
  fi
  wait "$pid" 2> /dev/null
  return 0
}

# ------------------------------------------------------------------- client
nbd_size() { cat /sys/block/${DEV#/dev/}/size 2> /dev/null || echo 0; }
attach() {
  local bs=$1 conns=$2 i
  shift 2
  $T nbd-client -unix "$SOCK" "$DEV" -b "$bs" -C "$conns" "$@" || return 1
  for ((i = 0; i < 100; i++)); do
    [ "$(nbd_size)" != 0 ] && break
    sleep 0.1
  done
  [ "$(nbd_size)" != 0 ] || { echo "$DEV has size 0 after nbd-client"; return 1; }
  local q=/sys/block/${DEV#/dev/}/queue
  echo "$DEV: $(blockdev --getsize64 "$DEV") bytes, logical block $(cat $q/logical_block_size), hw queues $(ls /sys/block/${DEV#/dev/}/mq | wc -l)"
}
detach() {
  local i
  $T nbd-client -d "$DEV" || return 1
  for ((i = 0; i < 100; i++)); do
    [ "$(nbd_size)" = 0 ] && return 0
    sleep 0.1
  done
  echo "$DEV still has size $(nbd_size) after nbd-client -d"
  return 1
}

# ---------------------------------------------------------------- block I/O
dwrite() {
  $T dd if="$3" of="$DEV" bs="$2" count=1 seek="$1" iflag=fullblock \
    oflag=direct,seek_bytes conv=notrunc status=none
}
write_read() {
  dwrite "$@" && same_bytes "$@"
}
seq_fill() {
  $T dd if="$3" of="$DEV" bs=256K count="$2" seek="$1" iflag=fullblock,count_bytes \
    oflag=direct,seek_bytes conv=notrunc status=none
}
dread() {
  $T dd if="$DEV" bs="$2" count=1 skip="$1" iflag=direct,skip_bytes status=none
}
same_bytes() {
  cmp -n "$2" <(dread "$1" "$2") "$3" && echo "$2 bytes at $1 match"
}
nonzero_bytes() {
  dread "$1" "$2" > "$work/nz" || return 1
  [ "$(stat -c %s "$work/nz")" = "$2" ] || { echo "short read"; return 1; }
  if cmp -s "$work/nz" <(head -c "$2" /dev/zero); then
    echo "$2 bytes at $1 are all zero"
    return 1
  fi
  echo "$2 bytes at $1 are not all zero"
}
zero_bytes() {
  cmp -n "$2" <(dread "$1" "$2") /dev/zero && echo "$2 bytes at $1 are zero"
}
# fio_zbd_verify OFFSET MIB [WRITTEN]: fio's zbd mode over MIB MiB at
# OFFSET, QD8, crc32c-verified: WRITTEN MiB (default MIB; less with a
# zone capacity below the zone size) written and read back.
fio_zbd_verify() {
  local want=${3:-$2}
  $T fio --name=zbd --filename="$DEV" --direct=1 --zonemode=zbd \
    --ioengine=libaio --iodepth=8 --rw=write --bs=64k --offset="$1" \
    --size="$2M" --verify=crc32c --do_verify=1 > "$work/fio.out" 2>&1 ||
    { cat "$work/fio.out"; return 1; }
  grep -e 'err=' -e 'WRITE:' -e 'READ:' "$work/fio.out"
  grep -q 'err= *0:' "$work/fio.out" && grep -qE "WRITE:.*io=$want(\.0)?MiB" "$work/fio.out" &&
    grep -qE "READ:.*io=$want(\.0)?MiB" "$work/fio.out"
}

# held_together MS: 32 reads of 4 KiB at QD32 on $DEV, whose every
# request an injected latency of 1 s holds: fio's run time (its start-up
# not counted) under MS ms, so held together, not one after the other
# (32 s).
held_together() {
  local ms
  ms=$($T fio --name=held --filename="$DEV" --rw=read --bs=4k --direct=1 \
    --ioengine=libaio --iodepth=32 --iodepth_batch_submit=32 --size=128k \
    --minimal 2> /dev/null | awk -F';' '{ print $9 }')
  echo "32 reads held 1 s each, at QD32: fio ran ${ms:-?} ms"
  [ -n "$ms" ] && [ "$ms" -lt "$1" ]
}

# fs_check TYPE FSCK MKFS...: on $DEV, mkfs, mount, write $work/f8 (8 MiB
# of random bytes, made if missing), umount, fsck, mount, the bytes read
# back (page cache dropped), umount.
fs_check() {
  local type=$1 fsck=$2
  shift 2
  mkdir -p "$work/mnt"
  [ -f "$work/f8" ] || head -c $((8 << 20)) /dev/urandom > "$work/f8"
  $T "$@" "$DEV" > "$work/mkfs.out" 2>&1 || { cat "$work/mkfs.out"; return 1; }
  grep -i -e zone -e zoned "$work/mkfs.out" | head -3
  $T mount -t "$type" "$DEV" "$work/mnt" &&
    $T cp "$work/f8" "$work/mnt/f8" && $T umount "$work/mnt" &&
    $T $fsck "$DEV" > "$work/fsck.out" 2>&1 || { cat "$work/fsck.out" 2> /dev/null; return 1; }
  echo 3 > /proc/sys/vm/drop_caches
  $T mount -t "$type" "$DEV" "$work/mnt" &&
    cmp "$work/f8" "$work/mnt/f8" && echo "8 MiB read back after remount" &&
    $T umount "$work/mnt"
}

# ---------------------------------------------------- zones, two views
# ctl LINE: the control socket $CTL's reply to LINE (znbdctl.py on the
# standard library alone: python3 -S, whose start costs no site imports).
ctl() {
  PYTHONPATH=$top_srcdir/tests $T python3 -S -c '
import sys
from znbdctl import control
sys.stdout.write(control(sys.argv[1], sys.argv[2], 10.0))' "$CTL" "$1"
}
# Zones as "START_SECTOR WP_REL_SECTORS COND" lines (conventional: wp -),
# from blkzone and from the control socket.  With the argument "cap":
# "START WP_REL COND CAP", FULL zones with wp "full" (sd puts a FULL
# zone's wp at the zone end, the device at the capacity end after
# writes, sd_zbc_parse_report()).
kernel_zones() {
  # Parsed in this shell: three seds per line cost ~5 s per report in TCG.
  local line cap=${1:-} re='start: (0x[0-9a-f]+).*cap (0x[0-9a-f]+).*wptr (0x[0-9a-f]+).*zcond: *([0-9]+)'
  blkzone report "$DEV" | while read -r line; do
    [[ $line =~ $re ]] || continue
    case $line in
      *CONVENTIONAL*) w=- ;;
      *zcond:14*) if [ -n "$cap" ]; then w=full; else w=$((BASH_REMATCH[3])); fi ;;
      *) w=$((BASH_REMATCH[3])) ;;
    esac
    echo "$((BASH_REMATCH[1])) $w ${BASH_REMATCH[4]}${cap:+ $((BASH_REMATCH[2]))}"
  done
}
device_zones() {
  ctl "report 0 $NZ" | grep "^zone=" | awk -v cap="${1:-}" '{
    for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    m["NOT_WP"] = 0; m["EMPTY"] = 1; m["IMP_OPEN"] = 2; m["EXP_OPEN"] = 3
    m["CLOSED"] = 4; m["FULL"] = 14
    w = (f["type"] == "CONVENTIONAL") ? "-" : (f["wp"] - f["start"]) / 512
    if (cap != "" && f["cond"] == "FULL") w = "full"
    print f["start"] / 512, w, m[f["cond"]] (cap != "" ? " " f["cap"] / 512 : "") }'
}
# same_zones [cap]: blkzone's report of $DEV is the control socket's,
# $NZ zones.
same_zones() {
  kernel_zones "${1:-}" > "$work/k"
  device_zones "${1:-}" > "$work/d"
  [ "$(wc -l < "$work/k")" = "$NZ" ] && diff "$work/k" "$work/d"
}
# kernel_report_as_dir DEV: blkzone's report of DEV as a dir= store keeps
# it.  What dir= keeps of a zone is its wp: an open zone comes back
# CLOSED (EMPTY if nothing was written), as a drive after power-up, so
# open conditions are mapped so.  A FULL zone has no wp for nbdzone
# (printed 0, see nbdzone(1)) while sd and ublk report it at the zone
# end (sd_zbc_parse_report(), null_blk): that field is aligned too.
kernel_report_as_dir() {
  blkzone report "$1" | sed -E -e '/wptr 0x0+ .*zcond: [23]\(o[ie]\)/s/zcond: [23]\(o[ie]\)/zcond: 1(em)/' \
    -e 's/zcond: [23]\(o[ie]\)/zcond: 4(cl)/' -e '/zcond:14/s/wptr 0x[0-9a-f]*/wptr 0x000000/'
}
# nbdzone_same DIR N REPORT: znbd (mq) on dir=DIR, the disk's user gone:
# nbdzone's report over NBD has N zones and equals REPORT
# (kernel_report_as_dir's, taken before).
nbdzone_same() {
  start_server mq dir="$1" || return 1
  $T "$top_builddir/client/nbdzone" report "nbd+unix:///?socket=$SOCK" > "$work/nbdzone.txt"
  local r=$?
  stop_server
  [ "$r" = 0 ] && [ "$(wc -l < "$work/nbdzone.txt")" = "$2" ] &&
    diff "$3" "$work/nbdzone.txt" && echo "$2 zones alike"
}

# wplug_kernel: the guest's kernel has zone write plugging (Linux 6.10
# and later, block/blk-zoned.c), which keeps each zone's wp and refuses
# some writes itself (EIO) that 6.1 sent to the device.
wplug_kernel() {
  local v
  v=$(uname -r)
  v=${v%%[!0-9.]*}
  [ "${v%%.*}" -gt 6 ] || { [ "${v%%.*}" = 6 ] && [ "$(echo "$v" | cut -d. -f2)" -ge 10 ]; }
}

# all CMD... [-- CMD...]...: run each in turn, stop at the first failure
# (several conditions as one check).
all() {
  local cmd=()
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then
      "${cmd[@]}" || return 1
      cmd=()
    else
      cmd+=("$1")
    fi
    shift
  done
  "${cmd[@]}"
}

# start_writer MNT DONE STOP OUT MAX: in the background, files MNT/w1,
# w2, ... each the first 256 KiB of $work/rand written with dd
# conv=fsync, each file's number appended to DONE once it is written,
# until the file STOP exists or MAX files are written; the writer's
# output goes to OUT, its pid to WRITER_BG.
start_writer() {
  (
    i=0
    while [ ! -e "$3" ] && [ $i -lt "$5" ]; do
      i=$((i + 1))
      dd if="$work/rand" of="$1/w$i" bs=64k count=4 conv=fsync status=none || exit 1
      echo "$i" >> "$2"
    done
  ) > "$4" 2>&1 < /dev/null &
  WRITER_BG=$!
}
# writer_stopped STOP PID FILE OUT: ask the writer PID to stop (it looks
# for the file STOP), wait for it; true if it ended with status 0.
writer_stopped() {
  local rc=0
  touch "$1"
  wait "$2" || rc=$?
  echo "writer: exit status $rc, $(wc -l < "$3") files"
  cat "$4"
  [ "$rc" = 0 ]
}
# files_read_back MNT SUMS FILE RAND: with the page cache dropped (read
# from the disk again), the files of sha256sum list SUMS under MNT and
# every writer file MNT/wI (I up to FILE's line count, each the first
# 256 KiB of RAND) hold what was written; at least one writer file.
files_read_back() {
  local mnt=$1 sums=$2 i n bad=0
  sync && echo 3 > /proc/sys/vm/drop_caches || return 1
  (cd "$mnt" && $T sha256sum -c --quiet "$sums") || bad=1
  n=$(wc -l < "$3")
  for i in $(seq "$n"); do
    cmp -s "$mnt/w$i" <(head -c 262144 "$4") || { echo "w$i differs" && bad=1; }
  done
  echo "$(wc -l < "$sums") synced files and $n writer files read back"
  [ "$bad" = 0 ] && [ "$n" -ge 1 ]
}
# lines_reach FILE PID OUT N: wait (at most 120 s) until FILE, where a
# writer PID appends a line per file it completed, has N lines; on
# failure OUT (the writer's output) is shown.
lines_reach() {
  local file=$1 pid=$2 out=$3 n=$4 i
  for i in $(seq 1200); do
    [ "$(wc -l < "$file")" -ge "$n" ] && echo "the writer has $(wc -l < "$file") files" && return 0
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "the writer has $(wc -l < "$file") files, not $n"
  cat "$out"
  return 1
}
# writable_copy SRC DEST: DEST shows SRC (a read-only share, say a peer
# suite's tree) and takes writes in a tmpfs: an overlay, not a copy,
# which over 9p takes minutes for a tree of thousands of files.
writable_copy() {
  mkdir -p "$2" "$work/ov-${2//\//_}/upper" "$work/ov-${2//\//_}/work" &&
    mount -t overlay -o "lowerdir=$1,upperdir=$work/ov-${2//\//_}/upper,workdir=$work/ov-${2//\//_}/work" \
      overlay "$2"
}
