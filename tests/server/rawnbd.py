#!/usr/bin/python3
"""A small raw-socket NBD client for znbd's server tests.

Speaks the wire format of doc/proto.md byte by byte (no libnbd), so tests
can send what a well-behaved client never would.  Used by malformed.sh,
holes.sh and friends: `rawnbd.py SOCKET CASE` runs one named case and
exits 0 when every check in it held, printing what it checked.
"""
import os
import socket
import struct
import sys

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPMAGIC = 0x3E889045565A9
REQ_MAGIC = 0x25609513
SIMPLE = 0x67446698
STRUCT = 0x668E33EF

OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_INFO, OPT_GO = 1, 2, 3, 6, 7
OPT_STARTTLS = 5
OPT_STRUCTURED, OPT_LIST_META, OPT_SET_META = 8, 9, 10
REP_ACK, REP_SERVER, REP_INFO, REP_META = 1, 2, 3, 4
ERR_UNSUP, ERR_INVALID, ERR_UNKNOWN, ERR_TOO_BIG = (
    0x80000001, 0x80000003, 0x80000006, 0x80000009)
ERR_TLS_REQD = 0x80000005
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM = 0, 1, 2, 3, 4
CMD_CACHE, CMD_ZERO, CMD_BS = 5, 6, 7
EPERM, EIO, EINVAL, ENOSPC = 1, 5, 22, 28

checks = 0


def check(cond, what):
    global checks
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    checks += 1
    print("ok:", what)


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10)
        self.s.connect(path)
        self.cookie = 0
        self.pushback = b""

    def recv(self, n):
        b, self.pushback = self.pushback[:n], self.pushback[n:]
        while len(b) < n:
            d = self.s.recv(n - len(b))
            if not d:
                raise EOFError("server closed after %d of %d bytes" % (len(b), n))
            b += d
        return b

    def closed(self):
        """True if the server closed the connection (EOF, nothing more)."""
        try:
            return self.s.recv(1) == b""
        except ConnectionResetError:
            return True

    def greeting(self, cflags=3):
        m, o, f = struct.unpack(">QQH", self.recv(18))
        check(m == NBDMAGIC and o == IHAVEOPT and f & 1,
              "greeting: NBDMAGIC, IHAVEOPT, FIXED_NEWSTYLE")
        self.s.sendall(struct.pack(">I", cflags))

    def opt(self, opt, data=b"", magic=IHAVEOPT, length=None):
        if length is None:
            length = len(data)
        self.s.sendall(struct.pack(">QII", magic, opt, length) + data)

    def reply(self):
        m, o, t, n = struct.unpack(">QIII", self.recv(20))
        assert m == REPMAGIC, hex(m)
        return o, t, self.recv(n)

    def go(self, name=b"", infos=()):
        d = struct.pack(">I", len(name)) + name + struct.pack(">H", len(infos))
        d += b"".join(struct.pack(">H", i) for i in infos)
        self.opt(OPT_GO, d)
        size = flags = None
        while True:
            o, t, data = self.reply()
            if t == REP_INFO and struct.unpack(">H", data[:2])[0] == 0:
                size, flags = struct.unpack(">QH", data[2:12])
            if t != REP_INFO:
                break
        check(t == REP_ACK, "NBD_OPT_GO acknowledged")
        self.size, self.flags = size, flags
        return size, flags

    def structured(self):
        self.opt(OPT_STRUCTURED)
        check(self.reply()[1] == REP_ACK, "structured replies negotiated")

    def request(self, cmd, off, length, flags=0, payload=b"", magic=REQ_MAGIC):
        self.cookie += 1
        self.s.sendall(struct.pack(">IHHQQI", magic, flags, cmd, self.cookie,
                                   off, length) + payload)
        return self.cookie

    def simple(self, cookie, datalen=0):
        m, err, c = struct.unpack(">IIQ", self.recv(16))
        assert m == SIMPLE, hex(m)
        assert c == cookie, (c, cookie)
        data = self.recv(datalen) if err == 0 and datalen else b""
        return err, data

    def chunks(self, cookie):
        """All chunks of one structured reply: [(flags, type, payload)]."""
        out = []
        while True:
            m, fl, ty, c, n = struct.unpack(">IHHQI", self.recv(20))
            assert m == STRUCT, hex(m)
            assert c == cookie, (c, cookie)
            out.append((fl, ty, self.recv(n)))
            if fl & 1:
                return out

    def reply_any(self, cookie, structured, datalen=0):
        """Error number of a reply (simple or structured)."""
        if not structured:
            return self.simple(cookie, datalen)[0]
        # Structured replies were negotiated: a simple reply is still
        # allowed for anything but READ (doc/proto.md).
        head = self.recv(4)
        if struct.unpack(">I", head)[0] == SIMPLE:
            err, c = struct.unpack(">IQ", self.recv(12))
            assert c == cookie, (c, cookie)
            return err
        self.pushback = head
        for fl, ty, p in self.chunks(cookie):
            if ty & 0x8000:
                return struct.unpack(">I", p[:4])[0]
        return 0


