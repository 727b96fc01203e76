# TLS credentials made by the test itself, sourced after functions.sh
# (certtool and psktool come with gnutls-bin, scripts/install-deps.sh):
#
#   make_psk FILE IDENTITY     psktool: a new random key for IDENTITY
#   make_certs DIR             a CA and, signed by it, the server's files
#                              as --tls-certificates wants them
#                              (DIR/ca-cert.pem, server-cert.pem,
#                              server-key.pem) and a client's for libnbd's
#                              tls-certificates= (DIR/client/ca-cert.pem,
#                              client-cert.pem, client-key.pem);
#                              DIR/nocert/ holds only ca-cert.pem (a client
#                              without a certificate) and DIR/rogue/ a
#                              client certificate from another CA.
# Both skip (77) when gnutls-bin is missing.

make_psk() {
  require psktool
  psktool -u "$2" -p "$1" >/dev/null 2>&1 || die "psktool -u $2 -p $1 failed"
}

# _cert_sign DIR NAME ROLE CA: NAME-key.pem and NAME-cert.pem in DIR,
# signed by CA (DIR of ca-key.pem and ca-cert.pem) for ROLE
# (tls_www_server or tls_www_client).
_cert_sign() {
  local dir=$1 name=$2 role=$3 ca=$4
  cat >"$dir/$name.info" <<EOT
organization = znbd test
cn = localhost
dns_name = localhost
ip_address = 127.0.0.1
$role
encryption_key
signing_key
expiration_days = 2
EOT
  certtool --generate-privkey --outfile "$dir/$name-key.pem" >/dev/null 2>&1 &&
    certtool --generate-certificate --load-privkey "$dir/$name-key.pem" \
      --load-ca-certificate "$ca/ca-cert.pem" --load-ca-privkey "$ca/ca-key.pem" \
      --template "$dir/$name.info" --outfile "$dir/$name-cert.pem" >/dev/null 2>&1 ||
    die "certtool: cannot make $dir/$name-cert.pem"
}

_make_ca() {
  local dir=$1
  mkdir -p "$dir"
  printf 'cn = znbd test CA %s\nca\ncert_signing_key\nexpiration_days = 2\n' \
    "$(basename "$dir")" >"$dir/ca.info"
  certtool --generate-privkey --outfile "$dir/ca-key.pem" >/dev/null 2>&1 &&
    certtool --generate-self-signed --load-privkey "$dir/ca-key.pem" \
      --template "$dir/ca.info" --outfile "$dir/ca-cert.pem" >/dev/null 2>&1 ||
    die "certtool: cannot make the CA in $dir"
}

make_certs() {
  require certtool
  local d=$1
  _make_ca "$d"
  _cert_sign "$d" server tls_www_server "$d"
  mkdir -p "$d/client" "$d/nocert" "$d/rogue"
  _cert_sign "$d/client" client tls_www_client "$d"
  cp "$d/ca-cert.pem" "$d/client/"
  cp "$d/ca-cert.pem" "$d/nocert/"
  _make_ca "$d/rogueca"
  _cert_sign "$d/rogue" client tls_www_client "$d/rogueca"
  cp "$d/ca-cert.pem" "$d/rogue/"
}
