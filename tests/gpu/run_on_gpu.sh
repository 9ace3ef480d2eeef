#!/usr/bin/env bash
# Verification on a machine with a GPU, from a bundle (deploy/bundle.sh) of a
# --config=cuda build; needs no package manager and no Bazel:
#
#   . BUNDLE/env.sh && run_on_gpu.sh --out=/tmp/gpu_results.txt
#
# 1. The backend conformance suite (CUDA against the reference and the CPU):
#    backend_test (the ops) and backend_training_test (device memory, copies
#    and the training step). CUDA cases that skip count as a failure here:
#    this script is for GPUs.
# 2. Training: 2 servers and 2 GPU workers on Fashion-MNIST, then the same
#    with CPU workers; samples/s of each and their ratio, final accuracy.
# 3. compute_bench: the worker's per-step compute time against its GEMMs
#    alone (the floor), on the GPU and on the CPU.
# Every step's output goes to the results file; the summary is at its end.
# Exits non-zero if any step failed.
set -uo pipefail

usage() {
  cat <<'USAGE'
usage: run_on_gpu.sh [--out=FILE] [--epochs=N] [--bundle=DIR]

  --out=FILE     results file (default ./gpu_results.txt)
  --epochs=N     training epochs per configuration (default 1)
  --bundle=DIR   the bundle (default $PS_BUNDLE from env.sh, else this
                 script's folder's parent)
USAGE
}

OUT=./gpu_results.txt
EPOCHS=1
BUNDLE="${PS_BUNDLE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
for a in "$@"; do
  case "$a" in
    --out=*) OUT="${a#*=}" ;;
    --epochs=*) EPOCHS="${a#*=}" ;;
    --bundle=*) BUNDLE="${a#*=}" ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; echo "run_on_gpu: unknown option '$a'" >&2; exit 2 ;;
  esac
done
BIN="$BUNDLE/bin"
DATA="$BUNDLE/data/fashion-mnist"
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for b in ps_server ps_worker backend_test backend_training_test compute_bench local_cluster.sh; do
  [ -x "$BIN/$b" ] || { echo "run_on_gpu: $BIN/$b missing: is $BUNDLE a bundle of a --config=cuda build?" >&2; exit 2; }
done
[ -d "$DATA" ] || { echo "run_on_gpu: no dataset in $DATA (bundle without --no_dataset)" >&2; exit 2; }

: >"$OUT"
SUMMARY=()
failed=0
section() { echo; echo "=== $*"; } >>"$OUT"
note() { SUMMARY+=("$*"); echo "$*"; }
fail() { note "FAIL: $*"; failed=1; }

section "machine"
{ date -u; uname -a; nvidia-smi -L 2>&1 || echo "nvidia-smi not available"; } >>"$OUT"

# conformance TEST: runs one binary of the backend conformance suite; its
# output goes to the results file, and its checks see only its own output.
conformance() {
  local t="$1" log rc skipped
  log=$(mktemp)
  section "backend conformance ($t)"
  timeout 600 "$BIN/$t" >"$log" 2>&1
  rc=$?
  cat "$log" >>"$OUT"
  skipped=$(grep -c '^\[  SKIPPED \]' "$log" || true)
  if [ $rc -ne 0 ]; then fail "$t exited $rc"
  elif grep -qi '^\[  SKIPPED \].*cuda' "$log"; then fail "$t skipped CUDA cases (no usable GPU?)"
  elif ! grep -q '^\[ RUN      \] .*/cuda' "$log"; then fail "$t has no CUDA cases: is this a --config=cuda build?"
  else note "conformance: $t passed ($skipped skipped)"; fi
  rm -f "$log"
}
conformance backend_test
conformance backend_training_test

# train DEVICE: 2 servers, 2 workers on DEVICE; sets SPS (total samples/s) and ACC.
train() {
  local device="$1" log
  log=$(mktemp)
  section "training: 2 servers, 2 workers, --device=$device, $EPOCHS epoch(s)"
  local gpu_flags=() gpus
  if [ "$device" = cuda ]; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    [ "$gpus" -ge 1 ] 2>/dev/null || gpus=1
    gpu_flags=(--gpus_per_host="$gpus")
  fi
  timeout 1200 "$BIN/local_cluster.sh" --bin_dir="$BIN" --servers=2 --workers=2 "${gpu_flags[@]}" -- \
    --device="$device" --epochs="$EPOCHS" --dataset_dir="$DATA" 2>&1 | tee -a "$OUT" >"$log"
  local rc=${PIPESTATUS[0]}
  SPS=$(grep -o 'done: .*samples/s [0-9.]*' "$log" | awk '{s += $NF} END {print s + 0}')
  ACC=$(grep -o 'final test_accuracy [0-9.]*' "$log" | awk '{print $3}')
  rm -f "$log"
  [ $rc -eq 0 ] || { fail "training on $device: launcher exited $rc"; return 1; }
  note "training on $device: $SPS samples/s (2 workers together), final test accuracy ${ACC:-?}"
}
train cuda && GPU_SPS=$SPS || GPU_SPS=0
train cpu && CPU_SPS=$SPS || CPU_SPS=0
if [ "$GPU_SPS" != 0 ] && [ "$CPU_SPS" != 0 ]; then
  note "GPU workers / CPU workers samples/s: $(awk -v g="$GPU_SPS" -v c="$CPU_SPS" 'BEGIN {printf "%.2f", g / c}')"
fi

for device in cuda cpu; do
  section "compute_bench --device=$device"
  line=$(timeout 600 "$BIN/compute_bench" --device="$device" 2>&1 | tee -a "$OUT")
  rc=$?
  if [ $rc -ne 0 ]; then fail "compute_bench --device=$device exited $rc"
  else note "compute_bench $device: $(tail -1 <<<"$line")"; fi
done

section "summary"
printf '%s\n' "${SUMMARY[@]}" >>"$OUT"
echo "results in $OUT"
exit $failed
