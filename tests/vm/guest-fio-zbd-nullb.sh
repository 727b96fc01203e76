#!/bin/bash
# In the vm-run guest: fio's own t/zbd/test-zbd-support, unchanged, on a
# Linux null_blk zoned device with one of the geometries that
# tests/client/fio-suite-*.sh give the znbd front-ends, for the reference
# pass list (man znbd-fio, "FIO'S ZONED TEST SUITE").  guest-fio-zbd-disks.sh
# runs it in make check-vm (fio-zbd.test); on its own, by hand:
#
#   tests/vm/vm-run -t 3600 -m 3072 -w /tmp/zbd-out:/out \
#     tests/vm/guest-fio-zbd-nullb.sh 1m [-t N]...
#
# (FIO_SOURCE, passed with -e, names another fio source tree.)
# GEOM: 1m (1 MiB zones), zcap (4 MiB zones of 3 MiB capacity), open8
# (1 MiB zones, zone_max_open=8, the suite run with -o 8).  Other
# arguments go to test-zbd-support.  The null_blk settings follow fio's
# t/zbd/run-tests-against-nullb (completion_nsec=0, 4096-byte blocks,
# memory_backed=1, no conventional zones).  The suite's output and its
# per-test logs go to /out when that share exists.
set -u
geom=$1
shift
fio_src=${FIO_SOURCE:-/usr/local/src/fio}
opts=()
case $geom in
1m) size=136 zsize=1 zcap=1 maxopen=0 ;;
zcap) size=544 zsize=4 zcap=3 maxopen=0 ;;
open8) size=136 zsize=1 zcap=1 maxopen=8 opts=(-o 8) ;;
*) echo "unknown geometry $geom" >&2; exit 2 ;;
esac
modprobe null_blk nr_devices=0 || exit 1
modprobe sd_mod 2>/dev/null || true
d=/sys/kernel/config/nullb/nullb0
mkdir "$d" || exit 1
echo 0 >"$d/completion_nsec"
echo 4096 >"$d/blocksize"
echo "$size" >"$d/size"
echo 1 >"$d/memory_backed"
echo 1 >"$d/zoned"
echo "$zsize" >"$d/zone_size"
[ "$zcap" = "$zsize" ] || echo "$zcap" >"$d/zone_capacity"
echo "$maxopen" >"$d/zone_max_open"
echo 1 >"$d/power" || exit 1
for ((i = 0; i < 100; i++)); do
  [ -b /dev/nullb0 ] && break
  sleep 0.1
done
# No udev in the guest: make the node from sysfs if it is missing.
if [ ! -b /dev/nullb0 ]; then
  IFS=: read -r ma mi </sys/block/nullb0/dev
  mknod /dev/nullb0 b "$ma" "$mi"
fi
work=/tmp/zbd
mkdir -p "$work/t/zbd"
cp "$fio_src/t/zbd/test-zbd-support" "$fio_src/t/zbd/functions" "$work/t/zbd/"
ln -s "$(type -P fio)" "$work/fio"
cat /sys/block/nullb0/queue/zoned /sys/block/nullb0/queue/max_open_zones
rc=0
bash "$work/t/zbd/test-zbd-support" "${opts[@]}" "$@" /dev/nullb0 || rc=$?
if [ -d /out ]; then
  cp "$work"/t/zbd/test-zbd-support.log.* /out/ 2>/dev/null || true
fi
exit "$rc"
