#!/usr/bin/env bash
# Tight queue settings on a plain RAM disk (zoned=false): with
# hw_queue_depth=2 and submit_queues=4 (znbd mq: 2 tags per tag set, so
# requests wait for tags), 512 asynchronous 4 KiB writes then reads with
# 64 in flight from each of two connections all succeed and return the
# right data.  The plugin and bio mode have no queues: they refuse both
# parameters, naming the front-end.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "mq parameters"

if [ "$ZNBD_FRONTEND" != mq ]; then
  case "$ZNBD_FRONTEND" in
  plugin) who=nbdkit-zoned-plugin ;;
  *) who="znbd --queue-mode=$ZNBD_FRONTEND" ;;
  esac
  for qp in hw_queue_depth=2 submit_queues=4; do
    expect_start_failure "$who: ${qp%%=*} has no effect here" size=8M zoned=false "$qp"
  done
  pass "hw_queue_depth and submit_queues refused by $who"
  exit 0
fi

for qp in "hw_queue_depth=1 submit_queues=1" "hw_queue_depth=2 submit_queues=4"; do
  # shellcheck disable=SC2086
  start_frontend size=8M zoned=false $qp
  qp=$qp nbd_py <<'EOF'
from znbdtest import *
B, N = 4 * KiB, 512
hs = [connect(), connect()]
errs = []
def done(err):
    if err.value != 0:
        errs.append(err.value)
    return 1
data = pattern(2 * N * B, 5)
def drain(limit):
    for h in hs:
        while h.aio_in_flight() > limit:
            h.poll(-1)
for k in range(N):
    for c, h in enumerate(hs):
        off = (c * N + k) * B
        h.aio_pwrite(data[off:off + B], off, completion=done)
    drain(63)
drain(0)
check_eq(errs, [], "%s: %d async writes on 2 connections succeeded" % (os.environ["qp"], 2 * N))
bufs = {}
for k in range(N):
    for c, h in enumerate(hs):
        off = (c * N + k) * B
        bufs[off] = nbd.Buffer(B)
        h.aio_pread(bufs[off], off, completion=done)
    drain(63)
drain(0)
check_eq(errs, [], "async reads succeeded")
bad = [o for o, b in bufs.items() if b.to_bytearray() != data[o:o + B]]
check_eq(bad, [], "every read returned its block")
for h in hs:
    h.shutdown()
EOF
  stop_frontend
done
pass "tight tag sets and queues"
