#!/usr/bin/python3
"""Write the libFuzzer seed corpus for fuzz.c into fuzz-seeds/ (run from
server/; the output is committed).  Each seed: device byte, chunk byte,
then a client's bytes (see fuzz.c)."""
import os
import struct

IHAVEOPT = 0x49484156454F5054


def opt(o, d=b""):
    return struct.pack(">QII", IHAVEOPT, o, len(d)) + d


def req(cmd, off, n, flags=0, cookie=1, payload=b""):
    return struct.pack(">IHHQQI", 0x25609513, flags, cmd, cookie, off, n) + payload


def meta(names, o=10):
    d = struct.pack(">II", 0, len(names))
    for n in names:
        d += struct.pack(">I", len(n)) + n
    return opt(o, d)


go = opt(7, struct.pack(">IH", 0, 3) + struct.pack(">HHH", 1, 2, 3))
reqs = (req(1, 0, 4096, payload=b"\xab" * 4096, cookie=1) +
        req(0, 0, 8192, cookie=2) + req(0, 0, 8192, flags=4, cookie=3) +
        req(7, 0, 1 << 20, cookie=4) + req(7, 0, 1 << 20, flags=8, cookie=5) +
        req(6, 65536, 65536, flags=2, cookie=6) + req(6, 131072, 4096, flags=16, cookie=7) +
        req(4, 131072, 65536, cookie=8) + req(3, 0, 0, cookie=9) +
        req(5, 0, 4096, cookie=10) + req(1, 131072, 512, flags=1, payload=b"z" * 512, cookie=11) +
        req(0, 1 << 20, 512, cookie=12) + req(9, 0, 0, cookie=13) + req(2, 0, 0))
seeds = {
    "structured-zoned": bytes([1, 0]) + struct.pack(">I", 3) + opt(8) +
    meta([b"base:allocation", b"x-znbd:zone"]) + go + reqs,
    "structured-ram-chunked": bytes([0, 7]) + struct.pack(">I", 3) + opt(8) +
    meta([b"base:allocation"]) + go + reqs,
    "simple-exportname": bytes([0, 0]) + struct.pack(">I", 1) + opt(1, b"") + reqs,
    "options": bytes([4, 3]) + struct.pack(">I", 3) + opt(3) + opt(6, struct.pack(">IH", 1, 0) + b"x") +
    meta([b"base:", b"x-znbd:"], 9) + meta([b"base:allocation"]) + opt(8) + opt(8) +
    meta([b"nope:x", b"base:allocation"], 9) + opt(5) + opt(0x77, b"junk") + opt(2),
    "readonly": bytes([2, 0]) + struct.pack(">I", 2) + go + reqs,
    "badmagic": bytes([0, 1]) + struct.pack(">I", 3) + go + req(0, 0, 512)[:4][::-1] + b"\0" * 24,
    "bigwrite": bytes([0, 0]) + struct.pack(">I", 3) + go + req(1, 0, 40 << 20)[:28] + b"\0" * 64,
    # Export names over 4096 bytes (NBD_REP_ERR_INVALID), then one of 4096.
    "longname": bytes([0, 0]) + struct.pack(">I", 3) + opt(8) +
    opt(6, struct.pack(">I", 4097) + b"n" * 4097 + struct.pack(">H", 0)) +
    opt(10, struct.pack(">I", 4097) + b"n" * 4097 + struct.pack(">I", 0)) +
    opt(7, struct.pack(">I", 4096) + b"n" * 4096 + struct.pack(">H", 0)) +
    req(0, 0, 512),
    # BLOCK_STATUS with unaligned offsets and lengths, REQ_ONE too.
    "bs-unaligned": bytes([1, 0]) + struct.pack(">I", 3) + opt(8) +
    meta([b"base:allocation", b"x-znbd:zone"]) + go +
    req(1, 4096, 4096, payload=b"\xcd" * 4096, cookie=1) +
    req(7, 100, 5000, cookie=2) + req(7, 4095, 1, flags=8, cookie=3) +
    req(7, 1, (1 << 20) - 3, cookie=4) + req(2, 0, 0),
    # --tls=require (byte 0 bit 4): options before STARTTLS get
    # NBD_REP_ERR_TLS_REQD, then STARTTLS (with data: invalid; then right),
    # a second STARTTLS (invalid), then the session as usual.
    "tls-require": bytes([0x10 | 1, 0]) + struct.pack(">I", 3) + opt(8) + go +
    meta([b"base:allocation"]) + opt(3) + opt(5, b"x") + opt(5) + opt(5) + opt(8) +
    meta([b"base:allocation", b"x-znbd:zone"]) + go + reqs,
    # --tls=on: STARTTLS after other options (their state is forgotten),
    # EXPORT_NAME under require ends the session.
    "tls-on": bytes([0x08, 5]) + struct.pack(">I", 3) + opt(8) + opt(5) +
    go + reqs,
    "tls-require-exportname": bytes([0x10, 0]) + struct.pack(">I", 1) + opt(2 - 1, b"") + reqs,
}
os.makedirs("fuzz-seeds", exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join("fuzz-seeds", name), "wb") as f:
        f.write(data)
