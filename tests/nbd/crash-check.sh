#!/usr/bin/env bash
# The crash and power-cut checker (tests/crashcheck.py): several
# connections write self-describing sectors with FLUSH, FUA and zone
# resets while the server is killed with SIGKILL or the control socket
# cuts the power, requests in flight, the restart's journal replay itself
# killed at times; every sector, write pointer and zone condition is then
# checked against a model of what was acknowledged and durable
# (nbdkit-zoned-plugin(1), POWER CUTS).  RAM: power cuts only (a killed
# RAM server keeps nothing, by design); ZNBD_STORE=dir: kills and cuts,
# write_cache true and false.  A short run in make check; by hand, longer:
#   SEED=N ITERATIONS=200 TIME_LIMIT=600 ZNBD_FRONTEND=mq ZNBD_STORE=dir \
#     BUILD=$PWD/build bash tests/nbd/crash-check.sh
# SEED replays the same choices (a failure prints it; timing differs).
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "write_cache, power-cut and dir="
require_python_nbd

# The front-end's command line with placeholders crashcheck.py fills in
# (it starts, kills and restarts the server itself).
sock=@SOCK@ pidfile=@PIDFILE@ ZNBD_STORE=ram _frontend_cmd
printf '%s\0' "${_cmd[@]}" >"$tmpdir/cmd"

store=${ZNBD_STORE:-ram}
CHECK_STORE=$store CHECK_CMD_FILE=$tmpdir/cmd CHECK_DIR=$tmpdir \
  ITERATIONS=${ITERATIONS:-100} TIME_LIMIT=${TIME_LIMIT:-30} \
  /usr/bin/python3 "$top_srcdir/tests/crashcheck.py" || {
  tail -n 30 "$tmpdir/server.log" >&2 || true
  die "violations (see above)"
}
check_server_log "$tmpdir/server.log"
pass "$store: no violation"
