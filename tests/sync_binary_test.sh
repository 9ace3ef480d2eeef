#!/usr/bin/env bash
# Sync mode is exact across processes. 4 real ps_worker processes, started by
# the launcher with the setup of sync_equivalence_test (seed 42, batch 16,
# 20 steps, lr 0.1, one math thread each), save exactly the same bits with
# --save_model against 1 ps_server over the unary transport as against 2
# ps_servers over streams: a shard applies the mean elementwise, so neither
# the partition nor the transport may change a bit.
#
# What only this test covers: the real binaries and the flags that select the
# run (--servers, --transport, --seed, --batch_size, --max_steps, --threads),
# separate processes talking over TCP, a 1-shard partition, and the model as
# --save_model writes it. sync_equivalence_test already checks, in one
# process over 2 shards and both transports, that sync training matches the
# server's arithmetic bit for bit and single-process SGD at batch 4 x 16
# within a rounding bound it derives; e2e_test checks that the binaries train
# to a useful accuracy and that the saved model loads with numpy. So this test
# no longer runs the 1-worker batch-64 comparison it once had.
#
# usage: sync_binary_test.sh LAUNCHER PS_SERVER PS_WORKER
set -euo pipefail
LAUNCH=("$1" --server_bin="$2" --worker_bin="$3")
COMMON=(--batch_size=16 --max_steps=20 --seed=42 --log_every=0 --threads=1)

"${LAUNCH[@]}" --servers=2 --workers=4 -- \
  "${COMMON[@]}" --transport=stream --save_model="$TEST_TMPDIR/two_shards_stream"
"${LAUNCH[@]}" --servers=1 --workers=4 -- \
  "${COMMON[@]}" --transport=unary --save_model="$TEST_TMPDIR/one_shard_unary"

/usr/bin/python3 - "$TEST_TMPDIR/two_shards_stream" "$TEST_TMPDIR/one_shard_unary" <<'PY'
import glob, os, sys, numpy as np
a_dir, b_dir = sys.argv[1:3]
names = sorted(os.path.basename(p) for p in glob.glob(f"{a_dir}/*.npy"))
assert names == sorted(os.path.basename(p) for p in glob.glob(f"{b_dir}/*.npy")), "different tensors"
assert len(names) == 6, names
a = {n: np.load(f"{a_dir}/{n}") for n in names}
b = {n: np.load(f"{b_dir}/{n}") for n in names}
for n in names:
    assert a[n].shape == b[n].shape, n
    assert np.array_equal(a[n], b[n]), \
        f"{n}: 1 shard over unary differs from 2 shards over streams by {np.abs(a[n] - b[n]).max()}"

# The biases start at zero, so their values are what training moved them by;
# they must have moved, or the comparison would be vacuous.
update = max(float(np.abs(a[n]).max()) for n in names if n.endswith(".bias.npy"))
assert update > 1e-3, f"model did not train: largest bias {update}"
print(f"1 shard over unary = 2 shards over streams, bit for bit; largest bias update {update:.3g}")
PY
echo PASS
