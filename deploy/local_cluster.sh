#!/usr/bin/env bash
# One-machine launcher: starts S parameter servers and W workers on this
# host, each server on a unix socket of its own (or, with --tcp, a free port
# of 127.0.0.1), and waits for the workers to finish.
#
#   deploy/local_cluster.sh --mode=async --servers=2 --workers=2 -- --epochs=2
#
# Everything after "--" goes to every worker. Each log line is prefixed with
# its process's role and index. Exits 0 when every worker succeeded; exits
# non-zero, stopping every process it started, as soon as a worker fails, a
# server dies, or on Ctrl-C / SIGTERM. With --restart, a server or worker
# that dies is started again in place instead (a server on the same address,
# restoring its newest checkpoint), up to --max_restarts times each: kill one
# (kill -9 PID) to watch the cluster recover.
#
# By default the servers listen on unix sockets in a private folder (mode
# 0700) of the launcher's temporary directory: only this user's processes
# (and root) can connect, so there is no TLS to pay for (docs/security.md).
# With --tcp every connection is mutual TLS over loopback TCP instead, with a
# throwaway CA and certificates made by make_certs.sh (next to this script)
# in the launcher's temporary folder (or taken from --certs_dir); --insecure
# runs plaintext over loopback TCP.
#
# With --metrics every server and ps_worker also serves Prometheus /metrics
# on a free port of 127.0.0.1 (HTTPS with client certificates under TLS),
# and the launcher writes a Prometheus config for them (prometheus.yml in its
# temporary directory, with the alert rules of prometheus/alerts.yml next to
# this script) and prints the command that starts prometheus with it.
# --keep_servers leaves the servers running after the workers finish (for
# ps_ctl status or a last scrape) until Ctrl-C / SIGTERM.
set -uo pipefail