def ready(path, structured=True):
    c = Conn(path)
    c.greeting()
    if structured:
        c.structured()
    c.go()
    return c


def alive(path, what):
    """A fresh connection still gets served: write, read back."""
    c = ready(path, structured=False)
    pattern = os.urandom(512)
    ck = c.request(CMD_WRITE, 1 << 20, 512, payload=pattern)
    e1 = c.simple(ck)[0]
    ck = c.request(CMD_READ, 1 << 20, 512)
    e2, data = c.simple(ck, 512)
    check(e1 == 0 and e2 == 0 and data == pattern,
          "server still serving after " + what)
    c.request(CMD_DISC, 0, 0)
    check(c.closed(), "NBD_CMD_DISC closes the connection")


# ------------------------------------------------------------------ cases

def case_handshake(path):
    # Unknown client flags: the spec says the server closes.
    c = Conn(path)
    c.greeting(cflags=0x80000003)
    check(c.closed(), "unknown client flags: connection closed")
    alive(path, "unknown client flags")

    # Wrong option magic.
    c = Conn(path)
    c.greeting()
    c.opt(OPT_GO, b"\0" * 6, magic=0x1122334455667788)
    check(c.closed(), "wrong option magic: connection closed")
    alive(path, "wrong option magic")

    # Unknown option, then the negotiation goes on.
    c = Conn(path)
    c.greeting()
    c.opt(0x1234, b"junk")
    o, t, _ = c.reply()
    check(o == 0x1234 and t == ERR_UNSUP, "unknown option: NBD_REP_ERR_UNSUP")
    c.opt(5)  # STARTTLS
    check(c.reply()[1] == ERR_UNSUP, "STARTTLS: NBD_REP_ERR_UNSUP (no TLS)")
    # Oversized option: refused, its data dropped, stream still in step.
    big = 1 << 20
    c.opt(OPT_LIST, b"\0" * big)
    check(c.reply()[1] == ERR_TOO_BIG, "1 MiB option: NBD_REP_ERR_TOO_BIG")
    c.opt(OPT_LIST)
    o, t, d = c.reply()
    check(t == REP_SERVER, "NBD_OPT_LIST after it: NBD_REP_SERVER")
    check(c.reply()[1] == REP_ACK, "NBD_OPT_LIST ends with ACK")
    # Malformed GO: name length beyond the option.
    c.opt(OPT_GO, struct.pack(">IH", 100, 0))
    check(c.reply()[1] == ERR_INVALID, "GO with bad name length: ERR_INVALID")
    c.opt(OPT_GO, struct.pack(">IH", 0, 3) + b"\0\1")
    check(c.reply()[1] == ERR_INVALID, "GO with bad info count: ERR_INVALID")
    c.opt(OPT_STRUCTURED, b"x")
    check(c.reply()[1] == ERR_INVALID, "STRUCTURED_REPLY with data: ERR_INVALID")
    # SET_META_CONTEXT before STRUCTURED_REPLY: invalid (spec SHOULD).
    q = b"base:allocation"
    meta = struct.pack(">II", 0, 1) + struct.pack(">I", len(q)) + q
    c.opt(OPT_SET_META, meta)
    check(c.reply()[1] == ERR_INVALID, "SET_META_CONTEXT before structured: ERR_INVALID")
    c.structured()
    c.opt(OPT_STRUCTURED)
    check(c.reply()[1] == ERR_INVALID, "second STRUCTURED_REPLY: ERR_INVALID")
    # LIST_META_CONTEXT with the "base:" wildcard.
    c.opt(OPT_LIST_META, struct.pack(">II", 0, 1) + struct.pack(">I", 5) + b"base:")
    o, t, d = c.reply()
    check(t == REP_META and d[4:] == b"base:allocation",
          "LIST_META_CONTEXT base: -> base:allocation")
    check(c.reply()[1] == REP_ACK, "LIST_META_CONTEXT ends with ACK")
    # Query past the option's end.
    c.opt(OPT_SET_META, struct.pack(">II", 0, 1) + struct.pack(">I", 50) + b"base:")
    check(c.reply()[1] == ERR_INVALID, "SET_META_CONTEXT with query past the end: ERR_INVALID")
    c.opt(OPT_SET_META, meta)
    o, t, d = c.reply()
    check(t == REP_META and d[4:] == q, "SET_META_CONTEXT base:allocation selected")
    check(c.reply()[1] == REP_ACK, "SET_META_CONTEXT ends with ACK")
    # INFO with NAME, DESCRIPTION and BLOCK_SIZE.
    c.opt(OPT_INFO, struct.pack(">IH", 0, 3) + struct.pack(">HHH", 1, 2, 3))
    got = {}
    while True:
        o, t, d = c.reply()
        if t != REP_INFO:
            break
        got[struct.unpack(">H", d[:2])[0]] = d[2:]
    check(t == REP_ACK and 0 in got and 1 in got and 2 in got and 3 in got,
          "NBD_OPT_INFO: EXPORT, NAME, DESCRIPTION, BLOCK_SIZE")
    check(got[2].startswith(b"znbd "), "description is znbd_dev_describe(): %r" % got[2][:40])
    mn, pref, mx = struct.unpack(">III", got[3])
    check(mn in (512, 4096) and pref >= 4096 and mx == 32 << 20,
          "block size %d/%d/%d" % (mn, pref, mx))
    # ABORT: ACK then close.
    c.opt(OPT_ABORT)
    check(c.reply()[1] == REP_ACK, "NBD_OPT_ABORT acknowledged")
    check(c.closed(), "closed after NBD_OPT_ABORT")

    # Old-style EXPORT_NAME without NO_ZEROES: size, flags, 124 zeros.
    c = Conn(path)
    c.greeting(cflags=1)
    c.opt(OPT_EXPORT_NAME, b"")
    d = c.recv(134)
    size, flags = struct.unpack(">QH", d[:10])
    check(size > 0 and flags & 1 and d[10:] == b"\0" * 124,
          "NBD_OPT_EXPORT_NAME: size %d, flags 0x%x, 124 zeros" % (size, flags))
    ck = c.request(CMD_READ, 0, 512)
    check(c.simple(ck, 512)[0] == 0, "read after EXPORT_NAME")

    # Client that sends half a greeting reply and vanishes.
    c = Conn(path)
    c.recv(18)
    c.s.sendall(b"\0\0")
    c.s.close()
    # Zero-length option stream then close.
    c = Conn(path)
    c.greeting()
    c.s.close()
    alive(path, "clients vanishing mid-handshake")


