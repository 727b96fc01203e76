#!/bin/bash
# nbdzone on a non-zoned export, a wrong URI and bad usage: clear messages
# and exit status 1 (not zoned / refused) or 2 (usage, connection).
. "$(dirname "$0")/../functions.sh"
. "$srcdir/common.sh"

# Usage errors need no server.
expect_status 2 nbdzone
expect_status 2 nbdzone report
expect_status 2 nbdzone frobnicate nbd+unix:///?socket=/nonexistent
case "$out" in *"unknown command 'frobnicate'"*) ;; *) die "unknown command: '$out'" ;; esac
expect_status 2 nbdzone reset --json --all nbd+unix:///?socket=/nonexistent
expect_status 2 nbdzone report --count 0 nbd+unix:///?socket=/nonexistent
expect_status 2 nbdzone report --offset 1.5M nbd+unix:///?socket=/nonexistent
expect_status 0 nbdzone --help
pass "usage errors exit 2"

# Wrong URIs: exit 2, the message names the URI and the reason.
expect_status 2 nbdzone report "nbd+unix:///?socket=$tmpdir/no-such-socket"
case "$out" in *"no-such-socket"*"cannot connect"*"No such file"*) ;;
*) die "missing socket: '$out'" ;; esac
expect_status 2 nbdzone report "http://example.invalid/"
case "$out" in *"cannot connect"*) ;; *) die "bad scheme: '$out'" ;; esac
pass "wrong URIs exit 2 with the reason"

# A plain RAM disk: "not a zoned export", exit 1, for every command.
start_frontend size=4M zoned=false
for cmd in report capacity "reset --all" "finish --offset 0"; do
  # shellcheck disable=SC2086
  expect_status 1 nbdzone $cmd "$uri"
  case "$out" in *"not a zoned export"*) ;; *) die "$cmd on a RAM disk: '$out'" ;; esac
done
nbdzone report --json "$uri" 2>/dev/null >"$tmpdir/plain.json" && die "report --json of a RAM disk exited 0"
/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["zoned"] is False and d["zones"] == [] and d["size"] == 8192, d
' "$tmpdir/plain.json" || die "report --json of a RAM disk: $(cat "$tmpdir/plain.json")"
pass "non-zoned export reported as such (exit 1; --json says zoned: false)"
stop_frontend

# --control pointing nowhere: exit 2.
start_zoned
expect_status 2 nbdzone open --control "$tmpdir/nope" --offset 2M "$uri"
case "$out" in *nope*) ;; *) die "bad --control: '$out'" ;; esac
pass "--control to a missing socket exits 2"
stop_frontend
