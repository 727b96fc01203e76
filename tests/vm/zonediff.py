#!/usr/bin/env python3
"""Differential run of random zone operations on two Linux zoned block
devices of the same geometry: a reference (null_blk) and the device
under test (znbd-tcmu's /dev/sdX).

    zonediff.py [--ops N] [--seed S] [--log FILE] REF DUT

Each operation is applied to REF, then to DUT, through the kernel's
interfaces a zoned application uses: pwrite/pread with O_DIRECT and the
zone ioctls of <linux/blkzoned.h> (BLKREPORTZONE, BLKRESETZONE,
BLKOPENZONE, BLKCLOSEZONE, BLKFINISHZONE).  After each one the two
results (success, errno, or the digest of the bytes read) and the two
zone reports (condition and wp of every zone) are compared.

The operations aim where zone rules bite: writes at the wp, off it
(ahead and behind), across the zone end, into FULL zones; explicit
opens past the open limit; closes, finishes and resets of zones in any
condition, of conventional zones and of ranges; reads below, across and
past the wp.

A difference is explained when the only thing that differs is the
errno of a refused request and the pair is one the two drivers are
known to map differently (listed in EXPLAINED, documented in
znbd-tcmu(1)); everything else is unexplained.  The last line is

    N ops: S same, E explained, U unexplained

and the exit status is 1 when U > 0.  --log writes one line per
operation with both results.
"""

import argparse
import errno
import fcntl
import hashlib
import mmap
import os
import random
import struct
import sys

SECTOR = 512
# <linux/blkzoned.h>: _IOWR(0x12, 130, struct blk_zone_report) and
# _IOW(0x12, 131..136, struct blk_zone_range), both 16 bytes.
BLKREPORTZONE = 0xC0101282
BLKRESETZONE = 0x40101283
BLKOPENZONE = 0x40101286
BLKCLOSEZONE = 0x40101287
BLKFINISHZONE = 0x40101288
ZONE_OPS = {"reset": BLKRESETZONE, "open": BLKOPENZONE,
            "close": BLKCLOSEZONE, "finish": BLKFINISHZONE}
TYPE_CONV = 1
COND_FULL = 0xE
# struct blk_zone: start, len, wp, type, cond, non_seq, reset, resv[4],
# capacity, reserved[24] (64 bytes, sectors).
BLK_ZONE = struct.Struct("=QQQBBBB4xQ24x")

# (errno from null_blk, errno from SCSI): null_blk fails a request that
# breaks a zone rule with BLK_STS_IOERR (EIO, null_zone_write(),
# null_open_zone() ... in drivers/block/null_blk/zoned.c); a ZBC disk
# answers ILLEGAL REQUEST, which scsi_io_completion_action() turns into
# BLK_STS_TARGET (EREMOTEIO).
EXPLAINED = {
    (errno.EIO, errno.EREMOTEIO): "EIO from null_blk, EREMOTEIO from SCSI",
}


