#!/usr/bin/python3
"""Turn the raw runs of bench/run.sh into tables, target checks and plots.

usage: report.py WORKDIR OUTPREFIX

WORKDIR holds `meta` (key=value lines) and `raw.tsv` (one line per
measured run: part, row, workload, round, status, fio JSON file, server
clock ticks used during the run, VmHWM KiB, VmRSS KiB, extra k=v;...).
Writes OUTPREFIX.md (tables + target checks), OUTPREFIX.csv (every run)
and OUTPREFIX-<part>.png (gnuplot), and prints the markdown on stdout.

Every figure is the median over rounds with min-max; ratios are the
median of the row divided by the median of the anchor row of the same
table, measured interleaved in the same run.
"""
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys

work, prefix = sys.argv[1], sys.argv[2]
meta = {}
with open(os.path.join(work, "meta")) as f:
    for line in f:
        k, _, v = line.rstrip("\n").partition("=")
        meta[k] = v
clk = float(meta.get("clk_tck", "100"))

DESC = {
    "null": "nbdkit null",
    "memory": "nbdkit memory",
    "zoned.so-ram": "zoned.so zoned=false",
    "zoned.so-zoned": "zoned.so zoned (64M zones, pipelined)",
    "zoned.so-po2": "zoned.so zoned, 64 MiB zones (po2)",
    "zoned.so-npo2": "zoned.so zoned, 96 MiB zones (npo2)",
    "znbd-bio": "znbd bio",
    "znbd-mq": "znbd mq (none)",
    "znbd-bio-zoned": "znbd bio zoned (64M zones)",
    "znbd-bio-nomem": "znbd bio memory_backed=false (stores nothing)",
    "null-ord": "nbdkit null",
    "mq-none": "znbd mq, scheduler none",
    "mq-deadline": "znbd mq, mq-deadline (zone write locking)",
    "mq-deadline-nzwl": "znbd mq, mq-deadline + no_zone_write_lock",
    "mq-deadline-pipe": "znbd mq, mq-deadline + pipeline_zoned_writes",
    "mq-deadline-pipe-nzwl": "znbd mq, mq-deadline + pipeline_zoned_writes + no_zone_write_lock",
    "zoned.so-pipe": "zoned.so, pipeline_zoned_writes",
    "mq-plug-none": "znbd mq, none + zone_write_plugging",
    "mq-plug-deadline": "znbd mq, mq-deadline + zone_write_plugging",
    "mq-none-64m": "znbd mq, scheduler none (64M zones)",
    "mq-deadline-64m": "znbd mq, mq-deadline (zone write locking, 64M zones)",
    "mq-plug-none-64m": "znbd mq, none + zone_write_plugging (64M zones)",
    "mq-plug-deadline-64m": "znbd mq, mq-deadline + zone_write_plugging (64M zones)",
    "null-1T": "nbdkit null 1T",
    "memory-1T": "nbdkit memory 1T",
    "zoned.so-1T": "zoned.so 1T zoned",
    "znbd-bio-1T": "znbd bio 1T zoned",
    "znbd-mq-1T": "znbd mq 1T zoned",
    "nbd-strided": "fio nbd engine, --zonemode=strided",
    "engine-zbd": "znbd-fio.so, --zonemode=zbd",
    "nbd-zbd": "fio nbd engine, --zonemode=zbd (fio emulates the zones)",
    "engine-strided": "znbd-fio.so, --zonemode=strided",
}
ANCHOR = {"ram": "null", "zoned": "null", "submit": "null", "order": "mq-none",
          "peers": "null", "scale": "null-1T",
          "engine": "nbd-strided"}
# Workloads whose rows run on other servers than the part's anchor: their
# own anchor (the 1 MiB ordering rows use 64 MiB zones).
ANCHOR_WL = {"write-1m-qd16-64mzones": "mq-none-64m"}
SECOND = {"ram": "memory", "peers": "memory", "order": "null-ord", "submit": "znbd-bio"}
TITLE = {
    "ram": "1. RAM disk vs anchors",
    "zoned": "2. Zoned mode: sequential write and zone-size shape",
    "submit": "3. Submission model: znbd bio vs mq on a RAM disk",
    "order": "4. Zone write ordering",
    "peers": "5. Peers",
    "scale": "6. Scale: 1 TiB export, 64 MiB zones",
    "engine": "7. fio engine: --zonemode=zbd through znbd-fio.so vs fio's nbd engine",
}


def load_json(path):
    with open(path) as f:
        s = f.read()
    return json.loads(s[s.index("{"):])


