#!/usr/bin/env bash
# Builds the wire fuzzer (tests/fuzz/wire_fuzz.cc and rows_fuzz.cc, and the
# common/, rpc/ and server/ code they cover) with clang-14, libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer, then fuzzes from the seed corpus in
# tests/fuzz/corpus for a bounded number of runs. Exits 0 if nothing was
# found; otherwise libFuzzer's report is shown and the input that failed is
# kept (its path is printed).
#
# Usage: tests/fuzz/run_fuzz.sh [--runs=N | --max_total_time=SECONDS]
#                               [--seed=N] [--build_only] [-- LIBFUZZER_FLAGS...]
#   --runs=N          inputs to run (default 500000); with a fixed seed the
#                     same inputs each time on the same code
#   --max_total_time  fuzz for a time instead (for longer runs by hand)
#   --seed=N          libFuzzer's random seed (default 1)
# Environment: FUZZ_OUT, the build and work folder (default
# ${TMPDIR:-/tmp}/ps_wire_fuzz). The seed corpus is only read: inputs the
# fuzzer finds go to $FUZZ_OUT/found, emptied at each start.
#
# Needs clang-14 and libclang-rt-14-dev (deploy/setup_debian.sh installs
# them) and the gRPC, protobuf and Abseil packages the Bazel build uses.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

runs=500000
max_total_time=""
seed=1
build_only=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs=*) runs="${1#*=}" ;;
    --max_total_time=*) max_total_time="${1#*=}" ;;
    --seed=*) seed="${1#*=}" ;;
    --build_only) build_only=1 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run_fuzz: unknown argument '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
  shift
done

CXX=clang++-14
if ! command -v "$CXX" >/dev/null ||
   ! compgen -G "/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "run_fuzz: needs $CXX and libFuzzer (packages clang-14 libclang-rt-14-dev): run deploy/setup_debian.sh" >&2
  exit 1
fi

out="${FUZZ_OUT:-${TMPDIR:-/tmp}/ps_wire_fuzz}"
mkdir -p "$out/obj"

# The libraries the covered code needs, as in third_party/system_libs.bzl.
modules=(grpc++ protobuf absl_status absl_statusor absl_strings absl_str_format)
cflags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -I"$root" -I"$out/gen"
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
        $(pkg-config --cflags "${modules[@]}"))
libs=($(pkg-config --libs "${modules[@]}"))
sources=(rpc/proto_codec.cc rpc/raw_fields.cc rpc/raw_unary.cc rpc/raw_stream.cc
         common/slice_assembler.cc common/float_bytes.cc common/bf16.cc common/wire_dtype.cc
         common/partition.cc common/model_spec.cc common/status_macros.cc
         common/table_spec.cc common/embedding_shard.cc common/sparse_optimizer.cc
         common/incarnation.cc common/mode.cc common/parallel.cc rpc/wire.cc
         server/core/embedding_table.cc server/core/embedding_table_contents.cc
         server/core/embedding_table_eviction.cc server/core/embedding_table_index.cc
         server/core/embedding_table_limits.cc
         server/core/admission.cc server/core/sparse_tables.cc
         server/core/sparse_tables_contents.cc
         tests/fuzz/fuzz_input.cc tests/fuzz/wire_fuzz.cc tests/fuzz/rows_fuzz.cc
         "$out/gen/proto/types.pb.cc" "$out/gen/proto/ps.pb.cc")

build() {
  local pids=() objs=() src obj
  # rpc/raw_*.cc take their field numbers from the generated code.
  mkdir -p "$out/gen"
  protoc --cpp_out="$out/gen" -I"$root" "$root/proto/types.proto" "$root/proto/ps.proto"
  for src in "${sources[@]}"; do
    obj="$out/obj/$(tr / _ <<<"${src%.cc}").o"
    objs+=("$obj")
    "$CXX" "${cflags[@]}" -c "$src" -o "$obj" &
    pids+=($!)
    # At most as many compilers at once as there are cores.
    if [ ${#pids[@]} -ge "$(nproc)" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  "$CXX" "${cflags[@]}" "${objs[@]}" "${libs[@]}" -o "$out/wire_fuzz"
}

# Rebuilt unless the binary is newer than this script, proto/'s files and
# every source and header of common/, rpc/, server/ and tests/fuzz/ (a fresh checkout,
# as in CI, always rebuilds; after upgrading system packages, delete
# $FUZZ_OUT).
start=$SECONDS
if [ -x "$out/wire_fuzz" ] && [ -z "$(find "$0" common rpc server tests/fuzz proto -newer "$out/wire_fuzz" \
     \( -name '*.h' -o -name '*.cc' -o -name '*.proto' -o -name run_fuzz.sh \) | head -1)" ]; then
  echo "run_fuzz: $out/wire_fuzz is up to date"
else
  build
  echo "run_fuzz: built $out/wire_fuzz in $((SECONDS - start)) s"
fi
[ "$build_only" -eq 0 ] || exit 0

corpus=tests/fuzz/corpus
seeds=$(find "$corpus" -type f | wc -l)
seed_bytes=$(du -cb "$corpus" | tail -1 | cut -f1)
if [ -n "$max_total_time" ]; then bound=(-max_total_time="$max_total_time"); what="for $max_total_time s"
else bound=(-runs="$runs"); what="$runs runs"; fi
rm -rf "$out/found" "$out/artifacts"
mkdir -p "$out/found" "$out/artifacts"
echo "run_fuzz: $what, seed $seed, from $seeds seed inputs ($seed_bytes bytes) in $corpus"

log="$out/fuzz.log"
start=$SECONDS
set +e
"$out/wire_fuzz" "${bound[@]}" -seed="$seed" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$out/artifacts/" "${extra[@]}" \
  "$out/found" "$corpus" >"$log" 2>&1
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
  grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' "$log" || tail -3 "$log"
  echo "run_fuzz: no finding in $((SECONDS - start)) s (inputs it found are in $out/found)"
  exit 0
fi
tail -60 "$log"
echo "run_fuzz: FAILED (exit $rc) after $((SECONDS - start)) s; full log $log" >&2
for f in "$out"/artifacts/*; do
  [ -e "$f" ] || continue
  echo "run_fuzz: failing input $f ($(stat -c %s "$f") bytes): replay with $out/wire_fuzz $f;" \
    "keep it as a regression input by copying it into $corpus" >&2
done
exit 1
