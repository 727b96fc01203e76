#!/usr/bin/env bash
# znbd-ublk and znbd-tcmu refuse a parameter they ignore, naming the
# front-end, the parameter and why, with exit status 1, before they need
# the kernel (/dev/ublk-control, LIO's configfs): so this runs on any
# host.  Their other start-up refusals (a bare word, a missing size,
# znbd-tcmu's cmd_time_out= and SCSI checks), which lib/start.c now
# makes for them, keep their messages.  Skips a front-end that this
# build has not built.
ZNBD_FRONTEND=${ZNBD_FRONTEND:-ublk+tcmu} # for the messages; none is started
. "$(dirname "$0")/../functions.sh"

# expect_refusal PROGRAM MESSAGE ARG...: PROGRAM ARG... exits 1 and
# prints MESSAGE, and nothing else, on stderr.
expect_refusal() {
  local prog=$1 want=$2 rc=0 out
  shift 2
  out=$("$prog" "$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -eq 1 ] || die "$(basename "$prog") $*: status $rc, expected 1 ($out)"
  [ "$out" = "$want" ] || die "$(basename "$prog") $*: printed '$out', expected '$want'"
  note "$(basename "$prog") $*: $out"
}

ran=0
ublk=$top_builddir/ublk/znbd-ublk
if [ -x "$ublk" ]; then
  expect_refusal "$ublk" "znbd-ublk: hw_queue_depth has no effect here: the queues are the kernel's; use --queues/--depth" \
    size=8M zone_size=1M hw_queue_depth=8
  expect_refusal "$ublk" "znbd-ublk: pipeline_zoned_writes has no effect here: writes never wait for the wp: one ahead of it fails at once" \
    size=8M zone_size=1M pipeline_zoned_writes=false
  expect_refusal "$ublk" "znbd-ublk: zone_write_plugging has no effect here: the kernel's block layer orders each zone's writes" \
    --queues 2 size=8M zone_write_plugging=true
  # The other refusals of the shared start-up (lib/start.c) keep their words.
  expect_refusal "$ublk" "znbd-ublk: notkv: expected key=value" size=8M notkv
  expect_refusal "$ublk" "znbd-ublk: size: required and must not be 0 (e.g. size=4G)" zoned=false
  ran=$((ran + 1))
fi
tcmu=$top_builddir/tcmu/znbd-tcmu
if [ -x "$tcmu" ]; then
  expect_refusal "$tcmu" "znbd-tcmu: submit_queues has no effect here: the queues are the kernel's (tcm_loop's and the SCSI disk's)" \
    refusetest size=8M zone_size=1M submit_queues=2
  expect_refusal "$tcmu" "znbd-tcmu: sched_batch has no effect here: its threads keep their scheduling class" \
    refusetest size=8M zone_size=1M sched_batch=false
  expect_refusal "$tcmu" "znbd-tcmu: cmd_time_out=0: expected seconds from 1 to 3600" \
    refusetest size=8M cmd_time_out=0
  expect_refusal "$tcmu" "znbd-tcmu: zone_size=3145728: SCSI needs a power-of-two zone size (Linux sd refuses others)" \
    refusetest size=12M zone_size=3M
  ran=$((ran + 1))
fi
[ "$ran" -gt 0 ] || skip "neither znbd-ublk nor znbd-tcmu is built"
pass "znbd-ublk and znbd-tcmu refuse parameters they ignore ($ran front-ends)"