def case_requests(path):
    for structured in (False, True):
        c = ready(path, structured)
        size = c.size
        tag = "structured" if structured else "simple"
        # Zero-length read and write.
        ck = c.request(CMD_READ, 0, 0)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": zero-length read: EINVAL")
        ck = c.request(CMD_WRITE, 0, 0)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": zero-length write: EINVAL")
        # Past the end.
        ck = c.request(CMD_READ, size - 512, 1024)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": read past the end: EINVAL")
        ck = c.request(CMD_READ, (1 << 64) - 512, 1024)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": read at offset 2^64-512: EINVAL")
        ck = c.request(CMD_WRITE, size - 512, 1024, payload=b"\xaa" * 1024)
        check(c.reply_any(ck, structured) == ENOSPC, tag + ": write past the end: ENOSPC")
        ck = c.request(CMD_ZERO, size, 512)
        check(c.reply_any(ck, structured) == ENOSPC, tag + ": write zeroes past the end: ENOSPC")
        ck = c.request(CMD_TRIM, size - 512, 4096)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": trim past the end: EINVAL")
        ck = c.request(CMD_CACHE, size, 512)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": cache past the end: EINVAL")
        # Unaligned.
        ck = c.request(CMD_WRITE, 1, 512, payload=b"\xbb" * 512)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": unaligned write: EINVAL")
        ck = c.request(CMD_READ, 0, 100)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": unaligned read: EINVAL")
        # Unknown command and flags.
        ck = c.request(42, 0, 512)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": unknown command: EINVAL")
        ck = c.request(CMD_READ, 0, 512, flags=0x4000)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": unknown flag: EINVAL")
        ck = c.request(CMD_WRITE, 0, 512, flags=0x2, payload=b"\xcc" * 512)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": NO_HOLE on WRITE: EINVAL")
        ck = c.request(CMD_BS, 0, 512)
        check(c.reply_any(ck, structured) == EINVAL,
              tag + ": BLOCK_STATUS without a context: EINVAL")
        # Oversized write (past the 64 MiB that nbdkit accepts too):
        # refused, payload dropped, stream in step.
        big = (64 << 20) + 4096
        ck = c.request(CMD_WRITE, 0, big, payload=b"\xdd" * big)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": 64 MiB + 4 KiB write: EINVAL")
        ck = c.request(CMD_READ, 0, big)
        check(c.reply_any(ck, structured) == EINVAL, tag + ": 64 MiB + 4 KiB read: EINVAL")
        # Still in step: the rejected writes changed nothing.
        ck = c.request(CMD_READ, 0, 512)
        if structured:
            ch = c.chunks(ck)
            data = b"".join(p[8:] if t == 1 else b"\0" * struct.unpack(">I", p[8:12])[0]
                            for f, t, p in ch)
        else:
            data = c.simple(ck, 512)[1]
        check(data == b"\0" * 512, tag + ": refused writes changed no byte")
        ck = c.request(CMD_FLUSH, 0, 0)
        check(c.reply_any(ck, structured) == 0, tag + ": flush")
        # Wrong request magic: hard disconnect, nothing else.
        c.request(CMD_READ, 0, 512, magic=0xDEADBEEF)
        check(c.closed(), tag + ": wrong request magic: connection closed")
        alive(path, tag + " malformed requests")


