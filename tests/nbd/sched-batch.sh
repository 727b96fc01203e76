#!/usr/bin/env bash
# sched_batch (default true): every thread of the serving process runs as
# SCHED_BATCH while a client is connected (policy 3, field 41 of
# /proc/PID/task/TID/stat); sched_batch=false leaves them SCHED_OTHER (0).
# lib/sched.c says why.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "sched_batch="

policies() { # the sorted, distinct policies of $server_pid's threads
  nbd_py <<'EOF'
import os
from znbdtest import *
h = connect()
h.pwrite(b"x" * 4096, 0)  # the request threads exist now
pid = os.environ["server_pid"]
pols = set()
for tid in os.listdir("/proc/%s/task" % pid):
    with open("/proc/%s/task/%s/stat" % (pid, tid)) as f:
        pols.add(int(f.read().rsplit(")", 1)[1].split()[38]))
print("threads=%d policies=%s" % (len(os.listdir("/proc/%s/task" % pid)),
      ",".join(str(p) for p in sorted(pols))))
h.shutdown()
EOF
}

start_frontend size=1M zoned=false
out=$(policies) || die "client failed: $out"
note "default: $out"
case $out in *" policies=3") ;; *) die "expected every thread SCHED_BATCH (3): $out" ;; esac
stop_frontend

start_frontend size=1M zoned=false sched_batch=false
out=$(policies) || die "client failed: $out"
note "sched_batch=false: $out"
case $out in *" policies=0") ;; *) die "expected every thread SCHED_OTHER (0): $out" ;; esac
stop_frontend
pass "SCHED_BATCH by default, SCHED_OTHER with sched_batch=false"