# ---------------------------------------------------------------- load
runs = []  # dicts
with open(os.path.join(work, "raw.tsv")) as f:
    for line in f:
        p = line.rstrip("\n").split("\t")
        if len(p) < 10:
            continue
        r = dict(part=p[0], row=p[1], wl=p[2], round=int(p[3]), status=p[4],
                 ticks=int(p[6] or 0), hwm=int(p[7] or 0), rss=int(p[8] or 0),
                 extra=p[9])
        if r["status"] == "ok" and p[5] != "-":
            try:
                j = load_json(p[5])["jobs"][0]
            except (OSError, ValueError, KeyError, IndexError) as e:
                r["status"] = "fail"
                r["extra"] = "bad fio json: %s" % e
            else:
                ios = iops = bw = 0.0
                p99 = 0.0
                best = -1
                for d in ("read", "write", "trim"):
                    x = j.get(d, {})
                    n = x.get("total_ios", 0)
                    ios += n
                    iops += x.get("iops", 0.0)
                    bw += x.get("bw", 0) / 1024.0
                    if n > best:
                        best = n
                        p99 = x.get("clat_ns", {}).get("percentile", {}).get("99.000000", 0) / 1000.0
                r.update(ios=ios, iops=iops, bw=bw, p99=p99,
                         fio_cpu=j.get("usr_cpu", 0.0) + j.get("sys_cpu", 0.0),
                         # fio's usr+sys are percent of its job's run time
                         fio_us=((j.get("usr_cpu", 0.0) + j.get("sys_cpu", 0.0)) / 100.0 *
                                 j.get("job_runtime", 0) * 1000.0 / ios) if ios else float("nan"),
                         cpu_us=(r["ticks"] / clk * 1e6 / ios) if ios else float("nan"))
                if ios == 0:
                    r["status"] = "fail"
                    r["extra"] = "no requests completed"
        if r["extra"] not in ("", "-") and "=" in r["extra"]:
            r["kv"] = dict(kv.split("=", 1) for kv in r["extra"].split(";"))
        runs.append(r)


def ordered(seq):
    out = []
    for x in seq:
        if x not in out:
            out.append(x)
    return out


def wl_key(wl):
    """Sort key of a submit-matrix workload name rw-bs-qdN."""
    p = wl.split("-")
    try:
        return (int(p[1].rstrip("k")), int(p[2][2:]),
                ["read", "randread", "write", "randwrite"].index(p[0]))
    except (ValueError, IndexError):
        return (0, 0, 0)


def cell(part, row, wl):
    return [r for r in runs if r["part"] == part and r["row"] == row and r["wl"] == wl]


class Stat:
    """Median, min and max of one metric over the ok runs of a cell."""

    def __init__(self, rs, key):
        v = [r[key] for r in rs if r["status"] == "ok" and key in r]
        self.n = len(v)
        self.med = statistics.median(v) if v else None
        self.lo = min(v) if v else None
        self.hi = max(v) if v else None


def why_not(rs):
    if not rs:
        return "not run"
    if all(r["status"] == "na" for r in rs):
        return "n/a (not built)"
    if all(r["status"] in ("skip", "na") for r in rs):
        return "skipped (BENCH_TIME_LIMIT)"
    bad = [r for r in rs if r["status"] == "fail"]
    return "failed: " + (bad[0]["extra"] if bad else "?")


def fmt(x, nd=0):
    if x is None:
        return "-"
    if x != x:  # nan
        return "-"
    if nd == 0:
        if abs(x) >= 1e4:
            return "%.1fk" % (x / 1e3)
        return "%.0f" % x
    return "%.*f" % (nd, x)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


# ---------------------------------------------------------------- tables
md = []
md.append("# znbd benchmark results — %s, %s" % (meta.get("date"), meta.get("host")))
md.append("")
md.append("| | |")
md.append("|---|---|")
for k in ("date", "host", "kernel", "commit", "cpus", "loadavg_start", "loadavg_end",
          "fio", "nbdkit", "profile", "rounds", "runtime_s", "fill", "elapsed_s",
          "zoned_so", "znbd"):
    md.append("| %s | %s |" % (k, meta.get(k, "")))
md.append("| 1-min load average at start→end of each part | %s |" % ", ".join(
    "%s %s" % (k[5:], v) for k, v in meta.items() if k.startswith("load_")))
if "idle_gate_zoned" in meta:
    md.append("| part zoned, idle gate | %s |" % meta["idle_gate_zoned"])
md.append("| elapsed per part (s) | %s |" % ", ".join(
    "%s %s" % (k[8:], v) for k, v in meta.items() if k.startswith("elapsed_") and k != "elapsed_s"))
