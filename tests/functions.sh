# znbd test helpers, sourced by every shell test:
#
#   . "$(dirname "$0")/../functions.sh"
#
# Gives: strict bash, /usr/bin first in PATH (Debian's python3 has the nbd
# module), a private temporary directory $tmpdir removed on exit, and
#
#   start_frontend key=value...   start the device server chosen by
#                                 $ZNBD_FRONTEND and wait until it serves
#                                 (and its zone_control= socket is there);
#                                 sets $sock, $uri, $server_pid, $server_log
#                                 (ZNBD_TCP=1: on 127.0.0.1, random port)
#   stop_frontend                 stop it (also done on exit); fails the test
#                                 if the server log shows a sanitizer report
#   frontend_alive                true while the server process runs
#   expect_start_failure NAME key=value...
#                                 the front-end must refuse to start with
#                                 these parameters, non-zero, naming NAME
#   die MSG / skip MSG / pass MSG / note MSG
#   require TOOL...               skip (77) unless every TOOL is in PATH
#   require_python_nbd            skip unless /usr/bin/python3 has nbd
#   fuzz_run DIR PROGRAM RUNS MAX_LEN SEEDS
#                                 build a libFuzzer harness and run RUNS
#                                 inputs of it; dies on a crash
#   nbd_py [ARGS] <<'EOF'         run Python with tests/znbdtest.py on the
#                                 path and $uri in the environment
#   run_fio NAME FIO-ARGS...      fio --output-format=json into
#                                 $tmpdir/NAME.json; dies if fio fails
#   fio_get NAME PATH             one number from that JSON, PATH like
#                                 jobs.0.write.io_bytes
#   random_file FILE SIZE         SIZE bytes from /dev/urandom (SIZE in bytes
#                                 or with K/M suffix as dd's iflag=fullblock)
#
# Front-ends ($ZNBD_FRONTEND):
#   plugin  (default) nbdkit -f -U SOCK -P PIDFILE $top_builddir/zoned.so ...
#   bio, mq           $top_builddir/server/znbd -f -U SOCK -P PIDFILE
#                     --queue-mode=bio|mq ...
#   memory            nbdkit memory size=... (development stand-in: only
#                     size= is passed on, other parameters are ignored)
# A front-end whose binary is not built makes the test skip (77).
#
# ZNBD_TLS=psk: the front-ends (plugin, bio, mq) serve with --tls=require
# --tls-psk=$tmpdir/tls.psk (identity znbd, made by psktool) and $uri is
# the nbds:// URI naming that file, so a test written for plain NBD runs
# unchanged over TLS (tests/nbd: TEST.tlsplugin, TEST.tlsbio, TEST.tlsmq).
#
# ZNBD_STORE=dir: every start_frontend / expect_start_failure of a znbd
# front-end gets dir=$tmpdir/storeN (a new directory each time) unless
# the test passes dir= or memory_backed=false itself, and blocksize=512
# unless it passes blocksize=, so a test written for the RAM store runs
# unchanged on the directory store.
#
# Environment from tests/env.am (AM_TESTS_ENVIRONMENT): top_builddir,
# top_srcdir, builddir, srcdir (absolute), ZNBD_SANITIZERS=yes|no.  When a
# test is run by hand they default to the source tree and $top_srcdir/build
# (or $BUILD).  ZNBD_KEEP_TMP=1 keeps $tmpdir; ZNBD_START_TIMEOUT (seconds,
# default 10, 30 with sanitizers) bounds the wait for a server to serve.

set -euo pipefail
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
export LC_ALL=C

test_name=$(basename "$0")
test_name=${test_name%.sh}

: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${top_builddir:=${BUILD:-$top_srcdir/build}}"
: "${srcdir:=$(cd "$(dirname "$0")" && pwd)}"
: "${builddir:=$PWD}"
: "${ZNBD_SANITIZERS:=no}"
: "${ZNBD_FRONTEND:=plugin}"
export top_srcdir top_builddir srcdir builddir ZNBD_SANITIZERS ZNBD_FRONTEND test_name

# ---------------------------------------------------------------- messages
note() { echo "$test_name [$ZNBD_FRONTEND]: $*"; }
die() {
  echo "$test_name [$ZNBD_FRONTEND]: FAIL: $*" >&2
  exit 1
}
skip() {
  echo "$test_name [$ZNBD_FRONTEND]: SKIP: $*"
  exit 77
}
pass() { echo "$test_name [$ZNBD_FRONTEND]: ok: $*"; }

require() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || skip "$t is not installed"
  done
}

# fuzz_run DIR TARGET RUNS MAX_LEN SEEDS: build the libFuzzer harness
# TARGET with `make -C $top_builddir/DIR TARGET`, then run it for RUNS
# inputs of at most MAX_LEN bytes from the seed corpus SEEDS (a
# directory of the source tree), seed 1, in $tmpdir.  Skips when clang
# has no libFuzzer; fails on a crash, sanitizer report or broken
# invariant (the harness aborts), printing the log's end.
fuzz_run() {
  local dir=$1 target=$2 runs=$3 max_len=$4 seeds=$5
  require clang
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}\n' \
    >"$tmpdir/t.c"
  clang -fsanitize=fuzzer "$tmpdir/t.c" -o "$tmpdir/t" 2>/dev/null ||
    skip "clang lacks libFuzzer (-fsanitize=fuzzer); install libclang-rt-dev"
  make -s -C "$top_builddir/$dir" "$target" >"$tmpdir/build.log" 2>&1 ||
    { cat "$tmpdir/build.log"; die "building $target failed"; }
  mkdir -p "$tmpdir/corpus"
  (cd "$tmpdir" && "$top_builddir/$dir/$target" -runs="$runs" \
    -max_len="$max_len" -seed=1 "$tmpdir/corpus" "$seeds") \
    >"$tmpdir/fuzz.log" 2>&1 ||
    { tail -40 "$tmpdir/fuzz.log"; die "$target found a crash"; }
  grep -E '^Done [0-9]+ runs' "$tmpdir/fuzz.log" || die "$target did not finish"
  note "$(grep -c . "$tmpdir/fuzz.log") log lines, $(ls "$tmpdir/corpus" | wc -l) new corpus units"
}

require_python_nbd() {
  /usr/bin/python3 -c 'import nbd' 2>/dev/null ||
    skip "/usr/bin/python3 has no nbd module (apt-get install python3-libnbd)"
}

# ------------------------------------------------------------ temp + cleanup
tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/znbd-$test_name.XXXXXX")
export tmpdir
_cleanup_hooks=()

# on_exit CMD...: run CMD when the test exits (before $tmpdir goes).
on_exit() { _cleanup_hooks+=("$*"); }

