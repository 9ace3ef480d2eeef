#!/usr/bin/env bash
# Multi-host test cluster on one Linux machine: the docker-compose topology
# (ps-server-0..S-1, ps-worker-0..W-1) with one network namespace per host,
# all joined by a bridge that lives in a namespace of its own, on a private
# /24 that no route or address of this machine uses. The real binaries run
# inside the namespaces and reach each other by the compose names, which each
# host's /etc/hosts (/etc/netns/NS/hosts, bind-mounted by `ip netns exec`)
# resolves. Nothing is created in the root network namespace.
#
#   deploy/netns_cluster.sh up --mode=sync -- --epochs=1
#   deploy/netns_cluster.sh wait --timeout=300
#   deploy/netns_cluster.sh down
#
# Every connection is mutual TLS, with certificates that make_certs.sh (next
# to this script) makes into the cluster's state folder; --insecure runs
# plaintext instead. Needs root, iproute2 and openssl. Every namespace is named psns-ID-HOST and recorded,
# with its inode, in the cluster's state folder; `down` removes only those, so
# clusters with different ids can run side by side.
set -euo pipefail
PATH="$PATH:/usr/sbin:/sbin"

usage() {
  cat <<'USAGE'
usage: deploy/netns_cluster.sh COMMAND [options] [-- worker flags...]

commands:
  check              exit 0 if this machine can run a cluster; else print why, exit 1
  up                 create the hosts, start the servers, wait until every server
                     answers the gRPC health check, start the workers, return
  wait [HOST...]     wait for every worker (or each HOST) to exit; exit 0 iff all
                     succeeded
  status             hosts, addresses, links, processes and server health
  logs [HOST]        the output of every process (or of HOST), lines prefixed [HOST]
  exec HOST -- CMD   run CMD inside HOST's network namespace
  link HOST up|down  connect or cut HOST's cable to the bridge (a partition)
  kill HOST          SIGKILL HOST's process (a crash); `wait HOST` then fails
  restart HOST       start HOST's process again with the command it had (a
                     server on the same address; its log is appended to)
  down               stop every process and remove everything `up` created

options of every command:
  --id=ID            cluster id, 1-8 of [a-z0-9] (default 0); namespaces are psns-ID-HOST
  --state_dir=DIR    folder holding each cluster's state (default /run/psns)

options of up:
  --servers=S        parameter-server hosts ps-server-0.. (default 2)
  --workers=W        worker hosts ps-worker-0.. (default 3)
  --mode=sync|async  consistency mode of the servers (default sync)
  --lr=LR            servers' SGD learning rate (default 0.1)
  --pull_timeout=SEC servers' longest wait for missing workers (default 120)
  --checkpoint_dir=DIR  servers write checkpoints to DIR/ps-server-<i> (default:
                     none), so that `restart` finds them
  --server_flag=FLAG pass FLAG to every server (repeatable)
  --port=PORT        servers' port (default 50051)
  --subnet=A.B.C     use A.B.C.0/24 (default: the first 10.213.X.0/24 that no
                     address, route or other cluster of this machine uses)
  --bin_dir=DIR      folder holding ps_server, ps_worker and ps_ctl (default:
                     bazel-bin/server, bazel-bin/worker and bazel-bin/tools/ctl
                     of this repository)
  --server_bin=PATH, --worker_bin=PATH, --ctl_bin=PATH   the binaries themselves
  --startup_timeout=SEC  how long servers may take to become healthy (default 30)
  --insecure         plaintext instead of mutual TLS

options of wait:
  --timeout=SEC      give up (exit 1, cluster left up) after SEC seconds (default 600)