def case_midwrite(path):
    c = ready(path, structured=False)
    old = os.urandom(1 << 20)
    ck = c.request(CMD_WRITE, 0, len(old), payload=old)
    check(c.simple(ck)[0] == 0, "1 MiB written")
    # A second 1 MiB write, killed after half its payload.
    c2 = ready(path, structured=False)
    c2.s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_WRITE, 7, 0, 1 << 20)
                 + b"\xee" * (1 << 19))
    c2.s.close()
    ck = c.request(CMD_READ, 0, 1 << 20)
    err, data = c.simple(ck, 1 << 20)
    check(err == 0 and data == old, "half-sent write applied nothing")
    alive(path, "a client killed in the middle of a write")


def case_holes(path):
    c = ready(path, structured=True)
    check(c.flags & (1 << 7), "SEND_DF offered with structured replies")
    bs = 4096
    ck = c.request(CMD_READ, 0, 4 * bs)
    ch = c.chunks(ck)
    check(len(ch) == 1 and ch[0][1] == 2 and
          struct.unpack(">QI", ch[0][2]) == (0, 4 * bs),
          "read of an unwritten range: one OFFSET_HOLE chunk")
    pat = os.urandom(bs)
    ck = c.request(CMD_WRITE, bs, bs, payload=pat)
    check(c.reply_any(ck, True) == 0, "4 KiB written at 4 KiB")
    ck = c.request(CMD_READ, 0, 4 * bs)
    ch = c.chunks(ck)
    kinds = [(t, struct.unpack(">Q", p[:8])[0]) for f, t, p in ch]
    check(kinds == [(2, 0), (1, bs), (2, 2 * bs)],
          "hole, data, hole chunks: %r" % kinds)
    check(ch[1][2][8:] == pat, "data chunk carries the written bytes")
    check(ch[-1][0] & 1 and not any(f & 1 for f, t, p in ch[:-1]),
          "only the last chunk has NBD_REPLY_FLAG_DONE")
    ck = c.request(CMD_READ, 0, 4 * bs, flags=4)  # DF
    ch = c.chunks(ck)
    check(len(ch) == 1 and ch[0][1] == 1 and ch[0][2][8 + bs:2 * bs + 8] == pat,
          "DF read: a single OFFSET_DATA chunk")
    # Simple replies carry the zeros.
    s = ready(path, structured=False)
    ck = s.request(CMD_READ, 0, 2 * bs)
    err, data = s.simple(ck, 2 * bs)
    check(data == b"\0" * bs + pat, "simple read returns zeros and data")


