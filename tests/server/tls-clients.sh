#!/usr/bin/env bash
# Clients beyond libnbd's own tools over TLS (nbds://, PSK and X.509):
# nbdcopy and qemu-img copy data in and out and read it back, fio's nbd
# engine verifies what it wrote (X.509 from libnbd's default certificate
# directory: fio takes no tls-psk-file= URI), and the project's own
# nbdzone and fio engine (znbd-fio.so) see and move zone write pointers.
. "$(dirname "$0")/../functions.sh"
. "$top_srcdir/tests/tlsfiles.sh"
. "$top_srcdir/tests/client/common.sh" # nbdzone, zfio, fio_engine
frontend_available
require nbdinfo nbdcopy qemu-img fio
mkdir -p "$tmpdir/psk"
make_psk "$tmpdir/psk/keys.psk" alice
make_certs "$tmpdir/pki"
psk_uri() { echo "nbds+unix://alice@/?socket=$sock&tls-psk-file=$tmpdir/psk/keys.psk"; }

# ---- a RAM disk, PSK and X.509 both offered, TLS required
start_frontend --tls=require --tls-psk="$tmpdir/psk/keys.psk" \
  --tls-certificates="$tmpdir/pki" size=64M zoned=false
random_file "$tmpdir/src.img" 8M
nbdcopy "$tmpdir/src.img" "$(psk_uri)" || die "nbdcopy to nbds:// failed"
nbdcopy "$(psk_uri)" "$tmpdir/back.img" || die "nbdcopy from nbds:// failed"
head -c 8M "$tmpdir/back.img" | cmp - "$tmpdir/src.img" ||
  die "nbdcopy: what came back over TLS differs"
note "nbdcopy: 8 MiB in and out over TLS (PSK), identical"

qobj="tls-creds-psk,id=tls0,endpoint=client,dir=$tmpdir/psk,username=alice"
qimg="driver=nbd,path=$sock,tls-creds=tls0"
size=$(qemu-img info --output=json --object "$qobj" --image-opts "$qimg" |
  sed -n 's/.*"virtual-size": \([0-9]*\).*/\1/p')
[ "$size" = $((64 << 20)) ] || die "qemu-img info over TLS: size '$size'"
random_file "$tmpdir/q.img" 4M
qemu-img convert -n -f raw "$tmpdir/q.img" --object "$qobj" \
  --target-image-opts "driver=nbd,path=$sock,tls-creds=tls0" ||
  die "qemu-img convert to the TLS export failed"
qemu-img convert --object "$qobj" --image-opts "$qimg" -O raw "$tmpdir/qback.img" ||
  die "qemu-img convert from the TLS export failed"
head -c 4M "$tmpdir/qback.img" | cmp - "$tmpdir/q.img" ||
  die "qemu-img: what came back over TLS differs"
note "qemu-img: info (64 MiB) and 4 MiB in and out over TLS (PSK), identical"

mkdir -p "$tmpdir/fiohome/.pki/libnbd"
cp "$tmpdir/pki/client/"*.pem "$tmpdir/fiohome/.pki/libnbd/"
HOME=$tmpdir/fiohome run_fio nbdfio --ioengine=nbd \
  --uri="nbds+unix:///?socket=$sock" --rw=randwrite --bs=4k --size=8M \
  --iodepth=16 --verify=crc32c --do_verify=1
e=$(fio_get nbdfio jobs.0.error)
w=$(fio_get nbdfio jobs.0.write.io_bytes)
[ "$e" = 0 ] && [ "$w" = $((8 << 20)) ] || die "fio nbd over TLS: error $e, wrote $w"
note "fio nbd engine: 8 MiB random writes verified (crc32c) over TLS (X.509)"
stop_frontend

# ---- a zoned disk: nbdzone and znbd-fio.so over nbds://
start_frontend --tls=require --tls-psk="$tmpdir/psk/keys.psk" \
  size=64M zone_size=4M zone_nr_conv=1
uri=$(psk_uri)
nbdzone report --count 2 --offset $((4 << 20)) "$(psk_uri)" >"$tmpdir/r0" ||
  die "nbdzone report over TLS failed"
grep -c 'wptr 0x000000 .*zcond: 1(em)' "$tmpdir/r0" | grep -qx 2 ||
  die "nbdzone report: not two empty zones: $(cat "$tmpdir/r0")"
if [ -f "$fio_engine" ]; then
  zfio zfio --zonemode=zbd --rw=write --bs=64k --offset=4M --size=8M --io_size=6M
  w=$(fio_get zfio jobs.0.write.io_bytes)
  [ "$w" = $((6 << 20)) ] || die "znbd-fio over TLS wrote $w bytes"
  nbdzone report --count 2 --offset $((4 << 20)) "$(psk_uri)" >"$tmpdir/r1" ||
    die "nbdzone report over TLS failed"
  grep -q 'start: 0x000002000, .*zcond:14(fu)' "$tmpdir/r1" &&
    grep -q 'start: 0x000004000, .*wptr 0x001000 .*zcond: 2(oi)' "$tmpdir/r1" ||
    die "after 6 MiB from zone 1: $(cat "$tmpdir/r1")"
  nbdzone reset --all "$(psk_uri)" || die "nbdzone reset over TLS failed"
  nbdzone report --count 2 --offset $((4 << 20)) "$(psk_uri)" | grep -c 'zcond: 1(em)' |
    grep -qx 2 || die "nbdzone reset --all over TLS left zones written"
  note "znbd-fio.so: 6 MiB sequential over TLS; nbdzone: zone 1 FULL, zone 2 wp 2 MiB, reset all"
else
  note "znbd-fio.so not built (no fio source): its part skipped"
fi
stop_frontend
pass "nbdcopy, qemu-img, fio (nbd and znbd-fio.so) and nbdzone over TLS"