usage() {
  cat <<'USAGE'
usage: deploy/local_cluster.sh [options] [-- worker flags...]

options:
  --servers=S          number of parameter-server shards (default 2)
  --workers=W          number of workers (default 2)
  --mode=sync|async|ssp  consistency mode of the servers (default sync; ssp
                       takes --server_flag=--staleness=S)
  --lr=LR              servers' learning rate (default 0.1); pick the
                       optimizer with --server_flag=--optimizer=adam
  --pull_timeout=SEC   servers' longest wait for missing workers (default 120)
  --worker_timeout=SEC servers' worker lease: a sync step closes without a
                       worker silent this long (default: the server's, 10)
  --checkpoint_dir=DIR servers write checkpoints under DIR/shard-<i>
                       (default: none; with --restart, a folder in the
                       launcher's temporary directory)
  --checkpoint_every=N servers checkpoint every N versions (default: the
                       server's, 100)
  --restart            restart a server or worker that dies, in place
  --max_restarts=N     restarts per process with --restart (default 3)
  --keep_servers       keep the servers running after the workers finished,
                       until Ctrl-C / SIGTERM (exit 130 then)
  --metrics            each server (and each ps_worker, not --worker_cmd)
                       serves /metrics on a free port of 127.0.0.1 (HTTPS
                       with --tcp); writes prometheus.yml (1 s scrapes, jobs
                       ps_server and ps_worker, the rules of
                       prometheus/alerts.yml beside this script) into the
                       launcher's temporary folder and prints the command
                       that runs prometheus with it. With --tcp the scrapes
                       use the reader certificate of the certificates' folder
  --server_flag=FLAG   pass FLAG to every server (repeatable), e.g.
                       --server_flag=--sync_quorum=2
  --bin_dir=DIR        folder holding both ps_server and ps_worker
                       (default: bazel-bin/server/ps_server and
                       bazel-bin/worker/ps_worker in this repository)
  --server_bin=PATH    the ps_server binary (overrides --bin_dir)
  --worker_bin=PATH    the ps_worker binary (overrides --bin_dir)
  --worker_cmd='CMD'   run CMD (through bash -c) as each worker instead of
                       ps_worker, e.g. --worker_cmd='python3 train.py
                       --epochs=2', with PS_SERVERS, PS_WORKER_ID,
                       PS_NUM_WORKERS and PS_TLS_DIR (set with --tcp only)
                       in its environment, as ps.connect_from_env() reads
                       them, and bazel-bin/python on PYTHONPATH; flags after
                       "--" are appended to CMD
  --startup_timeout=SEC  how long to wait for servers to listen (default 30)
  --tcp                servers on 127.0.0.1 TCP ports with mutual TLS, as
                       on separate hosts (default: unix sockets in a 0700
                       folder of the launcher's temporary directory, no
                       TLS: only this user and root can connect)
  --certs_dir=DIR      certificates from deploy/make_certs.sh (implies --tcp;
                       default: made afresh in the launcher's temporary folder)
  --insecure           plaintext over loopback TCP (implies --tcp)
  --elastic            start an etcd too (Debian's etcd-server; docs/elastic.md):
                       the servers and workers register there (job "local"),
                       workers find the servers there, and sync steps wait for
                       the registered workers; it prints how to add a worker
                       from another shell (with TLS, with the certificate of
                       the --worker_id it takes)
  --max_workers=N      with --elastic: the most workers the job takes (the
                       servers' --num_workers; default --workers)
  --gpus_per_host=N    GPU workers: worker i gets --device=cuda --gpu=(i mod N),
                       one worker per GPU when W = N (default 0: no GPU flags;
                       workers then pick with their own --device, default auto)
  -h, --help           this text

Worker flags after "--" pass through unchanged (e.g. --epochs=2
--batch_size=64 --save_model=/tmp/model). Unless given there, each worker gets
--threads=max(1, nproc/W) so that the workers share the cores, and with
--gpus_per_host, --device=cuda (pass --device=auto there to let a worker fall
back to the CPU where its GPU is missing).
USAGE
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NUM_SERVERS=2
NUM_WORKERS=2
MODE=sync
LR=0.1
PULL_TIMEOUT=120
WORKER_TIMEOUT=
CHECKPOINT_DIR=
CHECKPOINT_EVERY=
RESTART=0
KEEP_SERVERS=0
METRICS=0
MAX_RESTARTS=3
SERVER_FLAGS=()
STARTUP_TIMEOUT=30
GPUS_PER_HOST=0
INSECURE=0
TCP=0
CERTS_DIR=
SERVER_BIN="$ROOT/bazel-bin/server/ps_server"
WORKER_BIN="$ROOT/bazel-bin/worker/ps_worker"
WORKER_ARGS=()
WORKER_CMD=
ELASTIC=0
MAX_WORKERS=
COORDINATOR=

die() { echo "local_cluster: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --servers=*) NUM_SERVERS="${1#*=}" ;;
    --workers=*) NUM_WORKERS="${1#*=}" ;;
    --mode=*) MODE="${1#*=}" ;;
    --lr=*) LR="${1#*=}" ;;
    --pull_timeout=*) PULL_TIMEOUT="${1#*=}" ;;
    --worker_timeout=*) WORKER_TIMEOUT="${1#*=}" ;;
    --checkpoint_dir=*) CHECKPOINT_DIR="${1#*=}" ;;
    --checkpoint_every=*) CHECKPOINT_EVERY="${1#*=}" ;;
    --restart) RESTART=1 ;;
    --keep_servers) KEEP_SERVERS=1 ;;
    --metrics) METRICS=1 ;;
    --max_restarts=*) MAX_RESTARTS="${1#*=}" ;;
    --server_flag=*) SERVER_FLAGS+=("${1#*=}") ;;
    --startup_timeout=*) STARTUP_TIMEOUT="${1#*=}" ;;
    --gpus_per_host=*) GPUS_PER_HOST="${1#*=}" ;;
    --certs_dir=*) CERTS_DIR="${1#*=}"; TCP=1 ;;
    --insecure) INSECURE=1; TCP=1 ;;
    --tcp) TCP=1 ;;
    --elastic) ELASTIC=1 ;;
    --max_workers=*) MAX_WORKERS="${1#*=}" ;;
    --bin_dir=*) SERVER_BIN="${1#*=}/ps_server"; WORKER_BIN="${1#*=}/ps_worker" ;;
    --server_bin=*) SERVER_BIN="${1#*=}" ;;
    --worker_bin=*) WORKER_BIN="${1#*=}" ;;
    --worker_cmd=*) WORKER_CMD="${1#*=}" ;;
    -h|--help) usage; exit 0 ;;
    --) shift; WORKER_ARGS=("$@"); break ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
  shift
