#!/bin/bash
# nbdzone report --json parses with Python's json module and carries the
# same state as the text report.
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"
require nbdsh
start_zoned

M=$((1024 * 1024))
nbd_write $((2 * M)) 4096
ctl "open 3" >/dev/null
nbd_write $((4 * M)) $((768 * 1024))

for src in control default; do
  args=()
  [ $src = control ] && args=(--control "$ctl")
  nbdzone report --json "${args[@]}" "$uri" >"$tmpdir/$src.json" ||
    die "report --json ($src)"
  /usr/bin/python3 - "$tmpdir/$src.json" $src <<'PY' || die "JSON check ($src)"
import json, sys
d = json.load(open(sys.argv[1]))
src = sys.argv[2]
def eq(what, got, want):
    if got != want:
        sys.exit("%s: %r, expected %r" % (what, got, want))
eq("zoned", d["zoned"], True)
eq("units", d["units"], "512-byte sectors")
eq("nr_zones", d["nr_zones"], 16)
eq("nr_conv", d["nr_conv"], 2)
eq("zone_size", d["zone_size"], 2048)
eq("zone_capacity", d["zone_capacity"], 1536)
eq("len(zones)", len(d["zones"]), 16)
z = d["zones"]
eq("zone 0", (z[0]["zone"], z[0]["start"], z[0]["len"], z[0]["cap"], z[0]["wptr"], z[0]["cond_name"], z[0]["type_name"]),
   (0, 0, 2048, 2048, None, "NOT_WP", "CONVENTIONAL"))
c2 = "IMP_OPEN" if d["exact"] else "CLOSED"
eq("zone 2", (z[2]["start"], z[2]["cap"], z[2]["wptr"], z[2]["cond_name"], z[2]["cond"], z[2]["type"]),
   (4096, 1536, 8, c2, {"IMP_OPEN": 2, "CLOSED": 4}[c2], 2))
if d["exact"]:
    eq("zone 3", (z[3]["wptr"], z[3]["cond_name"], z[3]["cond"]), (0, "EXP_OPEN", 3))
eq("zone 4", (z[4]["wptr"], z[4]["cond_name"], z[4]["cond"]), (None, "FULL", 14))
eq("zone 15", (z[15]["start"], z[15]["len"], z[15]["cap"], z[15]["wptr"], z[15]["cond_name"]),
   (15 * 2048, 1024, 1024, 0, "EMPTY"))
if src == "control":
    # x-znbd:zone, when the server offers it, comes before the socket.
    if d["source"] not in ("control", "x-znbd:zone"):
        sys.exit("source %r with --control" % d["source"])
    eq("exact", d["exact"], True)
print("json ok: source %s, exact %s, %d zones" % (d["source"], d["exact"], len(z)))
PY
done
# A window, and an odd URI that needs escaping in JSON.
nbdzone report --json --offset 14M --count 1 "$uri" |
  /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); assert [z["zone"] for z in d["zones"]] == [14], d' ||
  die "report --json --offset 14M --count 1"
pass "--json parses; fields match the written state (control and default source)"
stop_frontend
