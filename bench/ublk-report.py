#!/usr/bin/env python3
"""The tables of bench/ublk-bench.sh from the guest's results.tsv.

Lines: ROUND JOB DISK IOPS FIO-IOS SERVER-CPU-NS DISK-REQUESTS CELL-S
(tab-separated, NA where a cell failed or the disk has no server process;
DISK-REQUESTS from /sys/block/X/stat, CELL-S the cell's wall seconds, zone
resets and fill included).  Per job a table of the
disks (median IOPS, median of the per-round ratios to null_blk, server CPU
ns per request), the same-run ratios between them, then the targets.
"""
import statistics
import sys

ANCHOR = "null_blk"
# (name, numerator, denominator, target or None, rows the target is for:
# "all", "4k" (the 4 KiB jobs), a job's name, or "prefix:P" (the jobs
# whose name starts with P))
RATIOS = [
    ("znbd-ublk / znbd-tcmu", "znbd-ublk", "znbd-tcmu", 2.0, "all"),
    ("znbd-ublk / zloop (RAM vs tmpfs)", "znbd-ublk", "zloop", 1.0, "4k"),
    ("znbd-ublk-dir / zloop (same tmpfs)", "znbd-ublk-dir", "zloop", 1.0, "4k"),
    ("znbd-ublk / null_blk", "znbd-ublk", ANCHOR, 0.5, "randread-4k"),
    ("znbd-ublk-q2 / null_blk", "znbd-ublk-q2", ANCHOR, 0.5, "randread-4k"),
    ("znbd-ublk-q2 / znbd-ublk", "znbd-ublk-q2", "znbd-ublk", None, None),
    # The same targets with --poll-us 100.
    ("znbd-ublk-poll / znbd-tcmu", "znbd-ublk-poll", "znbd-tcmu", 2.0, "all"),
    ("znbd-ublk-poll / zloop (RAM vs tmpfs)", "znbd-ublk-poll", "zloop", 1.0, "4k"),
    ("znbd-ublk-dir-poll / zloop (same tmpfs)", "znbd-ublk-dir-poll", "zloop", 1.0, "4k"),
    ("znbd-ublk-poll / null_blk", "znbd-ublk-poll", ANCHOR, 0.5, "randread-4k"),
]
# BENCH_UBLK_SET=seed004 (bench/ublk-bench.sh): file-backed zones on XFS,
# injected latency, RAM against another build.
RATIOS_SEED004 = [
    ("znbd-ublk-dir / zloop (XFS)", "znbd-ublk-dir", "zloop", 1.0, "prefix:write"),
    ("znbd-ublk-dir / zloop (XFS)", "znbd-ublk-dir", "zloop", 2.0, "prefix:randwrite"),
    ("znbd-ublk-dir-copy / zloop (XFS)", "znbd-ublk-dir-copy", "zloop", None, None),
    ("znbd-ublk-dir / znbd-ublk-dir-copy (zero copy)", "znbd-ublk-dir",
     "znbd-ublk-dir-copy", None, None),
    ("znbd-ublk / znbd-ublk-old (RAM, this build / the other)", "znbd-ublk",
     "znbd-ublk-old", 0.95, "all"),
    ("znbd-ublk-t100us / null_blk-t100us", "znbd-ublk-t100us", "null_blk-t100us",
     0.8, "prefix:lat-100us"),
    ("znbd-ublk-t1ms / null_blk-t1ms", "znbd-ublk-t1ms", "null_blk-t1ms", 0.8,
     "prefix:lat-1ms"),
    # Moonshots.
    ("znbd-ublk / null_blk (moonshot)", "znbd-ublk", ANCHOR, 1.5, "randread-4k"),
    ("znbd-ublk-dir / zloop (XFS, moonshot)", "znbd-ublk-dir", "zloop", 1.5,
     "prefix:write"),
    ("znbd-ublk-dir / zloop (XFS, moonshot)", "znbd-ublk-dir", "zloop", 1.5,
     "prefix:randwrite"),
]


def med(v):
    return statistics.median(v) if v else None


def fmt(v, f="%.2f"):
    return "-" if v is None else f % v


def applies(rows, job):
    if rows is None:
        return False
    if rows.startswith("prefix:"):
        return job.startswith(rows[len("prefix:"):])
    return rows == "all" or rows == job or rows == "4k" and "-4k" in job