_cleanup() {
  local rc=$? h
  trap - EXIT INT TERM
  for h in "${_cleanup_hooks[@]+"${_cleanup_hooks[@]}"}"; do
    eval "$h" || true
  done
  if [ -n "${server_pid:-}" ]; then
    _stop_server || true
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -s "${server_log:-/dev/null}" ]; then
      echo "--- server log ($server_log) ---" >&2
      tail -n 50 "$server_log" >&2 || true
    fi
  fi
  if [ "${ZNBD_KEEP_TMP:-0}" = 1 ]; then
    echo "$test_name: kept $tmpdir" >&2
  else
    rm -rf "$tmpdir"
  fi
  exit "$rc"
}
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Work inside $tmpdir: files tools drop in the current directory (fio's
# *-verify.state) go away with it instead of littering the build tree.
cd "$tmpdir"

# ---------------------------------------------------------------- front-ends
# The plugin: the top of the build tree (as the README says), else libtool's
# .libs; $ZNBD_PLUGIN overrides.
_plugin_path() {
  local p
  for p in "${ZNBD_PLUGIN:-}" "$top_builddir/zoned.so" \
    "$top_builddir/plugin/.libs/nbdkit-zoned-plugin.so"; do
    if [ -n "$p" ] && [ -f "$p" ]; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
_server_path() {
  local p=${ZNBD_SERVER:-$top_builddir/server/znbd}
  [ -x "$p" ] && echo "$p"
}

# _nbdkit_env: start _cmd with what nbdkit needs to load a sanitizer-built
# plugin (nbdkit itself is not instrumented: ASan's runtime must come
# first, and leak checking of nbdkit's own allocations is off).
_nbdkit_env() {
  _cmd=()
  if [ "$ZNBD_SANITIZERS" = yes ]; then
    _cmd=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so)"
      "ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
  fi
}

# run_nbdkit ARGS...: nbdkit with the plugin-loading environment above.
run_nbdkit() {
  _nbdkit_env
  "${_cmd[@]}" nbdkit "$@"
}

# frontend_cmd key=value...: fill the array _cmd with the command line that
# serves on $sock with pidfile $pidfile.  Skips if the binary is not built.
_frontend_cmd() {
  local plugin server a
  _cmd=()
  if [ -n "${_tcp_port:-}" ]; then
    _listen=(-i 127.0.0.1 -p "$_tcp_port")
  else
    _listen=(-U "$sock")
  fi
  if [ "${ZNBD_STORE:-ram}" = dir ] && [ "$ZNBD_FRONTEND" != memory ]; then
    case " $* " in
    *" dir="* | *" memory_backed=false "* | *" memory_backed=0 "*) ;;
    *) set -- "$@" "dir=$tmpdir/store$_nservers" ;;
    esac
    # The RAM store's default block size (dir= defaults to the file
    # system's, 4096 on most), so the test's 512-byte requests mean the same.
    case " $* " in
    *" blocksize="*) ;;
    *) set -- "$@" blocksize=512 ;;
    esac
  fi
  _tls=()
  if [ "${ZNBD_TLS:-}" = psk ] && [ "$ZNBD_FRONTEND" != memory ]; then
    if [ ! -s "$tmpdir/tls.psk" ]; then
      require psktool
      psktool -u znbd -p "$tmpdir/tls.psk" >/dev/null 2>&1 ||
        die "psktool could not make $tmpdir/tls.psk"
    fi
    _tls=(--tls=require --tls-psk="$tmpdir/tls.psk")
  fi
  case "$ZNBD_FRONTEND" in
  plugin)
    require nbdkit
    plugin=$(_plugin_path) ||
      skip "front-end plugin: zoned.so is not built yet (no $top_builddir/zoned.so)"
    _nbdkit_env
    # shellcheck disable=SC2206 # ZNBD_NBDKIT_OPTS: extra nbdkit options, split on spaces
    _cmd+=(nbdkit --exit-with-parent -f "${_listen[@]}" -P "$pidfile" "${_tls[@]}" ${ZNBD_NBDKIT_OPTS:-} ${ZNBD_FRONTEND_OPTS:-} "$plugin" "$@")
    ;;
  bio | mq)
    server=$(_server_path) ||
      skip "front-end $ZNBD_FRONTEND: server/znbd is not built yet ($top_builddir/server/znbd)"
    if [ "${#_tls[@]}" -gt 0 ] && "$server" --help | grep -q 'built without GnuTLS'; then
      skip "front-end $ZNBD_FRONTEND over TLS: server/znbd was built without GnuTLS"
    fi
    if [ "$ZNBD_SANITIZERS" = yes ]; then
      _cmd=(env "ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
    fi
    # shellcheck disable=SC2206 # ZNBD_FRONTEND_OPTS: options, split on spaces
    _cmd+=("$server" -f "${_listen[@]}" -P "$pidfile" --queue-mode="$ZNBD_FRONTEND" "${_tls[@]}" ${ZNBD_FRONTEND_OPTS:-} "$@")
    ;;
  memory)
    require nbdkit
    # shellcheck disable=SC2206
    _cmd=(nbdkit --exit-with-parent -f "${_listen[@]}" -P "$pidfile" ${ZNBD_NBDKIT_OPTS:-} ${ZNBD_FRONTEND_OPTS:-} memory)
    for a in "$@"; do
      case "$a" in size=*) _cmd+=("$a") ;; esac
    done
    ;;
  *)
    die "unknown ZNBD_FRONTEND=$ZNBD_FRONTEND (plugin, bio, mq or memory)"
    ;;
  esac
}

# frontend_help: the front-end's help text on stdout (nbdkit PLUGIN --help,
# znbd --help), exit status of that command.
frontend_help() {
  local p
  case "$ZNBD_FRONTEND" in
  plugin)
    p=$(_plugin_path) || skip "front-end plugin: zoned.so is not built yet"
    run_nbdkit "$p" --help
    ;;
  bio | mq)
    p=$(_server_path) || skip "front-end $ZNBD_FRONTEND: server/znbd is not built yet"
    "$p" --help
    ;;
  *) skip "no help text for front-end $ZNBD_FRONTEND" ;;
  esac
}

