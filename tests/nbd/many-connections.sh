#!/usr/bin/env bash
# 100 simultaneous connections to a plain RAM disk (zoned=false), each
# writing its own block and reading a neighbour's, then 200 connect /
# read / disconnect cycles: all succeed, and afterwards the server holds no
# more file descriptors than it did before the first client (no leak per
# connection).
. "$(dirname "$0")/../functions.sh"

start_frontend size=64M zoned=false
nfds() { find "/proc/$server_pid/fd" -mindepth 1 -maxdepth 1 | wc -l; }
before=$(nfds)
nbd_py <<'EOF'
from znbdtest import *
N = 100
hs = [connect() for _ in range(N)]
for i, h in enumerate(hs):
    h.pwrite(pattern(4096, i), i * 64 * KiB)
bad = [i for i, h in enumerate(hs) if hs[(i + 1) % N].pread(4096, i * 64 * KiB) != pattern(4096, i)]
check_eq(bad, [], "%d connections: each reads its neighbour's block" % N)
for h in hs:
    h.shutdown()
for k in range(200):
    h = connect()
    h.pread(512, k * 512)
    h.shutdown()
say("200 connect/read/disconnect cycles")
h = connect()
check_eq(h.pread(4096, 99 * 64 * KiB), pattern(4096, 99), "data of connection 99 still there")
h.shutdown()
EOF
after=$(nfds)
# The server closes a connection when it sees the client's EOF; on a busy
# machine that can lag, so wait for it (up to 30 s) rather than expect it
# at once.
for ((i = 0; i < 600 && after > before; i++)); do
  sleep 0.05
  after=$(nfds)
done
[ "$after" -le "$before" ] || die "server holds $after file descriptors after all clients left, $before before"
note "server file descriptors: $before before, $after after 300 connections"
stop_frontend
pass "many connections, no descriptor leak"