done

[[ "$NUM_SERVERS" =~ ^[1-9][0-9]*$ ]] || die "--servers must be a positive integer, got '$NUM_SERVERS'"
[[ "$NUM_WORKERS" =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer, got '$NUM_WORKERS'"
[[ "$GPUS_PER_HOST" =~ ^[0-9]+$ ]] || die "--gpus_per_host must be a non-negative integer, got '$GPUS_PER_HOST'"
[[ "$MODE" == sync || "$MODE" == async || "$MODE" == ssp ]] || die "--mode must be sync, async or ssp, got '$MODE'"
[[ "$MAX_RESTARTS" =~ ^[0-9]+$ ]] || die "--max_restarts must be a non-negative integer, got '$MAX_RESTARTS'"
[ -n "$MAX_WORKERS" ] || MAX_WORKERS=$NUM_WORKERS
[[ "$MAX_WORKERS" =~ ^[1-9][0-9]*$ && $MAX_WORKERS -ge $NUM_WORKERS ]] || die "--max_workers must be an integer >= --workers, got '$MAX_WORKERS'"
[ $ELASTIC -eq 1 ] || [ $MAX_WORKERS -eq $NUM_WORKERS ] || die "--max_workers needs --elastic"
[ $ELASTIC -eq 0 ] || [ -x /usr/bin/etcd ] || die "--elastic needs etcd (apt-get install etcd-server)"
[ $ELASTIC -eq 0 ] || [ $RESTART -eq 0 ] || die "--restart with --elastic is not supported yet: a restarted process finds its etcd key held until its lease ends"
[ -z "$WORKER_TIMEOUT" ] || SERVER_FLAGS+=("--worker_timeout=$WORKER_TIMEOUT")
[ -z "$CHECKPOINT_EVERY" ] || SERVER_FLAGS+=("--checkpoint_every=$CHECKPOINT_EVERY")
bins=("$SERVER_BIN")
[ -n "$WORKER_CMD" ] || bins+=("$WORKER_BIN")
for b in "${bins[@]}"; do
  [ -x "$b" ] || die "$b not found: build first (bazel build //:ps_server //:ps_worker) or pass --bin_dir"
done
[ -z "$WORKER_CMD" ] || [ $GPUS_PER_HOST -eq 0 ] || die "--gpus_per_host sets ps_worker flags: not with --worker_cmd"

has_threads=0
has_device=0
for a in "${WORKER_ARGS[@]+"${WORKER_ARGS[@]}"}"; do
  [[ "$a" == --threads=* ]] && has_threads=1
  [[ "$a" == --device=* ]] && has_device=1
  [[ "$a" == --gpu=* && $GPUS_PER_HOST -gt 0 ]] && die "--gpu is set per worker by --gpus_per_host; do not pass it after --"
done
if [ $GPUS_PER_HOST -gt 0 ] && [ $has_device -eq 0 ]; then
  WORKER_ARGS+=("--device=cuda")
fi
if [ $has_threads -eq 0 ] && [ -z "$WORKER_CMD" ]; then
  t=$(( $(nproc) / NUM_WORKERS ))
  [ $t -ge 1 ] || t=1
  WORKER_ARGS+=("--threads=$t")
fi

WORKDIR="$(mktemp -d "${TMPDIR:-/tmp}/local_cluster.XXXXXX")"
# A restarted server must find its checkpoints: without --checkpoint_dir,
# --restart keeps them in the temporary directory (gone at exit).
[ -n "$CHECKPOINT_DIR" ] || [ $RESTART -eq 0 ] || CHECKPOINT_DIR="$WORKDIR/checkpoints"
SOCKET_DIR=
if [ $TCP -eq 0 ]; then
  # The sockets' folder is their access control: this user's only (0700).
  # A socket path holds at most 107 bytes: with a long TMPDIR, the folder
  # goes to /tmp instead.
  SOCKET_DIR="$WORKDIR/sockets"
  if [ ${#SOCKET_DIR} -gt 80 ]; then
    SOCKET_DIR="$(mktemp -d /tmp/ps-sockets.XXXXXX)" || { rm -rf "$WORKDIR"; die "cannot make a socket folder in /tmp"; }
  fi
  mkdir -p -m 0700 "$SOCKET_DIR" && chmod 0700 "$SOCKET_DIR" ||
    { rm -rf "$WORKDIR"; die "cannot make the socket folder $SOCKET_DIR"; }
elif [ $INSECURE -eq 1 ]; then
  [ -z "$CERTS_DIR" ] || die "--certs_dir and --insecure exclude each other"
elif [ -z "$CERTS_DIR" ]; then
  CERTS_DIR="$WORKDIR/certs"
  "$(dirname "${BASH_SOURCE[0]}")/make_certs.sh" "$CERTS_DIR" --servers="$NUM_SERVERS" \
    --workers="$MAX_WORKERS" >/dev/null || { rm -rf "$WORKDIR"; die "cannot make certificates (is openssl installed?)"; }
fi
if [ -n "$CERTS_DIR" ]; then
  reader=()
  [ $METRICS -eq 0 ] || reader=(reader.pem reader.key)
  etcd=()
  [ $ELASTIC -eq 0 ] || etcd=(etcd.pem etcd.key)
  for f in ca.pem "${reader[@]+"${reader[@]}"}" "${etcd[@]+"${etcd[@]}"}" $(seq -f 'server-%g.pem' 0 $((NUM_SERVERS - 1))) $(seq -f 'worker-%g.pem' 0 $((MAX_WORKERS - 1))); do
    [ -r "$CERTS_DIR/$f" ] || { rm -rf "$WORKDIR"; die "$CERTS_DIR/$f is missing: make it with deploy/make_certs.sh $CERTS_DIR --servers=$NUM_SERVERS --workers=$MAX_WORKERS"; }
  done
fi
# tls ROLE-NAME: the TLS flags of that certificate (none with --insecure).
tls() {
  [ -n "$CERTS_DIR" ] || return 0
  printf '%s\n' "--tls_ca=$CERTS_DIR/ca.pem" "--tls_cert=$CERTS_DIR/$1.pem" "--tls_key=$CERTS_DIR/$1.key"
}

# free_port: sets FREE_PORT to a TCP port of 127.0.0.1 that nothing listens
# on and that this launcher has not handed out yet, from 20000-32767 (below
# Linux's ephemeral range, where the kernel picks the ports of port-0 binds).
declare -A PORTS_TAKEN=()
free_port() {
  local p
  for _ in $(seq 200); do
    p=$(( 20000 + RANDOM % 12768 ))
    [ -z "${PORTS_TAKEN[$p]:-}" ] || continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      PORTS_TAKEN[$p]=1
      FREE_PORT=$p
      return 0
    fi
  done
  return 1
}

SERVER_METRICS=()  # server index -> 127.0.0.1:PORT of its /metrics
WORKER_METRICS=()  # worker index -> 127.0.0.1:PORT (ps_worker only)
PROM_CONFIG=
if [ $METRICS -eq 1 ]; then
  for ((s = 0; s < NUM_SERVERS; s++)); do
    free_port || { rm -rf "$WORKDIR"; die "no free port for the metrics of server $s"; }
    SERVER_METRICS[$s]="127.0.0.1:$FREE_PORT"
  done
  if [ -z "$WORKER_CMD" ]; then
    for ((w = 0; w < NUM_WORKERS; w++)); do
      free_port || { rm -rf "$WORKDIR"; die "no free port for the metrics of worker $w"; }
      WORKER_METRICS[$w]="127.0.0.1:$FREE_PORT"
    done
  fi
  PROM_CONFIG="$WORKDIR/prometheus.yml"
  RULES="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/prometheus/alerts.yml"
  # prom_job NAME TARGETS...: one scrape job of the config.
  prom_job() {
    local name=$1 t sep=""
    shift
    echo "  - job_name: $name"
    if [ -n "$CERTS_DIR" ]; then
      # Only the reader and admin identities may scrape; the servers' (and
      # workers') certificates all name localhost.
      cat <<TLS
    scheme: https
    tls_config:
      ca_file: $CERTS_DIR/ca.pem
      cert_file: $CERTS_DIR/reader.pem
      key_file: $CERTS_DIR/reader.key
      server_name: localhost
TLS
    fi
    printf '    static_configs:\n      - targets: ['
    for t in "$@"; do printf "%s'%s'" "$sep" "$t"; sep=", "; done
    printf ']\n'
  }
  {
    echo "# Written by local_cluster.sh --metrics for the cluster of $WORKDIR."
    echo "global:"
    echo "  scrape_interval: 1s"
    echo "  scrape_timeout: 1s"
    echo "  evaluation_interval: 1s"
    if [ -r "$RULES" ]; then
      echo "rule_files:"
      echo "  - $RULES"
    fi
    echo "scrape_configs:"
    prom_job ps_server "${SERVER_METRICS[@]}"
    [ ${#WORKER_METRICS[@]} -eq 0 ] || prom_job ps_worker "${WORKER_METRICS[@]}"
  } > "$PROM_CONFIG" || { rm -rf "$WORKDIR"; die "cannot write $PROM_CONFIG"; }
  [ -r "$RULES" ] || echo "local_cluster: $RULES not found: the Prometheus config has no alert rules" >&2
fi

declare -A ROLE=()   # pid -> "server i" / "worker i"
declare -A RESTARTS=()  # "server i" / "worker i" -> times restarted
SERVER_PIDS=()
WORKER_PIDS=()

cleanup() {
  trap '' INT TERM  # a second Ctrl-C must not cut the cleanup short
  local pids=("${!ROLE[@]}")
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null
    # Give them 5 s to exit, then force.
    for _ in $(seq 50); do
      local alive=0
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive -eq 0 ] && break
      sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null
  fi
  [ -z "${ETCD_PID:-}" ] || { kill -TERM "$ETCD_PID" 2>/dev/null; wait "$ETCD_PID" 2>/dev/null; }
  rm -rf "$WORKDIR"
  [ -z "$SOCKET_DIR" ] || rm -rf "$SOCKET_DIR"
}
trap cleanup EXIT
trap 'echo "local_cluster: interrupted, stopping all processes" >&2; exit 130' INT TERM

if [ $ELASTIC -eq 1 ]; then
  # One etcd member on loopback (after the trap: cleanup stops it); mutual
  # TLS with the cluster's certificates under --tcp, plaintext otherwise.
  source "$(dirname "${BASH_SOURCE[0]}")/etcd_lib.sh"
  free_port && client=$FREE_PORT && free_port && peer=$FREE_PORT || die "no free port for etcd"
  start_etcd "$WORKDIR/etcd" $client $peer "$CERTS_DIR" $STARTUP_TIMEOUT || die "etcd did not start"
  SERVER_FLAGS+=("--coordinator=$COORDINATOR" --job=local)
fi

# start ROLE_NAME BINARY ARGS...: runs BINARY with its output prefixed.
start() {
  local role="$1"; shift
  "$@" > >(sed -u "s/^/[$role] /") 2>&1 &
  ROLE[$!]="$role"
  LAST_PID=$!
}

# start_server INDEX LISTEN: (re)starts server INDEX listening on LISTEN.
start_server() {
  local s=$1 listen=$2 extra=()
  if [ -n "$CHECKPOINT_DIR" ]; then
    mkdir -p "$CHECKPOINT_DIR/shard-$s" || die "cannot create $CHECKPOINT_DIR/shard-$s"
    extra=("--checkpoint_dir=$CHECKPOINT_DIR/shard-$s")
  fi
  [ -z "${SERVER_METRICS[$s]:-}" ] || extra+=("--metrics_listen=${SERVER_METRICS[$s]}")
  start "server $s" "$SERVER_BIN" --listen="$listen" --port_file="$WORKDIR/port.$s" \
    --shard_id=$s --num_shards=$NUM_SERVERS --num_workers=$MAX_WORKERS --mode=$MODE \
    --lr=$LR --pull_timeout=$PULL_TIMEOUT "${extra[@]+"${extra[@]}"}" $(tls "server-$s") \
    "${SERVER_FLAGS[@]+"${SERVER_FLAGS[@]}"}"
  SERVER_PIDS[$s]=$LAST_PID
}

# start_worker INDEX: (re)starts worker INDEX.
start_worker() {
  local w=$1 gpu=() metrics=()
  if [ -n "$WORKER_CMD" ]; then
    # The command line, then the flags after "--", each quoted for bash -c.
    local cmd="$WORKER_CMD" a
    for a in "${WORKER_ARGS[@]+"${WORKER_ARGS[@]}"}"; do cmd+=" $(printf '%q' "$a")"; done
    local place=(PS_SERVERS="$SERVERS_FLAG" PS_WORKER_ID=$w PS_NUM_WORKERS=$NUM_WORKERS)
    [ $ELASTIC -eq 0 ] || place=(PS_COORDINATOR="$COORDINATOR" PS_JOB=local PS_WORKER_ID=$w)
    start "worker $w" env "${place[@]}" ${CERTS_DIR:+PS_TLS_DIR="$CERTS_DIR"} \
      PYTHONPATH="$ROOT/bazel-bin/python${PYTHONPATH:+:$PYTHONPATH}" bash -c "$cmd"
    WORKER_PIDS[$w]=$LAST_PID
    return
  fi
  [ $GPUS_PER_HOST -gt 0 ] && gpu=("--gpu=$((w % GPUS_PER_HOST))")
  [ -z "${WORKER_METRICS[$w]:-}" ] || metrics=("--metrics_listen=${WORKER_METRICS[$w]}")
  local place=(--servers="$SERVERS_FLAG" --worker_id=$w --num_workers=$NUM_WORKERS)
  [ $ELASTIC -eq 0 ] || place=(--coordinator="$COORDINATOR" --job=local --worker_id=$w)
  start "worker $w" "$WORKER_BIN" "${place[@]}" $(tls "worker-$w") "${WORKER_ARGS[@]}" \
    "${gpu[@]+"${gpu[@]}"}" "${metrics[@]+"${metrics[@]}"}"
  WORKER_PIDS[$w]=$LAST_PID
}

# may_restart ROLE: true (counting it) if ROLE may be restarted once more.
may_restart() {
  local n=${RESTARTS[$1]:-0}
  [ $RESTART -eq 1 ] && [ "$n" -lt "$MAX_RESTARTS" ] || return 1
  RESTARTS[$1]=$((n + 1))
}

# restart_server ROLE STATUS: starts "server I" again on its address.
restart_server() {
  local index=${1#* }
  echo "local_cluster: $1 exited (status $2); restarting it on ${ADDRS[$index]} (restart ${RESTARTS[$1]} of $MAX_RESTARTS)" >&2
  start_server "$index" "${ADDRS[$index]}"
}

for ((s = 0; s < NUM_SERVERS; s++)); do
  if [ -n "$SOCKET_DIR" ]; then
    start_server $s "unix:$SOCKET_DIR/shard-$s.sock"
  else
    start_server $s 127.0.0.1:0
  fi
done

# Wait until every server has written its port file (it does so once serving).
ADDRS=()
deadline=$(( $(date +%s) + STARTUP_TIMEOUT ))
for ((s = 0; s < NUM_SERVERS; s++)); do
  while [ ! -s "$WORKDIR/port.$s" ]; do
    kill -0 "${SERVER_PIDS[$s]}" 2>/dev/null || die "server $s exited during startup"
    [ "$(date +%s)" -lt $deadline ] || die "server $s did not start listening within ${STARTUP_TIMEOUT}s"
    sleep 0.05
  done
  ADDRS+=("$(cat "$WORKDIR/port.$s")")
done
SERVERS_FLAG=$(IFS=,; echo "${ADDRS[*]}")
if [ -n "$SOCKET_DIR" ]; then
  security="unix sockets in $SOCKET_DIR (mode 0700), no TLS"
elif [ -n "$CERTS_DIR" ]; then
  security="mutual TLS, certificates in $CERTS_DIR"
else
  security="plaintext TCP"
fi
echo "local_cluster: $NUM_SERVERS servers ($MODE mode, $security) at $SERVERS_FLAG; starting $NUM_WORKERS workers"
if [ $ELASTIC -eq 1 ]; then
  echo "local_cluster: elastic: etcd at $COORDINATOR, job local, up to $MAX_WORKERS workers; add one from another shell:"
  echo "local_cluster:   $WORKER_BIN --coordinator=$COORDINATOR --job=local${CERTS_DIR:+ --worker_id=N --tls_ca=$CERTS_DIR/ca.pem --tls_cert=$CERTS_DIR/worker-N.pem --tls_key=$CERTS_DIR/worker-N.key} [worker flags]"
fi
if [ -n "$PROM_CONFIG" ]; then
  all_metrics=("${SERVER_METRICS[@]}" "${WORKER_METRICS[@]+"${WORKER_METRICS[@]}"}")
  echo "local_cluster: metrics at $(IFS=,; echo "${all_metrics[*]}"); Prometheus config $PROM_CONFIG"
  echo "local_cluster: run: prometheus --config.file=$PROM_CONFIG --storage.tsdb.path=$WORKDIR/prometheus --web.listen-address=127.0.0.1:9090"
fi

for ((w = 0; w < NUM_WORKERS; w++)); do
  start_worker $w
done

remaining=$NUM_WORKERS
while [ $remaining -gt 0 ]; do
  wait -n -p done_pid "${!ROLE[@]}"
  rc=$?
  role="${ROLE[$done_pid]:-}"
  [ -n "$role" ] || continue
  unset "ROLE[$done_pid]"
  index=${role#* }
  case "$role" in
    server*)
      if may_restart "$role"; then
        restart_server "$role" $rc
        continue
      fi
      echo "local_cluster: $role exited (status $rc) while workers were running" >&2
      exit 1 ;;
    worker*)
      if [ $rc -ne 0 ]; then
        if may_restart "$role"; then
          echo "local_cluster: $role failed with status $rc; restarting it (restart ${RESTARTS[$role]} of $MAX_RESTARTS)" >&2
          start_worker "$index"
          continue
        fi
        echo "local_cluster: $role failed with status $rc; stopping everything" >&2
        exit 1
      fi
      remaining=$((remaining - 1)) ;;
  esac
done
echo "local_cluster: all $NUM_WORKERS workers finished"
[ $KEEP_SERVERS -eq 1 ] || exit 0
echo "local_cluster: servers still running at $SERVERS_FLAG (--keep_servers): stop them with Ctrl-C or SIGTERM"
while true; do
  wait -n -p done_pid "${!ROLE[@]}"
  rc=$?
  role="${ROLE[$done_pid]:-}"
  [ -n "$role" ] || continue
  unset "ROLE[$done_pid]"
  if [ "${role% *}" = server ] && may_restart "$role"; then
    restart_server "$role" $rc
    continue
  fi
  echo "local_cluster: $role exited (status $rc)" >&2
  exit 1
done
