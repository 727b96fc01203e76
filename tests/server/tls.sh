#!/usr/bin/env bash
# TLS (--tls, --tls-psk, --tls-certificates, --tls-verify-peer) with
# credentials made here by psktool and certtool: start-up refusals that
# name the option and file; FORCEDTLS negotiation byte by byte; libnbd
# clients (nbdinfo, Python nbd) reading back what they wrote over TLS with
# PSK and X.509; a plain client, a wrong key, an unknown identity and a
# client without an accepted certificate refused; a stalled handshake
# closed without holding up other clients; --tls=off unchanged.
. "$(dirname "$0")/../functions.sh"
. "$top_srcdir/tests/tlsfiles.sh"
frontend_available
require nbdinfo
require_python_nbd
make_psk "$tmpdir/keys.psk" alice
make_psk "$tmpdir/other.psk" alice # same identity, another key
make_psk "$tmpdir/bob.psk" bob
make_certs "$tmpdir/pki"

# ---- start-up refusals, each naming its option
expect_start_failure "--tls=require" --tls=require size=8M
expect_start_failure "--tls bogus" --tls=bogus size=8M
expect_start_failure "--tls-psk $tmpdir/none.psk" --tls=require \
  --tls-psk="$tmpdir/none.psk" size=8M
printf 'alice:00ff\nnot a key line\n' >"$tmpdir/bad.psk"
expect_start_failure "line 2" --tls=require --tls-psk="$tmpdir/bad.psk" size=8M
printf 'alice:0g\n' >"$tmpdir/badhex.psk"
expect_start_failure "line 1" --tls=on --tls-psk="$tmpdir/badhex.psk" size=8M
mkdir "$tmpdir/nokey"
cp "$tmpdir/pki/server-cert.pem" "$tmpdir/nokey/"
expect_start_failure "server-key.pem" --tls=require \
  --tls-certificates="$tmpdir/nokey" size=8M
expect_start_failure "--tls-verify-peer" --tls=require \
  --tls-psk="$tmpdir/keys.psk" --tls-verify-peer size=8M
mkdir "$tmpdir/noca"
cp "$tmpdir/pki/server-"*.pem "$tmpdir/noca/"
expect_start_failure "ca-cert.pem" --tls=require \
  --tls-certificates="$tmpdir/noca" --tls-verify-peer size=8M

# ---- --tls=off (default): STARTTLS is unsupported, nothing else changes
start_frontend size=16M zoned=false
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" tls_off || die "--tls=off negotiation"
stop_frontend

# nbds+unix URI with the PSK file; the identity is the URI's user.
psk_uri() { echo "nbds+unix://$2@/?socket=$sock&tls-psk-file=$1"; }

# rw_check PSKFILE|- CERTDIR|-: write, read back, aio, trim, zero over TLS
rw_check() {
  nbd_py "$sock" "$1" "$2" <<'PY'
import os, sys
import nbd
sock, psk, certs = sys.argv[1:4]
h = nbd.NBD()
h.set_tls(nbd.TLS_REQUIRE)
if psk != "-":
    h.set_tls_psk_file(psk)
    h.set_tls_username("alice")
if certs != "-":
    h.set_tls_certificates(certs)
h.connect_unix(sock)
assert h.get_tls_negotiated(), "TLS not negotiated"
big = os.urandom(4 << 20)
h.pwrite(big, 0)
assert h.pread(len(big), 0) == big, "4 MiB read back differs"
# 32 reads of 64 KiB in flight at once (zero-copy replies, encrypted)
bufs = [nbd.Buffer(65536) for _ in range(32)]
for i, b in enumerate(bufs):
    h.aio_pread(b, i * 65536)
while h.aio_in_flight() > 0:
    h.poll(-1)
assert b"".join(b.to_bytearray() for b in bufs) == big[:32 * 65536], "aio reads differ"
small = os.urandom(512)
h.pwrite(small, 8 << 20, nbd.CMD_FLAG_FUA)
assert h.pread(512, 8 << 20) == small, "512 bytes read back differ"
h.zero(65536, 65536)
assert h.pread(65536, 65536) == bytes(65536), "zeroed range not zero"
h.trim(65536, 0)
h.flush()
h.shutdown()
print("TLS %s: 4 MiB + 32 aio reads + FUA write + zero + trim read back" % (
    "PSK" if psk != "-" else "X.509"))
PY
}

