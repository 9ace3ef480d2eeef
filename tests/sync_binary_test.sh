#!/usr/bin/env bash
# Sync equivalence at the binary level: `ps_worker --num_workers=1
# --batch_size=4b` and 4 workers with --batch_size=b, each against 2 real
# ps_server shards, save the same model (max abs difference < 1e-5).
#
# usage: sync_binary_test.sh LAUNCHER PS_SERVER PS_WORKER
set -euo pipefail
LAUNCH=("$1" --server_bin="$2" --worker_bin="$3")
B=16
STEPS=20
COMMON=(--max_steps=$STEPS --seed=7 --log_every=0)

"${LAUNCH[@]}" --servers=2 --workers=1 -- \
  --batch_size=$((4 * B)) "${COMMON[@]}" --save_model="$TEST_TMPDIR/one"
"${LAUNCH[@]}" --servers=2 --workers=4 -- \
  --batch_size=$B "${COMMON[@]}" --save_model="$TEST_TMPDIR/four"

/usr/bin/python3 - "$TEST_TMPDIR/one" "$TEST_TMPDIR/four" <<'PY'
import glob, os, sys, numpy as np
one, four = sys.argv[1], sys.argv[2]
names = sorted(os.path.basename(p) for p in glob.glob(f"{one}/*.npy"))
assert names == sorted(os.path.basename(p) for p in glob.glob(f"{four}/*.npy")), "different tensors"
assert len(names) == 6, names
worst = 0.0
for n in names:
    a, b = np.load(f"{one}/{n}"), np.load(f"{four}/{n}")
    assert a.shape == b.shape, n
    worst = max(worst, float(np.abs(a - b).max()))
# The biases start at zero: after training they must have moved, or the
# comparison would be vacuous.
assert np.abs(np.load(f"{one}/fc3.bias.npy")).max() > 1e-4, "model did not train"
print(f"max |1 worker x batch {4*16} - 4 workers x batch 16| = {worst:.3g}")
assert worst < 1e-5, worst
PY
echo PASS
