# shellcheck shell=bash
# Sourced by the benches that measure in a qemu guest (tests/vm/vm-run):
# one way to set up either side of the run.
# vm_bench_host NAME: on the host, before the guest run (top set): date
# (the UTC day), res (a new folder for the guest's /results, removed at
# exit), load0 (the load average), commit, t0 ($SECONDS).
# shellcheck disable=SC2034,SC2154 # set for the caller; top is its
vm_bench_host() {
  date=$(date -u +%Y-%m-%d)
  res=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap 'rm -rf "$res"' EXIT
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  commit=$(git -C "$top" describe --always --dirty 2> /dev/null || echo unknown)
  t0=$SECONDS
}
# vm_bench_guest: in the guest (vm-run -w RES:/results): out=/results
# with results.tsv and info.txt empty, work (a new folder), the PATH.
# shellcheck disable=SC2034 # set for the caller
vm_bench_guest() {
  out=/results
  export PATH=/usr/bin:/usr/sbin:/bin:/sbin LC_ALL=C
  : > $out/results.tsv
  : > $out/info.txt
  work=$(mktemp -d)
}
