# shellcheck shell=bash
# Sourced by netns_cluster.sh (beside it), never run: the helpers of its
# commands. They read the script's settings (ID, PREFIX, STATE, STATE_ROOT,
# INSECURE, NUM_SERVERS, PORT) and call its die.
#   - names: a host's namespace (ns_of) and bridge-side interface (veth_of);
#   - the cluster's state folder: the namespaces it created (owned), its
#     config and hosts (require_state, hosts, addr_of, require_host);
#   - whether namespaces, veth pairs and bridges can be made here (why_not);
#   - a free /24 (subnet_taken, pick_subnet), a namespace (add_ns), a process
#     inside one (start), the servers' list and TLS flags (server_list, tls).
# shellcheck disable=SC2154  # the settings above are assigned by netns_cluster.sh

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

# tls NAME: the TLS flags of certificate NAME (server-<i>, worker-<i>, admin)
# of the cluster; with --insecure, --insecure (plaintext to and from the
# namespaces' addresses, which are not loopback).
tls() {
  if [ "$INSECURE" -eq 1 ]; then echo --insecure; return 0; fi
  printf '%s\n' "--tls_ca=$STATE/certs/ca.pem" "--tls_cert=$STATE/certs/$1.pem" "--tls_key=$STATE/certs/$1.key"
}

ns_of() { echo "$PREFIX$1"; }
# The bridge-side end of HOST's cable: s<i> or w<i> (interface names are short).
veth_of() {
  case "$1" in
    ps-server-*) echo "s${1#ps-server-}" ;;
    ps-worker-*) echo "w${1#ps-worker-}" ;;
  esac
}

# --- state -----------------------------------------------------------------
# $STATE/namespaces: one "NAME INODE" line per namespace that up created.
# $STATE/hosts: "HOST ADDRESS" per host; $STATE/config: key=value lines.
# $STATE/logs/HOST.log, $STATE/run/HOST.rc (exit status once it exited),
# $STATE/run/HOST.cmd (its command line, for restart).

ns_inode() { stat -L -c %i "/run/netns/$1" 2>/dev/null; }

# owned NS: true iff NS carries our prefix, is recorded in our state and is
# still the namespace (same inode) that we created.
owned() {
  local ns="$1" name inode
  [[ "$ns" == "$PREFIX"* ]] || return 1
  [ -f "$STATE/namespaces" ] || return 1
  while read -r name inode; do
    if [ "$name" = "$ns" ]; then
      [ "$(ns_inode "$ns")" = "$inode" ] && return 0
      return 1
    fi
  done <"$STATE/namespaces"
  return 1
}

require_state() {
  [ -f "$STATE/config" ] || die "no cluster '$ID' (no $STATE/config); start one with: $0 up --id=$ID"
  # shellcheck disable=SC1091
  source "$STATE/config"
}

hosts() { awk '{print $1}' "$STATE/hosts"; }
addr_of() { awk -v h="$1" '$1 == h {print $2}' "$STATE/hosts"; }
require_host() {
  [ -n "$(addr_of "$1")" ] || die "no host '$1' in cluster '$ID' (hosts: $(hosts | tr '\n' ' '))"
}

# --- check -------------------------------------------------------------------

# Prints why this machine cannot run a cluster, or nothing if it can.
why_not() {
  if [ "$(id -u)" -ne 0 ]; then echo "not root (uid $(id -u)): network namespaces need root"; return; fi
  if ! command -v ip >/dev/null; then echo "'ip' not found: install iproute2"; return; fi
  local probe="${PREFIX}probe$$" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "cannot create a network namespace (ip netns add: $err)"; return
  fi
  if ! err=$(ip -n "$probe" link add pa type veth peer name pb 2>&1 &&
             ip -n "$probe" link add pbr type bridge 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    echo "cannot create veth pairs or bridges in a namespace ($err)"; return
  fi
  ip netns del "$probe"
}

# --- up ----------------------------------------------------------------------

ip2int() { local IFS=.; set -- $1; echo $(( ($1 << 24) | ($2 << 16) | ($3 << 8) | $4 )); }

# True iff A.B.C.0/24 overlaps an IPv4 address or route of the root namespace
# (the default route aside) or the subnet of another cluster under STATE_ROOT.
subnet_taken() {
  local lo hi cidr net len n_lo n_hi
  lo=$(ip2int "$1.0"); hi=$((lo + 255))
  while read -r cidr; do
    [[ "$cidr" =~ ^([0-9.]+)(/([0-9]+))?$ ]] || continue
    net=${BASH_REMATCH[1]}; len=${BASH_REMATCH[3]:-32}
    [ "$len" -gt 0 ] || continue
    n_lo=$(( $(ip2int "$net") & ~((1 << (32 - len)) - 1) & 0xffffffff ))
    n_hi=$(( n_lo + (1 << (32 - len)) - 1 ))
    [ $n_lo -le $hi ] && [ $lo -le $n_hi ] && return 0
  done < <(ip -4 -o addr show | awk '{print $4}'
           # A route line starts with its prefix, or with its type and then the prefix.
           ip -4 route show table all | awk '$1 ~ /^[0-9]/ {print $1} $1 !~ /^[0-9]/ && $2 ~ /^[0-9]/ {print $2}')
  grep -qsxF "SUBNET=$1" "$STATE_ROOT"/*/config && return 0
  return 1
}

pick_subnet() {
  local x
  for x in $(seq 0 255); do
    subnet_taken "10.213.$x" || { echo "10.213.$x"; return; }
  done
  die "every 10.213.X.0/24 is in use; pass --subnet=A.B.C"
}

# add_ns NAME: creates a namespace, records it, turns IPv6 off in it (so that
# its only addresses are 127.0.0.1 and its test address) and brings lo up.
add_ns() {
  local ns="$1"
  ip netns add "$ns" || die "cannot create network namespace $ns"
  echo "$ns $(ns_inode "$ns")" >>"$STATE/namespaces"
  if [ -d /proc/sys/net/ipv6 ]; then
    ip netns exec "$ns" sh -c 'for f in all default; do echo 1 > /proc/sys/net/ipv6/conf/$f/disable_ipv6; done'
  fi
  ip -n "$ns" link set lo up
}

# start HOST BINARY ARGS...: runs BINARY inside HOST's namespace with its output
# in logs/HOST.log and, once it exits, its status in run/HOST.rc. The process
# stays in this script's process group (so a test runner's kill reaches it)
# but ignores SIGHUP, so it outlives the terminal that ran `up`.
start() {
  local host="$1"; shift
  printf '%q ' "$@" >"$STATE/run/$host.cmd"
  (
    trap '' HUP
    rc=0
    ip netns exec "$(ns_of "$host")" "$@" >>"$STATE/logs/$host.log" 2>&1 </dev/null || rc=$?
    # Readers wait for the file to exist: it must appear whole.
    echo "$rc" >"$STATE/run/$host.rc.tmp" && mv "$STATE/run/$host.rc.tmp" "$STATE/run/$host.rc"
  ) >/dev/null 2>&1 &  # holds no pipe of the caller open (`up | tee` returns)
  echo $! >"$STATE/run/$host.pid"
}

server_list() {
  local s out=()
  for ((s = 0; s < NUM_SERVERS; s++)); do out+=("ps-server-$s:$PORT"); done
  (IFS=,; echo "${out[*]}")
}