def main(path, bset="tmpfs"):
    global RATIOS
    if bset == "seed004":
        RATIOS = RATIOS_SEED004
    data = {}
    for line in open(path):
        if not line.strip():
            continue
        r, job, dev, iops, ios, cpu, reqs = line.rstrip("\n").split("\t")[:7]
        data.setdefault(job, {}).setdefault(dev, {})[r] = (iops, ios, cpu, reqs)
    iops_of = lambda rs, r: int(rs[r][0]) if r in rs and rs[r][0] not in ("NA", "0") else None

    def ratio(job, a, b):
        ra, rb = data[job].get(a, {}), data[job].get(b, {})
        v = [iops_of(ra, r) / iops_of(rb, r) for r in ra if iops_of(ra, r) and iops_of(rb, r)]
        return med(v)

    # One line a job: every disk against null_blk, then the targets' ratios.
    disks = list(dict.fromkeys(d for devs in data.values() for d in devs if d != ANCHOR))
    pairs = list({(r[1], r[2]): r for r in RATIOS
                  if r[2] != ANCHOR and r[0] != "znbd-ublk-q2 / znbd-ublk"}.values())
    print("### Summary: x %s (median of per-round ratios), and the same-run ratios" % ANCHOR)
    print()
    print("| job | %s IOPS | %s | %s |" % (ANCHOR, " | ".join(disks),
                                         " | ".join(r[1] + " / " + r[2] for r in pairs)))
    print("|---|---|%s%s" % ("---|" * len(disks), "---|" * len(pairs)))
    for job, devs in data.items():
        a = [int(v[0]) for v in devs.get(ANCHOR, {}).values() if v[0] != "NA"]
        print("| %s | %s | %s | %s |" % (
            job, fmt(med(a), "%.0f"),
            " | ".join(fmt(ratio(job, d, ANCHOR)) if d in devs else "" for d in disks),
            " | ".join(fmt(ratio(job, r[1], r[2])) if r[1] in devs and r[2] in devs else ""
                       for r in pairs)))
    print()
    checks = []
    for job, devs in data.items():
        print("### %s" % job)
        print()
        print("| disk | IOPS | x %s | CPU ns/req | ios/req | rounds |" % ANCHOR)
        print("|---|---|---|---|---|---|")
        for dev, rs in devs.items():
            iops = [int(v[0]) for v in rs.values() if v[0] != "NA"]
            cpu = [int(v[2]) / int(v[1]) for v in rs.values()
                   if v[2] != "NA" and v[0] != "NA" and int(v[1]) > 0]
            # fio's I/Os per request the disk completed: above 1 where
            # the block layer merged them.
            per = [int(v[1]) / int(v[3]) for v in rs.values()
                   if v[0] != "NA" and v[3] != "NA" and int(v[3]) > 0]
            print("| %s | %s | %s | %s | %s | %d/%d |" % (
                dev, fmt(med(iops), "%.0f"), fmt(ratio(job, dev, ANCHOR)),
                fmt(med(cpu), "%.0f"), fmt(med(per)), len(iops), len(rs)))
        print()
        for name, a, b, target, rows in RATIOS:
            if a not in devs or b not in devs:
                continue
            v = ratio(job, a, b)
            if b != ANCHOR:  # the table's column has those
                print("- %s: %s" % (name, fmt(v)))
            if target is not None and applies(rows, job):
                checks.append((job, name, v, target))
        print()
    none, mqd = "write-4k-qd64-b16-none", "write-4k-qd64-b16-mq-deadline"
    if none in data and mqd in data:
        print("### mq-deadline against none (4 KiB sequential write, QD64, batches of 16)")
        print()
        for dev in data[none]:
            a, b = data[mqd].get(dev, {}), data[none][dev]
            v = [iops_of(a, r) / iops_of(b, r) for r in a if iops_of(a, r) and iops_of(b, r)]
            print("- %s: mq-deadline / none %s" % (dev, fmt(med(v))))
        print()
    # Injected latency: what queue depth buys each, at 1 ms (null_blk's
    # timer mode holds each request on its own hrtimer).
    q1, q32 = "lat-1ms-qd1", "lat-1ms-qd32"
    if q1 in data and q32 in data:
        print("### QD32 / QD1 at 1 ms")
        print()
        own = {}
        for dev in data[q1]:
            a, b = data[q32].get(dev, {}), data[q1][dev]
            v = med([iops_of(a, r) / iops_of(b, r) for r in a
                     if iops_of(a, r) and iops_of(b, r)])
            own[dev] = v
            print("- %s: %s" % (dev, fmt(v)))
        u, n = own.get("znbd-ublk-t1ms"), own.get("null_blk-t1ms")
        if u is not None and n:
            checks.append((q32, "QD32/QD1 znbd-ublk-t1ms / null_blk-t1ms's", u / n, 0.8))
        print()
    print("### Targets (reported, not asserted)")
    print()
    print("| job | ratio | value | target | |")
    print("|---|---|---|---|---|")
    for job, name, v, target in checks:
        ok = "met" if v is not None and v >= target else "missed"
        print("| %s | %s | %s | >= %.1f | %s |" % (job, name, fmt(v), target, ok))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "tmpfs")
