#!/bin/bash
# fio's t/zbd/test-zbd-support through znbd-fio.so (fio-suite.bash):
# 4 MiB zones of 3 MiB capacity, no conventional zones (section 3).
# 136 zones, so that the tests needing 130 sequential zones run.
suite_geometry=(size=544M zone_size=4M zone_capacity=3M)
suite_opts=()
suite_expect=(2 3 4 5 6 7 8 11 12 13 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 44 45 46 47 48 55 57 58)
. "$(dirname "$0")/fio-suite.bash"
