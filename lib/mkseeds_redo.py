#!/usr/bin/python3
"""Write the libFuzzer seed corpus for fuzz_redo.c into fuzz-redo-seeds/
(run from lib/; the output is committed).  Each seed is a whole znbd.redo
file (lib/intent.c): a 64-byte header ("ZNBDREDO", version 1, N slots)
then 2N records of 32 bytes (state, zone, sector and length in bytes),
little-endian.  The zones of the harness: 8 of 64 KiB, the last 40 KiB,
zones 0 and 1 conventional."""
import os
import struct

Z = 65536


def head(nslots, magic=b"ZNBDREDO", version=1):
    return struct.pack("<8sII48x", magic, version, nslots)


def rec(state=1, zone=2, off=None, length=4096):
    if off is None:
        off = zone * Z
    return struct.pack("<IIQQ8x", state, zone, off, length)


FREE = rec(0, 0, 0, 0)
SEEDS = {
    "empty": b"",
    "one-noted": head(1) + rec() + FREE,
    "kept": head(2) + FREE + FREE + rec(zone=3, length=8192) + rec(zone=4),
    "mixed": head(4) + rec(zone=2) + rec(zone=0) + rec(state=2, zone=3)
    + rec(zone=8) + rec(zone=5, length=0) + rec(zone=6, off=6 * Z + Z - 4096)
    + rec(zone=6, off=6 * Z + Z - 4096, length=8192) + rec(zone=7, off=7 * Z,
                                                             length=40960),
    "last-zone-over": head(1) + rec(zone=7, off=7 * Z, length=40961) + FREE,
    "wrap": head(1) + rec(zone=3, off=3 * Z + 4096, length=2**64 - 4096)
    + rec(zone=3, off=2**64 - 512, length=1024),
    "before-zone": head(1) + rec(zone=3, off=2 * Z) + FREE,
    "short": head(4) + rec(),
    "bad-magic": head(1, magic=b"ZNBDREDX") + rec() + FREE,
    "bad-version": head(1, version=2) + rec() + FREE,
    "no-slots": head(0) + rec() + FREE,
    "too-many-slots": head(65537) + rec() + FREE,
    "head-only": head(1),
    "half-head": head(1)[:40],
    "trailing": head(1) + rec() + FREE + b"\xff" * 100,
}

os.makedirs("fuzz-redo-seeds", exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join("fuzz-redo-seeds", name), "wb") as f:
        f.write(data)
