#!/bin/bash
# nbdkit-racy.sh [NBDKIT]: exit status 0 when this nbdkit (default the
# one on PATH) is a release that aborts when a client goes away with
# several replies still to be sent ("raw_send_socket: Assertion `sock >=
# 0' failed"): from 1.32.4 and 1.33.3, where "Give client EOF when we are
# done writing" came in, up to 1.33.9; 1.33.10 and 1.34 carry the fix
# (man nbdkit-zoned-plugin, BUGS).  1 otherwise, and when there is no
# nbdkit.  Used by scripts/serve.sh and the NBD suite, which run such an
# nbdkit with --threads=1 and any other without.
v=$("${1:-nbdkit}" --version 2> /dev/null | sed -n 's/^nbdkit \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p')
IFS=. read -r maj min pat <<< "${v:-0.0.0}"
[ "$maj" = 1 ] || exit 1
{ [ "$min" = 32 ] && [ "$pat" -ge 4 ]; } || { [ "$min" = 33 ] && [ "$pat" -ge 3 ] && [ "$pat" -le 9 ]; }