# Fail early (skip) when this front-end is not built, before doing work.
frontend_available() {
  local sock=/nonexistent pidfile=/nonexistent
  _frontend_cmd size=1M
}

# Byte granularity of allocation in base:allocation for this front-end:
# the RAM store's page (lib/store.h), nbdkit memory's 32 KiB.
frontend_page_size() {
  if [ "$ZNBD_FRONTEND" = memory ]; then echo 32768; else echo 4096; fi
}

# true for front-ends running the znbd core (not the nbdkit memory stand-in)
frontend_is_znbd() { [ "$ZNBD_FRONTEND" != memory ]; }

# Skip a test that checks behaviour the memory stand-in does not have.
require_znbd_frontend() {
  frontend_is_znbd || skip "nbdkit memory stand-in lacks this: $*"
}

_nservers=0
# _try_start key=value...: start once; 0 serving, 1 exited before serving
# (status in _start_rc), dies on timeout.
_try_start() {
  _nservers=$((_nservers + 1))
  sock=$tmpdir/sock$_nservers
  pidfile=$tmpdir/pid$_nservers
  server_log=$tmpdir/server$_nservers.log
  rm -f "$sock" "$pidfile"
  _frontend_cmd "$@"
  note "starting: ${_cmd[*]}"
  "${_cmd[@]}" >"$server_log" 2>&1 </dev/null &
  server_pid=$!
  if [ "${#_tls[@]}" -gt 0 ] && [ -n "${_tcp_port:-}" ]; then
    uri="nbds://znbd@127.0.0.1:$_tcp_port/?tls-psk-file=$tmpdir/tls.psk"
  elif [ "${#_tls[@]}" -gt 0 ]; then
    uri="nbds+unix://znbd@/?socket=$sock&tls-psk-file=$tmpdir/tls.psk"
  elif [ -n "${_tcp_port:-}" ]; then
    uri="nbd://127.0.0.1:$_tcp_port"
  else
    uri="nbd+unix:///?socket=$sock"
  fi
  export sock uri server_pid server_log

  local timeout=${ZNBD_START_TIMEOUT:-}
  if [ -z "$timeout" ]; then
    if [ "$ZNBD_SANITIZERS" = yes ]; then timeout=30; else timeout=10; fi
  fi
  # zone_control=PATH: that socket too.  nbdkit writes its pidfile before
  # the plugin's after_fork, which opens the control socket, so a test
  # that asks it at once could otherwise find nothing there yet.
  local a ctl_sock=
  if [ "$ZNBD_FRONTEND" != memory ]; then
    for a in "$@"; do
      case "$a" in zone_control=?*) ctl_sock=${a#zone_control=} ;; esac
    done
  fi
  local i n=$((timeout * 20))
  for ((i = 0; i < n; i++)); do
    if [ -s "$pidfile" ] && { [ -n "${_tcp_port:-}" ] || [ -S "$sock" ]; } &&
      { [ -z "$ctl_sock" ] || [ -S "$ctl_sock" ]; }; then
      return 0
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
      _start_rc=0
      wait "$server_pid" || _start_rc=$?
      server_pid=
      return 1
    fi
    sleep 0.05
  done
  echo "--- server log ---" >&2
  cat "$server_log" >&2
  die "front-end $ZNBD_FRONTEND did not serve on ${_tcp_port:+127.0.0.1:}${_tcp_port:-$sock}${ctl_sock:+ (control socket $ctl_sock)} within ${timeout}s"
}

# start_frontend key=value...: serve on a Unix socket in $tmpdir, or with
# ZNBD_TCP=1 on 127.0.0.1 at a random port (retried if taken).
start_frontend() {
  [ -z "${server_pid:-}" ] || die "start_frontend: a front-end is already running (pid $server_pid)"
  local try tries=1
  _tcp_port=
  [ "${ZNBD_TCP:-0}" = 1 ] && tries=5
  for ((try = 1; try <= tries; try++)); do
    [ "${ZNBD_TCP:-0}" = 1 ] && _tcp_port=$((20000 + RANDOM % 40000))
    _try_start "$@" && return 0
    if [ -n "$_tcp_port" ] && grep -qi 'in use' "$server_log"; then
      note "port $_tcp_port taken, trying another"
      continue
    fi
    break
  done
  echo "--- server log ---" >&2
  cat "$server_log" >&2
  die "front-end $ZNBD_FRONTEND exited with status $_start_rc before serving"
}

