#!/usr/bin/env bash
# Every front-end documents the same device parameters, all derived from
# lib/params.c's table: the help text (nbdkit zoned.so --help, znbd
# --help) lists each key at the start of a line as KEY=..., and the keys
# it lists are exactly the =item B<KEY=> entries of the plugin man page's
# PARAMETERS.  The plugin's --dump-plugin says name=zoned,
# thread_model=parallel and has every callback the plugin implements; its
# zoned_parameters= list is the help's keys, in the same order, and every
# zoned_* key it prints is documented (DUMP-PLUGIN OUTPUT).
. "$(dirname "$0")/../functions.sh"

pod=$top_srcdir/man/nbdkit-zoned-plugin.pod
[ -f "$pod" ] || die "no $pod"
# PARAMETERS: from its =head1 to the next =head1; items are
# "=item B<key=>..." or "=item [B<key=>]..." (size may be omitted).
awk '/^=head1 /{on = ($0 == "=head1 PARAMETERS")} on' "$pod" |
  sed -n 's/^=item \[\{0,1\}B<\([a-z_]*\)=>.*/\1/p' >"$tmpdir/documented"
frontend_help >"$tmpdir/help" 2>&1 || die "help failed: $(cat "$tmpdir/help")"
grep -oE '^[a-z_]+=' "$tmpdir/help" | tr -d = >"$tmpdir/listed"
n=$(wc -l <"$tmpdir/listed")
[ "$n" -ge 21 ] || die "help lists only $n parameters: $(cat "$tmpdir/help")"
if ! diff <(sort "$tmpdir/documented") <(sort "$tmpdir/listed") >"$tmpdir/diff"; then
  die "help keys (>) and the man page's PARAMETERS (<) differ: $(cat "$tmpdir/diff")"
fi
note "help lists all $n parameters, the same as the man page"

if [ "$ZNBD_FRONTEND" = plugin ]; then
  plugin=$(_plugin_path)
  run_nbdkit "$plugin" --dump-plugin >"$tmpdir/dump" || die "--dump-plugin failed"
  for l in name=zoned thread_model=parallel magic_config_key=size has_config_help=1 \
    has_block_size=1 has_extents=1 has_trim=1 has_zero=1 has_flush=1 has_cache=1 \
    has_can_fua=1 has_can_multi_conn=1 has_can_fast_zero=1 has_export_description=1; do
    grep -qx "$l" "$tmpdir/dump" || die "--dump-plugin lacks $l"
  done
  want=$(paste -sd, "$tmpdir/listed")
  grep -qx "zoned_parameters=$want" "$tmpdir/dump" ||
    die "--dump-plugin's zoned_parameters is not the help's list ($want): $(grep zoned_parameters "$tmpdir/dump")"
  section=$(awk '/^=head1 /{on = ($0 == "=head1 DUMP-PLUGIN OUTPUT")} on' "$pod")
  k=0
  for key in $(sed -n 's/^\(zoned_[a-z_]*\)=.*/\1/p' "$tmpdir/dump"); do
    grep -q "^=item B<$key=" <<<"$section" || die "--dump-plugin prints $key, which the man page does not document"
    k=$((k + 1))
  done
  [ "$k" -ge 6 ] || die "--dump-plugin prints only $k zoned_* keys"
  note "--dump-plugin: $(grep -c . "$tmpdir/dump") lines, name, thread model, callbacks and $k documented zoned_* keys"
fi
pass "parameters documented"
