#!/bin/sh
# Export a running znbd-tcmu backstore over LIO's iSCSI target, with CHAP.
#
#   scripts/export-iscsi.sh NAME --initiator IQN [--user U] [--secret S]
#       [--mutual-user U --mutual-secret S] [--initiator IQN ...]
#       [--target IQN] [--portal ADDRESS:PORT]
#   scripts/export-iscsi.sh --remove NAME [--target IQN]
#
# NAME is the backstore znbd-tcmu serves (configfs target/core/user_*/NAME);
# the script writes configfs directly (as targetcli would; targetcli is not
# needed) and must run as root.  It creates the target (default
# iqn.2003-01.org.linux-iscsi.znbd:NAME, lower case), portal group 1, LUN 0
# on the backstore and a network portal (default 127.0.0.1:3260: anything
# else is the user's decision, the project's tests use only loopback), and
# locks it down:
#   - attrib/authentication 1: every login must pass CHAP (an initiator
#     offering AuthMethod=None is refused);
#   - attrib/generate_node_acls 0 (no demo mode: no ACL, no login),
#     demo_mode_write_protect 1, cache_dynamic_acls 0;
#   - one ACL per --initiator IQN (at least one is required), LUN 0 mapped
#     read-write in it, with its own CHAP user name and secret.
# Options after an --initiator apply to that initiator:
#   --user U            CHAP user name (default: the initiator's IQN)
#   --secret S          CHAP secret (default: 16 random letters and digits
#                       from /dev/urandom); given ones must be 12 to 255
#                       characters without spaces.  A secret on the command
#                       line is visible in ps while the script runs.
#   --mutual-user U, --mutual-secret S
#                       mutual CHAP: the target proves itself to the
#                       initiator with these (either one turns it on; the
#                       user defaults to the target IQN, the secret is
#                       generated); it must differ from the initiator's.
# The credentials are printed once, on stdout, as the open-iscsi node
# settings of each initiator (node.session.auth.*); LIO keeps them in
# configfs, readable by root only.  Nothing else stores them.
#
# --remove NAME tears the target down (ACLs, LUN, portal, portal group,
# target); log the initiators out first.  Remove the target before
# stopping znbd-tcmu: a backstore still linked cannot be removed.
#
# Discovery (SendTargets) is left as LIO has it: it tells anyone who can
# reach the portal the target's name, not its data.  Its CHAP is LIO's
# global target/iscsi/discovery_auth, shared by every target, so this
# script leaves it alone; demo_mode_discovery 0 would hide the name from
# initiators without an ACL, but on Linux 6.1 that path takes a mutex
# under a spinlock (iscsit_build_sendtargets_response()).
# Exit status: 0 done, 1 an error (nothing left half made on creation),
# 2 bad usage.
set -u
export LC_ALL=C
CFG=/sys/kernel/config/target
prog=export-iscsi.sh

die() {
  echo "$prog: $*" >&2
  exit 1
}
usage() {
  [ $# -gt 0 ] && echo "$prog: $*" >&2
  sed -n '4,8s/^#  //p' "$0" >&2
  exit 2
}
# What a value must look like: configfs keeps at most 255 bytes, and a
# value starting with "NULL" means "unset" to LIO.
check_word() {
  case $2 in
    '' | *[!!-~]*) usage "$1 must be printable ASCII without spaces" ;;
    NULL*) usage "$1 must not start with NULL (LIO reads that as unset)" ;;
  esac
  [ "${#2}" -le 255 ] || usage "$1 is longer than 255 characters"
}
check_secret() {
  check_word "$1" "$2"
  [ "${#2}" -ge 12 ] || usage "$1 must have at least 12 characters (a short CHAP secret falls to a dictionary attack on one recorded login)"
}
# 16 letters and digits (95 bits) from /dev/urandom.
gen_secret() {
  s=
  while [ "${#s}" -lt 16 ]; do
    s=$(head -c 512 /dev/urandom | LC_ALL=C tr -dc 'A-Za-z0-9' | head -c 16) || return 1
    case $s in NULL*) s= ;; esac
  done
  printf '%s\n' "$s"
}
# put FILE VALUE: a configfs write, without the newline echo would add
# (LIO keeps a CHAP name or secret byte for byte, newline included).
put() {
  printf '%s' "$2" > "$1" 2> /dev/null || {
    echo "$prog: cannot write $1" >&2 # not the value: it may be a secret
    return 1
  }
}

