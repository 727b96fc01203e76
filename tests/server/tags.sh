#!/usr/bin/env bash
# mq tag sharing: two workers share one hardware queue of 16 tags while
# four fio jobs keep 128 requests in flight, so tags run out, freed tags
# go to the other worker and stalled readers are retried.  Every byte is
# verified.  In a ThreadSanitizer build (make check-tsan) the server log
# must also be free of race reports: a tag is reused by another worker the
# moment it is released (mq_put_tag).
. "$(dirname "$0")/../functions.sh"
export ZNBD_FRONTEND=mq
frontend_available
require fio
start_frontend size=64M zoned=false submit_queues=1 hw_queue_depth=16 -t 2
run_fio tags --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k \
  --iodepth=32 --numjobs=4 --size=16M --offset_increment=16M \
  --verify=crc32c --do_verify=1
stop_frontend
if grep -q 'ThreadSanitizer' "$server_log"; then
  cat "$server_log" >&2
  die "ThreadSanitizer report in the server log"
fi
w=$(fio_get tags jobs.0.write.io_bytes)
[ "$w" = $((16 << 20)) ] || die "job 0 wrote $w bytes, want 16 MiB"
pass "16 tags shared by 2 workers, 4 x 16 MiB written and verified"