def case_multiconn(path):
    a = ready(path, structured=False)
    b = ready(path, structured=False)
    check(a.flags & (1 << 8), "CAN_MULTI_CONN advertised")
    pat = os.urandom(8192)
    ck = a.request(CMD_WRITE, 65536, 8192, payload=pat)
    check(a.simple(ck)[0] == 0, "write on connection A")
    ck = a.request(CMD_FLUSH, 0, 0)
    check(a.simple(ck)[0] == 0, "flush on connection A")
    ck = b.request(CMD_READ, 65536, 8192)
    check(b.simple(ck, 8192)[1] == pat, "connection B reads A's write after FLUSH")


def case_readonly(path):
    c = ready(path, structured=False)
    check(c.flags & 2, "READ_ONLY flag set")
    ck = c.request(CMD_WRITE, 0, 512, payload=b"x" * 512)
    check(c.simple(ck)[0] == EPERM, "write on a read-only export: EPERM")
    ck = c.request(CMD_TRIM, 0, 512)
    check(c.simple(ck)[0] == EPERM, "trim on a read-only export: EPERM")
    ck = c.request(CMD_READ, 0, 512)
    check(c.simple(ck, 512)[0] == 0, "read on a read-only export")


def case_pipeline(path):
    """Many requests in one send, replies matched by cookie."""
    c = ready(path, structured=False)
    pats = {}
    buf = b""
    for i in range(64):
        p = os.urandom(4096)
        pats[i] = p
        c.cookie += 1
        buf += struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_WRITE, 1000 + i,
                           i * 4096, 4096) + p
    c.s.sendall(buf)
    got = set()
    for i in range(64):
        m, err, ck = struct.unpack(">IIQ", c.recv(16))
        if m == SIMPLE and err == 0:
            got.add(ck)
    check(got == set(range(1000, 1064)), "64 pipelined writes, 64 good replies")
    buf = b"".join(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_READ, 2000 + i,
                               i * 4096, 4096) for i in range(64))
    c.s.sendall(buf)
    ok = 0
    for i in range(64):
        m, err, ck = struct.unpack(">IIQ", c.recv(16))
        if err == 0 and c.recv(4096) == pats[ck - 2000]:
            ok += 1
    check(ok == 64, "64 pipelined reads returned their data")


