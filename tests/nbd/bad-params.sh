#!/usr/bin/env bash
# Bad device parameters stop start-up: the front-end exits non-zero without
# serving, and its message names the offending parameter.
. "$(dirname "$0")/../functions.sh"
require_znbd_frontend "parameter checking"

expect_start_failure size zoned=false
expect_start_failure size size=0 zoned=false
expect_start_failure size size=foo zoned=false
expect_start_failure size size=64MiB zoned=false
expect_start_failure size size=1.5M zoned=false
expect_start_failure size size=-1 zoned=false
expect_start_failure zoned size=1M zoned=maybe
expect_start_failure blocksize size=1M zoned=false blocksize=1000
expect_start_failure blocksize size=1M zoned=false blocksize=2048
expect_start_failure blocksize size=1M zoned=false blocksize=8192
expect_start_failure blocksize size=1M zoned=false blocksize=abc
expect_start_failure memory_backed size=1M zoned=false memory_backed=perhaps
expect_start_failure badblocks size=1M zoned=false badblocks=2048
expect_start_failure badblocks size=1M zoned=false badblocks=10-5
expect_start_failure badblocks size=1M zoned=false badblocks=1,,2
expect_start_failure badblocks size=1M zoned=false badblocks=
expect_start_failure badblocks_once size=1M zoned=false badblocks_once=sometimes
expect_start_failure mbps size=1M zoned=false mbps=-5
expect_start_failure zone_reset_nsec size=1M zone_size=512K zone_reset_nsec=1ms
expect_start_failure no_such_param size=1M zoned=false no_such_param=1
pass "bad parameters refused, each message naming the parameter"
