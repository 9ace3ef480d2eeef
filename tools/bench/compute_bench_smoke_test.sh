#!/usr/bin/env bash
# Keeps compute_bench from rotting: a few steps of a small model on the CPU
# must print every figure, as text and as JSON. Values are not checked:
# performance is measured by running compute_bench, never asserted in tests.
#
# usage: compute_bench_smoke_test.sh COMPUTE_BENCH
set -euo pipefail
BENCH="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
args=(--device=cpu --threads=1 --steps=3 --warmup=1 --batch=16 --dims=50,20,10)

out=$("$BENCH" "${args[@]}")
echo "$out"
grep -q "^backend cpu" <<<"$out" || fail "no backend line"
last=$(tail -1 <<<"$out")
for figure in train_step_ms gemm_floor_ms step_over_gemm forward_samples_per_s; do
  grep -qE "(^| )$figure [0-9.]+" <<<"$last" || fail "no $figure figure on the last line"
done

json=$("$BENCH" "${args[@]}" --json)
echo "$json"
/usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["backend"].startswith("cpu") and d["dims"] == [50, 20, 10] and d["batch"] == 16, d
for k in ("train_step_ms", "gemm_floor_ms", "step_over_gemm", "forward_samples_per_s"):
    assert d[k] > 0, (k, d)
' "$json"

"$BENCH" --dims=784 >/dev/null 2>&1 && fail "--dims=784 (no classes) was accepted"
echo PASS
