# Sourced by the bench scripts that start znbd themselves (faults.sh,
# persist.sh): one environment for all of them and one way to find the
# build.  The caller sets bench_name (its name in messages) first.
# Sets here (bench/), top (the source tree), build (BUILD, default
# <top>/build) and znbd (the server binary); stops when znbd is not built.
set -u
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=${BUILD:-$top/build}
znbd=$build/server/znbd
[ -x "$znbd" ] || { echo "$bench_name: $znbd is not built" >&2; exit 1; }
