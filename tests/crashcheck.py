"""A randomized crash and power-cut checker for znbd (run by
tests/nbd/crash-check.sh, which passes the front-end's command line).

Several NBD connections write self-describing sectors (every 512-byte
sector names its zone, its own byte offset, the id of the write that
carried it and the generation, with a CRC), with FLUSH, FUA and zone
resets (TRIM of a whole zone) at random points, while the server is
killed with SIGKILL (dir=) or the control socket cuts the power
(write_cache=true): at a random moment, with requests in flight, more
sent while the cut is carried out, sometimes "power-cut after N", and
sometimes the restart that replays the journal is itself killed.  Then
every sector, write pointer and zone condition is checked against a model
of what the client saw acknowledged and what was durable, following the
rules of nbdkit-zoned-plugin(1), POWER CUTS and PERSISTENT DEVICES:

* write_cache=false, kill -9 (dir=): every acknowledged write survives.
* write_cache=true, power cut or kill -9 (dir=): a conventional 4 KiB
  page holds what it held at the last durability point, which is the
  last completed FLUSH before the cut (it covers every write acknowledged
  before the FLUSH was sent, and may cover writes in flight meanwhile:
  NBD's flush rule, all connections sharing one device) or a FUA write
  that touched the page ("the 4 KiB pages it touched, as they are when
  it completes"); a sequential zone's write pointer is at the end of the
  last write a FLUSH covered or a FUA write in it ended at (nothing of a
  zone below it is lost); a completed reset is durable.
* Zones afterwards take power-cycle conditions: EMPTY at the start, FULL
  at the capacity, CLOSED in between; nothing is open.  Bytes at or above
  a write pointer read as zeros.
* A request of a connection made before a power cut either ran wholly
  before the cut or changed nothing; one sent after the cut's "ok" never
  succeeds; a request that got an error reply changed nothing.
* Nothing is unacknowledged-garbage: every sector holds zeros or the
  exact sector of a write that covered it.

The model checks each page and zone on its own (each must be explained
by some order of events the client could not tell apart); it assumes
512-byte sectors are written whole.  To keep the model exact, writes
touching the same conventional page are never in flight together, and a
zone is reset only with no write in flight to it; writes to one
sequential zone from several connections are in flight together.

Environment: SEED (default random, printed), ITERATIONS (crash events,
default 20), TIME_LIMIT (seconds, default 40), CHECK_STORE (ram or dir),
CHECK_CMD_FILE (the server command prefix, NUL-separated), CHECK_DIR (a
scratch directory), CHECK_VERBOSE=1.  Exit 0: no violation; 1: at least
one (each printed with the seed to replay: the choices repeat, the
timing cannot).
"""

import errno
import os
import random
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib

import nbd

from znbdctl import control

SECT = 512
PAGE = 4096
MAGIC = b"ZCK1"
ZONE_SIZE = 256 * 1024
NR_ZONES = 10
NR_CONV = 2
SIZE = ZONE_SIZE * NR_ZONES
CONNS = 3
DEPTH = 8  # per connection

seed = int(os.environ.get("SEED") or random.SystemRandom().randrange(1 << 31))
iterations = int(os.environ.get("ITERATIONS", "20"))
time_limit = float(os.environ.get("TIME_LIMIT", "40"))
store = os.environ.get("CHECK_STORE", "ram")
frontend = os.environ.get("ZNBD_FRONTEND", "?")
workdir = os.environ["CHECK_DIR"]
verbose = os.environ.get("CHECK_VERBOSE", "0") == "1"
with open(os.environ["CHECK_CMD_FILE"], "rb") as f:
    cmd_prefix = [a.decode() for a in f.read().split(b"\0") if a]

rng = random.Random(seed)
# Client-side clock: one tick per event the client observes or causes,
# so "acknowledged before the FLUSH was sent" is a comparison of ticks.
clock = [0]


def tick():
    clock[0] += 1
    return clock[0]


counts = dict(iterations=0, kills=0, cuts=0, cuts_after=0, restart_kills=0,
              writes=0, acked=0, flushes=0, resets=0, in_flight_at_crash=0,
              cuts_in_flight=0, failed=0, violations=0)