md.append("")
md.append("Figures: median over the rounds with (min–max); every server is a fresh "
          "process per run, rows of one table interleaved round by round. "
          "`×anchor` = median of the row / median of the anchor row of the same "
          "table. CPU µs/req = server utime+stime during the fio run "
          "(/proc/PID/stat 14+15) / requests completed. fio CPU % = the fio "
          "client's usr+sys (100 % = one core busy). p99 = fio completion latency.")
md.append("")

checks = []  # (target, figure text, met bool or None)
parts_present = ordered(r["part"] for r in runs)
stats_cache = {}


def st(part, row, wl, key):
    k = (part, row, wl, key)
    if k not in stats_cache:
        stats_cache[k] = Stat(cell(part, row, wl), key)
    return stats_cache[k]


def perf_table(part):
    anchor = ANCHOR[part]
    second = SECOND.get(part)
    wls = ordered(r["wl"] for r in runs if r["part"] == part and not r["wl"].startswith("rss-"))
    if not wls:
        return
    if part == "submit":
        wls.sort(key=wl_key)
    rows = ordered(r["row"] for r in runs if r["part"] == part and not r["wl"].startswith("rss-"))
    h = ["workload", "server", "IOPS median (min–max)", "×" + DESC.get(anchor, anchor)]
    if second and second in rows:
        h.append("×" + DESC.get(second, second))
    h += ["MiB/s", "p99 µs", "CPU µs/req (min–max)", "CPU ×anchor", "fio CPU %"]
    # The engine part compares clients: their CPU per request too.
    client = part == "engine"
    if client:
        h += ["fio CPU µs/req (min–max)", "fio CPU ×anchor"]
    h += ["RSS MiB", "n"]
    md.append("| " + " | ".join(h) + " |")
    md.append("|" + "---|" * len(h))
    for wl in wls:
        a = st(part, ANCHOR_WL.get(wl, anchor), wl, "iops")
        ac = st(part, ANCHOR_WL.get(wl, anchor), wl, "cpu_us")
        af = st(part, ANCHOR_WL.get(wl, anchor), wl, "fio_us")
        s2 = st(part, second, wl, "iops") if second else None
        for row in rows:
            rs = cell(part, row, wl)
            if not rs:  # e.g. nbdkit null outside the 4k qd32 submit rows
                continue
            i = st(part, row, wl, "iops")
            line = [wl, DESC.get(row, row)]
            if i.n == 0:
                line += [why_not(rs)] + [""] * (len(h) - 3)
                md.append("| " + " | ".join(line) + " |")
                continue
            c = st(part, row, wl, "cpu_us")
            line += ["%s (%s–%s)" % (fmt(i.med), fmt(i.lo), fmt(i.hi)),
                     fmt(ratio(i.med, a.med), 2)]
            if second and second in rows:
                line.append(fmt(ratio(i.med, s2.med), 2))
            line += [fmt(st(part, row, wl, "bw").med, 1),
                     fmt(st(part, row, wl, "p99").med, 0),
                     "%s (%s–%s)" % (fmt(c.med, 1), fmt(c.lo, 1), fmt(c.hi, 1)),
                     fmt(ratio(c.med, ac.med), 2),
                     fmt(st(part, row, wl, "fio_cpu").med, 0)]
            if client:
                fu = st(part, row, wl, "fio_us")
                line += ["%s (%s–%s)" % (fmt(fu.med, 1), fmt(fu.lo, 1), fmt(fu.hi, 1)),
                         fmt(ratio(fu.med, af.med), 2)]
            line += [fmt(st(part, row, wl, "rss").med / 1024.0 if st(part, row, wl, "rss").med else None, 0),
                     str(i.n)]
            if i.n < len(rs):
                line[-1] += " (%d failed)" % (len(rs) - i.n)
            md.append("| " + " | ".join(line) + " |")
    md.append("")