class Dev:
    def __init__(self, path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        self.size = os.lseek(self.fd, 0, os.SEEK_END)

    def report(self):
        """[(start, len, wp, type, cond, capacity)] in sectors."""
        zones = []
        sector = 0
        while sector < self.size // SECTOR:
            n = 64
            buf = bytearray(16 + n * BLK_ZONE.size)
            struct.pack_into("=QII", buf, 0, sector, n, 0)
            fcntl.ioctl(self.fd, BLKREPORTZONE, buf, True)
            got = struct.unpack_from("=QII", buf, 0)[1]
            if got == 0:
                break
            for i in range(got):
                z = BLK_ZONE.unpack_from(buf, 16 + i * BLK_ZONE.size)
                zones.append((z[0], z[1], z[2], z[3], z[4], z[7]))
            sector = zones[-1][0] + zones[-1][1]
        return zones

    def state(self):
        """Condition and wp of every zone (wp only for sequential ones)."""
        return [(z[4], None if z[3] == TYPE_CONV else z[2])
                for z in self.report()]

    def zone_op(self, name, sector, nr):
        try:
            fcntl.ioctl(self.fd, ZONE_OPS[name], struct.pack("=QQ", sector, nr))
            return "ok"
        except OSError as e:
            return e.errno

    def write(self, buf, off):
        try:
            n = os.pwrite(self.fd, buf, off)
            return "ok" if n == len(buf) else "short %d" % n
        except OSError as e:
            return e.errno

    def read(self, buf, off):
        try:
            n = os.preadv(self.fd, [buf], off)
            return "ok %d %s" % (n, hashlib.md5(buf[:n]).hexdigest()[:12])
        except OSError as e:
            return e.errno


def show(r):
    return errno.errorcode.get(r, str(r)) if isinstance(r, int) else r


class Run:
    def __init__(self, ref, dut, rng, block):
        self.ref, self.dut, self.rng, self.block = ref, dut, rng, block
        self.buf = mmap.mmap(-1, 1 << 20)  # page-aligned, for O_DIRECT
        self.zsec = ref.report()[0][1]  # zone size, sectors

    def pick_op(self):
        """One random operation on the reference's current zones, the
        same for both devices: ("write" or "read", sector, bytes) or
        (zone operation, first sector, sectors)."""
        rng, zones = self.rng, self.ref.report()
        i = rng.randrange(len(zones))
        start, zlen, wp, ztype = zones[i][:4]
        bs = self.block // SECTOR
        end_dev = self.ref.size // SECTOR
        # Where a write "at the wp" goes: anywhere in a conventional zone,
        # anywhere in a FULL one (whose reported wp is the zone end).
        anywhere = ztype == TYPE_CONV or zones[i][4] == COND_FULL
        at = start + rng.randrange(zlen // bs) * bs if anywhere else wp
        r = rng.random()
        if r < 0.34:  # write at the wp (conventional: anywhere)
            nb = rng.choice([1, 1, 2, 8, 32, 64, 256])
            if rng.random() < 0.2:  # to the zone end and past it
                nb = (start + zlen - at) // bs + rng.choice([0, 1, 8])
            nb = max(1, min(nb, (end_dev - at) // bs, 256))
            return ("write", at, nb * self.block) if at < end_dev else ("read", 0, self.block)
        if r < 0.44:  # write off the wp: ahead of it or behind it
            delta = rng.choice([-8, -1, 1, 2, 64]) * bs
            off = min(max(start, at + delta), end_dev - bs)
            return ("write", off, rng.choice([1, 8]) * self.block)
        if r < 0.60:  # read: below, across or past the wp, or into the next zone
            off = start + rng.randrange(zlen // bs) * bs
            nb = rng.choice([1, 8, 64, 256])
            nb = max(1, min(nb, (end_dev - off) // bs, 256))
            return ("read", off, nb * self.block)
        name = rng.choices(["open", "close", "finish", "reset"],
                           [14, 10, 6, 6])[0]
        nz = 1
        if rng.random() < 0.08:  # a range of zones, or the whole device
            nz = rng.choice([2, 3, len(zones) - i])
            if name == "reset" and rng.random() < 0.5:
                i, nz = 0, len(zones)
        return (name, zones[i][0], min(nz, len(zones) - i) * zlen)

    def apply(self, dev, op):
        """OP on DEV: "ok", an errno or the read's digest.  A write across
        a zone end and an open or finish of several zones are sent zone
        by zone, in order, up to the first error: the kernel would split
        them per zone anyway and send the pieces together (chained bios
        in blkdev_zone_mgmt(), one zone-write lock per zone in
        mq-deadline), and with the open limit binding, the pieces' order
        decides which zone gets an open resource or is implicitly closed,
        on null_blk as on any device.  Sending them in order keeps the
        run deterministic; a write across a zone end in one command is
        checked with SG_IO (guest-tcmu-diff.sh)."""
        name, off, n = op
        zsec = self.zsec
        if name == "read":
            return dev.read(memoryview(self.buf)[:n], off * SECTOR)
        if name in ("write", "open", "finish"):
            end = off + (n // SECTOR if name == "write" else n)
            r, pos = "ok", off
            while r == "ok" and pos < end:
                piece = min(end, (pos // zsec + 1) * zsec) - pos
                if name == "write":
                    b = (pos - off) * SECTOR
                    r = dev.write(memoryview(self.buf)[b:b + piece * SECTOR],
                                  pos * SECTOR)
                else:
                    r = dev.zone_op(name, pos, piece)
                pos += piece
            return r
        return dev.zone_op(name, off, n)

    def fill(self, k, n):
        """Bytes of write K: distinct per write, the same on both devices."""
        seed = hashlib.sha256(b"%d" % k).digest()
        self.buf[:n] = (seed * (n // len(seed) + 1))[:n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log")
    ap.add_argument("ref")
    ap.add_argument("dut")
    a = ap.parse_args()
    ref, dut = Dev(a.ref), Dev(a.dut)
    rg, dg = ref.report(), dut.report()
    geom = lambda zs: [(z[0], z[1], z[3], z[5]) for z in zs]
    if ref.size != dut.size or geom(rg) != geom(dg):
        print("geometries differ: %s %d bytes %d zones, %s %d bytes %d zones"
              % (a.ref, ref.size, len(rg), a.dut, dut.size, len(dg)))
        return 2
    block = max(int(open("/sys/block/%s/queue/logical_block_size"
                         % os.path.basename(p)).read()) for p in (a.ref, a.dut))
    run = Run(ref, dut, random.Random(a.seed), max(block, 4096))
    for dev in (ref, dut):
        dev.zone_op("reset", 0, dev.size // SECTOR)
    log = open(a.log, "w") if a.log else None
    same = unexplained = 0
    explained = {}
    results = {}
    first = []  # the first unexplained differences
    recent = []  # the last lines, for the context of the first
    for k in range(a.ops):
        op = run.pick_op()
        out = []
        for dev in (ref, dut):
            if op[0] == "write":
                run.fill(k, op[2])
            out.append(run.apply(dev, op))
        sref, sdut = ref.state(), dut.state()
        line = "%d %s %d+%d: %s | %s" % (k, op[0], op[1], op[2],
                                         show(out[0]), show(out[1]))
        key = (op[0], show(out[1]).split()[0])
        results[key] = results.get(key, 0) + 1
        if out[0] == out[1] and sref == sdut:
            same += 1
        elif sref == sdut and (out[0], out[1]) in EXPLAINED:
            why = EXPLAINED[(out[0], out[1])]
            explained[why] = explained.get(why, 0) + 1
            line += "  [explained: %s]" % why
        else:
            unexplained += 1
            diff = [(i, r, d) for i, (r, d) in enumerate(zip(sref, sdut)) if r != d]
            line += "  [UNEXPLAINED; zones (index, ref, dut) %s]" % diff
            if unexplained == 1:
                first.extend("(before) " + x for x in recent)
            if unexplained <= 10:
                first.append(line)
        recent = (recent + [line])[-4:]
        if log:
            log.write(line + "\n")
    for (name, r), n in sorted(results.items()):
        print("# %s -> %s: %d" % (name, r, n))
    for line in first:
        print(line)
    for why, n in explained.items():
        print("# explained, %s: %d" % (why, n))
    print("%d ops: %d same, %d explained, %d unexplained"
          % (a.ops, same, sum(explained.values()), unexplained))
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