Worker flags after "--" (up only) pass through unchanged. Unless given there,
each worker gets --threads=max(1, nproc/W). Hosts get addresses .10+i
(ps-server-i) and .100+i (ps-worker-i) of the subnet.
USAGE
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ID=0
STATE_ROOT=/run/psns
NUM_SERVERS=2
NUM_WORKERS=3
MODE=sync
LR=0.1
PULL_TIMEOUT=120
PORT=50051
SUBNET=""
STARTUP_TIMEOUT=30
WAIT_TIMEOUT=600
SERVER_BIN="$ROOT/bazel-bin/server/ps_server"
WORKER_BIN="$ROOT/bazel-bin/worker/ps_worker"
CTL_BIN="$ROOT/bazel-bin/tools/ctl/ps_ctl"
WORKER_ARGS=()
SERVER_FLAGS=()
CHECKPOINT_DIR=""
INSECURE=0
POSITIONAL=()

die() { echo "netns_cluster: $*" >&2; exit 2; }
log() { echo "netns_cluster: $*"; }

# The namespace, state and process helpers, from netns_cluster_lib.sh beside
# this script (through symlinks, as in Bazel's runfiles).
# shellcheck source=deploy/netns_cluster_lib.sh
source "$(dirname "$(readlink -f "$0")")/netns_cluster_lib.sh"

[ $# -gt 0 ] || { usage >&2; die "missing COMMAND"; }
COMMAND="$1"
shift
case "$COMMAND" in
  -h|--help) usage; exit 0 ;;
  check|up|wait|status|logs|exec|link|kill|restart|down) ;;
  *) usage >&2; die "unknown command '$COMMAND'" ;;
esac

while [ $# -gt 0 ]; do
  case "$1" in
    --id=*) ID="${1#*=}" ;;
    --state_dir=*) STATE_ROOT="${1#*=}" ;;
    --servers=*) NUM_SERVERS="${1#*=}" ;;
    --workers=*) NUM_WORKERS="${1#*=}" ;;
    --mode=*) MODE="${1#*=}" ;;
    --lr=*) LR="${1#*=}" ;;
    --pull_timeout=*) PULL_TIMEOUT="${1#*=}" ;;
    --checkpoint_dir=*) CHECKPOINT_DIR="${1#*=}" ;;
    --server_flag=*) SERVER_FLAGS+=("${1#*=}") ;;
    --port=*) PORT="${1#*=}" ;;
    --subnet=*) SUBNET="${1#*=}" ;;
    --bin_dir=*)
      SERVER_BIN="${1#*=}/ps_server"; WORKER_BIN="${1#*=}/ps_worker"; CTL_BIN="${1#*=}/ps_ctl" ;;
    --server_bin=*) SERVER_BIN="${1#*=}" ;;
    --worker_bin=*) WORKER_BIN="${1#*=}" ;;
    --ctl_bin=*) CTL_BIN="${1#*=}" ;;
    --startup_timeout=*) STARTUP_TIMEOUT="${1#*=}" ;;
    --timeout=*) WAIT_TIMEOUT="${1#*=}" ;;
    --insecure) INSECURE=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; WORKER_ARGS=("$@"); break ;;
    --*) usage >&2; die "unknown option '$1'" ;;
    *) POSITIONAL+=("$1") ;;
  esac
  shift
done

[[ "$ID" =~ ^[a-z0-9]{1,8}$ ]] || die "--id must be 1-8 characters of [a-z0-9], got '$ID'"
for v in NUM_SERVERS NUM_WORKERS PORT STARTUP_TIMEOUT WAIT_TIMEOUT; do
  is_uint "${!v}" && [ "${!v}" -gt 0 ] || die "${v,,} must be a positive integer, got '${!v}'"
done
[ "$NUM_SERVERS" -le 80 ] || die "--servers must be at most 80 (addresses .10-.89)"
[ "$NUM_WORKERS" -le 150 ] || die "--workers must be at most 150 (addresses .100-.249)"
[[ "$MODE" == sync || "$MODE" == async ]] || die "--mode must be sync or async, got '$MODE'"

PREFIX="psns-$ID-"
STATE="$STATE_ROOT/$ID"
NET_NS="${PREFIX}net"  # holds the bridge