def rss_table(part):
    rs_all = [r for r in runs if r["part"] == part and r["wl"].startswith("rss-")]
    if not rs_all:
        return
    md.append("RSS (MiB, median (min–max)): start-up = launch until an NBD handshake "
              "succeeds; written = after writing %s sequentially from offset 0; "
              "peak = VmHWM then; trimmed = after trimming the same range with 64 MiB "
              "requests (on a zoned export this resets the zones)." % rs_all[0]["wl"][4:])
    md.append("")
    h = ["server", "start-up ms", "empty", "written", "peak (VmHWM)", "trimmed", "trimmed − empty", "n"]
    md.append("| " + " | ".join(h) + " |")
    md.append("|" + "---|" * len(h))
    for row in ordered(r["row"] for r in rs_all):
        rs = [r for r in rs_all if r["row"] == row]
        ok = [r for r in rs if r["status"] == "ok" and "kv" in r]
        if not ok:
            md.append("| %s | %s |" % (DESC.get(row, row), why_not(rs)) + " |" * (len(h) - 2))
            continue

        def mm(key, div=1024.0):
            v = [float(r["kv"][key]) / div for r in ok]
            return statistics.median(v), min(v), max(v)

        line = [DESC.get(row, row)]
        for key, div in (("startup_ms", 1.0), ("empty_kib", 1024.0), ("written_kib", 1024.0),
                         ("hwm_kib", 1024.0), ("trimmed_kib", 1024.0)):
            m, lo, hi = mm(key, div)
            line.append("%.0f (%.0f–%.0f)" % (m, lo, hi))
        d = statistics.median(float(r["kv"]["trimmed_kib"]) - float(r["kv"]["empty_kib"]) for r in ok) / 1024
        line += ["%.1f" % d, str(len(ok))]
        md.append("| " + " | ".join(line) + " |")
        for r in ok:
            r["_rss"] = True
    md.append("")


def submit_summary():
    wls = sorted(ordered(r["wl"] for r in runs if r["part"] == "submit"), key=wl_key)
    if not wls:
        return
    md.append("bio vs mq side by side (mq overhead = (bio − mq) / bio IOPS; the "
              "published brd result is 17–23 %):")
    md.append("")
    h = ["workload", "null IOPS", "bio IOPS", "bio ×null", "mq IOPS", "mq ×null",
         "mq overhead %", "CPU µs/req null / bio / mq"]
    md.append("| " + " | ".join(h) + " |")
    md.append("|" + "---|" * len(h))
    for wl in wls:
        n, b, m = (st("submit", x, wl, "iops") for x in ("null", "znbd-bio", "znbd-mq"))
        cn, cb, cm = (st("submit", x, wl, "cpu_us") for x in ("null", "znbd-bio", "znbd-mq"))
        ov = (100.0 * (b.med - m.med) / b.med) if (b.med and m.med) else None
        md.append("| " + " | ".join([
            wl, fmt(n.med), fmt(b.med) if b.n else why_not(cell("submit", "znbd-bio", wl)),
            fmt(ratio(b.med, n.med), 2), fmt(m.med) if m.n else why_not(cell("submit", "znbd-mq", wl)),
            fmt(ratio(m.med, n.med), 2), fmt(ov, 1),
            "%s / %s / %s" % (fmt(cn.med, 1), fmt(cb.med, 1), fmt(cm.med, 1))]) + " |")
    md.append("")


def check(target, part, row, wl, key, anchor_row, op, limit, anchor_wl=None):
    a = st(part, anchor_row, anchor_wl or wl, key)
    b = st(part, row, wl, key)
    q = ratio(b.med, a.med)
    if q is None:
        why = why_not(cell(part, row, wl)) if b.n == 0 else why_not(cell(part, anchor_row, anchor_wl or wl))
        checks.append((target, why, None))
        return
    lo = ratio(b.lo, a.hi)
    hi = ratio(b.hi, a.lo)
    # Same-round pairs (measured seconds apart): their median ratio is a
    # second, less load-sensitive view; the verdict uses the medians.
    ra = {r["round"]: r[key] for r in cell(part, anchor_row, anchor_wl or wl) if r["status"] == "ok"}
    pr = [r[key] / ra[r["round"]] for r in cell(part, row, wl)
          if r["status"] == "ok" and ra.get(r["round"])]
    paired = "; same-round pairs median %.2f×" % statistics.median(pr) if pr else ""
    met = q >= limit if op == ">=" else q <= limit
    checks.append((target, "%.2f× (%s %s vs %s; worst–best pairing %.2f–%.2f%s)" % (
        q, key, fmt(b.med, 1), fmt(a.med, 1), lo, hi, paired), met))