# ---- PSK, --tls=require
start_frontend -v --tls=require --tls-psk="$tmpdir/keys.psk" size=16M zoned=false
nbdinfo "$(psk_uri "$tmpdir/keys.psk" alice)" >"$tmpdir/info" || die "nbdinfo over TLS (PSK) failed"
grep -q 'with TLS' "$tmpdir/info" || die "nbdinfo: $(head -1 "$tmpdir/info")"
note "nbdinfo: $(head -1 "$tmpdir/info")"
rw_check "$tmpdir/keys.psk" - || die "read/write over TLS (PSK)"
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" tls_require || die "FORCEDTLS negotiation"
if nbdinfo "nbd+unix:///?socket=$sock" >"$tmpdir/plain" 2>&1; then
  die "a plain client was served under --tls=require"
fi
note "plain client refused: $(head -1 "$tmpdir/plain")"
if nbdinfo "$(psk_uri "$tmpdir/other.psk" alice)" >"$tmpdir/wrong" 2>&1; then
  die "a client with the wrong key was served"
fi
grep -q "PSK identity 'alice': not the key" "$server_log" ||
  die "wrong key: the -v log does not say so"
if nbdinfo "$(psk_uri "$tmpdir/bob.psk" bob)" >"$tmpdir/unknown" 2>&1; then
  die "a client with an unknown identity was served"
fi
grep -q "unknown PSK identity 'bob'" "$server_log" ||
  die "unknown identity: the -v log does not say so"
note "wrong key and unknown identity refused; log: $(grep -m1 'not the key' "$server_log")"
rw_check "$tmpdir/keys.psk" - || die "read/write over TLS after the refusals"
stop_frontend

# ---- --tls=on: TLS and plain clients both served; a stalled handshake
start_frontend -v --tls=on --tls-psk="$tmpdir/keys.psk" size=16M zoned=false
nbdinfo --size "nbd+unix:///?socket=$sock" >/dev/null || die "--tls=on: plain client refused"
rw_check "$tmpdir/keys.psk" - || die "--tls=on: read/write over TLS"
/usr/bin/python3 "$srcdir/rawnbd.py" "$sock" tls_stall || die "stalled handshake"
grep -q "handshake not done after" "$server_log" || die "stalled handshake: not logged"
stop_frontend

# ---- X.509 with --tls-verify-peer
start_frontend -v --tls=require --tls-certificates="$tmpdir/pki" --tls-verify-peer \
  size=16M zoned=false
cert_uri() { echo "nbds+unix:///?socket=$sock&tls-certificates=$1"; }
nbdinfo "$(cert_uri "$tmpdir/pki/client")" >"$tmpdir/info" || die "nbdinfo over TLS (X.509) failed"
grep -q 'with TLS' "$tmpdir/info" || die "nbdinfo X.509: $(head -1 "$tmpdir/info")"
rw_check - "$tmpdir/pki/client" || die "read/write over TLS (X.509)"
for who in nocert rogue; do
  if nbdinfo "$(cert_uri "$tmpdir/pki/$who")" >"$tmpdir/$who" 2>&1; then
    die "--tls-verify-peer: client '$who' was served"
  fi
done
grep -q "handshake failed" "$server_log" || die "refused certificate: not logged"
note "--tls-verify-peer: clients without a certificate of the CA refused"
stop_frontend

# ---- X.509 without --tls-verify-peer: a client without certificate is fine
start_frontend --tls=require --tls-certificates="$tmpdir/pki" size=16M zoned=false
nbdinfo --size "$(cert_uri "$tmpdir/pki/nocert")" >/dev/null ||
  die "X.509 without --tls-verify-peer: client without certificate refused"
stop_frontend
pass "TLS: refusals named, PSK and X.509 read back, plain/wrong key/unknown identity/uncertified refused, stall closed"
