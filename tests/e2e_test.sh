#!/usr/bin/env bash
# End to end through the launcher and the real binaries: 2 servers and 2
# workers train the MLP for one epoch in sync mode, then in async mode; each
# must reach test accuracy >= 0.80. The sync run also saves the model, which
# numpy must load with the right shapes. The sync run uses the launcher's
# default, unix sockets in a 0700 folder without TLS; the async run --tcp,
# mutual TLS over loopback TCP: both servers must say so.
#
# usage: e2e_test.sh LAUNCHER PS_SERVER PS_WORKER
set -euo pipefail
LAUNCH=("$1" --server_bin="$2" --worker_bin="$3")

fail() { echo "FAIL: $*" >&2; exit 1; }

for mode in sync async; do
  log="$TEST_TMPDIR/$mode.log"
  echo "=== $mode"
  transport=()
  want_security="plaintext on a unix socket"
  if [ $mode = async ]; then transport=(--tcp); want_security="mutual TLS"; fi
  "${LAUNCH[@]}" "${transport[@]+"${transport[@]}"}" --mode=$mode --servers=2 --workers=2 -- \
    --epochs=1 --metrics_file="$TEST_TMPDIR/metrics_${mode}_{worker_id}.jsonl" \
    --save_model="$TEST_TMPDIR/model_$mode" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || fail "$mode: launcher exited with $rc"
  acc=$(grep -o 'final test_accuracy [0-9.]*' "$log" | awk '{print $3}')
  [ -n "$acc" ] || fail "$mode: worker 0 printed no final test accuracy"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "$mode: test accuracy $acc < 0.80"
  grep -q '^\[worker 1\] worker 1 done' "$log" || fail "$mode: worker 1 did not finish"
  [ "$(grep -c "^\[server [01]\] security: $want_security\$" "$log")" -eq 2 ] ||
    fail "$mode: the servers did not both serve $want_security"
  if [ $mode = sync ]; then
    grep -qE '^local_cluster: .* at unix:/[^,]+/shard-0.sock,unix:/[^,]+/shard-1.sock;' "$log" ||
      fail "sync: the workers were not given unix: addresses"
  fi
  # Worker 0's final weights include every push: version = steps (sync) or
  # W * steps (async, where the version counts pushes).
  done0=$(grep '^\[worker 0\] worker 0 done' "$log")
  steps=$(sed -E 's/.*steps ([0-9]+),.*/\1/' <<<"$done0")
  version=$(sed -E 's/.*version ([0-9]+),.*/\1/' <<<"$done0")
  want=$steps
  [ $mode = async ] && want=$((2 * steps))
  [ "$version" -eq "$want" ] || fail "$mode: worker 0 ended at version $version, expected $want"
  for w in 0 1; do
    m="$TEST_TMPDIR/metrics_${mode}_$w.jsonl"
    [ -s "$m" ] || fail "$mode: no metrics from worker $w"
    grep -q "\"worker_id\": $w, \"step\": " "$m" || fail "$mode: metrics of worker $w lack fields"
  done
  grep -q '"test_accuracy"' "$TEST_TMPDIR/metrics_${mode}_0.jsonl" ||
    fail "$mode: worker 0's metrics have no test_accuracy"
  echo "$mode: final test accuracy $acc"
done

/usr/bin/python3 - "$TEST_TMPDIR/model_sync" <<'PY'
import sys, numpy as np
d = sys.argv[1]
want = {"fc1.weight": (784, 512), "fc1.bias": (512,), "fc2.weight": (512, 256),
        "fc2.bias": (256,), "fc3.weight": (256, 10), "fc3.bias": (10,)}
for name, shape in want.items():
    a = np.load(f"{d}/{name}.npy")
    assert a.dtype == np.float32 and a.shape == shape and a.flags.c_contiguous, (name, a.dtype, a.shape)
    assert np.isfinite(a).all(), name
print("saved model loads with numpy:", ", ".join(f"{k}{v}" for k, v in want.items()))
PY
echo PASS