for part in ["ram", "zoned", "submit", "order", "peers", "scale", "engine"]:
    if part not in parts_present:
        continue
    md.append("## " + TITLE[part])
    md.append("")
    if part == "order":
        md.append("znbd: `%s`; fio: sequential write, 4 KiB, iodepth 64, iodepth_batch=16, "
                  "`--zonemode=strided --zonesize=1M --zonerange=1M`, one pass over a fresh "
                  "4 GiB device (no zone is written twice), capped at the run time." %
                  meta.get("srv.mq-none", "").replace("znbd ", ""))
        md.append("")
        md.append("Published (null_blk, io_uring, kernel): 250 K none, 6 K mq-deadline with "
                  "zone write locking, 123 K with it disabled; variant 236 K none, 81 K "
                  "mq-deadline, 121 K mq-deadline + pipeline_zoned_writes.  In that kernel "
                  "series mq-deadline stops zone write locking on a queue that pipelines "
                  "zoned writes; both pipelined rows are shown (with and without an explicit "
                  "`no_zone_write_lock=true`) so the table shows whether znbd does the same.")
        md.append("")
        md.append("Zone write plugging rows (same servers; `-1zone`: sequential, one zone at a "
                  "time; `-16zones`: 16 connections at iodepth 1, each sequential in its own "
                  "256 MiB range, so 16 zones open at once; `write-1m-qd16-64mzones`: 64 MiB "
                  "zones, anchor `%s`).  Published (null_blk, 16-core Xeon, 4096 × 256 MB zones, "
                  "max open 128, kernel): 4 KiB sequential QD1 940 MB/s with zone write locking + "
                  "mq-deadline, 2,639 MB/s with plugging + none; 4 KiB random writes QD16 over "
                  "the open zones 424 K (locking), 461 K (plugging, mq-deadline), 344 K "
                  "(plugging, none)." % DESC["mq-none-64m"])
        md.append("")
    if part == "engine":
        md.append("One fresh zoned znbd (`%s`) per run; fio sequential write, iodepth 32, "
                  "one pass, capped at the run time.  The target row is znbd-fio.so with "
                  "`--zonemode=zbd` (zones, write pointers and resets from the server) against "
                  "fio's nbd engine with `--zonemode=strided` (no zone logic); the other two "
                  "rows split the difference into fio's own zbd bookkeeping (nbd engine, "
                  "zones emulated by fio) and the engine's (znbd-fio.so, strided)." %
                  meta.get("srv.engine-zbd", "").replace("znbd ", ""))
        md.append("")
    if part == "scale":
        rss_table(part)
    perf_table(part)
    if part == "ram":
        rss_table(part)
    if part == "submit":
        submit_summary()

# ---------------------------------------------------------------- targets
for wl in ("randread-4k-qd32", "randwrite-4k-qd32-fresh", "randwrite-4k-qd32-rewrite"):
    check("zoned.so zoned=false ≥ 0.95× null IOPS, %s" % wl, "ram", "zoned.so-ram", wl, "iops", "null", ">=", 0.95)
ok = [r for r in runs if r["part"] == "ram" and r["row"] == "zoned.so-ram" and r["wl"] == "rss-1G"
      and r["status"] == "ok" and "kv" in r]
if ok:
    hwm = statistics.median(float(r["kv"]["hwm_kib"]) for r in ok) / 1024
    d = statistics.median(float(r["kv"]["trimmed_kib"]) - float(r["kv"]["empty_kib"]) for r in ok) / 1024
    lim = 1.01 * 1024 + 16
    checks.append(("zoned.so RSS peak after writing 1 GiB ≤ 1.01 GiB + 16 MiB (%.0f MiB)" % lim,
                   "%.0f MiB" % hwm, hwm <= lim))
    checks.append(("zoned.so RSS after trimming within 32 MiB of empty", "%+.1f MiB" % d, abs(d) <= 32))
else:
    checks.append(("zoned.so RSS after 1 GiB / after trim",
                   why_not([r for r in runs if r["part"] == "ram" and r["row"] == "zoned.so-ram" and r["wl"] == "rss-1G"]), None))
check("zoned.so zoned seq write 4k qd32 ≥ 0.9× null", "zoned", "zoned.so-po2", "write-4k-qd32", "iops", "null", ">=", 0.9)
# Zoned writes at RAM-disk speed: against zoned.so zoned=false writing the
# same fresh pages, and steady (every round within ±15 % of the median).
check("zoned.so zoned seq write 4k qd32 ≥ 0.9× zoned.so zoned=false", "zoned", "zoned.so-po2",
      "write-4k-qd32", "iops", "zoned.so-ram", ">=", 0.9)
for row in ("zoned.so-po2", "zoned.so-ram"):
    v = st("zoned", row, "write-4k-qd32", "iops")
    t = "%s seq write 4k qd32: min–max within ±15 %% of the median" % DESC.get(row, row)
    if not v.n:
        checks.append((t, why_not(cell("zoned", row, "write-4k-qd32")), None))
    else:
        dev = max(v.med - v.lo, v.hi - v.med) / v.med
        checks.append((t, "±%.0f %% (%s–%s around %s, %d rounds)" % (
            100 * dev, fmt(v.lo), fmt(v.hi), fmt(v.med), v.n), dev <= 0.15))