remove=0
name=
target=
portal=127.0.0.1:3260
n=0 # initiators; their settings in i_<k>, user_<k>, secret_<k>, ...
while [ $# -gt 0 ]; do
  case $1 in
    --remove) remove=1; shift; continue ;;
    -h | --help) usage ;;
    --initiator | --user | --secret | --mutual-user | --mutual-secret | --target | --portal)
      [ $# -ge 2 ] || usage "$1 needs a value" ;;
    -*) usage "unknown option $1" ;;
    *)
      [ -z "$name" ] || usage "one NAME only ('$name', then '$1')"
      name=$1; shift; continue ;;
  esac
  case $1 in
    --target) target=$2 ;;
    --portal) portal=$2 ;;
    --initiator)
      check_word "$1" "$2"
      case $2 in iqn.* | eui.* | naa.*) ;; *) usage "--initiator must be an iqn., eui. or naa. name" ;; esac
      n=$((n + 1))
      eval "i_$n=\$2 user_$n= secret_$n= muser_$n= msecret_$n="
      ;;
    *)
      [ "$n" -gt 0 ] || usage "$1 belongs to an --initiator given before it"
      case $1 in
        --user) check_word "$1" "$2"; eval "user_$n=\$2" ;;
        --secret) check_secret "$1" "$2"; eval "secret_$n=\$2" ;;
        --mutual-user) check_word "$1" "$2"; eval "muser_$n=\$2" ;;
        --mutual-secret) check_secret "$1" "$2"; eval "msecret_$n=\$2" ;;
      esac
      ;;
  esac
  shift 2
done
[ -n "$name" ] || usage "no backstore NAME"
case $name in */* | .* | *[[:space:]]*) usage "bad backstore NAME '$name'" ;; esac
[ -n "$target" ] || target=iqn.2003-01.org.linux-iscsi.znbd:$(printf '%s' "$name" | tr '[:upper:]' '[:lower:]')
case $target in iqn.* | eui.* | naa.*) ;; *) usage "--target must be an iqn., eui. or naa. name" ;; esac
case $portal in
  *:[0-9]*) ;;
  *) usage "--portal must be ADDRESS:PORT (IPv6: [ADDRESS]:PORT)" ;;
esac

[ "$(id -u)" = 0 ] || die "must run as root (it writes configfs)"
grep -qs ' configfs ' /proc/mounts ||
  die "configfs is not mounted at ${CFG%/target} (mount -t configfs none ${CFG%/target})"
# The fabric's directory appears when it is made (configfs loads the
# module then); target_core_mod must be there first.
[ -d "$CFG" ] || modprobe target_core_mod 2> /dev/null
[ -d "$CFG" ] || die "no LIO target in configfs ($CFG): modprobe target_core_mod failed"
[ -d "$CFG/iscsi" ] || modprobe iscsi_target_mod 2> /dev/null
[ -d "$CFG/iscsi" ] || mkdir "$CFG/iscsi" 2> /dev/null ||
  die "no LIO iSCSI target in $CFG/iscsi (modprobe iscsi_target_mod failed: is it built for this kernel?)"
TGT=$CFG/iscsi/$target
TPG=$TGT/tpgt_1

# --------------------------------------------------------------- removal
teardown() {
  ok=0
  for acl in "$TPG"/acls/*; do
    [ -d "$acl" ] || continue
    for ml in "$acl"/lun_*; do
      [ -d "$ml" ] || continue
      for l in "$ml"/*; do [ -L "$l" ] && { rm "$l" || ok=1; }; done
      rmdir "$ml" || ok=1
    done
    rmdir "$acl" || ok=1
  done
  for lun in "$TPG"/lun/lun_*; do
    [ -d "$lun" ] || continue
    for l in "$lun"/*; do [ -L "$l" ] && { rm "$l" || ok=1; }; done
    rmdir "$lun" || ok=1
  done
  for np in "$TPG"/np/*; do [ -d "$np" ] && { rmdir "$np" || ok=1; }; done
  [ ! -d "$TPG" ] || rmdir "$TPG" || ok=1
  [ ! -d "$TGT" ] || rmdir "$TGT" || ok=1
  return $ok
}
if [ "$remove" = 1 ]; then
  [ "$n" = 0 ] || usage "--remove takes no --initiator"
  [ -d "$TGT" ] || die "no iSCSI target $target in $CFG/iscsi"
  teardown || die "could not remove all of $TGT (initiators still logged in?)"
  echo "removed iSCSI target $target"
  exit 0
fi

# -------------------------------------------------------------- creation
[ "$n" -gt 0 ] || usage "at least one --initiator IQN is required (one ACL each)"
bs=
for d in "$CFG"/core/user_*/"$name"; do [ -d "$d" ] && bs=$d && break; done
[ -n "$bs" ] ||
  die "no znbd-tcmu backstore '$name' (no $CFG/core/user_*/$name): start znbd-tcmu $name first"
