#!/usr/bin/env bash
# Out of memory fails one request, never the server: under an address
# space limit a little above what the idle server maps, a 32 MiB READ
# (reply buffer) and a 32 MiB WRITE (receive buffer) get ENOMEM, the
# write's payload is read and dropped so the stream stays in step, the
# connection goes on serving small requests and the server stays up.
. "$(dirname "$0")/../functions.sh"
frontend_available
require_python_nbd
[ "$ZNBD_SANITIZERS" = no ] || skip "ASan's shadow memory does not fit an address space limit"
require nbdinfo
# One malloc arena: per-thread arenas (64 MiB of address space each,
# made on a thread's first malloc) would make the mapped size vary.
export MALLOC_ARENA_MAX=1
vmsize() { awk '/^VmSize:/{print $2}' "/proc/$server_pid/status"; }

# Conventional zones: reads are copied into a reply buffer (a plain RAM
# disk's may be sent from the store without one).
dev=(size=64M zone_size=32M zone_nr_conv=1)
# What the server maps once it has served a connection on each worker.
start_frontend "${dev[@]}"
for i in 1 2 3 4; do nbdinfo --size "$uri" >/dev/null; done
vm=$(vmsize)
stop_frontend

limit=$((vm + 20 * 1024))
ulimit -Sv "$limit"
start_frontend "${dev[@]}"
ulimit -Sv unlimited
note "address space limit ${limit} KiB (idle server: ${vm} KiB, now $(vmsize))"
nbd_py <<'PY' || die "ENOMEM checks failed"
import errno, nbd, os, sys
M = 1 << 20
h = nbd.NBD()
h.connect_uri(os.environ["uri"])
data = os.urandom(32 * M)
for i in range(32):  # in pieces: a 32 MiB receive buffer does not fit
    h.pwrite(data[i * M:(i + 1) * M], i * M)
for what, f in (("32 MiB read", lambda: h.pread(32 * M, 0)),
                ("32 MiB write", lambda: h.pwrite(b"w" * (32 * M), 0))):
    try:
        f()
        sys.exit(what + " succeeded under the limit: raise nothing, test is void")
    except nbd.Error as e:
        if e.errnum != errno.ENOMEM:
            sys.exit("%s: %s, want ENOMEM" % (what, e))
        print("ok: %s refused with ENOMEM" % what)
if h.pread(M, 0) != data[:M] or h.pread(M, 31 * M) != data[31 * M:]:
    sys.exit("after ENOMEM: data read back differs (the refused write "
             "changed it?)")
print("ok: the connection still serves; the refused write changed nothing")
h.shutdown()
PY
frontend_alive || die "server died"
nbdinfo --size "$uri" >/dev/null || die "server no longer serves"
stop_frontend
pass "ENOMEM for one request, connection and server still serving"
