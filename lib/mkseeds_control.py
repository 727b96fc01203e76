#!/usr/bin/python3
"""Write the libFuzzer seed corpus for fuzz_control.c into
fuzz-control-seeds/ (run from lib/; the output is committed).  Each seed:
a device character ('0' to '?', see fuzz_control.c: bits 0-1 geometry,
bit 2 write_cache, bit 3 blocksize 4096), then request lines.  Together
they hold every request word and argument form of the control language
(man/znbd-zone-control.pod, REQUESTS), the right ones and the refused
ones."""
import os

# Devices (fuzz_control.c): 16 zones of 64 KiB, capacity 48 KiB, 2
# conventional, max_open 3, max_active 5 ...
ZONED, NPO2, FULL, RAM = 0, 1, 2, 3
WC, BS4K = 4, 8

SEEDS = {
    # report in every form, and its refusals
    "report": (ZONED, [
        "report", "report 0", "report 2 3", "report 15 1", "report 0 100",
        "report 16", "report 0 0", "report x", "report 1 2 3",
        "report 4294967295", "report 007 01",
    ]),
    # single-zone operations through their conditions
    "ops": (ZONED, [
        "open 2", "open 2", "close 2", "open 3", "#write 384 4", "close 3",
        "finish 3", "finish 3", "reset 3", "reset 3", "close 4", "finish 5",
        "open 0", "close 0", "finish 0", "reset 0",
    ]),
    # the all forms
    "all": (ZONED, [
        "open 2", "#write 512 1", "#write 640 1", "close all", "open all",
        "close all", "finish all", "reset all", "open all", "report",
    ]),
    # open and active limits: ETOOMANYREFS, EOVERFLOW, open all refused
    "limits": (ZONED, [
        "open 2", "open 3", "open 4", "open 5", "close 2", "close 3",
        "close 4", "#write 640 1", "#write 768 1", "open 7", "open all",
        "stats", "finish all", "stats",
    ]),
    # readonly / offline / online, conventional refused
    "faults": (ZONED, [
        "readonly 4", "offline 5", "open 4", "online 4", "readonly 4",
        "readonly 4", "offline 5", "offline 0", "online 0", "online 6",
        "readonly all", "open 6", "#write 768 1", "offline 6", "stats",
        "report 4 3",
    ]),
    # a CLOSED zone made READONLY while the open limit is reached stays
    # counted as closed; open all must not count it
    "faults-stuck": (ZONED, [
        "#write 256 1", "close 2", "open 3", "#write 384 1", "open 4",
        "#write 512 1", "open 5", "#write 640 1", "readonly 2", "stats",
        "close all", "open all", "online 2", "stats",
    ]),
    # appends: partial, to capacity, beyond, conventional, misaligned
    "append": (ZONED, [
        "append 2 512", "append 2 1024", "append 0 512", "append 3 49152",
        "append 3 512", "append 4 49664", "append 5 100", "append 99 512",
        "append x 512", "append 2 33554432", "report 2 4",
    ]),
    # a malformed append closes the connection: the rest is not run
    "append-bad": (ZONED, ["append 2 512", "append 2 4k", "stats"]),
    "append-big": (ZONED, ["append 2 33554433"]),
    # bad sectors, list forms, an append over one
    "badblocks": (ZONED, [
        "badblocks list", "badblocks add 100-107,2048", "badblocks list",
        "badblocks del 100-103", "badblocks list", "badblocks add 256",
        "append 2 1024", "badblocks add 99999999", "badblocks add x",
        "badblocks del 0-2047", "badblocks", "badblocks add", "badblocks list",
    ]),
    # lost replies: every form of drop-reply
    "drop-reply": (ZONED, [
        "drop-reply", "drop-reply every 3", "drop-reply every 3 read,write",
        "drop-reply every 1 flush,trim,other", "drop-reply every 2 all",
        "drop-reply every 0", "drop-reply every 5 bogus", "drop-reply off",
        "drop-reply on", "drop-reply every", "drop-reply",
    ]),
    # power cut: durable and lost writes, open zones come back CLOSED,
    # armed cuts that fire on a zone operation or an append
    "power-cut": (ZONED | WC, [
        "append 2 8192", "#flush", "append 2 8192", "open 3", "power-cut",
        "report 2 2", "append 4 4096", "power-cut after 2", "append 4 512",
        "append 4 512", "open 5", "stats", "power-cut after 0",
        "power-cut before 1", "power-cut after", "power-cut after 4294967295",
    ]),
    # FULL zones back CLOSED past max_active after a cut: 5 zones (the
    # active limit) half durable, then filled; a 6th the same way with a
    # sync of its range alone
    "power-cut-active": (ZONED | WC, [f"append {z} 24576" for z in range(2, 7)]
                         + ["#flush"]
                         + [f"append {z} 24576" for z in range(2, 7)]
                         + ["append 7 24576", "#sync 896 48", "append 7 24576",
                            "stats", "power-cut", "stats", "open 9", "reset 2",
                            "open 9", "finish 3", "stats", "reset all",
                            "stats"]),
    "power-cut-off": (ZONED, ["power-cut", "power-cut after 1"]),
    # zone size not a power of 2, shorter last zone, max_open = max_active
    "npo2": (NPO2, [
        "report", "append 10 65536", "append 10 512", "finish 10", "open 2",
        "open 3", "open 4", "close 2", "append 5 81920", "reset all", "stats",
    ]),
    # zones that start FULL
    "full": (FULL, [
        "report", "append 1 512", "reset 1", "append 1 512", "close 1",
        "open 2", "reset all", "badblocks add 128", "#write 128 2", "stats",
    ]),
    # a RAM disk: zone requests refused, faults accepted
    "ram": (RAM, [
        "report", "stats", "open 0", "reset all", "append 0 512",
        "badblocks add 0-7", "badblocks list", "drop-reply every 2 read",
        "power-cut",
    ]),
    "ram-wc": (RAM | WC, [
        "#write 0 8", "#flush", "#write 8 8", "power-cut", "power-cut after 1",
        "#write 0 1", "#write 0 1", "stats",
    ]),
    # 4 KiB blocks: appends must be multiples of 4096
    "bs4k": (ZONED | BS4K, [
        "append 2 4096", "append 2 512", "append 2 8192", "#write 24 1",
        "badblocks add 1-7", "stats",
    ]),
    "bs4k-wc": (ZONED | BS4K | WC, [
        "append 2 4096", "#flush", "append 2 4096", "power-cut", "report 2 1",
    ]),
    # the grammar: blanks, case, word count, numbers, line ends, length
    "grammar": (ZONED, [
        "", "   \t", "bogus", "REPORT", "open", "open 1 2", "readonly all",
        "online all", "offline all", "a b c d e", "open 99999999999",
        "open -1", "open +1", "open 4294967294", "stats now", "stats\r",
        "  stats  \t", "\treport\t0\t1", "append",
        "x" * 4097, "report " + "0" * 10,
    ]),
}


def main():
    out = "fuzz-control-seeds"
    os.makedirs(out, exist_ok=True)
    for name, (dev, lines) in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([0x30 + dev]) + "\n".join(lines).encode() + b"\n")


if __name__ == "__main__":
    main()