def log(msg):
    print("crashcheck [%s %s]: %s" % (frontend, store, msg), flush=True)


class Violation(Exception):
    pass


violations = []
selftest_on = [False]


selftest = []  # while the model checks itself: the violations it found


def violation(msg):
    if selftest_on[0]:
        selftest.append(msg)
        return
    counts["violations"] += 1
    violations.append(msg)
    log("VIOLATION (SEED=%d, iteration %d): %s" % (seed, counts["iterations"], msg))


# ------------------------------------------------------------ sectors
def sector(off, wid, gen):
    head = struct.pack("<4sIQQI", MAGIC, off // ZONE_SIZE, off, wid, gen)
    body = (head * (SECT // len(head) + 1))[:SECT - 4]
    return body + struct.pack("<I", zlib.crc32(body))


ZERO_SECT = bytes(SECT)


def decode(buf, off):
    """The write id a sector read at OFF carries, 0 for zeros; raises
    Violation for anything else (torn, misplaced, garbage)."""
    if buf == ZERO_SECT:
        return 0
    magic, zone, soff, wid, gen = struct.unpack_from("<4sIQQI", buf)
    if magic != MAGIC or struct.unpack_from("<I", buf, SECT - 4)[0] != zlib.crc32(buf[:SECT - 4]):
        raise Violation("sector at %d holds garbage or a torn sector" % off)
    if soff != off or zone != off // ZONE_SIZE:
        raise Violation("sector at %d holds the sector written for offset %d (write %d)"
                        % (off, soff, wid))
    return wid


# -------------------------------------------------------------- requests
class Req:
    """One NBD request: kind write/flush/reset; status pending (no reply
    yet, or the connection died before it: may or may not have run), ok,
    or err (an error reply: it changed nothing)."""

    def __init__(self, kind, conn, off=0, length=0, fua=False):
        self.kind, self.conn, self.off, self.len, self.fua = kind, conn, off, length, fua
        self.id = 0
        self.send_t = tick()
        self.ack_t = None
        self.status = "pending"
        self.errnum = 0
        self.buf = None
        self.after_cut = False  # sent after a power cut's "ok" on an old connection

    @property
    def end(self):
        return self.off + self.len


class Model:
    def __init__(self, bs, write_cache):
        self.bs, self.wc = bs, write_cache
        self.base = [0] * (SIZE // SECT)  # write id per sector at the last resync
        self.base_wp = [0] * NR_ZONES     # per sequential zone, bytes from its start
        self.gen = 1
        self.next_id = 1
        self.reset()

    def reset(self):
        self.reqs = []
        self.flushes = []
        self.page_ops = {}   # conventional page -> [write, ...] in order
        self.page_busy = set()
        self.zone_ops = [[] for _ in range(NR_ZONES)]  # writes since the last reset
        self.zone_next = list(self.base_wp)
        self.zone_reset = [None] * NR_ZONES  # pending/ok reset request
        self.zone_poison = [False] * NR_ZONES
        self.zone_cleared = [False] * NR_ZONES  # a reset completed this epoch
        self.zone_inflight = [0] * NR_ZONES

    # a flush F that certainly / possibly covers write W
    def certain(self, w):
        return any(f.status == "ok" and w.ack_t is not None and w.ack_t < f.send_t
                   for f in self.flushes)

    def possible(self, w):
        if w.status == "err":
            return False
        if w.fua:
            return True
        for f in self.flushes:
            if f.status == "err":
                continue
            if f.ack_t is None or w.send_t < f.ack_t:
                return True
        return False

    def certain_durable(self, w):
        return w.status == "ok" and (w.fua or self.certain(w))


# ------------------------------------------------------------- server
class Server:
    def __init__(self, params):
        self.params = params
        self.sock = os.path.join(workdir, "nbd.sock")
        self.ctl = os.path.join(workdir, "ctl.sock")
        self.pidfile = os.path.join(workdir, "pid")
        self.proc = None
        self.logf = open(os.path.join(workdir, "server.log"), "ab")

    def cmd(self):
        out = []
        for a in cmd_prefix:
            out.append(a.replace("@SOCK@", self.sock).replace("@PIDFILE@", self.pidfile))
        return out + self.params + ["zone_control=" + self.ctl]

    def spawn(self):
        for p in (self.sock, self.ctl, self.pidfile):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        self.proc = subprocess.Popen(self.cmd(), stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=self.logf)

    def wait_serving(self, timeout=20):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise Violation("server exited with status %d before serving (see %s/server.log)"
                                % (self.proc.returncode, workdir))
            if os.path.exists(self.pidfile) and os.path.getsize(self.pidfile) > 0 \
                    and os.path.exists(self.sock) and os.path.exists(self.ctl):
                return
            time.sleep(0.01)
        raise Violation("server did not serve within %d s" % timeout)

    def start(self):
        self.spawn()
        self.wait_serving()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def control(self, line, timeout=30):
        return control(self.ctl, line, timeout)


# ---------------------------------------------------------- connections
class Conn:
    def __init__(self, uri):
        self.h = nbd.NBD()
        self.h.connect_uri(uri)
        self.dead = False
        self.pending = {}

    def send(self, req, model):
        flags = nbd.CMD_FLAG_FUA if req.fua else 0

        def done(err, req=req):
            if req.status != "pending":
                return 1
            if err.value == 0:
                req.status, req.ack_t = "ok", tick()
            elif err.value in (errno.ENOTCONN, errno.EPIPE, errno.ECONNRESET):
                pass  # the client gave up on it: unknown whether it ran
            else:
                req.status, req.errnum, req.ack_t = "err", err.value, tick()
            model.completed(req)
            return 1

        try:
            if req.kind == "write":
                req.buf = nbd.Buffer.from_bytearray(req.data)
                self.h.aio_pwrite(req.buf, req.off, completion=done, flags=flags)
            elif req.kind == "flush":
                self.h.aio_flush(completion=done)
            else:
                self.h.aio_trim(req.len, req.off, completion=done, flags=flags)
        except nbd.Error:
            self.dead = True
            return False
        return True

    def close(self):
        """Disconnect (libnbd closes the handle when the last reference
        goes)."""
        self.dead = True
        self.h = None


def pump(conns, timeout, extra=()):
    """One round of I/O on every live connection (and the sockets in
    EXTRA, returned readable ones)."""
    rl, wl, fmap = [], [], {}
    for c in conns:
        if c.dead:
            continue
        try:
            fd = c.h.aio_get_fd()
            d = c.h.aio_get_direction()
        except nbd.Error:
            c.dead = True
            continue
        fmap[fd] = c
        if d & nbd.AIO_DIRECTION_READ:
            rl.append(fd)
        if d & nbd.AIO_DIRECTION_WRITE:
            wl.append(fd)
    rl += list(extra)
    if not rl and not wl:
        time.sleep(timeout)
        return []
    r, w, _ = select.select(rl, wl, [], timeout)
    for fd in w:
        try:
            fmap[fd].h.aio_notify_write()
        except nbd.Error:
            fmap[fd].dead = True
    ready = []
    for fd in r:
        if fd in fmap:
            try:
                fmap[fd].h.aio_notify_read()
            except nbd.Error:
                fmap[fd].dead = True
        else:
            ready.append(fd)
    return ready


def in_flight(conns):
    n = 0
    for c in conns:
        if not c.dead:
            try:
                n += c.h.aio_in_flight()
            except nbd.Error:
                c.dead = True
    return n


# ------------------------------------------------------------- the run
class Run:
    def __init__(self, params, bs, wc):
        self.server = Server(params)
        self.m = Model(bs, wc)
        self.m.completed = self.completed
        self.conns = []
        self.uri = "nbd+unix:///?socket=" + self.server.sock
        self.crash_window = False  # errors are expected from now on
        self.cut_ok_t = None

    def connect(self):
        self.conns = [Conn(self.uri) for _ in range(CONNS)]

    def completed(self, req):
        m = self.m
        if req.kind == "write" and req.status != "pending":
            # an unknown outcome keeps its page or zone busy: nothing more
            # goes there until the next check
            if req.zone >= NR_CONV:
                m.zone_inflight[req.zone] -= 1
            else:
                for p in req.pages:
                    m.page_busy.discard(p)
            if req.status == "ok":
                counts["acked"] += 1
        if req.status == "err":
            counts["failed"] += 1
            if not self.crash_window:
                violation("%s at %d+%d failed with %s outside any crash or cut"
                          % (req.kind, req.off, req.len, errno.errorcode.get(req.errnum, req.errnum)))
            if req.kind != "flush":
                m.zone_poison[req.off // ZONE_SIZE] = True
        if req.status == "ok" and req.after_cut:
            violation("%s at %d+%d sent on an old connection after the power cut's ok "
                      "succeeded" % (req.kind, req.off, req.len))
        if req.kind == "reset" and req.status == "ok":
            z = req.off // ZONE_SIZE
            m.zone_cleared[z] = True
            m.zone_ops[z] = []

    def conn(self):
        live = [c for c in self.conns if not c.dead]
        return rng.choice(live) if live else None

    def issue(self):
        """Send one random request if there is room; False if none."""
        m = self.m
        c = self.conn()
        if c is None:
            return False
        try:
            if c.h.aio_in_flight() >= DEPTH:
                return False
        except nbd.Error:
            c.dead = True
            return False
        r = rng.random()
        if r < 0.07:
            req = Req("flush", c)
            m.flushes.append(req)
            counts["flushes"] += 1
        elif r < 0.10:
            z = rng.randrange(NR_CONV, NR_ZONES)
            if m.zone_inflight[z] or m.zone_poison[z] or m.zone_next[z] == 0 \
                    or (m.zone_reset[z] and m.zone_reset[z].status != "ok"):
                return False
            req = Req("reset", c, z * ZONE_SIZE, ZONE_SIZE, rng.random() < 0.2)
            m.zone_reset[z] = req
            m.zone_next[z] = 0
            counts["resets"] += 1
        elif r < 0.45:
            nb = rng.choice([1, 1, 2, 3, 8]) if m.bs == SECT else rng.choice([1, 1, 2])
            length = nb * m.bs
            off = rng.randrange(0, NR_CONV * ZONE_SIZE - length + 1, m.bs)
            pages = set(range(off // PAGE, (off + length - 1) // PAGE + 1))
            if pages & m.page_busy:
                return False
            req = self.write(c, off, length, pages)
            for p in pages:
                m.page_busy.add(p)
                m.page_ops.setdefault(p, []).append(req)
        else:
            z = rng.randrange(NR_CONV, NR_ZONES)
            room = ZONE_SIZE - m.zone_next[z]
            if room == 0 or m.zone_poison[z] or m.zone_inflight[z] >= 4 \
                    or (m.zone_reset[z] and m.zone_reset[z].status != "ok"):
                return False
            length = min(room, rng.choice([1, 2, 4, 8, 16]) * m.bs)
            req = self.write(c, z * ZONE_SIZE + m.zone_next[z], length, None)
            m.zone_next[z] += length
            m.zone_ops[z].append(req)
            m.zone_inflight[z] += 1
        if self.cut_ok_t is not None:
            req.after_cut = True
        m.reqs.append(req)
        if not c.send(req, m):
            # never reached the server (the connection is gone): it
            # changed nothing
            req.status = "err"
            saved, self.crash_window = self.crash_window, True
            self.completed(req)
            self.crash_window = saved
        return True

    def write(self, c, off, length, pages):
        m = self.m
        req = Req("write", c, off, length, rng.random() < 0.2)
        req.id = m.next_id
        m.next_id += 1
        req.zone = off // ZONE_SIZE
        req.pages = pages
        req.data = bytearray(b"".join(sector(o, req.id, m.gen) for o in range(off, off + length, SECT)))
        counts["writes"] += 1
        return req

    def load(self, seconds):
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            for _ in range(4):
                self.issue()
            pump(self.conns, 0.001)

    def drain(self, timeout):
        t_end = time.monotonic() + timeout
        while in_flight(self.conns) and time.monotonic() < t_end:
            pump(self.conns, 0.01)

    # ------------------------------------------------------- crashes
    def power_cut(self):
        """The control socket's power-cut, sent while requests are in
        flight, and more requests sent until its reply."""
        self.crash_window = True
        n = in_flight(self.conns)
        counts["in_flight_at_crash"] += n
        counts["cuts_in_flight"] += n > 0
        after = rng.random() < 0.25
        if after:
            n = rng.randrange(1, 20)
            counts["cuts_after"] += 1
            reply = self.server.control("power-cut after %d" % n)
            if not reply.startswith("ok"):
                violation("power-cut after %d: %s" % (n, reply.strip()))
                return
            arm_t = tick()
            # load until the cut shows (an error reply or a dropped connection)
            t_end = time.monotonic() + 5
            while time.monotonic() < t_end:
                for _ in range(2):
                    self.issue()
                pump(self.conns, 0.001)
                if any(r.status == "err" for r in self.m.reqs if r.send_t > arm_t) \
                        or any(c.dead for c in self.conns):
                    break
            else:
                violation("power-cut after %d: no request failed in 5 s of writes" % n)
            ok_after = sum(1 for r in self.m.reqs if r.kind == "write" and r.send_t > arm_t
                           and r.status == "ok")
            if ok_after > n:
                violation("power-cut after %d: %d writes sent after arming succeeded" % (n, ok_after))
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.server.ctl)
            s.sendall(b"power-cut\n")
            s.shutdown(socket.SHUT_WR)
            s.setblocking(False)
            reply = b""
            t_end = time.monotonic() + 30
            while time.monotonic() < t_end:
                if rng.random() < 0.5:
                    self.issue()
                if s.fileno() in pump(self.conns, 0.0005, [s.fileno()]):
                    c = s.recv(4096)
                    if not c:
                        break
                    reply += c
            s.close()
            if not reply.startswith(b"ok"):
                violation("power-cut: %r" % reply)
            self.cut_ok_t = tick()
            # requests sent now on the old connections must all fail
            for _ in range(rng.randrange(0, 6)):
                self.issue()
                pump(self.conns, 0.0005)
        counts["cuts"] += 1
        self.drain(3)
        for c in self.conns:
            c.close()

    def kill(self):
        """SIGKILL with requests in flight; the restart is itself killed
        sometimes (while it replays the journal)."""
        self.crash_window = True
        counts["in_flight_at_crash"] += in_flight(self.conns)
        self.server.kill()
        counts["kills"] += 1
        self.drain(1)
        for c in self.conns:
            c.close()
        while rng.random() < 0.3:
            self.server.spawn()
            time.sleep(rng.random() * 0.03)
            self.server.kill()
            counts["restart_kills"] += 1
        self.server.start()

    # ------------------------------------------------------- checking
    def verify(self, kind):
        """Check the device against the model, then make what was read
        the new baseline."""
        m = self.m
        self.connect()
        h = self.conns[0].h
        data = h.pread(SIZE, 0)
        got = [None] * (SIZE // SECT)
        for i in range(SIZE // SECT):
            off = i * SECT
            try:
                got[i] = decode(data[off:off + SECT], off)
            except Violation as e:
                violation(str(e))
                got[i] = -1
        rep = self.server.control("report 0 %d" % NR_ZONES)
        zones = {}
        for line in rep.splitlines()[1:]:
            f = dict(w.split("=", 1) for w in line.split())
            zones[int(f["zone"])] = f
        if len(zones) != NR_ZONES:
            violation("report: %r" % rep)
            return
        wps = [0] * NR_ZONES
        nclosed = 0
        for z in range(NR_CONV, NR_ZONES):
            f = zones[z]
            start = z * ZONE_SIZE
            wp = int(f["wp"]) - start
            wps[z] = wp
            want = "EMPTY" if wp == 0 else "FULL" if wp == ZONE_SIZE else "CLOSED"
            if f["cond"] != want:
                violation("zone %d: wp %d, condition %s after the %s, want %s"
                          % (z, wp, f["cond"], kind, want))
            nclosed += f["cond"] == "CLOSED"
            self.check_zone(z, wp, got, kind)
        for p in range(NR_CONV * ZONE_SIZE // PAGE):
            self.check_page(p, got, kind)
        st = self.server.control("stats")
        stv = {k: int(v) for k, v in (w.split("=", 1) for w in st.split()[1:] if "=" in w)
               if v.lstrip("-").isdigit()}
        if (stv.get("imp_open"), stv.get("exp_open"), stv.get("closed")) != (0, 0, nclosed):
            violation("after the %s: stats imp_open=%s exp_open=%s closed=%s, want 0 0 %d"
                      % (kind, stv.get("imp_open"), stv.get("exp_open"), stv.get("closed"), nclosed))
        # the new baseline: what is on the device now is durable
        m.base = [max(g, 0) for g in got]
        m.base_wp = wps
        m.gen += 1
        m.reset()
        self.crash_window = False
        self.cut_ok_t = None

    def zone_options(self, z, wc):
        """Possible (wp, writes below it) states of sequential zone Z."""
        m = self.m
        opts = []
        r = m.zone_reset[z]
        epochs = []
        base_wp = 0 if m.zone_cleared[z] else m.base_wp[z]
        if r is None or r.status == "err":
            epochs.append((base_wp, m.zone_ops[z]))
        elif r.status == "ok":
            epochs.append((0, m.zone_ops[z]))
        else:  # in flight at the crash: it ran or it did not
            epochs.append((base_wp, m.zone_ops[z]))
            epochs.append((0, []))
        for base, ops in epochs:
            prefix = []
            for w in ops:
                if w.status == "err":
                    break
                prefix.append(w)
            if not wc:
                lo = max([base] + [w.end - z * ZONE_SIZE for w in prefix if w.status == "ok"])
                hi = max([base] + [w.end - z * ZONE_SIZE for w in prefix])
                opts.append((base, prefix, lo, hi, None))
            else:
                lo = max([base] + [w.end - z * ZONE_SIZE for w in prefix if m.certain_durable(w)])
                ends = {lo} | {w.end - z * ZONE_SIZE for w in prefix if m.possible(w)}
                opts.append((base, prefix, lo, None, sorted(e for e in ends if e >= lo)))
        return opts

    def check_zone(self, z, wp, got, kind):
        m = self.m
        start = z * ZONE_SIZE
        wc = m.wc
        reasons = []
        for base, prefix, lo, hi, ends in self.zone_options(z, wc):
            if ends is None:
                if not (lo <= wp <= hi and wp % m.bs == 0):
                    reasons.append("wp in [%d, %d]" % (lo, hi))
                    continue
            elif wp not in ends:
                reasons.append("wp one of %s" % ends[:12])
                continue
            # the bytes: below base the baseline (if the zone was not reset),
            # then each write's own sectors, zeros from the wp on
            exp = {}
            if base:
                for o in range(0, base, SECT):
                    exp[o] = m.base[(start + o) // SECT]
            for w in prefix:
                for o in range(w.off, w.end, SECT):
                    exp[o - start] = w.id
            bad = None
            for o in range(0, ZONE_SIZE, SECT):
                want = exp.get(o, 0) if o < wp else 0
                if got[(start + o) // SECT] != want:
                    bad = (o, want, got[(start + o) // SECT])
                    break
            if bad is None:
                return
            reasons.append("offset %d holds write %d, want write %d" % (bad[0], bad[2], bad[1]))
        violation("zone %d after the %s: wp %d; expected %s" % (z, kind, wp, " or ".join(reasons)))
        self.describe(z)

    def check_page(self, p, got, kind):
        m = self.m
        ops = [w for w in m.page_ops.get(p, []) if w.status != "err"]
        first = p * PAGE // SECT
        sects = range(first, first + PAGE // SECT)
        # the page's contents after each of its writes: C_0 = baseline
        states = [[m.base[s] for s in sects]]
        for w in ops:
            c = list(states[-1])
            for s in sects:
                if w.off <= s * SECT < w.end:
                    c[s - first] = w.id
            states.append(c)
        have = [got[s] for s in sects]
        if not m.wc:
            k = max([0] + [i + 1 for i, w in enumerate(ops) if w.status == "ok"])
            cand = [states[k]] + ([states[k + 1]] if k < len(ops) else [])
            if all(have[j] in (cand[0][j], cand[-1][j]) for j in range(len(have))):
                return
            violation("page at %d after the %s: holds writes %s, want %s (last acknowledged)"
                      " or %s (in flight)" % (p * PAGE, kind, have, cand[0], cand[-1]))
            return
        lo = max([0] + [i + 1 for i, w in enumerate(ops) if m.certain_durable(w)])
        poss = {lo} | {i + 1 for i, w in enumerate(ops) if m.possible(w) and i + 1 > lo}
        for d in poss:
            if states[d] == have:
                return
        violation("page at %d after the %s: holds writes %s, want one of %s"
                  % (p * PAGE, kind, have, [states[d] for d in sorted(poss)]))

    def describe(self, z):
        m = self.m
        if selftest_on[0]:
            return
        for w in m.zone_ops[z]:
            log("  zone %d write %d: +%d len %d fua=%d sent %d ack %s %s %s"
                % (z, w.id, w.off - z * ZONE_SIZE, w.len, w.fua, w.send_t, w.ack_t, w.status,
                   errno.errorcode.get(w.errnum, "")))
        for f in m.flushes:
            log("  flush sent %d ack %s %s" % (f.send_t, f.ack_t, f.status))


def self_test():
    """The model on made-up histories, before any server runs: states the
    rules allow pass, states they forbid are violations (so the checker
    can fail)."""
    selftest_on[0] = True
    clock[0] = 0
    per_page = PAGE // SECT

    def make(bs, wc):
        run = Run.__new__(Run)
        run.m = Model(bs, wc)
        return run

    def write(run, off, length, fua, acked, zone_list=None):
        m = run.m
        w = Req("write", None, off, length, fua)
        w.id, m.next_id = m.next_id, m.next_id + 1
        w.zone = off // ZONE_SIZE
        if acked:
            w.status, w.ack_t = "ok", tick()
        m.reqs.append(w)
        if w.zone < NR_CONV:
            for p in range(off // PAGE, (off + length - 1) // PAGE + 1):
                m.page_ops.setdefault(p, []).append(w)
        else:
            m.zone_ops[w.zone].append(w)
        return w

    def flush(run, acked):
        f = Req("flush", None)
        if acked:
            f.status, f.ack_t = "ok", tick()
        run.m.flushes.append(f)
        return f

    def page(run, ids, want_ok, what):
        got = [0] * (SIZE // SECT)
        got[:per_page] = ids + [0] * (per_page - len(ids))
        n = len(selftest)
        run.check_page(0, got, "self-test")
        if (len(selftest) == n) != want_ok:
            raise SystemExit("crashcheck self-test: %s: the model %s it"
                             % (what, "refused" if want_ok else "accepted"))

    def zone(run, z, wp, want_ok, what):
        got = [0] * (SIZE // SECT)
        start = z * ZONE_SIZE
        for w in run.m.zone_ops[z]:
            for o in range(w.off, min(w.end, start + wp), SECT):
                got[o // SECT] = w.id
        n = len(selftest)
        run.check_zone(z, wp, got, "self-test")
        if (len(selftest) == n) != want_ok:
            raise SystemExit("crashcheck self-test: %s: the model %s it"
                             % (what, "refused" if want_ok else "accepted"))

    # write_cache=true: a FLUSH covers what was acknowledged before it
    # was sent, and nothing sent after it completed
    r = make(SECT, True)
    w1 = write(r, 0, SECT, False, True)
    flush(r, True)
    w2 = write(r, SECT, SECT, False, True)
    page(r, [w1.id], True, "flushed sector kept, later one lost")
    page(r, [0], False, "a flushed write lost")
    page(r, [w1.id, w2.id], False, "an unflushed write kept")
    # FUA keeps the whole 4 KiB page as it is at its completion
    r = make(SECT, True)
    w1 = write(r, 0, SECT, False, True)
    w2 = write(r, SECT, SECT, True, True)
    page(r, [w1.id, w2.id], True, "FUA keeps its page")
    page(r, [0, w2.id], False, "FUA kept only its own sector")
    # a FLUSH in flight at the cut may or may not have run
    r = make(SECT, True)
    w1 = write(r, 0, SECT, False, True)
    flush(r, False)
    page(r, [w1.id], True, "covered by a flush in flight")
    page(r, [0], True, "not covered by a flush in flight")
    # write_cache=false: every acknowledged write survives a kill
    r = make(SECT, False)
    w1 = write(r, 0, SECT, False, True)
    w2 = write(r, SECT, SECT, False, False)
    page(r, [w1.id, w2.id], True, "an in-flight write landed")
    page(r, [w1.id], True, "an in-flight write did not land")
    page(r, [0, w2.id], False, "an acknowledged write lost")
    # a sequential zone goes back to the last flush or FUA write in it
    r = make(SECT, True)
    z = NR_CONV
    a = write(r, z * ZONE_SIZE, 4 * SECT, False, True)
    flush(r, True)
    b = write(r, a.end, 4 * SECT, False, True)
    c = write(r, b.end, 4 * SECT, True, False)
    zone(r, z, a.len, True, "zone back at the flushed wp")
    zone(r, z, c.end - z * ZONE_SIZE, True, "a FUA write in flight ran")
    zone(r, z, b.end - z * ZONE_SIZE, False, "an unflushed wp kept")
    zone(r, z, 0, False, "a flushed zone emptied")
    r = make(SECT, False)
    a = write(r, z * ZONE_SIZE, 4 * SECT, False, True)
    zone(r, z, a.len, True, "write_cache=false: acknowledged wp kept")
    zone(r, z, 2 * SECT, False, "write_cache=false: acknowledged bytes lost")
    selftest_on[0] = False
    clock[0] = 0
    log("self-test: the model refuses %d made-up states the rules forbid" % len(selftest))


def main():
    self_test()
    t0 = time.monotonic()
    log("SEED=%d ITERATIONS=%d TIME_LIMIT=%g" % (seed, iterations, time_limit))
    rnd = 0
    while counts["iterations"] < iterations and time.monotonic() - t0 < time_limit:
        rnd += 1
        bs = rng.choice([SECT, 4096])
        wc = True if store == "ram" else rng.random() < 0.7
        params = ["size=%d" % SIZE, "zone_size=%d" % ZONE_SIZE, "zone_nr_conv=%d" % NR_CONV,
                  "blocksize=%d" % bs, "write_cache=%s" % ("true" if wc else "false")]
        if store == "dir":
            d = os.path.join(workdir, "dev%d" % rnd)
            params.append("dir=" + d)
            if rng.random() < 0.3:
                params.append("buffered_io=false")
        log("round %d: %s" % (rnd, " ".join(params)))
        run = Run(params, bs, wc)
        try:
            t1 = time.monotonic()
            run.server.start()
            run.connect()
            if verbose:
                log("round %d: serving after %.2f s" % (rnd, time.monotonic() - t1))
            for _ in range(rng.randrange(3, 8)):
                if counts["iterations"] >= iterations or time.monotonic() - t0 >= time_limit:
                    break
                counts["iterations"] += 1
                run.load(rng.random() * 0.1)
                t_crash = time.monotonic()
                if store == "dir" and (not wc or rng.random() < 0.5):
                    run.kill()
                    kind = "kill -9"
                else:
                    run.power_cut()
                    kind = "power cut"
                    if store == "dir" and rng.random() < 0.3:
                        run.kill()
                        kind = "power cut and kill -9"
                t1 = time.monotonic()
                run.verify(kind)
                t2 = time.monotonic()
                if verbose:
                    log("iteration %d (%s, %.2f s to crash and restart, %.2f s to check): %s"
                        % (counts["iterations"], kind, t1 - t_crash, t2 - t1, counts))
        except Violation as e:
            violation(str(e))
        finally:
            for c in run.conns:
                c.close()
            t1 = time.monotonic()
            run.server.stop()
            if verbose:
                log("round %d: server stopped in %.2f s" % (rnd, time.monotonic() - t1))
    log("SEED=%d: %s in %.1f s" % (seed, " ".join("%s=%d" % kv for kv in counts.items()),
                                   time.monotonic() - t0))
    if counts["violations"]:
        log("FAIL: %d violations; replay with SEED=%d ITERATIONS=%d"
            % (counts["violations"], seed, iterations))
        sys.exit(1)


main()
