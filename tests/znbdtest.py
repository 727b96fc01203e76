"""Helpers for znbd's Python (libnbd) checks, used through nbd_py in
tests/functions.sh:

    nbd_py <<'EOF'
    from znbdtest import *
    h = connect()
    ...
    EOF

Every check prints what it verified; a failed check raises TestFailure,
which exits the interpreter with status 1 and a message.  Offsets and
lengths are bytes.
"""

import errno
import os
import random
import socket
import sys

import nbd

from znbdctl import control  # noqa: F401 (re-exported)

__all__ = [
    "nbd", "errno", "os", "random", "sys", "uri", "connect", "check", "check_eq",
    "expect_errno", "extents", "pattern", "say", "TestFailure", "HOLE",
    "ZERO", "KiB", "MiB", "control", "control_stats", "zone_counts",
]

uri = os.environ.get("uri", "")
HOLE = nbd.STATE_HOLE
ZERO = nbd.STATE_ZERO
KiB = 1024
MiB = 1024 * 1024
_name = "%s [%s]" % (os.environ.get("test_name", os.path.basename(sys.argv[0])),
                     os.environ.get("ZNBD_FRONTEND", "?"))


class TestFailure(Exception):
    pass


def _excepthook(tp, value, tb, _orig=sys.excepthook):
    if issubclass(tp, TestFailure):
        print("FAIL: %s" % value, file=sys.stderr)
        sys.exit(1)
    _orig(tp, value, tb)


sys.excepthook = _excepthook


def say(msg):
    print("  ok: %s" % msg, flush=True)


def connect(meta=("base:allocation",), strict=True, u=None):
    """A connected handle on $uri, with the given metadata contexts
    requested; strict=False turns libnbd's client-side checks off so the
    server's own validation is what is tested."""
    h = nbd.NBD()
    # nbds:// URIs of the TLS variants name a PSK file (tls-psk-file=).
    h.set_uri_allow_local_file(True)
    for m in meta:
        h.add_meta_context(m)
    if not strict:
        h.set_strict_mode(0)
    h.connect_uri(u or uri)
    return h


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)
    say(msg)


def check_eq(got, want, msg):
    if got != want:
        g, w = repr(got), repr(want)
        if len(g) > 200:
            g = g[:200] + "..."
        if len(w) > 200:
            w = w[:200] + "..."
        raise TestFailure("%s: got %s, want %s" % (msg, g, w))
    say(msg)


def expect_errno(want, msg, fn, *args, **kw):
    """FN(*ARGS) must fail with nbd.Error whose errno number is WANT (an
    errno module constant: the error the server sent, as libnbd reports
    it)."""
    try:
        fn(*args, **kw)
    except nbd.Error as e:
        # nbd.Error: .errnum is the number, .errno its name (or None).
        if e.errnum != want:
            raise TestFailure("%s: failed with errno %s (%s), want %s" % (
                msg, e.errno or e.errnum, e.string, errno.errorcode[want]))
        say("%s -> %s" % (msg, errno.errorcode[want]))
        return
    raise TestFailure("%s: succeeded, want %s" % (msg, errno.errorcode[want]))


def extents(h, off, length, context="base:allocation"):
    """Extents of CONTEXT covering [OFF, OFF+LENGTH) as a list of
    (offset, length, flags), asking repeatedly until the range is covered,
    the last one clipped to the range and adjacent equal ones merged."""
    out = []
    pos = off
    end = off + length
    while pos < end:
        got = []

        def cb(meta, o, entries, err):
            if meta == context:
                got.append((o, list(entries)))
            return 0

        h.block_status(min(end - pos, 2**31), pos, cb)
        if not got:
            raise TestFailure("block status at %d: no %s reply" % (pos, context))
        o, entries = got[0]
        if o != pos:
            raise TestFailure("block status reply for offset %d, asked %d" % (o, pos))
        if not entries:
            raise TestFailure("block status at %d: empty reply" % pos)
        for i in range(0, len(entries), 2):
            ln, fl = entries[i], entries[i + 1]
            if ln == 0:
                raise TestFailure("block status at %d: zero-length extent" % pos)
            ln = min(ln, end - pos)
            if out and out[-1][2] == fl and out[-1][0] + out[-1][1] == pos:
                out[-1] = (out[-1][0], out[-1][1] + ln, fl)
            else:
                out.append((pos, ln, fl))
            pos += ln
            if pos >= end:
                break
    return out


def pattern(length, seed):
    """LENGTH pseudo-random bytes, the same for the same SEED, so a
    misplaced or stale block is detected."""
    return random.Random(seed).randbytes(length)


def control_stats(path):
    """The control socket's `stats` reply as a dict of ints."""
    reply = control(path, "stats")
    if not reply.startswith("ok "):
        raise TestFailure("stats: %s" % reply.strip())
    return {k: int(v) for k, v in
            (w.split("=", 1) for w in reply.split()[1:])}


def zone_counts(path):
    """(imp_open, exp_open, closed) from the control socket's stats."""
    st = control_stats(path)
    return st["imp_open"], st["exp_open"], st["closed"]
