#!/usr/bin/env bash
# base:allocation on a plain RAM disk (zoned=false): the extents are
# exactly the store's allocated pages after known writes, trims and
# zeroes — never-written and whole-page trimmed/zeroed ranges are
# HOLE|ZERO, written pages are data (0), a partial-page trim leaves the
# page allocated and its other bytes intact; REQ_ONE and queries starting
# mid-extent are answered correctly.
. "$(dirname "$0")/../functions.sh"

start_frontend size=1M zoned=false
page=$(frontend_page_size) nbd_py <<'EOF'
from znbdtest import *
P = int(os.environ["page"])
size = 1 * MiB
HZ = HOLE | ZERO
h = connect()
check_eq(extents(h, 0, size), [(0, size, HZ)], "empty disk: one HOLE|ZERO extent")

h.pwrite(pattern(P, 1), 2 * P)
check_eq(extents(h, 0, size), [(0, 2 * P, HZ), (2 * P, P, 0), (3 * P, size - 3 * P, HZ)],
         "one page written at page 2")

h.pwrite(pattern(512, 2), 5 * P + 512)
check_eq(extents(h, 0, size),
         [(0, 2 * P, HZ), (2 * P, P, 0), (3 * P, 2 * P, HZ), (5 * P, P, 0), (6 * P, size - 6 * P, HZ)],
         "512 bytes inside page 5 allocate the whole page")

h.trim(P, 2 * P)
check_eq(extents(h, 0, size), [(0, 5 * P, HZ), (5 * P, P, 0), (6 * P, size - 6 * P, HZ)],
         "whole-page trim frees page 2")

# Partial-page trim: the page stays allocated, other bytes intact.
full = pattern(P, 3)
h.pwrite(full, 7 * P)
h.trim(1024, 7 * P + 1024)
check_eq(extents(h, 7 * P, P), [(7 * P, P, 0)], "page 7 still data after trimming 1 KiB of it")
want = full[:1024] + bytes(1024) + full[2048:]
check_eq(h.pread(P, 7 * P), want, "partial-page trim zeroed exactly 1 KiB, neighbours intact")

# Whole-page write-zeroes frees the page too.
h.zero(P, 7 * P)
check_eq(extents(h, 6 * P, 3 * P), [(6 * P, 3 * P, HZ)], "whole-page zero frees page 7")
check_eq(h.pread(P, 7 * P), bytes(P), "page 7 reads zeros")

# Three pages written, the middle one trimmed.
h.pwrite(pattern(3 * P, 4), 10 * P)
h.trim(P, 11 * P)
check_eq(extents(h, 9 * P, 5 * P),
         [(9 * P, P, HZ), (10 * P, P, 0), (11 * P, P, HZ), (12 * P, P, 0), (13 * P, P, HZ)],
         "three pages written, middle one trimmed")

# A query starting inside an extent is clipped to it.
check_eq(extents(h, 10 * P + 512, P), [(10 * P + 512, P - 512, 0), (11 * P, 512, HZ)],
         "query starting mid-page")

# REQ_ONE: a single extent, starting at the offset asked.
got = []
h.block_status(size, 0, lambda m, o, e, err: got.append((m, o, list(e))) or 0,
               nbd.CMD_FLAG_REQ_ONE)
check_eq(len(got), 1, "REQ_ONE: one reply")
m, o, e = got[0]
check(m == "base:allocation" and o == 0 and len(e) == 2 and e[1] == HZ and 0 < e[0] <= 5 * P,
      "REQ_ONE: one HOLE|ZERO extent at 0 not beyond page 5 (got %r)" % (e,))

# One reply's descriptors: consecutive ones differ in status (NBD spec,
# BLOCK_STATUS: SHOULD), lengths are multiples of 512, and they do not run
# past the request.
raw = []
h.block_status(size, 0, lambda m, o, e, err: raw.append(list(e)) or 0)
e = raw[0]
pairs = [(e[i], e[i + 1]) for i in range(0, len(e), 2)]
check(all(pairs[i][1] != pairs[i + 1][1] for i in range(len(pairs) - 1)),
      "one reply: %d descriptors, no two consecutive with the same status" % len(pairs))
check(all(l % 512 == 0 for l, f in pairs) and sum(l for l, f in pairs) <= size,
      "descriptor lengths are multiples of 512 within the request")

# Total allocation: pages 5, 10, 12.
data = sum(l for o, l, f in extents(h, 0, size) if f == 0)
check_eq(data, 3 * P, "3 pages allocated in all")
h.shutdown()
EOF
stop_frontend
pass "base:allocation extents exact"