frontend_alive() { [ -n "${server_pid:-}" ] && kill -0 "$server_pid" 2>/dev/null; }

# Stop the server: SIGTERM, then SIGKILL after 5 s.  Returns its status.
_stop_server() {
  local pid=$server_pid i rc=0
  server_pid=
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$test_name: server $pid ignored SIGTERM for 5 s, killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  return "$rc"
}

# Sanitizer reports (ASan, UBSan) in the server log fail the test.
check_server_log() {
  local log=${1:-$server_log}
  if grep -E -q 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$log"; then
    cat "$log" >&2
    die "sanitizer report in the server log"
  fi
}

stop_frontend() {
  [ -n "${server_pid:-}" ] || return 0
  frontend_alive || {
    cat "$server_log" >&2
    server_pid=
    die "front-end $ZNBD_FRONTEND died while serving"
  }
  _stop_server || true
  check_server_log
}

# expect_start_failure NAME key=value...: starting with these parameters must
# fail (non-zero exit, within the start timeout) with NAME in the message.
expect_start_failure() {
  local name=$1 rc=0 log _tcp_port=
  shift
  _nservers=$((_nservers + 1))
  local sock=$tmpdir/sock$_nservers pidfile=$tmpdir/pid$_nservers
  log=$tmpdir/start-failure$_nservers.log
  _frontend_cmd "$@"
  timeout --kill-after=2 "${ZNBD_START_TIMEOUT:-10}" "${_cmd[@]}" >"$log" 2>&1 </dev/null || rc=$?
  if [ "$rc" -eq 0 ]; then
    cat "$log" >&2
    die "start with '$*' exited 0; expected a refusal naming $name"
  fi
  if { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ "$ZNBD_SANITIZERS" = yes ] &&
    [ "$ZNBD_FRONTEND" = plugin ] && [ ! -S "$sock" ] &&
    grep -q -- "nbdkit: error: .*$name" "$log"; then
    # nbdkit (not built with ASan, ASan preloaded) that refused with a
    # strerror() message deadlocks in its exit handlers (p11-kit's
    # destructor waits for glibc's locale lock); nbdkit's own file plugin
    # does the same (file=/nonexistent).  It refused before serving: that
    # is what is checked here.
    rc=1
    note "nbdkit with ASan preloaded hung in exit() after refusing; counted as the refusal"
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    cat "$log" >&2
    die "start with '$*' kept running (served?); expected a refusal naming $name"
  fi
  [ ! -S "$sock" ] || die "start with '$*' created its socket before refusing"
  check_server_log "$log"
  if ! grep -q -- "$name" "$log"; then
    cat "$log" >&2
    die "start with '$*' failed (status $rc) but the message does not name '$name'"
  fi
  note "refused '$*' (status $rc): $(grep -m1 -- "$name" "$log")"
}

# ------------------------------------------------------------------- python
# nbd_py [ARGS...] <<'EOF' ... EOF: Python 3 (Debian's, with the nbd module)
# with tests/ on sys.path, so `from znbdtest import *` gives the helpers.
nbd_py() {
  require_python_nbd
  PYTHONPATH="$top_srcdir/tests${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 - "$@"
}

# ---------------------------------------------------------------------- fio
run_fio() {
  local name=$1
  shift
  require fio
  local out=$tmpdir/$name.json rc=0
  fio --output-format=json --output="$out" --name="$name" "$@" \
    >"$tmpdir/$name.fio.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$tmpdir/$name.fio.log" "$out" >&2 2>/dev/null || true
    die "fio $name exited with status $rc"
  fi
}

# fio_get NAME PATH: PATH is dot-separated keys and list indices into the JSON
# of run_fio NAME, e.g. jobs.0.write.io_bytes.
fio_get() {
  /usr/bin/python3 - "$tmpdir/$1.json" "$2" <<'EOF'
import json, sys
with open(sys.argv[1]) as f:
    text = f.read()
# fio may print lines (e.g. "fio: connected to NBD server") before the JSON.
v = json.loads(text[text.index("{"):])
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)
EOF
}

# ------------------------------------------------------------------- files
random_file() {
  head -c "$2" /dev/urandom >"$1"
  [ "$(stat -c %s "$1")" -eq "$(numfmt --from=iec "$2")" ] || die "random_file: short file $1"
}
