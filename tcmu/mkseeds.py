#!/usr/bin/python3
"""Write the libFuzzer seed corpus for fuzz.c into fuzz-seeds/ (run from
tcmu/; the output is committed).  Each seed: a device byte, then commands
(see fuzz.c): the CDB length, the CDB, the number of buffers and their
16-bit little-endian lengths.  The sequences are those Linux's sd sends
(sd_revalidate_disk(): INQUIRY and its VPD pages, READ CAPACITY, MODE
SENSE, REPORT SUPPORTED OPERATION CODES, REPORT ZONES) followed by the
I/O and zone management a zoned file system sends."""
import os
import struct


def cmd(cdb, *bufs):
    return (bytes([len(cdb)]) + bytes(cdb) + bytes([len(bufs)]) +
            b"".join(struct.pack("<H", n) for n in bufs))


def be(v, n):
    return list(v.to_bytes(n, "big"))


def rw16(op, lba, blocks, b1=0):
    return [op, b1] + be(lba, 8) + be(blocks, 4) + [0, 0]


def rw10(op, lba, blocks):
    return [op, 0] + be(lba, 4) + [0] + be(blocks, 2) + [0]


def report(lba, alloc, opt=0, partial=False):
    return [0x95, 0] + be(lba, 8) + be(alloc, 4) + [opt | (0x80 if partial else 0), 0]


def zbc_out(sa, lba, all_=False):
    return [0x94, sa] + be(lba, 8) + [0, 0, 0, 0, 1 if all_ else 0, 0]


def probe(bs):
    return b"".join([
        cmd([0x00, 0, 0, 0, 0, 0]),
        cmd([0x12, 0, 0, 0, 36, 0], 36),
        cmd([0x12, 1, 0x00, 0, 255, 0], 255),
        cmd([0x12, 1, 0x80, 0, 255, 0], 255),
        cmd([0x12, 1, 0x83, 0, 255, 0], 255),
        cmd([0x12, 1, 0xb0, 0, 64, 0], 64),
        cmd([0x12, 1, 0xb1, 0, 64, 0], 64),
        cmd([0x12, 1, 0xb6, 0, 64, 0], 64),
        cmd([0x9e, 0x10] + [0] * 8 + be(32, 4) + [0, 0], 32),
        cmd([0x25] + [0] * 9, 8),
        cmd([0x1a, 0x08, 0x3f, 0, 0xc0, 0], 192),
        cmd([0x1a, 0x08, 0x08, 0, 0x20, 0], 32),
        cmd([0x5a, 0x08, 0x3f, 0, 0, 0, 0, 0, 0xc0, 0], 192),
        cmd([0xa3, 0x0c, 0x01, 0x93, 0, 0, 0, 0, 2, 0, 0, 0], 512),
        cmd([0xa3, 0x0c, 0x02, 0x95, 0, 0, 0, 0, 2, 0, 0, 0], 512),
        cmd([0xa3, 0x0c, 0x00, 0, 0, 0, 0, 0, 2, 0, 0, 0], 512),
        cmd(report(0, 4096, 0, True), 4096),
        cmd(report(0, 16384), 16384),
        cmd(rw10(0x28, 0, 8), 8 * bs),
    ])


def io(bs, zone_lba, zones):
    s = b""
    z = zone_lba
    k = 16384 // bs // 2  # blocks per read: at most 16 KiB of buffers
    for i in range(3):
        s += cmd(rw16(0x8a, z, 2), 2 * bs)
        s += cmd(rw16(0x8a, z + 2, 2, 0x08), bs, bs)
        s += cmd(rw16(0x88, z, k), k * bs)
        s += cmd(rw16(0x88, z + 2, 2 * k), 2 * k * bs)
        z += zone_lba
    s += cmd(zbc_out(0x03, zone_lba * 4))
    s += cmd(zbc_out(0x01, zone_lba * 4))
    s += cmd(zbc_out(0x02, zone_lba))
    s += cmd(zbc_out(0x01, 0, True))
    s += cmd(zbc_out(0x03, 0, True))
    s += cmd(zbc_out(0x02, 0, True))
    s += cmd([0x35] + [0] * 9)
    s += cmd([0x91] + [0] * 15)
    s += cmd(report(0, 4096, 0x3f), 4096)
    s += cmd(report(zone_lba * 2, 200, 0x01, True), 200)
    s += cmd(zbc_out(0x04, 0, True))
    s += cmd(report(0, 4096), 40, 24, 4000)
    return s


os.makedirs("fuzz-seeds", exist_ok=True)
seeds = {
    "ram-probe": bytes([0]) + probe(512) + cmd(rw10(0x2a, 8, 8), 4096) +
    cmd(rw10(0x28, 0, 16), 8192),
    "zoned-probe-io": bytes([1]) + probe(512) + io(512, 128, 16),
    "zoned-limits": bytes([2 | 8]) + probe(512) + io(512, 128, 16),
    "zoned-gaps": bytes([3]) + probe(512) + io(512, 128, 16) +
    cmd(rw16(0x88, 96, 32), 16384) + cmd(zbc_out(0x03, 96)),
    "zoned-4k-badblocks": bytes([1 | 4 | 16]) + probe(4096) + io(4096, 16, 16),
    "report-short-buffers": bytes([1]) + cmd(report(0, 4096), 1) +
    cmd(report(0, 4096), 63) + cmd(report(0, 63), 4096) +
    cmd(report(0, 0), 4096) + cmd(report(0, 4096, 0, True), 100),
    "malformed": bytes([2]) + cmd([0x95, 0, 0]) + cmd([0x28], 512) +
    cmd([0x88, 0x20] + [0] * 11 + [8, 0, 0], 4096) +
    cmd(rw16(0x8a, 256, 8), 4095) + cmd([0x12, 0x02, 0, 0, 36, 0], 36),
}
for name, data in seeds.items():
    with open(os.path.join("fuzz-seeds", name), "wb") as f:
        f.write(data)