def case_longname(path):
    """Export names over 4096 bytes (doc/proto.md: strings are at most
    4096 bytes) are refused with NBD_REP_ERR_INVALID, as nbdkit does."""
    c = Conn(path)
    c.greeting()
    c.structured()
    for opt, what in ((OPT_INFO, "NBD_OPT_INFO"), (OPT_GO, "NBD_OPT_GO")):
        name = b"n" * 4097
        c.opt(opt, struct.pack(">I", 4097) + name + struct.pack(">H", 0))
        o, t, d = c.reply()
        check(o == opt and t == ERR_INVALID,
              "%s with a 4097-byte name: ERR_INVALID (got %#x)" % (what, t))
    c.opt(OPT_SET_META, struct.pack(">I", 4097) + b"n" * 4097 +
          struct.pack(">I", 1) + struct.pack(">I", 15) + b"base:allocation")
    check(c.reply()[1] == ERR_INVALID,
          "SET_META_CONTEXT with a 4097-byte name: ERR_INVALID")
    c.opt(OPT_INFO, struct.pack(">I", 4096) + b"n" * 4096 +
          struct.pack(">H", 0))
    t = None
    while True:
        o, t, d = c.reply()
        if t != REP_INFO:
            break
    check(t == REP_ACK, "NBD_OPT_INFO with a 4096-byte name: answered")
    size, flags = c.go()
    check(size == 64 << 20, "NBD_OPT_GO still works on the same connection")


def bs_conn(path, ctx=b"base:allocation"):
    c = Conn(path)
    c.greeting()
    c.structured()
    c.opt(OPT_SET_META, struct.pack(">I", 0) + struct.pack(">I", 1) +
          struct.pack(">I", len(ctx)) + ctx)
    o, t, d = c.reply()
    check(t == REP_META, "%s selected" % ctx.decode())
    check(c.reply()[1] == REP_ACK, "SET_META_CONTEXT acknowledged")
    c.go()
    return c


