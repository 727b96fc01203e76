#!/usr/bin/env bash
# Lost replies (control socket `drop-reply`, null_blk's timeout injection
# seen from NBD): with `drop-reply every 1 read` a read is executed but
# never answered, so the client's timeout (libnbd: nbd_poll with a
# timeout) is what notices it; meanwhile a second connection, and the
# first connection's other requests, are served; `stats` counts the
# dropped reply, and after `drop-reply off` reads are answered again.
# `every 2 write`: exactly every second write is lost (and was done).
# `every 1 other`: a CACHE and a BLOCK_STATUS reply are lost too.
# The plugin parks the request in nbdkit_nanosleep until the client hangs
# up (nbdkit cannot drop a reply).  -v logs each drop.  Every connection
# hangs up with at most one reply held back: nbdkit 1.32 aborts when two
# of one connection's threads send to a client that has gone (man
# nbdkit-zoned-plugin, BUGS), and this test is about lost replies, not
# that defect.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "drop-reply"

ctl=$tmpdir/ctl
# -v: znbd and nbdkit (debug log) say when a reply is dropped.
ZNBD_FRONTEND_OPTS=-v start_frontend size=4M zoned=false zone_control="$ctl"
ctl=$ctl nbd_py <<'EOF'
from znbdtest import *
ctl = os.environ["ctl"]
data = pattern(64 * KiB, 5)
h1, h2 = connect(), connect()
h1.pwrite(data, 0)

def dropped_now():
    return control_stats(ctl)["dropped_replies"]

def poll_until(cond, hs, what, limit=60):
    """Poll the handles HS until COND() holds: up to LIMIT s, a bound
    for a loaded machine only (the server drops a reply at once)."""
    for _ in range(limit * 10):
        if cond():
            return
        for h in hs:
            h.poll(100 // len(hs))
    raise TestFailure("no %s within %d s" % (what, limit))

check_eq(control(ctl, "drop-reply every 1 read"),
         "ok every=1 kinds=read dropped_replies=0\n", "drop every read")
buf = nbd.Buffer(64 * KiB)
cookie = h1.aio_pread(buf, 0)
# The server counts the reply it dropped (however long a loaded machine
# takes to get there); then the client's timeout: 2 s more of polling,
# the reply must not come.
poll_until(lambda: dropped_now() >= 1, [h1], "dropped read counted")
check_eq(dropped_now(), 1, "stats counts the dropped reply")
for _ in range(20):
    h1.poll(100)
check(not h1.aio_command_completed(cookie), "dropped read still pending after the client's 2 s timeout")
check_eq(control(ctl, "drop-reply off"), "ok every=0 kinds=none dropped_replies=1\n", "drop-reply off")
# The server keeps serving: another connection, and the same one.
h2.pwrite(b"z" * 4096, 64 * KiB)
check_eq(h2.pread(4096, 64 * KiB), b"z" * 4096, "second connection served")
check_eq(h1.pread(64 * KiB, 0), data, "first connection's next read answered")
check(not h1.aio_command_completed(cookie), "the dropped read never completes")

check_eq(control(ctl, "drop-reply every 2 write"), "ok every=2 kinds=write dropped_replies=1\n", "every 2nd write")
# Four writes, one after the other, so the server takes them in this
# order: the 2nd and 4th lose their reply.  Each lost reply is left on a
# connection of its own (see the header).  Each write is either answered
# or counted as dropped: wait for one of the two (no time decides).
hw = [connect(), connect()]
answered, pending = [], []
for k in range(4):
    h = hw[k // 2]
    before = dropped_now()
    c = h.aio_pwrite(bytes([k]) * 4096, k * 4096 + 1 * MiB)
    done = []  # aio_command_completed retires the command: ask once
    def settled():
        if not done and h.aio_command_completed(c):
            done.append(k)
        return done or dropped_now() > before
    poll_until(settled, [h], "reply or dropped reply for write %d" % (k + 1))
    (answered if done else pending).append(k)
check_eq((answered, pending), ([0, 2], [1, 3]), "writes 1 and 3 answered, 2 and 4 not")
control(ctl, "drop-reply off")
check_eq(h1.pread(4 * 4096, 1 * MiB), b"".join(bytes([k]) * 4096 for k in range(4)),
         "every write was executed, answered or not")
check_eq(control_stats(ctl)["dropped_replies"], 3, "three replies dropped in all")
# Kind "other": CACHE and BLOCK_STATUS replies are lost too (the plugin
# holds them in its .cache and .extents callbacks).
check_eq(control(ctl, "drop-reply every 1 other"), "ok every=1 kinds=other dropped_replies=3\n",
         "drop every other request")
check(h1.can_cache() and h2.can_meta_context("base:allocation"), "CACHE and block status offered")
hc, hb = connect(), connect()
c_cache = hc.aio_cache(4096, 0)
c_bs = hb.aio_block_status(4096, 0, lambda *a: 0)
poll_until(lambda: dropped_now() >= 5, [hc, hb], "dropped CACHE and BLOCK_STATUS counted")
check_eq(dropped_now(), 5, "both dropped replies counted")
for _ in range(20):
    hc.poll(50)
    hb.poll(50)
check_eq([hc.aio_command_completed(c_cache), hb.aio_command_completed(c_bs)], [False, False],
         "CACHE and BLOCK_STATUS unanswered")
control(ctl, "drop-reply off")
seen = []
h2.block_status(4096, 0, lambda ctx, off, ents, err: seen.extend(ents) or 0)
check(len(seen) >= 2 and seen[0] >= 4096 and seen[1] == 0,
      "the next BLOCK_STATUS is answered: data at 0 (%r)" % seen[:2])
check_eq(h1.cache(4096, 0), None, "the next CACHE is answered")
check(control(ctl, "drop-reply every 0").startswith("error EINVAL"), "every 0 refused")
check(control(ctl, "drop-reply every 1 bogus").startswith("error EINVAL"), "unknown kind refused")
del h1, h2, hw, hc, hb  # hang up with the dropped requests pending
EOF
frontend_alive || die "the server died"
stop_frontend
n=$(grep -c 'fault: drop-reply: the reply to this \(read\|write\|request\) is not sent' "$server_log" || true)
[ "$n" = 5 ] || { cat "$server_log" >&2; die "-v logged $n dropped replies, want 5"; }
pass "dropped replies are executed, never answered, and counted"
