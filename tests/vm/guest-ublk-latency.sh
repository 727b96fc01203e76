# shellcheck shell=bash
# guest-ublk.sh part "latency": an injected delay holds each request
# on its own timer, as null_blk's timer mode (irqmode=2, completion_nsec)
# holds each on its own hrtimer, so requests in flight together wait
# together.  Sourced by guest-ublk.sh, on its functions.
# - 32 reads of 4 KiB at queue depth 32 from a znbd-ublk disk whose every
#   request is held 1 s (completion_nsec=1000000000) end within 8 s of
#   fio's run time: held one after the other they would take 32 s;
# - with every request held 1 ms, fio's random 4 KiB reads at queue depth
#   32 get at least 6 times the IOPS of queue depth 1, or, on a guest too
#   loaded for null_blk itself to reach that, at least 0.8 times
#   null_blk's own ratio measured beside it (three interleaved rounds,
#   the median ratio of each).
# fio_iops DEV QD: read IOPS of 3 s of 4 KiB random direct reads.
fio_iops() {
  $T fio --name=lat --filename="$1" --rw=randread --bs=4k --direct=1 \
    --ioengine=libaio --iodepth="$2" --runtime=3 --time_based --minimal 2> /dev/null |
    awk -F';' '{ print $8 }'
}
# qd_ratios NULLB UBLK: three rounds of QD1 and QD32 on both, alternated;
# the median QD32/QD1 ratio of each.
qd_ratios() {
  local i nb1 nb32 u1 u32
  : > "$work/lat.ratios"
  for i in 1 2 3; do
    nb1=$(fio_iops "$1" 1) && u1=$(fio_iops "$2" 1) &&
      nb32=$(fio_iops "$1" 32) && u32=$(fio_iops "$2" 32) || return 1
    echo "round $i: null_blk QD1 $nb1 QD32 $nb32 IOPS; znbd-ublk QD1 $u1 QD32 $u32 IOPS"
    echo "$nb1 $nb32 $u1 $u32" >> "$work/lat.ratios"
  done
  python3 - "$work/lat.ratios" << 'PY'
import statistics
import sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
nb = statistics.median(r[1] / r[0] for r in rows)
ub = statistics.median(r[3] / r[2] for r in rows)
print("QD32/QD1 at 1 ms: null_blk %.1f, znbd-ublk %.1f (%.2f of null_blk's)"
      % (nb, ub, ub / nb))
sys.exit(0 if ub >= 6 or ub >= 0.8 * nb else 1)
PY
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
