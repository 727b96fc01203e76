#!/usr/bin/env bash
# Option haggling on a plain RAM disk (zoned=false): NBD_OPT_LIST_META_CONTEXT
# offers base:allocation (and no zone context, the disk has no zones);
# NBD_OPT_SET_META_CONTEXT with an unknown context next to base:allocation
# selects only base:allocation, and block status then answers for it;
# NBD_OPT_INFO gives the size before NBD_OPT_GO.
. "$(dirname "$0")/../functions.sh"

start_frontend size=16M zoned=false
page=$(frontend_page_size) nbd_py <<'EOF'
from znbdtest import *
P = int(os.environ["page"])
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri(uri)
got = []
n = h.opt_list_meta_context(lambda name: got.append(name) or 0)
check_eq((n, got), (1, ["base:allocation"]), "listed contexts")
h.opt_info()
check_eq(h.get_size(), 16 * MiB, "size from NBD_OPT_INFO")
h.add_meta_context("x-unknown:ctx")
h.add_meta_context("base:allocation")
h.add_meta_context("x-znbd:zone")
h.opt_go()
check(h.can_meta_context("base:allocation"), "base:allocation selected")
check(not h.can_meta_context("x-unknown:ctx"), "unknown context not selected")
check(not h.can_meta_context("x-znbd:zone"), "no zone context on a plain disk")
h.pwrite(pattern(P, 1), 2 * P)
seen = []
h.block_status(16 * P, 0, lambda m, o, e, err: seen.append((m, list(e)[:4])) or 0)
check_eq(seen, [("base:allocation", [2 * P, HOLE | ZERO, P, 0])], "block status: one reply, base:allocation")
h.shutdown()
EOF
stop_frontend
pass "meta context negotiation"
