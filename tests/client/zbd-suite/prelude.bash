# BASH_ENV for fio's t/zbd/test-zbd-support (tests/client/fio-suite.bash):
# bash reads this before the script's first line.  The script learns the
# device's geometry only for a block or character device node (sysfs,
# stat); the URI it gets is neither, so that branch is skipped and the
# variables it would set are set here, the way it sets them for a zoned
# block device, from fio's own t/zbd/functions (whose blkzone is the
# nbdzone shim on PATH):
#   disk_size             the export size (nbdinfo; sysfs size * 512)
#   logical_block_size    the minimum block size the server advertises
#                         (sysfs queue/logical_block_size)
#   is_zbd                true (sysfs queue/zoned: host-managed)
#   first_sequential_zone_sector, sectors_per_zone, zone_size
#                         first_sequential_zone() on blkzone's report
#   max_open_zones        max_open_zones(): 0 without a SCSI device, as
#                         for null_blk (fio then asks the engine)
# Left out with that branch: check_blkzone (its sysfs probes find
# nothing), set_io_scheduler (no I/O scheduler over NBD) and -r.
unset BASH_ENV
# shellcheck source=/dev/null
source "$(dirname "$0")/functions" || exit 1
disk_size=$(nbdinfo --size "$ZBD_URI") || exit 1
logical_block_size=$(nbdinfo --json "$ZBD_URI" |
  sed -n 's/.*"block_size_minimum": *\([0-9]*\).*/\1/p')
[ -n "$logical_block_size" ] || exit 1
is_zbd=true
result=($(first_sequential_zone "$ZBD_URI")) || exit 1
first_sequential_zone_sector=${result[0]}
sectors_per_zone=${result[1]}
zone_size=$((sectors_per_zone * 512))
max_open_zones=$(max_open_zones "$ZBD_URI") || exit 1
