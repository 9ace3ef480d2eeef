#!/usr/bin/env bash
# A sync run survives losing every server: the servers write checkpoints
# every 10 steps (--checkpoint_dir); after 20 steps both are killed with
# SIGKILL (no final checkpoint), restarted on the same directory (they
# restore step 20) and new workers resume at step 20. The model they save
# after step 30 equals, bit for bit, the one an uninterrupted 30-step run
# saves: nothing was lost or applied twice, and the workers continued the
# same data order (a pure function of the seed and the step).
#
# usage: resume_test.sh PS_SERVER PS_WORKER
set -euo pipefail
SERVER="$1" WORKER="$2"
T="${TEST_TMPDIR:-$(mktemp -d)}"
COMMON=(--num_workers=2 --batch_size=16 --seed=42 --log_every=0 --threads=1)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true' EXIT
source "$(dirname "$0")/wait_lib.sh"

# start_servers NAME [FLAGS...]: 2 sync shards on 127.0.0.1; sets $servers
# and $server_pids.
start_servers() {
  local name="$1"
  shift
  server_pids=()
  local addrs=()
  for s in 0 1; do
    rm -f "$T/$name.$s.port"
    "$SERVER" --listen=127.0.0.1:0 --port_file="$T/$name.$s.port" --shard_id=$s --num_shards=2 \
      --num_workers=2 --mode=sync "$@" >"$T/$name.server$s.log" 2>&1 &
    server_pids+=($!)
    pids+=($!)
  done
  for s in 0 1; do
    wait_for_file 30 "$T/$name.$s.port" || true
    addrs+=("$(cat "$T/$name.$s.port")")
  done
  servers="${addrs[0]},${addrs[1]}"
}

# run_workers NAME MAX_STEPS [FLAGS for worker 0...]: both workers to the end.
run_workers() {
  local name="$1" steps="$2"
  shift 2
  "$WORKER" --servers="$servers" --worker_id=1 --max_steps="$steps" "${COMMON[@]}" \
    >"$T/$name.worker1.log" 2>&1 &
  local w1=$!
  "$WORKER" --servers="$servers" --worker_id=0 --max_steps="$steps" "${COMMON[@]}" "$@" \
    >"$T/$name.worker0.log" 2>&1 || { cat "$T/$name.worker0.log"; exit 1; }
  wait "$w1" || { cat "$T/$name.worker1.log"; exit 1; }
}

# The uninterrupted run.
start_servers ref
run_workers ref 30 --save_model="$T/ref"
kill "${server_pids[@]}"
wait "${server_pids[@]}" || true

# The run that loses its servers after step 20.
CKPT=(--checkpoint_dir="$T/ckpt" --checkpoint_every=10)
start_servers first "${CKPT[@]}"
run_workers first 20
for s in 0 1; do  # the step-20 checkpoints are written after the step: wait for them
  f="$T/ckpt/shard-$s-of-2-v00000000000000000020.ckpt"
  wait_until 30 test -e "$f" || { echo "FAIL: no $f"; ls -la "$T/ckpt"; exit 1; }
done
kill -9 "${server_pids[@]}"
wait "${server_pids[@]}" 2>/dev/null || true

start_servers second "${CKPT[@]}"
for s in 0 1; do
  grep -q "shard $s: restored checkpoint .*v00000000000000000020.ckpt (version 20)" \
    "$T/second.server$s.log" || { echo "FAIL: shard $s did not restore step 20:"; cat "$T/second.server$s.log"; exit 1; }
done
run_workers second 30 --save_model="$T/resumed"
grep -q "worker 0: the servers are at step 20; resuming there" "$T/second.worker0.log" ||
  { echo "FAIL: worker 0 did not resume at step 20:"; cat "$T/second.worker0.log"; exit 1; }
grep -q "steps 30, version 30" "$T/second.worker0.log" ||
  { echo "FAIL: worker 0 did not end at step 30:"; cat "$T/second.worker0.log"; exit 1; }
kill "${server_pids[@]}"
wait "${server_pids[@]}" || true

/usr/bin/python3 - "$T/ref" "$T/resumed" <<'PY'
import glob, os, sys, numpy as np
a_dir, b_dir = sys.argv[1:3]
names = sorted(os.path.basename(p) for p in glob.glob(f"{a_dir}/*.npy"))
assert len(names) == 6 and names == sorted(os.path.basename(p) for p in glob.glob(f"{b_dir}/*.npy")), names
for n in names:
    a, b = np.load(f"{a_dir}/{n}"), np.load(f"{b_dir}/{n}")
    assert np.array_equal(a, b), f"{n}: resumed run differs by {np.abs(a - b).max()}"
update = max(float(np.abs(np.load(f"{a_dir}/{n}")).max()) for n in names if n.endswith(".bias.npy"))
assert update > 1e-3, f"model did not train: largest bias {update}"
print(f"resumed after losing every server at step 20 = uninterrupted 30 steps, bit for bit")
PY
echo PASS
