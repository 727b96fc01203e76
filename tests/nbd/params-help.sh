#!/usr/bin/env bash
# Every front-end documents the same device parameters: the help text
# (nbdkit zoned.so --help, znbd --help) lists each key of struct
# znbd_params (include/znbd/params.h) at the start of a line as KEY=...;
# the plugin's --dump-plugin says name=zoned, thread_model=parallel and
# has every callback the plugin implements.
. "$(dirname "$0")/../functions.sh"

keys="size zoned blocksize memory_backed zone_size zone_capacity zone_nr_conv
  zone_max_open zone_max_active zone_full zone_readonly zone_offline
  zone_read_past_wp completion_nsec pipeline_zoned_writes zone_write_timeout
  zone_control sched_batch hw_queue_depth submit_queues no_zone_write_lock"
frontend_help >"$tmpdir/help" 2>&1 || die "help failed: $(cat "$tmpdir/help")"
n=0
for k in $keys; do
  grep -q "^$k=" "$tmpdir/help" || die "help text does not list $k= at the start of a line"
  n=$((n + 1))
done
note "help lists all $n parameters"

if [ "$ZNBD_FRONTEND" = plugin ]; then
  plugin=$(_plugin_path)
  run_nbdkit "$plugin" --dump-plugin >"$tmpdir/dump" || die "--dump-plugin failed"
  for l in name=zoned thread_model=parallel magic_config_key=size has_config_help=1 \
    has_block_size=1 has_extents=1 has_trim=1 has_zero=1 has_flush=1 has_cache=1 \
    has_can_fua=1 has_can_multi_conn=1 has_can_fast_zero=1 has_export_description=1; do
    grep -qx "$l" "$tmpdir/dump" || die "--dump-plugin lacks $l"
  done
  note "--dump-plugin: $(grep -c . "$tmpdir/dump") lines, name, thread model and callbacks as expected"
fi
pass "parameters documented"