for wl in ("write-4k-qd32", "randread-4k-qd32"):
    b = st("zoned", "zoned.so-npo2", wl, "iops")
    a = st("zoned", "zoned.so-po2", wl, "iops")
    q = ratio(b.med, a.med)
    if q is None:
        checks.append(("po2 vs npo2 within 2 %%, %s" % wl, why_not(cell("zoned", "zoned.so-npo2", wl)), None))
    else:
        checks.append(("po2 vs npo2 within 2 %%, %s" % wl,
                       "npo2 %+.1f %% (%s vs %s IOPS; ranges %s–%s vs %s–%s)" % (
                           100 * (q - 1), fmt(b.med), fmt(a.med), fmt(b.lo), fmt(b.hi), fmt(a.lo), fmt(a.hi)),
                       abs(q - 1) <= 0.02))
for wl in ("randread-4k-qd32", "randwrite-4k-qd32"):
    check("znbd bio ≥ 1.15× null IOPS, %s" % wl, "submit", "znbd-bio", wl, "iops", "null", ">=", 1.15)
    check("znbd bio ≤ 0.5× null CPU/request, %s" % wl, "submit", "znbd-bio", wl, "cpu_us", "null", "<=", 0.5)
# The mq model at the cost of its model: CPU per request against bio.
for qd in (32, 128):
    for rw in ("read", "randread", "write", "randwrite"):
        wl = "%s-4k-qd%d" % (rw, qd)
        check("znbd mq ≤ 1.2× bio CPU/request, %s" % wl, "submit", "znbd-mq", wl, "cpu_us",
              "znbd-bio", "<=", 1.2)
for wl in ("write-4k-qd32", "write-128k-qd32"):
    check("znbd-fio.so --zonemode=zbd ≥ 0.95× nbd engine --zonemode=strided, %s" % wl,
          "engine", "engine-zbd", wl, "iops", "nbd-strided", ">=", 0.95)
for prow in ("mq-deadline-pipe", "mq-deadline-pipe-nzwl"):
    check("%s ≥ 10× zone write locking" % DESC[prow], "order", prow, "write-4k-qd64-batch16", "iops",
          "mq-deadline", ">=", 10)
    check("%s ≥ 0.8× scheduler none" % DESC[prow], "order", prow, "write-4k-qd64-batch16", "iops",
          "mq-none", ">=", 0.8)

check("plugging + none ≥ 2× zone write locking, 4k QD16 one zone", "order", "mq-plug-none",
      "write-4k-qd16-1zone", "iops", "mq-deadline", ">=", 2)
check("plugging + none ≥ 0.9× scheduler none, 4k QD16 one zone", "order", "mq-plug-none",
      "write-4k-qd16-1zone", "iops", "mq-none", ">=", 0.9)
for prow in ("mq-plug-none", "mq-plug-deadline"):
    check("%s ≥ 0.95× scheduler none, 4k over 16 open zones" % DESC[prow], "order", prow,
          "write-4k-qd1x16-16zones", "iops", "mq-none", ">=", 0.95)

# ----------------------------------------------------------------- floors
# What no server of the kind measured can beat on this machine, from the
# same run: the reasons behind targets that are missed.
floors = []


def fio_us(part, row, wl):
    """The fio client's CPU per request (µs): its usr+sys % over IOPS."""
    c, i = st(part, row, wl, "fio_cpu"), st(part, row, wl, "iops")
    return (c.med / 100.0 * 1e6 / i.med) if (c.med is not None and i.med) else None


pf1, pf0 = meta.get("page_floor_first_ns"), meta.get("page_floor_rewrite_ns")
wl_f, wl_r = "randwrite-4k-qd32-fresh", "randwrite-4k-qd32-rewrite"
if pf1 and pf0:
    fault = (float(pf1) - float(pf0)) / 1000.0
    floors.append("bench/page-floor (lib/store_ram.c, one thread, no NBD): a 4 KiB write to a "
                  "never-written page costs %.2f µs, a rewrite %.2f µs: the kernel's page "
                  "allocation (fault, clear_page, memcg charge) adds **%.2f µs per fresh page**."
                  % (float(pf1) / 1000, float(pf0) / 1000, fault))
    srv = st("ram", "zoned.so-ram", wl_r, "cpu_us").med
    nul_cpu = st("ram", "null", wl_f, "cpu_us").med
    nul_iops = st("ram", "null", wl_f, "iops").med
    cli = fio_us("ram", "null", wl_f)
    if None not in (srv, nul_cpu, nul_iops, cli):
        per = srv + fault + cli  # server (page present) + allocation + client, µs
        used = nul_iops * (nul_cpu + cli) / 1e6  # cores nbdkit null + fio kept busy
        cores = float(meta.get("cpus", "2"))
        floors.append(
            "Bound for zoned.so zoned=false %s: server %.2f µs/req with the page present "
            "(the rewrite row) + %.2f µs allocation + fio's own %.2f µs/req = %.2f µs of CPU per "
            "request.  With all %.0f cores busy that allows at most %.0f IOPS = **%.2f× nbdkit "
            "null**; at the %.2f cores nbdkit null and fio kept busy, %.2f×."
            % (wl_f, srv, fault, cli, per, cores, cores * 1e6 / per,
               cores * 1e6 / per / nul_iops, used, used * 1e6 / per / nul_iops))
