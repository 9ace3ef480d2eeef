# start_etcd: one etcd member (Debian's etcd-server, /usr/bin/etcd) on
# 127.0.0.1 for a cluster on this machine: the coordinator of
# local_cluster.sh --elastic (docs/elastic.md). Sourced.
#
#   start_etcd DATA_DIR CLIENT_PORT PEER_PORT CERTS_DIR TIMEOUT
#       starts it in the background with its data in DATA_DIR (its log
#       DATA_DIR.log); with CERTS_DIR (a deploy/make_certs.sh folder; empty:
#       plaintext) its clients need mutual TLS: etcd.pem serves, ca.pem
#       verifies. Waits up to TIMEOUT seconds until it serves, then sets
#       ETCD_PID and COORDINATOR (etcd://127.0.0.1:CLIENT_PORT) and returns
#       0; otherwise prints the log's tail and returns 1.

start_etcd() {
  local dir=$1 client=$2 peer=$3 certs=$4 timeout=$5 scheme=http tls=()
  if [ -n "$certs" ]; then
    scheme=https
    tls=(--cert-file="$certs/etcd.pem" --key-file="$certs/etcd.key"
         --trusted-ca-file="$certs/ca.pem" --client-cert-auth)
  fi
  /usr/bin/etcd --name=local --data-dir="$dir" \
    --listen-client-urls="$scheme://127.0.0.1:$client" \
    --advertise-client-urls="$scheme://127.0.0.1:$client" \
    --listen-peer-urls="http://127.0.0.1:$peer" --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
    --initial-cluster="local=http://127.0.0.1:$peer" "${tls[@]+"${tls[@]}"}" > "$dir.log" 2>&1 &
  ETCD_PID=$!
  local deadline=$(( $(date +%s) + timeout ))
  until grep -q 'ready to serve client requests' "$dir.log"; do
    if ! kill -0 "$ETCD_PID" 2>/dev/null || [ "$(date +%s)" -ge $deadline ]; then
      tail -5 "$dir.log" >&2
      return 1
    fi
    sleep 0.1
  done
  COORDINATOR="etcd://127.0.0.1:$client"
}