def block_status(c, off, length, flags=0):
    """[(length, flags)] of the one context's BLOCK_STATUS chunk, or the
    error number."""
    ck = c.request(CMD_BS, off, length, flags=flags)
    ext = None
    for fl, ty, p in c.chunks(ck):
        if ty & 0x8000:
            return struct.unpack(">I", p[:4])[0]
        if ty == 5:
            v = struct.unpack(">I%dI" % ((len(p) - 4) // 4), p)[1:]
            ext = list(zip(v[0::2], v[1::2]))
    return ext


def case_bs_unaligned(path):
    """BLOCK_STATUS with an unaligned offset and length is answered: the
    first extent starts at the offset, the last may run to the next
    block boundary (doc/proto.md allows a status beyond the range)."""
    c = bs_conn(path)
    ck = c.request(CMD_WRITE, 8192, 4096, payload=os.urandom(4096))
    check(c.reply_any(ck, True) == 0, "4 KiB written at 8 KiB")
    e = block_status(c, 8192 + 100, 5000)
    check(isinstance(e, list), "unaligned BLOCK_STATUS answered (got %r)" % (e,))
    check(e[0] == (3996, 0), "first extent: 3996 data bytes from 8292: %r" % e)
    total = sum(n for n, f in e)
    check(5000 <= total <= 5000 + 511,
          "extents cover the range, ending at most one block past it: %d" % total)
    e = block_status(c, 100, 16000, flags=8)  # REQ_ONE
    check(isinstance(e, list) and len(e) == 1 and e[0] == (8092, 3),
          "REQ_ONE at offset 100: one hole extent up to the data: %r" % (e,))
    e = block_status(c, 8192, 4096)
    check(e == [(4096, 0)], "aligned request unchanged: %r" % (e,))


def case_bs_merge(path):
    """base:allocation on a zoned device: no two adjacent extents with the
    same flags (doc/proto.md: SHOULD NOT), across zone boundaries too."""
    c = bs_conn(path)
    size = 64 << 20
    e = block_status(c, 0, size)
    check(e == [(size, 3)], "empty zoned device: one hole|zero extent: %r" % (e[:4],))
    ck = c.request(CMD_WRITE, 16 << 20, 4096, payload=os.urandom(4096))
    check(c.reply_any(ck, True) == 0, "4 KiB written at the start of zone 2")
    e = block_status(c, 0, size)
    check(e == [(16 << 20, 3), (4096, 0), (size - (16 << 20) - 4096, 3)],
          "hole, data, hole: %r" % (e,))
    e = block_status(c, 0, size, flags=8)
    check(e == [(16 << 20, 3)], "REQ_ONE: one extent over zones 0-1: %r" % (e,))


def case_tls_require(path):
    """--tls=require (doc/proto.md, FORCEDTLS mode): every option but
    STARTTLS and ABORT is refused with NBD_REP_ERR_TLS_REQD; EXPORT_NAME,
    which cannot be refused, ends the session."""
    c = Conn(path)
    c.greeting()
    info = struct.pack(">IH", 0, 0)
    meta = struct.pack(">II", 0, 0)
    for o, d, name in ((OPT_STRUCTURED, b"", "STRUCTURED_REPLY"),
                       (OPT_LIST, b"", "LIST"), (OPT_INFO, info, "INFO"),
                       (OPT_GO, info, "GO"), (OPT_LIST_META, meta, "LIST_META"),
                       (0x77, b"junk", "an unknown option")):
        c.opt(o, d)
        ro, t, msg = c.reply()
        check(ro == o and t == ERR_TLS_REQD,
              "%s before STARTTLS: NBD_REP_ERR_TLS_REQD (%r)" % (name, msg))
    c.opt(OPT_STARTTLS, b"x")
    check(c.reply()[1] == ERR_INVALID, "STARTTLS with data: NBD_REP_ERR_INVALID")
    c.opt(OPT_ABORT)
    check(c.reply()[1] == REP_ACK, "ABORT before STARTTLS: NBD_REP_ACK")
    check(c.closed(), "ABORT closes the connection")
    c = Conn(path)
    c.greeting()
    c.opt(OPT_EXPORT_NAME, b"")
    check(c.closed(), "EXPORT_NAME before STARTTLS: connection closed")
    c = Conn(path)
    c.greeting()
    c.opt(OPT_STARTTLS)
    o, t, d = c.reply()
    check(o == OPT_STARTTLS and t == REP_ACK and d == b"",
          "STARTTLS: NBD_REP_ACK, no data")


def case_tls_off(path):
    """--tls=off (the default): NOTLS mode, STARTTLS unsupported, options
    served as before."""
    c = Conn(path)
    c.greeting()
    c.opt(OPT_STARTTLS)
    check(c.reply()[1] == ERR_UNSUP, "STARTTLS: NBD_REP_ERR_UNSUP")
    c.structured()
    c.go()


def case_tls_stall(path):
    """A client that stops in the TLS handshake holds no one else up, and
    the server closes it once the handshake limit (10 s) is over."""
    c = Conn(path)
    c.greeting()
    c.opt(OPT_STARTTLS)
    check(c.reply()[1] == REP_ACK, "STARTTLS: NBD_REP_ACK")
    alive(path, "a client stalled in the TLS handshake")
    c.s.settimeout(40)
    check(c.closed(), "the stalled handshake was closed by the server")


if __name__ == "__main__":
    sock = sys.argv[1]
    for name in sys.argv[2:]:
        globals()["case_" + name](sock)
    print("%d checks passed" % checks)
