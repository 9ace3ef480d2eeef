#!/usr/bin/env bash
# Prints the dependency graph between the repository's top-level folders, as
# the #include lines of the C++ sources give it, one edge a line:
#   server -> rpc (5 files)
# "gRPC" stands for gRPC's headers, "proto" for the generated code.
#
#   tools/dep_graph.sh [--check] [REPO]
#
# --check: also fails (exit 1), naming file and include, when an edge breaks
# the layering of docs/architecture.md: worker -> client -> rpc -> common,
# python -> client (the pybind11 extension of the Python package),
# server -> rpc -> common, and nothing in common/, the server core or the
# client's public headers (grpc_free below) reaching gRPC or protobuf.
# tools/ may use anything but tests/; tests/ may use anything. Nothing
# outside client/ includes client/internal/ (the library's private headers).
set -euo pipefail
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"

ours="common|rpc|server|worker|client|python|tools|tests|proto"
# Folder -> the folders it may include (gRPC and proto included).
declare -A allowed=(
  [common]=""
  [rpc]="common proto gRPC"
  [client]="rpc common proto gRPC"
  [server]="rpc common proto gRPC"
  # rpc: ps_worker's /metrics port (rpc/metrics_endpoint.h).
  [worker]="client rpc common"
  [python]="client common"
  [tools]="worker client server rpc common proto gRPC"
  [tests]="*"
)
# Files that must stay free of gRPC, protobuf and rpc/: the server core, and
# the client library's public headers (what its users include).
grpc_free='^(server/(shard|shard_state|shard_options|shard_stats|shard_recovery|consistency|embedding_table|membership|stall_reporter|versioned_weights|waiters|stats|gradient|pipeline|weights_snapshot|buffer_pool)(_test)?\.(h|cc)|client/(ps_client|pending_op|client_options)\.h)$'
# The same for client/push_pull_in_progress.h (public), the sparse ids'
# grouping (client/sparse_ids.h, pure) and the client's pure rules in
# client/internal/ (recovery, heartbeats, tensor checks).
grpc_free_client='^client/(push_pull_in_progress\.h|sparse_ids(_test)?\.(h|cc)|internal/(recovery|heartbeater|tensor_checks)(_test)?\.(h|cc))$'

edges=$(mktemp)
bad=0
while read -r f; do
  from=${f%%/*}
  tos=$( { grep -oE "^#include \"($ours)/" "$f" | sed -E 's/#include "([a-z_]+)\//\1/'
           grep -qE '^#include ["<](grpcpp|grpc\+\+|grpc)/' "$f" && echo gRPC || true; } | sort -u)
  if [ "$check" -eq 1 ] && [ "$from" != client ] &&
     grep -qE '^#include "client/internal/' "$f"; then
    echo "layering: $f includes a private client header:" \
      "$(grep -m1 -E '^#include "client/internal/' "$f")" >&2
    bad=1
  fi
  for to in $tos; do
    [ "$from" = "$to" ] && continue
    echo "$from -> $to" >>"$edges"
    [ "$check" -eq 1 ] || continue
    ok=0
    if [ "${allowed[$from]+set}" != set ]; then ok=1   # folders not in the table
    elif [ "${allowed[$from]}" = "*" ]; then ok=1
    else for a in ${allowed[$from]}; do [ "$a" = "$to" ] && ok=1; done; fi
    if [[ "$f" =~ $grpc_free || "$f" =~ $grpc_free_client ]] &&
       [[ "$to" =~ ^(gRPC|proto|rpc)$ ]]; then ok=0; fi
    if [ "$ok" -eq 0 ]; then
      if [ "$to" = gRPC ]; then pat='^#include ["<]grpc'; else pat="^#include \"$to/"; fi
      echo "layering: $f includes $to: $(grep -m1 -E "$pat" "$f" || true)" >&2
      bad=1
    fi
  done
done < <(git ls-files '*.cc' '*.h' '*.cu')
sort "$edges" | uniq -c | awk '{printf "%s -> %s (%d files)\n", $2, $4, $1}'
rm -f "$edges"
exit "$bad"
