#!/usr/bin/env bash
# Prints the dependency graph between the repository's folders, as the
# #include lines of the C++ sources give it, one edge a line:
#   server -> server/core (5 files)
# "gRPC" stands for gRPC's headers, "proto" for the generated code.
#
#   tools/dep_graph.sh [--check] [REPO]
#
# --check: also fails (exit 1), naming file and include, when an edge breaks
# the layering of docs/architecture.md, which the table below writes down
# folder by folder. A file's folder is the folder it sits in; a folder with
# no row takes the row of the nearest folder above it that has one
# (tools/bench takes tools'), and a C++ file in a folder with no row at all
# is an error, so that a new folder is placed in the layers when it is made.
# A row lists what the folder may include:
#   F       the folder F itself (not its subfolders)
#   F/*     every folder under F, at any depth
#   *       anything
#   -F      except F and the folders under it (after *)
#   gRPC    gRPC's headers; proto: the generated code of proto/.
# A folder may always include itself. Beyond the table, the client's public
# headers and its pure rules must stay free of gRPC and protobuf (what a
# user of the library includes; the rules' tests run with neither).
set -euo pipefail
set -f  # the table's * and F/* are patterns, not file names
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"

declare -A allowed=(
  [common]=""
  # Test-only helpers (Bazel testonly keeps them out of the binaries): the
  # fake clock, the bounded wait.
  [common/testing]="common"
  [rpc]="common proto gRPC"
  # The coordinator of elastic clusters: etcd's address, client (its v3
  # gRPC API, over rpc/'s credentials) and this process's leased membership.
  [coord]="common rpc gRPC"
  # The shard core: no gRPC, no protobuf, no rpc/. (Its tests: the fake
  # clock.)
  [server/core]="common common/testing"
  # The checkpoint format (protobuf), files and writer.
  [server/checkpoint]="server/core common common/testing proto rpc"
  # The embedding tables' on-disk tier (RocksDB) behind server/core's
  # RowTier interface.
  [server/tier]="server/core common"
  # The gRPC front of a shard: service, stream reactor, metrics, the process.
  [server]="server/core server/checkpoint server/tier rpc coord common proto gRPC"
  [client]="client/internal rpc common proto gRPC"
  [client/internal]="client rpc common proto gRPC"
  # ps_worker: its main, flags, run loop and reporter, over the workloads;
  # rpc: its /metrics port (rpc/metrics_endpoint.h).
  [worker]="worker/* client rpc coord common"
  # The workloads: each builds on the training contract (worker/train/:
  # Workload, ParamStore), never on another workload or on the loop above.
  [worker/mlp]="worker/train worker/compute common"
  [worker/ctr]="worker/train common"
  # The training contract, and the compute backends (dense math on the CPU
  # or a GPU).
  [worker/train]="client common"
  [worker/compute]="common"
  [python]="client coord common"
  # Tools and tests may use anything but each other's internals: tools never
  # tests/, nobody client/internal/.
  [tools]="* -tests -client/internal"
  [tests]="* -client/internal"
)
# Files that must stay free of gRPC and protobuf beyond the table: the client
# library's public headers (what its users include), its pure rules in
# client/internal/ (recovery, heartbeats, tensor checks) and the sparse ids'
# grouping.
grpc_free='^client/((ps_client|pending_op|client_options|push_pull_in_progress)\.h|sparse_ids(_test)?\.(h|cc)|internal/(recovery|heartbeater|tensor_checks)(_test)?\.(h|cc))$'

# The row that applies to folder $1: its own or its nearest parent's.
row_of() {
  local d=$1
  while :; do
    if [ "${allowed[$d]+set}" = set ]; then echo "$d"; return; fi
    [[ "$d" == */* ]] || return 1
    d=${d%/*}
  done
}

# Whether folder $1 may include folder (or gRPC/proto) $2.
may_include() {
  local from=$1 to=$2 row tok ok=0
  [ "$from" = "$to" ] && return 0
  row=$(row_of "$from") || return 1
  for tok in ${allowed[$row]}; do
    case "$tok" in
      "*") ok=1 ;;
      -*) [[ "$to" == "${tok#-}" || "$to" == "${tok#-}"/* ]] && ok=0 ;;
      */\*) [[ "$to" == "${tok%/\*}"/* ]] && ok=1 ;;
      *) [ "$to" = "$tok" ] && ok=1 ;;
    esac
  done
  [ "$ok" -eq 1 ]
}

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
bad=0
while read -r f; do
  from=$(dirname "$f")
  if [ "$check" -eq 1 ] && ! row_of "$from" >/dev/null; then
    echo "layering: $f is in $from/, which has no row in tools/dep_graph.sh" \
      "(place the folder in docs/architecture.md's layers)" >&2
    bad=1
    continue
  fi
  tos=$( { grep -oE '^#include "[a-z_/]+/[a-z_0-9]+\.(h|pb\.h|grpc\.pb\.h)"' "$f" |
             sed -E 's/#include "(.*)\/[^/]*"/\1/' | grep -E '^(common|coord|rpc|server|worker|client|python|tools|tests|proto)(/|$)' || true
           grep -qE '^#include ["<](grpcpp|grpc\+\+|grpc)/' "$f" && echo gRPC || true; } | sort -u)
  for to in $tos; do
    [ "$from" = "$to" ] && continue
    echo "$from -> $to" >>"$edges"
    [ "$check" -eq 1 ] || continue
    ok=1
    may_include "$from" "$to" || ok=0
    if [[ "$f" =~ $grpc_free ]] && [[ "$to" =~ ^(gRPC|proto|rpc)$ ]]; then ok=0; fi
    if [ "$ok" -eq 0 ]; then
      if [ "$to" = gRPC ]; then pat='^#include ["<]grpc'; else pat="^#include \"$to/[^/]*\""; fi
      echo "layering: $f includes $to: $(grep -m1 -E "$pat" "$f" || true)" >&2
      bad=1
    fi
  done
done < <(git ls-files '*.cc' '*.h' '*.cu')
sort "$edges" | uniq -c | awk '{printf "%s -> %s (%d files)\n", $2, $4, $1}'
exit "$bad"