# --- check -------------------------------------------------------------------

cmd_check() {
  local reason
  reason=$(why_not)
  if [ -n "$reason" ]; then echo "$reason"; exit 1; fi
  echo "netns_cluster: this machine can run network-namespace clusters"
}

# --- up ----------------------------------------------------------------------

cmd_up() {
  [ ${#POSITIONAL[@]} -eq 0 ] || die "up takes no arguments besides options, got '${POSITIONAL[*]}'"
  local reason
  reason=$(why_not)
  [ -z "$reason" ] || die "cannot run a cluster here: $reason"
  for b in "$SERVER_BIN" "$WORKER_BIN" "$CTL_BIN"; do
    [ -x "$b" ] || die "$b not found: build first (bazel build //:ps_server //:ps_worker //:ps_ctl) or pass --bin_dir"
  done
  SERVER_BIN=$(realpath "$SERVER_BIN"); WORKER_BIN=$(realpath "$WORKER_BIN"); CTL_BIN=$(realpath "$CTL_BIN")
  [ -z "$(ip netns list | awk -v p="$PREFIX" 'index($1, p) == 1')" ] ||
    die "namespaces named $PREFIX* exist already: cluster '$ID' is up (run: $0 down --id=$ID) or someone else uses the prefix; pick another --id"
  ! compgen -G "/etc/netns/$PREFIX*" >/dev/null ||
    die "/etc/netns/$PREFIX* exists already, left by an earlier cluster '$ID' or someone else; pick another --id"

  mkdir -p "$STATE_ROOT"
  # One up at a time picks a subnet and claims its state folder.
  exec 9>"$STATE_ROOT/.lock"
  flock -w 30 9 || die "could not lock $STATE_ROOT/.lock within 30s"
  [ ! -e "$STATE" ] || die "$STATE exists: cluster '$ID' is up or was not taken down (run: $0 down --id=$ID)"
  if [ -z "$SUBNET" ]; then
    SUBNET=$(pick_subnet)
  else
    [[ "$SUBNET" =~ ^([0-9]{1,3}\.){2}[0-9]{1,3}$ ]] || die "--subnet must look like A.B.C, got '$SUBNET'"
    ! subnet_taken "$SUBNET" || die "--subnet=$SUBNET: $SUBNET.0/24 overlaps an address, route or cluster of this machine"
  fi
  mkdir -p "$STATE/logs" "$STATE/run"
  : >"$STATE/namespaces"
  cat >"$STATE/config" <<EOF
SUBNET=$SUBNET
NUM_SERVERS=$NUM_SERVERS
NUM_WORKERS=$NUM_WORKERS
MODE=$MODE
PORT=$PORT
CTL_BIN=$CTL_BIN
INSECURE=$INSECURE
EOF
  flock -u 9
  exec 9>&-

  # From here on, any failure or interruption takes the cluster down again.
  trap 'echo "netns_cluster: up failed; removing cluster $ID" >&2; trap - EXIT; cmd_down >&2' EXIT
  trap 'exit 130' INT TERM

  local s w host
  : >"$STATE/hosts"
  for ((s = 0; s < NUM_SERVERS; s++)); do echo "ps-server-$s $SUBNET.$((10 + s))" >>"$STATE/hosts"; done
  for ((w = 0; w < NUM_WORKERS; w++)); do echo "ps-worker-$w $SUBNET.$((100 + w))" >>"$STATE/hosts"; done

  add_ns "$NET_NS"
  ip -n "$NET_NS" link add br0 type bridge
  ip -n "$NET_NS" link set br0 up
  if [ ! -d /etc/netns ]; then
    mkdir /etc/netns
    echo "CREATED_ETC_NETNS=1" >>"$STATE/config"
  fi
  for host in $(hosts); do
    local ns veth
    ns=$(ns_of "$host"); veth=$(veth_of "$host")
    add_ns "$ns"
    ip -n "$NET_NS" link add "$veth" type veth peer name eth0 netns "$ns"
    ip -n "$NET_NS" link set "$veth" master br0 up
    ip -n "$ns" addr add "$(addr_of "$host")/24" dev eth0
    ip -n "$ns" link set eth0 up
    mkdir "/etc/netns/$ns"
    { echo "127.0.0.1 localhost"; awk '{print $2, $1}' "$STATE/hosts"; } >"/etc/netns/$ns/hosts"
  done
  log "cluster $ID: $NUM_SERVERS servers, $NUM_WORKERS workers on $SUBNET.0/24 (namespaces $PREFIX*)"
  if [ "$INSECURE" -eq 0 ]; then
    "$(dirname "${BASH_SOURCE[0]}")/make_certs.sh" "$STATE/certs" --servers="$NUM_SERVERS" \
      --workers="$NUM_WORKERS" >/dev/null || die "cannot make certificates (is openssl installed?)"
    log "mutual TLS, certificates in $STATE/certs"
  fi

  for ((s = 0; s < NUM_SERVERS; s++)); do
    local ckpt=()
    if [ -n "$CHECKPOINT_DIR" ]; then
      mkdir -p "$CHECKPOINT_DIR/ps-server-$s"
      ckpt=("--checkpoint_dir=$(realpath "$CHECKPOINT_DIR")/ps-server-$s")
    fi
    start "ps-server-$s" "$SERVER_BIN" --listen="$(addr_of "ps-server-$s"):$PORT" \
      --shard_id=$s --num_shards=$NUM_SERVERS --num_workers=$NUM_WORKERS --mode="$MODE" \
      --lr="$LR" --pull_timeout="$PULL_TIMEOUT" "${ckpt[@]+"${ckpt[@]}"}" $(tls "server-$s") \
      "${SERVER_FLAGS[@]+"${SERVER_FLAGS[@]}"}"
  done

  # Healthy = every server answers grpc.health.v1 SERVING to a worker host,
  # through the hosts file and the bridge.
  local servers deadline
  servers=$(server_list)
  deadline=$(( $(date +%s) + STARTUP_TIMEOUT ))
  until ip netns exec "$(ns_of ps-worker-0)" "$CTL_BIN" health --servers="$servers" --timeout=1 $(tls admin) >/dev/null 2>&1; do
    for ((s = 0; s < NUM_SERVERS; s++)); do
      if [ -f "$STATE/run/ps-server-$s.rc" ]; then
        tail -5 "$STATE/logs/ps-server-$s.log" | sed "s/^/[ps-server-$s] /" >&2
        die "ps-server-$s exited during startup"
      fi
    done
    [ "$(date +%s)" -lt $deadline ] || die "servers not healthy within ${STARTUP_TIMEOUT}s ($CTL_BIN health --servers=$servers)"
    sleep 0.2
  done
  log "servers healthy: $servers ($MODE mode)"

  local has_threads=0 a t
  for a in "${WORKER_ARGS[@]+"${WORKER_ARGS[@]}"}"; do [[ "$a" == --threads=* ]] && has_threads=1; done
  if [ $has_threads -eq 0 ]; then
    t=$(( $(nproc) / NUM_WORKERS )); [ $t -ge 1 ] || t=1
    WORKER_ARGS+=("--threads=$t")
  fi
  for ((w = 0; w < NUM_WORKERS; w++)); do
    start "ps-worker-$w" "$WORKER_BIN" --servers="$servers" --worker_id=$w \
      --num_workers=$NUM_WORKERS $(tls "worker-$w") "${WORKER_ARGS[@]}"
  done
  log "started $NUM_WORKERS workers; follow with: $0 logs --id=$ID; then: $0 wait --id=$ID; $0 down --id=$ID"
  trap - EXIT INT TERM
}

# --- wait / status / logs / exec / link --------------------------------------

cmd_wait() {
  require_state
  local deadline host rc failed=0 list
  if [ ${#POSITIONAL[@]} -gt 0 ]; then list=("${POSITIONAL[@]}"); else mapfile -t list < <(hosts | grep '^ps-worker-'); fi
  deadline=$(( $(date +%s) + WAIT_TIMEOUT ))
  for host in "${list[@]}"; do
    require_host "$host"
    while [ ! -f "$STATE/run/$host.rc" ]; do
      if [ "$(date +%s)" -ge $deadline ]; then
        echo "netns_cluster: $host still running after ${WAIT_TIMEOUT}s (cluster left up)" >&2
        exit 1
      fi
      sleep 0.2
    done
  done
  for host in "${list[@]}"; do
    rc=$(cat "$STATE/run/$host.rc")
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
    echo "$host: exit $rc: $(tail -1 "$STATE/logs/$host.log")"
  done
  [ $failed -eq 0 ] || { echo "netns_cluster: $failed of ${#list[@]} processes failed" >&2; exit 1; }
  log "all ${#list[@]} processes finished"
}

cmd_status() {
  require_state
  local host ns state
  echo "cluster $ID: $SUBNET.0/24, $MODE mode, state in $STATE"
  for host in $(hosts); do
    ns=$(ns_of "$host")
    if ! owned "$ns"; then echo "$host: namespace $ns missing"; continue; fi
    if [ -f "$STATE/run/$host.rc" ]; then state="exited $(cat "$STATE/run/$host.rc")"
    elif [ -n "$(ip netns pids "$ns")" ]; then state="running"
    else state="not started"; fi
    printf '%-12s %-15s link %-4s %s\n' "$host" "$(addr_of "$host")" \
      "$(ip -n "$NET_NS" -o link show "$(veth_of "$host")" | grep -q 'state UP' && echo up || echo down)" "$state"
  done
  ip netns exec "$(ns_of ps-worker-0)" "$CTL_BIN" health --servers="$(server_list)" --timeout=2 $(tls admin) || true
}

cmd_logs() {
  require_state
  local host list
  if [ ${#POSITIONAL[@]} -gt 0 ]; then list=("${POSITIONAL[@]}"); else mapfile -t list < <(hosts); fi
  for host in "${list[@]}"; do
    require_host "$host"
    [ -f "$STATE/logs/$host.log" ] && sed "s/^/[$host] /" "$STATE/logs/$host.log"
  done
  return 0
}

cmd_exec() {
  require_state
  [ ${#POSITIONAL[@]} -eq 1 ] && [ ${#WORKER_ARGS[@]} -gt 0 ] || die "usage: $0 exec HOST -- CMD..."
  require_host "${POSITIONAL[0]}"
  exec ip netns exec "$(ns_of "${POSITIONAL[0]}")" "${WORKER_ARGS[@]}"
}

cmd_link() {
  require_state
  [ ${#POSITIONAL[@]} -eq 2 ] && [[ "${POSITIONAL[1]}" == up || "${POSITIONAL[1]}" == down ]] ||
    die "usage: $0 link HOST up|down"
  require_host "${POSITIONAL[0]}"
  owned "$NET_NS" || die "bridge namespace $NET_NS is not this cluster's"
  ip -n "$NET_NS" link set "$(veth_of "${POSITIONAL[0]}")" "${POSITIONAL[1]}"
  log "${POSITIONAL[0]}: link ${POSITIONAL[1]}"
}

# --- kill / restart ----------------------------------------------------------

cmd_kill() {
  require_state
  [ ${#POSITIONAL[@]} -eq 1 ] || die "usage: $0 kill HOST"
  local host="${POSITIONAL[0]}" ns p n=0
  require_host "$host"
  ns=$(ns_of "$host")
  owned "$ns" || die "namespace $ns is not this cluster's"
  for p in $(ip netns pids "$ns"); do kill -KILL "$p" 2>/dev/null && n=$((n + 1)); done
  [ $n -gt 0 ] || die "$host runs no process"
  # Its wrapper writes the exit status; wait for it, so that restart is clean.
  local deadline=$(( $(date +%s) + 10 ))
  while [ ! -f "$STATE/run/$host.rc" ] && [ "$(date +%s)" -lt $deadline ]; do sleep 0.1; done
  log "$host: killed (SIGKILL)"
}

cmd_restart() {
  require_state
  [ ${#POSITIONAL[@]} -eq 1 ] || die "usage: $0 restart HOST"
  local host="${POSITIONAL[0]}" ns
  require_host "$host"
  ns=$(ns_of "$host")
  [ -f "$STATE/run/$host.cmd" ] || die "$host was never started"
  [ -z "$(ip netns pids "$ns")" ] || die "$host is still running; kill it first"
  rm -f "$STATE/run/$host.rc"
  echo "--- restarted by netns_cluster at $(date +%T)" >>"$STATE/logs/$host.log"
  local cmd
  eval "cmd=($(cat "$STATE/run/$host.cmd"))"
  start "$host" "${cmd[@]}"
  log "$host: restarted"
}

# --- down --------------------------------------------------------------------

cmd_down() {
  [ -d "$STATE" ] || die "no cluster '$ID' ($STATE does not exist)"
  [ -f "$STATE/namespaces" ] || die "$STATE has no namespaces file: not a cluster folder, leaving it alone"
  local ns inode ours=() pids=() p
  while read -r ns inode; do
    if owned "$ns"; then
      ours+=("$ns")
    elif [ -e "/run/netns/$ns" ]; then
      echo "netns_cluster: leaving $ns alone: it is not the namespace cluster $ID created" >&2
    fi
  done <"$STATE/namespaces"
  for ns in "${ours[@]+"${ours[@]}"}"; do
    for p in $(ip netns pids "$ns"); do pids+=("$p"); done
  done
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    # Give them 5 s to exit, then force.
    local deadline=$(( $(date +%s) + 5 ))
    while [ "$(date +%s)" -lt $deadline ]; do
      local alive=0
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive -eq 0 ] && break
      sleep 0.1
    done
    # Only what still runs in our namespaces: a pid that exited meanwhile
    # may belong to someone else by now.
    local left=()
    for ns in "${ours[@]+"${ours[@]}"}"; do
      for p in $(ip netns pids "$ns" 2>/dev/null); do left+=("$p"); done
    done
    [ ${#left[@]} -eq 0 ] || kill -KILL "${left[@]}" 2>/dev/null || true
  fi
  # The wrappers started by `start` write their exit status when their
  # process ends; let them finish before the state folder goes.
  local deadline=$(( $(date +%s) + 5 )) f
  for f in "$STATE"/run/*.pid; do
    [ -f "$f" ] || continue
    while kill -0 "$(cat "$f")" 2>/dev/null && [ "$(date +%s)" -lt $deadline ]; do sleep 0.1; done
  done
  # Best effort from here: one failed removal must not stop the others
  # (this also runs as the cleanup of a failed `up`, under set -e).
  for ns in "${ours[@]+"${ours[@]}"}"; do
    ip netns del "$ns" || echo "netns_cluster: could not delete namespace $ns" >&2
    if [ -d "/etc/netns/$ns" ]; then
      rm -f "/etc/netns/$ns/hosts" || true
      rmdir "/etc/netns/$ns" || true
    fi
  done
  if grep -qsx "CREATED_ETC_NETNS=1" "$STATE/config"; then
    rmdir /etc/netns 2>/dev/null || true  # only if no other cluster uses it
  fi
  rm -rf "$STATE"
  log "cluster $ID down: removed ${#ours[@]} namespaces, stopped ${#pids[@]} processes"
}

"cmd_$COMMAND"
