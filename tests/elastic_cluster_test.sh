#!/usr/bin/env bash
# deploy/local_cluster.sh --elastic: an etcd, 2 sync servers for up to 2
# workers and 1 worker of 4 epochs (200 steps each alone, batch 300); a
# second ps_worker started "from another shell" with the command the
# launcher prints joins the running job: it takes share 1 of 2 from the
# next epoch on (100 steps an epoch for two), and both end at the same
# step, 200 E + 100 (4 - E) for a join at epoch E. The servers log both
# joins and both leaves.
#
# usage: elastic_cluster_test.sh LAUNCHER PS_SERVER PS_WORKER
set -euo pipefail
source "$(dirname "$0")/wait_lib.sh"
launcher=$1 server=$2 worker=$3
log="$TEST_TMPDIR/cluster.log"
fail() { echo "FAIL: $*" >&2; cat "$log" >&2 || true; exit 1; }

"$launcher" --server_bin="$server" --worker_bin="$worker" --elastic --servers=2 --workers=1 \
  --max_workers=2 -- --epochs=4 --batch_size=300 --progress=off > "$log" 2>&1 &
cluster=$!
wait_for_line 60 "$log" 'local_cluster:   .* --coordinator=etcd://127.0.0.1:[0-9]+ --job=local' ||
  fail "the launcher did not print how to add a worker"
coordinator=$(grep -oE -- '--coordinator=etcd://127.0.0.1:[0-9]+' "$log" | head -1)
wait_for_line 60 "$log" '^\[worker 0\] worker 0: epoch 0: share 0 of 1 from step 0' ||
  fail "worker 0 did not train"
# Another shell: no --servers, no id, no worker count. It waits for the
# next epoch (meanwhile worker 0 trains on) and trains its share from there.
"$worker" "$coordinator" --job=local --epochs=4 --batch_size=300 --progress=off \
  > "$TEST_TMPDIR/joiner.log" 2>&1 || { cat "$TEST_TMPDIR/joiner.log" >&2; fail "the joiner failed"; }
wait "$cluster" || fail "the cluster failed"
epoch=$(grep -oE 'worker 1: takes share 1 of 2 of epoch [0-9]+' "$TEST_TMPDIR/joiner.log" | grep -oE '[0-9]+$') ||
  { cat "$TEST_TMPDIR/joiner.log" >&2; fail "the joiner took no share"; }
[ "$epoch" -ge 1 ] && [ "$epoch" -le 3 ] || fail "the joiner joined at epoch $epoch"
steps=$((200 * epoch + 100 * (4 - epoch)))
grep -q "worker 1 done: mode sync, steps $steps," "$TEST_TMPDIR/joiner.log" ||
  { cat "$TEST_TMPDIR/joiner.log" >&2; fail "the joiner did not end at step $steps"; }
grep -q "^\[worker 0\] worker 0 done: mode sync, steps $steps, version $steps" "$log" ||
  fail "worker 0 did not end at step $steps"
grep -q "^\[worker 0\] worker 0: epoch $epoch: share 0 of 2 from step $((200 * epoch))" "$log" ||
  fail "worker 0 did not share epoch $epoch"
for s in 0 1; do
  for w in 0 1; do
    grep -q "^\[server $s\] shard $s: worker $w joined the job" "$log" || fail "server $s: no join of worker $w"
    grep -q "^\[server $s\] shard $s: worker $w left the job" "$log" || fail "server $s: no leave of worker $w"
  done
done
echo "PASS (worker 1 took share 1 of 2 from epoch $epoch; both ended at step $steps)"