z_ram, z_po2, z_null = (st("zoned", r, "write-4k-qd32", "iops") for r in ("zoned.so-ram", "zoned.so-po2", "null"))
if z_ram.n and z_null.n:
    floors.append("Sequential 4 KiB writes at iodepth 32 on fresh pages without zones (zoned.so "
                  "zoned=false): %s IOPS = %.2f× nbdkit null; zoned.so zoned (po2) reaches %.2f× "
                  "of that floor."
                  % (fmt(z_ram.med), ratio(z_ram.med, z_null.med) or 0,
                     ratio(z_po2.med, z_ram.med) or 0))
for wl in ("randwrite-4k-qd32", "write-4k-qd32"):
    fl, nl, bi = (st("submit", r, wl, "cpu_us") for r in ("znbd-bio-nomem", "null", "znbd-bio"))
    if fl.n and nl.n:
        floors.append("%s: znbd bio storing nothing (memory_backed=false) costs %.2f µs/req = "
                      "**%.2f× nbdkit null's CPU/request** (znbd bio storing: %s×); the rest is "
                      "the kernel receiving the client's 4 KiB (socket buffers, copy, memcg)."
                      % (wl, fl.med, ratio(fl.med, nl.med), fmt(ratio(bi.med, nl.med), 2)))
if floors:
    md.append("## Floors")
    md.append("")
    for f in floors:
        md.append("- " + f)
    md.append("")

md.append("## Targets")
md.append("")
md.append("Computed from the medians above; `worst–best pairing` divides the row's "
          "min by the anchor's max and the row's max by the anchor's min, so a "
          "target met only at one end of it is within the noise.")
md.append("")
md.append("| target | figure | verdict |")
md.append("|---|---|---|")
for t, fig, met in checks:
    md.append("| %s | %s | %s |" % (t, fig, "met" if met else ("n/a" if met is None else "**missed**")))
md.append("")
md.append("Server specs (the exact command lines):")
md.append("")
for k in sorted(meta):
    if k.startswith("srv."):
        md.append("- `%s`: `%s`" % (k[4:], meta[k]))
md.append("")

