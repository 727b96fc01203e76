# shellcheck shell=bash
# guest-ublk.sh part "latency": an injected delay holds each request
# on its own timer, as null_blk's timer mode (irqmode=2, completion_nsec)
# holds each on its own hrtimer, so requests in flight together wait
# together.  Sourced by guest-ublk.sh, on its functions.
# - 32 reads of 4 KiB at queue depth 32 from a znbd-ublk disk whose every
#   request is held 1 s (completion_nsec=1000000000) end within 8 s of
#   fio's run time: held one after the other they would take 32 s;
# - with every request held 1 ms, fio's random 4 KiB reads at queue depth
#   32 get at least 6 times the IOPS of queue depth 1 (the median of three
#   rounds), or, on a guest too loaded for null_blk itself to reach that,
#   at least 0.8 times null_blk's own ratio measured beside it (three
#   interleaved rounds, the median ratio of each).  null_blk's timer mode
#   runs only in that second case: its completions, each in the hard
#   interrupt of its hrtimer, about 10,000 a second beside fio's
#   io_submit, are the load under which this TCG guest (QEMU 7.2, Linux
#   6.18) took a double fault in the slab allocator with no znbd code
#   running at all (tests/vm/README.md, "A guest's double fault").
# fio_iops DEV QD: read IOPS of 3 s of 4 KiB random direct reads.
fio_iops() {
  $T fio --name=lat --filename="$1" --rw=randread --bs=4k --direct=1 \
    --ioengine=libaio --iodepth="$2" --runtime=3 --time_based --minimal 2> /dev/null |
    awk -F';' '{ print $8 }'
}
# qd_median FILE: the median QD32/QD1 ratio of FILE's rows ("QD1 QD32"
# of one disk, or of two: "NB1 NB32 U1 U32"); with one disk, status 0 if
# it is at least 6; with two, if znbd-ublk's is at least 6 or 0.8 times
# null_blk's.
qd_median() {
  python3 - "$1" << 'PY'
import statistics
import sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
ub = statistics.median(r[-1] / r[-2] for r in rows)
if len(rows[0]) == 2:
    print("QD32/QD1 at 1 ms: znbd-ublk %.1f" % ub)
    sys.exit(0 if ub >= 6 else 1)
nb = statistics.median(r[1] / r[0] for r in rows)
print("QD32/QD1 at 1 ms: null_blk %.1f, znbd-ublk %.1f (%.2f of null_blk's)"
      % (nb, ub, ub / nb))
sys.exit(0 if ub >= 6 or ub >= 0.8 * nb else 1)
PY
}
# qd_ratios NULLB UBLK: three rounds of QD1 and QD32 on znbd-ublk; if its
# median ratio is under 6, three rounds on both, alternated.
qd_ratios() {
  local i nb1 nb32 u1 u32
  : > "$work/lat.ublk"
  for i in 1 2 3; do
    u1=$(fio_iops "$2" 1) && u32=$(fio_iops "$2" 32) || return 1
    echo "round $i: znbd-ublk QD1 $u1 QD32 $u32 IOPS"
    echo "$u1 $u32" >> "$work/lat.ublk"
  done
  qd_median "$work/lat.ublk" && return 0
  echo "under 6: null_blk's ratio beside it"
  : > "$work/lat.ratios"
  for i in 1 2 3; do
    nb1=$(fio_iops "$1" 1) && u1=$(fio_iops "$2" 1) &&
      nb32=$(fio_iops "$1" 32) && u32=$(fio_iops "$2" 32) || return 1
    echo "round $i: null_blk QD1 $nb1 QD32 $nb32 IOPS; znbd-ublk QD1 $u1 QD32 $u32 IOPS"
    echo "$nb1 $nb32 $u1 $u32" >> "$work/lat.ratios"
  done
  qd_median "$work/lat.ratios"
}
if command -v fio > /dev/null; then
  if check "latency: znbd-ublk, a plain disk whose requests are each held 1 s" \
    ublk_start zoned=false size=16M completion_nsec=1000000000; then
    check "latency: 32 reads at QD32 held together, not one after the other" held_together 8000
    check "latency: SIGTERM removes the disk" ublk_stop
  fi
  if check "latency: null_blk in timer mode, each request held 1 ms" \
    nullb_create zoned=0 irqmode=2 completion_nsec=1000000; then
    LAT_NB=$DEV
    if check "latency: znbd-ublk, each request held 1 ms" \
      ublk_start zoned=false size=64M completion_nsec=1000000; then
      check "latency: QD32 reads at least 6x the IOPS of QD1, or 0.8x null_blk's ratio" \
        qd_ratios "$LAT_NB" "$DEV"
      check "latency: SIGTERM removes that disk" ublk_stop
    fi
    echo 0 > "$nb/power"
    rmdir "$nb"
  fi
else
  skip_check "latency: fio" "no fio in the guest"
fi
note "t=${SECONDS}s"