[ "$(cat "$bs/enable" 2> /dev/null)" = 1 ] || die "backstore $bs is not enabled"
[ ! -e "$TGT" ] || die "iSCSI target $target exists already (--remove it first)"

i='' u='' s='' mu='' ms=''
k=1
while [ "$k" -le "$n" ]; do
  eval "i=\$i_$k u=\$user_$k s=\$secret_$k mu=\$muser_$k ms=\$msecret_$k"
  [ -n "$u" ] || eval "user_$k=\$i"
  [ -n "$s" ] || { s=$(gen_secret) && eval "secret_$k=\$s"; } || die "cannot read /dev/urandom"
  if [ -n "$mu$ms" ]; then
    [ -n "$mu" ] || eval "muser_$k=\$target"
    [ -n "$ms" ] || { ms=$(gen_secret) && eval "msecret_$k=\$ms"; } || die "cannot read /dev/urandom"
    [ "$ms" != "$s" ] || usage "the mutual secret of $i must differ from its secret"
  fi
  k=$((k + 1))
done

create() {
  mkdir -p "$TPG/lun/lun_0" &&
    ln -s "$bs" "$TPG/lun/lun_0/$name" &&
    mkdir "$TPG/np/$portal" || return 1
  put "$TPG/attrib/authentication" 1 &&
    put "$TPG/attrib/generate_node_acls" 0 &&
    put "$TPG/attrib/cache_dynamic_acls" 0 &&
    put "$TPG/attrib/demo_mode_write_protect" 1 &&
    put "$TPG/param/AuthMethod" CHAP || return 1
  k=1
  while [ "$k" -le "$n" ]; do
    eval "i=\$i_$k u=\$user_$k s=\$secret_$k mu=\$muser_$k ms=\$msecret_$k"
    acl=$TPG/acls/$i
    mkdir -p "$acl/lun_0" &&
      ln -s "$TPG/lun/lun_0" "$acl/lun_0/$name" &&
      put "$acl/lun_0/write_protect" 0 &&
      put "$acl/auth/userid" "$u" && put "$acl/auth/password" "$s" || return 1
    if [ -n "$mu" ]; then
      put "$acl/auth/userid_mutual" "$mu" && put "$acl/auth/password_mutual" "$ms" || return 1
    fi
    k=$((k + 1))
  done
  put "$TPG/enable" 1
}
if ! create; then
  teardown 2> /dev/null
  die "could not create $TGT (nothing left of it; dmesg may say why)"
fi

echo "iSCSI target $target, portal $portal, LUN 0 = $bs"
echo "CHAP required; the credentials below are shown only this once."
k=1
while [ "$k" -le "$n" ]; do
  eval "i=\$i_$k u=\$user_$k s=\$secret_$k mu=\$muser_$k ms=\$msecret_$k"
  echo "# initiator $i"
  echo "node.session.auth.authmethod = CHAP"
  echo "node.session.auth.username = $u"
  echo "node.session.auth.password = $s"
  if [ -n "$mu" ]; then
    echo "node.session.auth.username_in = $mu"
    echo "node.session.auth.password_in = $ms"
  fi
  k=$((k + 1))
done