# ---------------------------------------------------------------- plots
plots = []
if shutil.which("gnuplot"):
    for part in ["ram", "zoned", "submit", "order", "peers", "scale", "engine"]:
        wls = ordered(r["wl"] for r in runs if r["part"] == part and not r["wl"].startswith("rss-"))
        rows = ordered(r["row"] for r in runs if r["part"] == part and not r["wl"].startswith("rss-"))
        if not wls:
            continue
        anchor = ANCHOR[part]
        if part == "submit":
            # nbdkit null runs only on the 4 KiB iodepth-32 rows: plot
            # against bio, which runs everywhere (mq overhead at a glance).
            anchor = "znbd-bio"
            wls.sort(key=wl_key)
        dat = os.path.join(work, "plot-%s.dat" % part)
        have = False
        with open(dat, "w") as f:
            f.write("workload " + " ".join('"%s" lo hi' % DESC.get(r, r) for r in rows) + "\n")
            for wl in wls:
                a = st(part, anchor, wl, "iops")
                vals = []
                for row in rows:
                    i = st(part, row, wl, "iops")
                    if part == "order":
                        v = (i.med, i.lo, i.hi)
                    else:
                        v = (ratio(i.med, a.med), ratio(i.lo, a.med), ratio(i.hi, a.med))
                    if v[0] is None:
                        v = (0, 0, 0)
                    else:
                        have = True
                    vals.append("%g %g %g" % v)
                f.write('"%s" %s\n' % (wl, " ".join(vals)))
        if not have:
            continue
        png = "%s-%s.png" % (prefix, part)
        ylabel = ("IOPS (median, min-max), log scale" if part == "order"
                  else "IOPS / %s (median, min-max)" % DESC.get(anchor, anchor))
        width = max(900, 40 * len(wls) * max(1, len(rows)))
        gp = ['set terminal pngcairo size %d,520 noenhanced font ",10"' % min(width, 2400),
              'set output "%s"' % png,
              'set title "%s"' % TITLE[part].split(" (")[0],
              "set style data histogram",
              "set style histogram errorbars gap 1 lw 1",
              "set style fill solid 0.8 border -1",
              "set key outside below horizontal",
              'set ylabel "%s"' % ylabel,
              "set xtics rotate by 30 right scale 0",
              "set grid ytics",
              "set yrange [0:*]" if part != "order" else "set logscale y"]
        cols = []
        for k in range(len(rows)):
            c = 2 + 3 * k
            cols.append("'%s' using %d:%d:%d:xtic(1) title columnheader(%d)" % (dat, c, c + 1, c + 2, c))
        gp.append("plot " + ", ".join(cols))
        gpf = os.path.join(work, "plot-%s.gp" % part)
        with open(gpf, "w") as f:
            f.write("\n".join(gp) + "\n")
        r = subprocess.run(["gnuplot", gpf], capture_output=True, text=True)
        if r.returncode == 0:
            plots.append(png)
        else:
            sys.stderr.write("bench: gnuplot failed for %s: %s\n" % (part, r.stderr.strip()[:300]))
    # RSS stages plot
    rr = [r for r in runs if "kv" in r and r["status"] == "ok"]
    if rr:
        dat = os.path.join(work, "plot-rss.dat")
        keys = ordered((r["part"], r["row"]) for r in rr)
        with open(dat, "w") as f:
            f.write("stage " + " ".join('"%s"' % DESC.get(k[1], k[1]) for k in keys) + "\n")
            for stage, key in (("empty", "empty_kib"), ("written", "written_kib"),
                               ("peak", "hwm_kib"), ("trimmed", "trimmed_kib")):
                vals = []
                for k in keys:
                    v = [float(r["kv"][key]) / 1024 for r in rr if (r["part"], r["row"]) == k]
                    vals.append("%g" % statistics.median(v))
                f.write('"%s" %s\n' % (stage, " ".join(vals)))
        png = "%s-rss.png" % prefix
        gp = ['set terminal pngcairo size 900,480 noenhanced font ",10"',
              'set output "%s"' % png, 'set title "Server RSS: empty, after writing 1 GiB, peak, after trim"',
              "set style data histogram", "set style histogram clustered gap 1",
              "set style fill solid 0.8 border -1", "set key outside right top",
              'set ylabel "MiB (median)"', "set grid ytics", "set yrange [0:*]",
              "plot " + ", ".join("'%s' using %d:xtic(1) title columnheader(%d)" % (dat, c, c)
                                  for c in range(2, 2 + len(keys)))]
        gpf = os.path.join(work, "plot-rss.gp")
        with open(gpf, "w") as f:
            f.write("\n".join(gp) + "\n")
        r = subprocess.run(["gnuplot", gpf], capture_output=True, text=True)
        if r.returncode == 0:
            plots.append(png)
        else:
            sys.stderr.write("bench: gnuplot failed for rss: %s\n" % r.stderr.strip()[:300])
else:
    sys.stderr.write("bench: gnuplot not installed (scripts/install-deps.sh): no plots\n")

if plots:
    md.append("Plots: " + ", ".join("![%s](%s)" % (os.path.basename(p), os.path.basename(p)) for p in plots))
    md.append("")

with open(prefix + ".md", "w") as f:
    f.write("\n".join(md) + "\n")
with open(prefix + ".csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["part", "server", "workload", "round", "status", "iops", "mib_s", "p99_us",
                "server_cpu_us_per_req", "fio_cpu_pct", "requests", "vmhwm_kib", "vmrss_kib", "extra"])
    for r in runs:
        w.writerow([r["part"], r["row"], r["wl"], r["round"], r["status"],
                    "%.0f" % r["iops"] if "iops" in r else "", "%.1f" % r["bw"] if "bw" in r else "",
                    "%.0f" % r["p99"] if "p99" in r else "",
                    "%.2f" % r["cpu_us"] if "cpu_us" in r and r["cpu_us"] == r["cpu_us"] else "",
                    "%.0f" % r["fio_cpu"] if "fio_cpu" in r else "", "%.0f" % r.get("ios", 0),
                    r["hwm"], r["rss"], r["extra"]])
print("\n".join(md))
print("bench: wrote %s.md, %s.csv%s" % (prefix, prefix, "".join(", " + p for p in plots)))
