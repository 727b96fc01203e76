# shellcheck shell=bash
# Sourced by the scripts that fetch from Debian's archive without touching
# the machine's apt state (fetch-kernel.sh, build-zloop.sh,
# fetch-tools.sh): which archive the machine uses, and apt-get/apt-cache
# options for a private state (lists, cache, source list) in a folder of
# znbd's.

# The machine's Debian archive: the first deb entry (one-line or deb822)
# with a plain Debian suite (not -security), and its keyring if it names
# a file.  Output: "URI KEYRING" (KEYRING "-" if none).
debian_entry() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" {
      i = 2; key = "-"
      if ($i ~ /^\[/) {
        for (; i <= NF; i++) {
          if ($i ~ /^\[?signed-by=/) { key = $i; sub(/^\[?signed-by=/, "", key); sub(/\]$/, "", key) }
          if ($i ~ /\]$/) { i++; break }
        }
      }
      if ($(i + 1) ~ /^(bookworm|trixie|forky|stable|oldstable|testing)(-updates|-backports)?$/) { print $i, key; exit }
    }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled !~ /^[Nn]o/ && uri != "")
          if (suites ~ /(^| )(bookworm|trixie|forky|stable|oldstable|testing)(-updates|-backports)?( |$)/) { print uri, (key ~ /^\// ? key : "-"); found = 1; exit }
        types = uri = suites = enabled = ""; key = "-"
      }
      BEGIN { key = "-" }
      /^[ \t]*$/ { flush(); next }
      /^[Tt]ypes:/ { sub(/^[^:]*:[ \t]*/, ""); types = $0 }
      /^URIs:/ { sub(/^[^:]*:[ \t]*/, ""); uri = $1 }
      /^Suites:/ { sub(/^[^:]*:[ \t]*/, ""); suites = $0 }
      /^Enabled:/ { sub(/^[^:]*:[ \t]*/, ""); enabled = $0 }
      /^Signed-By:/ { sub(/^[^:]*:[ \t]*/, ""); key = $0 }
      END { if (!found) flush() }' "$f"
  done
}
# debian_archive: set uri and key (a keyring file, or empty) from
# debian_entry; status 1 if the machine has no Debian entry.
debian_archive() {
  read -r uri key < <(debian_entry | head -n 1)
  [ -n "${uri:-}" ] || return 1
  uri=${uri%/}
  if [ "$key" = - ] || [ ! -r "$key" ]; then
    key=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -r "$key" ] || key=
  fi
}

# private_apt DIR "TYPE SUITE"...: a private apt state in DIR whose source
# list has one line "TYPE URI SUITE main" each (TYPE deb or deb-src; uri
# and key from debian_archive); sets aptopts for apt-get and apt-cache,
# and apt_dir.  Status 1 if DIR cannot be made.
private_apt() {
  local dir=$1 opt=${key:+[signed-by=$key] } e
  shift
  apt_dir=$dir
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" || return 1
  for e in "$@"; do
    echo "${e%% *} ${opt}$uri ${e#* } main"
  done > "$dir/sources.list" || return 1
  aptopts=(-q -o "Dir::State::Lists=$dir/lists" -o "Dir::Etc::SourceList=$dir/sources.list"
    -o Dir::Etc::SourceParts=/dev/null -o "Dir::Cache=$dir/cache"
    -o Acquire::Retries=2 -o Acquire::http::Timeout=30 -o Acquire::https::Timeout=30)
}

# private_update KIND: apt-get update of that private state, bounded in
# time, its lists of KIND (Packages or Sources) fetched again.  apt-get
# update may exit 0 when a fetch failed (a warning only), and one suite
# may fail (say, bookworm-backports retired) with another there: what
# counts is whether a list came (so none is kept from a run before).
# Status 1, and why in $why, if none came.
private_update() {
  local rc
  rm -f "$apt_dir"/lists/*_"$1"*
  timeout -k 10 180 apt-get "${aptopts[@]}" update > "$apt_dir/update.log" 2>&1
  rc=$?
  ls "$apt_dir"/lists/*_"$1"* > /dev/null 2>&1 && return 0
  why="status $rc$([ $rc = 124 ] && echo ', timed out'): $(grep -m1 -E '^(E|W|Err):' "$apt_dir/update.log" || echo 'no message')"
  return 1
}
