#!/bin/bash
# In the guest (fio-zbd.test): fio's own t/zbd/test-zbd-support,
# unchanged, on Linux null_blk, on a znbd-tcmu disk and, where the kernel
# has ublk, on a znbd-ublk disk of the same geometry (guest-fio-zbd-disks.sh),
# for each GEOM argument in this one boot.  One check per test of the
# suite and disk: a test that passes on null_blk must pass on the SCSI
# disk and on the ublk disk.  The known differences, with their reasons in
# man znbd-tcmu, "FIO'S ZONED TEST SUITE":
#   - tests 9 and 10 use fio's sg engine: null_blk skips them (not a
#     SCSI device); on the SCSI disk they run and must pass, except
#   - with zone capacity below the zone size (zcap), where tests 9 and 10
#     expect four zone sizes written into four zones that hold four
#     capacities: a limit of the suite (XFAIL, TODO);
#   - a test null_blk fails (54, fio 3.33's own defect) is XFAIL on the
#     SCSI disk when it fails there too.
#   usage: guest-fio-zbd.sh GEOM... (1m, zcap, open8: guest-fio-zbd-nullb.sh)
# shellcheck source=guest-lib.sh
. "$top_srcdir/tests/vm/guest-lib.sh"
fio_src=${FIO_SOURCE:-/usr/local/src/fio}
total=$(grep -c '^test[0-9]*()' "$fio_src/t/zbd/test-zbd-support" 2> /dev/null)

# The tests that need a SCSI device (fio's sg engine): null_blk skips
# them, the SCSI disk must run them.
scsi_test() { [ "$1" = 9 ] || [ "$1" = 10 ]; }

# Whether the SCSI disk's result $2 answers null_blk's $1 for test $3;
# on a miss, the end of the test's log on the SCSI disk.
answers() {
  echo "null_blk: $1, znbd-tcmu: $2"
  if scsi_test "$3"; then
    [ "$2" = PASS ]
  else
    case $1 in
      PASS | FAIL) [ "$2" = PASS ] ;; # a null_blk FAIL: XFAIL below when it fails alike
      SKIP) [ "$2" != FAIL ] ;;
    esac
  fi || { tail -n 20 "/tmp/zbdt/tcmu/test-zbd-support.log.$3"; return 1; }
}

# The same for the ublk disk, no SCSI test apart.
answers_ublk() {
  echo "null_blk: $1, znbd-ublk: $2"
  case $1 in
    PASS | FAIL) [ "$2" = PASS ] ;;
    SKIP) [ "$2" != FAIL ] ;;
  esac || { tail -n 20 "/tmp/zbdt/ublk/test-zbd-support.log.$3" 2> /dev/null; return 1; }
}

for geom in "$@"; do
  rm -rf /tmp/zbd /tmp/zbdt
  out=$work/zbd-$geom.out
  t0=$SECONDS
  bash "$top_srcdir/tests/vm/guest-fio-zbd-disks.sh" "$geom" > "$out" 2>&1 < /dev/null
  note "t/zbd $geom: null_blk, znbd-tcmu (and znbd-ublk) in $((SECONDS - t0)) s"
  grep -E '^(nullb|tcmu|ublk)' "$out" | sed 's/^/#   /'
  declare -A nb=() sd=() ub=()
  while read -r n st; do nb[$((10#$n))]=$st; done < /tmp/zbdt/nullb.res
  while read -r n st; do sd[$((10#$n))]=$st; done < /tmp/zbdt/tcmu.res
  # znbd-ublk: run where the kernel has ublk_drv (not on 6.1).
  ublk=false
  if modprobe ublk_drv 2> /dev/null; then
    ublk=true
    while read -r n st; do ub[$((10#$n))]=$st; done < /tmp/zbdt/ublk.res
    check "t/zbd $geom: the suite ran all its $total tests on znbd-ublk" test "${#ub[@]}" = "$total" || ublk=false
  fi
  # Both runs must have run the whole suite, or the comparison is empty.
  if ! check "t/zbd $geom: the suite ran all its $total tests on both disks" \
    test "${#nb[@]}" = "$total" -a "${#sd[@]}" = "$total" -a "$total" -gt 50; then
    tail -n 40 "$out" | sed 's/^/#   | /'
    continue
  fi
  for n in $(printf '%s\n' "${!nb[@]}" | sort -n); do
    TODO=
    if [ "${nb[$n]}" = FAIL ] && [ "${sd[$n]}" = FAIL ]; then
      TODO="fails on null_blk too (fio's own defect, man znbd-fio)"
    elif [ "$geom" = zcap ] && scsi_test "$n" && [ "${sd[$n]}" = FAIL ]; then
      TODO="the sg tests count 4 zone sizes written into 4 zones of smaller capacity"
    fi
    if [ "${nb[$n]}" = SKIP ] && [ "${sd[$n]}" = SKIP ] && ! scsi_test "$n"; then
      skip_check "t/zbd $geom test $n" "skipped on null_blk and on the SCSI disk"
    else
      what="znbd-tcmu answers null_blk's ${nb[$n]}"
      scsi_test "$n" && what="fio's sg engine runs and passes on the SCSI disk"
      check "t/zbd $geom test $n: $what" answers "${nb[$n]}" "${sd[$n]}" "$n" || true
    fi
    $ublk || continue
    # The block layer's ublk disk is no SCSI device: tests 9 and 10 skip
    # there as on null_blk.
    TODO=
    [ "${nb[$n]}" = FAIL ] && [ "${ub[$n]}" = FAIL ] && TODO="fails on null_blk too (fio's own defect, man znbd-fio)"
    if [ "${nb[$n]}" = SKIP ] && [ "${ub[$n]}" = SKIP ]; then
      skip_check "t/zbd $geom test $n on znbd-ublk" "skipped on null_blk and on the ublk disk"
      continue
    fi
    check "t/zbd $geom test $n: znbd-ublk answers null_blk's ${nb[$n]}" \
      answers_ublk "${nb[$n]}" "${ub[$n]}" "$n" || true
  done
  unset nb sd ub
done
tap_end
