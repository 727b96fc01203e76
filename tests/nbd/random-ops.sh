#!/usr/bin/env bash
# 2000 random requests (seeded, so a failure reproduces) on a plain RAM
# disk (zoned=false): writes of random and of all-zero data, write-zeroes
# and trims of 512 B to 20 KiB at any sector, checked against a model
# after every 100 and at the end — every byte (one read of the device) and
# base:allocation exactly (a page is data once written, a hole again when
# a trim or write-zeroes covers it whole; partial ones keep it).  Seed:
# $ZNBD_SEED (default 1).  Write-zeroes with NO_HOLE is in zero-no-hole.
# (The nbdkit memory stand-in frees all-zero pages itself: data only.)
. "$(dirname "$0")/../functions.sh"

start_frontend size=256K zoned=false
page=$(frontend_page_size) seed=${ZNBD_SEED:-1} nbd_py <<'EOF'
from znbdtest import *
P = int(os.environ["page"])
seed = int(os.environ["seed"])
S = 256 * KiB
rnd = random.Random(seed)
h = connect()
data = bytearray(S)
alloc = [False] * (S // P)

def model_extents():
    out = []
    for p, a in enumerate(alloc):
        f = 0 if a else HOLE | ZERO
        if out and out[-1][2] == f:
            out[-1] = (out[-1][0], out[-1][1] + P, f)
        else:
            out.append((p * P, P, f))
    return out

def free_whole(off, ln):
    for p in range((off + P - 1) // P, (off + ln) // P):
        alloc[p] = False

log = []
for i in range(1, 2001):
    op = rnd.choice(["write", "write-zero-data", "zero", "trim"])
    off = rnd.randrange(0, S // 512) * 512
    ln = min(rnd.choice([512, 1024, 1536, 4096, 8192, 12288, 20480]), S - off)
    log.append("%s %d+%d" % (op, off, ln))
    if op.startswith("write"):
        buf = rnd.randbytes(ln) if op == "write" else bytes(ln)
        h.pwrite(buf, off)
        data[off:off + ln] = buf
        for p in range(off // P, (off + ln + P - 1) // P):
            alloc[p] = True
    else:
        (h.zero if op == "zero" else h.trim)(ln, off)
        data[off:off + ln] = bytes(ln)
        free_whole(off, ln)
    if i % 100 == 0:
        if h.pread(S, 0) != bytes(data):
            raise TestFailure("seed %d: data differs after request %d; last: %s" % (seed, i, log[-5:]))
        got = extents(h, 0, S)
        if os.environ["ZNBD_FRONTEND"] != "memory" and got != model_extents():
            raise TestFailure("seed %d: base:allocation after request %d: got %r, want %r; last: %s"
                              % (seed, i, got, model_extents(), log[-5:]))
say("seed %d: 2000 random requests, data and base:allocation match the model at 20 checkpoints (%d of %d pages allocated)"
    % (seed, sum(alloc), len(alloc)))
h.shutdown()
EOF
stop_frontend
pass "random requests against a model"
