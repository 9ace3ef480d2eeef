#!/usr/bin/env bash
# Makes the Kubernetes Secrets that the manifests under deploy/k8s mount, one
# per role, from the certificates of deploy/make_certs.sh:
#
#   deploy/k8s/make_secrets.sh DIR [--servers=S] [--workers=W] [--days=N]
#                              [--namespace=NS] [--apply]
#
#   ps-tls-server  ca.pem, server-<s>.pem, server-<s>.key for s < S
#                  (mounted by the ps-server StatefulSet; pod s uses server-<s>)
#   ps-tls-worker  ca.pem, worker-<w>.pem, worker-<w>.key for w < W
#                  (mounted by the ps-worker Job; completion index w uses worker-<w>)
#   ps-tls-admin   ca.pem, admin.pem, admin.key   (deploy/k8s/admin's ps-admin pod)
#   ps-tls-reader  ca.pem, reader.pem, reader.key (for a pod of your own that
#                  only reads: Pull, GetStatus)
#
# DIR: when it holds no ca.pem yet, make_certs.sh makes a new CA and every
# certificate there (S and W default to 2 and 3, the manifests' replicas and
# completions; with --namespace, the servers' certificates also name
# ps-server-<s>.ps-server.NS.svc[.cluster.local]). When it holds them
# already, they are used as they are. DIR keeps ca.key, which goes into no
# Secret: keep DIR off the cluster.
#
# Prints the Secrets as YAML (kubectl create secret generic --dry-run=client
# -o yaml; --dry-run with a kubectl older than 1.18), or with --apply pipes
# them into `kubectl apply -f -` (in --namespace, if given). Nothing is kept
# in the repository. kubectl is $KUBECTL, else the one on PATH.
#
# Rotation: run it again with a new DIR and --apply. The kubelet updates the
# mounted files (within about a minute) and the servers and workers re-read
# them (every 10 s, --tls_reload_secs), without a restart; see
# deploy/README.md, "Security".
set -euo pipefail
shopt -s inherit_errexit

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}
die() { echo "make_secrets: $*" >&2; exit 2; }

dir="" servers=2 workers=3 days="" namespace="" apply=0
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --servers=*) servers="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --days=*) days="${arg#*=}" ;;
    --namespace=*) namespace="${arg#*=}" ;;
    --apply) apply=1 ;;
    -*) die "unknown flag $arg (see --help)" ;;
    *) [ -z "$dir" ] || die "one DIR only"; dir="$arg" ;;
  esac
done
[ -n "$dir" ] || die "DIR is missing (see --help)"
[[ "$servers" =~ ^[1-9][0-9]*$ ]] || die "--servers must be a positive integer, got '$servers'"
[[ "$workers" =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer, got '$workers'"
[[ -z "$namespace" || "$namespace" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] ||
  die "--namespace must be a Kubernetes namespace name, got '$namespace'"
kubectl=${KUBECTL:-kubectl}
command -v "$kubectl" >/dev/null || die "no kubectl ('$kubectl'; set KUBECTL)"

if [ ! -e "$dir/ca.pem" ]; then
  certs=("$(dirname "${BASH_SOURCE[0]}")/../make_certs.sh" "$dir" --servers="$servers"
         --workers="$workers")
  [ -z "$days" ] || certs+=(--days="$days")
  [ -z "$namespace" ] ||
    certs+=(--names="ps-server-{s}.ps-server.$namespace.svc,ps-server-{s}.ps-server.$namespace.svc.cluster.local")
  "${certs[@]}" >&2
else
  echo "make_secrets: using the certificates already in $dir" >&2
fi

# from_files VAR FILE...: VAR gets the --from-file arguments of ca.pem and
# FILE... in DIR; each must exist.
from_files() {
  local -n out=$1
  local f
  shift
  out=()
  for f in ca.pem "$@"; do
    [ -r "$dir/$f" ] || die "$dir/$f is missing (made for fewer servers or workers? use a new DIR)"
    out+=("--from-file=$dir/$f")
  done
}
server_pems=() worker_pems=()
for ((s = 0; s < servers; s++)); do server_pems+=("server-$s.pem" "server-$s.key"); done
for ((w = 0; w < workers; w++)); do worker_pems+=("worker-$w.pem" "worker-$w.key"); done
from_files server_files "${server_pems[@]}"
from_files worker_files "${worker_pems[@]}"
from_files admin_files admin.pem admin.key
from_files reader_files reader.pem reader.key

# kubectl 1.18 and later: --dry-run=client; older ones: --dry-run.
if "$kubectl" create secret generic --help 2>/dev/null | grep -q '"client"'; then
  dry_run=--dry-run=client
else
  dry_run=--dry-run
fi
ns=()
[ -z "$namespace" ] || ns=(--namespace="$namespace")

secret() {  # NAME FILE-ARGS...
  local name=$1
  shift
  echo "---"
  "$kubectl" create secret generic "$name" "${ns[@]+"${ns[@]}"}" "$@" "$dry_run" -o yaml
}
yaml() {
  secret ps-tls-server "${server_files[@]}"
  secret ps-tls-worker "${worker_files[@]}"
  secret ps-tls-admin "${admin_files[@]}"
  secret ps-tls-reader "${reader_files[@]}"
}

if [ "$apply" -eq 1 ]; then
  out=$(yaml)
  "$kubectl" apply "${ns[@]+"${ns[@]}"}" -f - <<<"$out"
else
  yaml
fi
