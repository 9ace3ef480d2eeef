#!/usr/bin/env bash
# deploy/local_cluster.sh --elastic: an etcd, 2 sync servers for up to 2
# workers and 1 worker of 1800 steps; a second ps_worker started "from
# another shell" with the command the launcher prints joins the running
# job at the servers' step once it has loaded its data, trains with it to
# 1000 steps past where worker 0 was and leaves; the first goes on alone and the
# cluster ends well. The servers log both joins and both leaves.
#
# usage: elastic_cluster_test.sh LAUNCHER PS_SERVER PS_WORKER
set -euo pipefail
source "$(dirname "$0")/wait_lib.sh"
launcher=$1 server=$2 worker=$3
log="$TEST_TMPDIR/cluster.log"
fail() { echo "FAIL: $*" >&2; cat "$log" >&2 || true; exit 1; }

"$launcher" --server_bin="$server" --worker_bin="$worker" --elastic --servers=2 --workers=1 \
  --max_workers=2 -- --max_steps=1800 --batch_size=16 --progress=off --eval_every=100 > "$log" 2>&1 &
cluster=$!
wait_for_line 60 "$log" 'local_cluster:   .* --coordinator=etcd://127.0.0.1:[0-9]+ --job=local' ||
  fail "the launcher did not print how to add a worker"
coordinator=$(grep -oE -- '--coordinator=etcd://127.0.0.1:[0-9]+' "$log" | head -1)
wait_for_line 60 "$log" '^\[worker 0\] step [0-9]+ epoch' ||
  fail "worker 0 did not train"
# Another shell: no --servers, no id, no worker count. It starts at the
# servers' step (once it has loaded its data: meanwhile worker 0 trains on)
# and trains to 1000 steps past the one worker 0 reported.
now=$(grep -oE '^\[worker 0\] step [0-9]+ epoch' "$log" | tail -1 | grep -oE '[0-9]+ epoch' | grep -oE '[0-9]+')
until_step=$((now + 1000))
"$worker" "$coordinator" --job=local --max_steps=$until_step --batch_size=16 --progress=off \
  > "$TEST_TMPDIR/joiner.log" 2>&1 || { cat "$TEST_TMPDIR/joiner.log" >&2; fail "the joiner failed"; }
grep -q "worker 1 done: mode sync, steps $until_step" "$TEST_TMPDIR/joiner.log" ||
  { cat "$TEST_TMPDIR/joiner.log" >&2; fail "the joiner did not train to step $until_step as worker 1"; }
wait "$cluster" || fail "the cluster failed"
for s in 0 1; do
  for w in 0 1; do
    grep -q "^\[server $s\] shard $s: worker $w joined the job" "$log" || fail "server $s: no join of worker $w"
    grep -q "^\[server $s\] shard $s: worker $w left the job" "$log" || fail "server $s: no leave of worker $w"
  done
done
# The joiner came while worker 0 trained, and left before it finished.
joined=$(grep -oE '^\[server 0\] shard 0: worker 1 joined the job \(registered in etcd\) at step [0-9]+' "$log" | grep -oE '[0-9]+$')
left=$(grep -oE '^\[server 0\] shard 0: worker 1 left the job \(its etcd key is gone\) at step [0-9]+' "$log" | grep -oE '[0-9]+$')
[ "$joined" -ge "$now" ] && [ "$joined" -lt "$until_step" ] && [ "$left" -eq "$until_step" ] ||
  fail "worker 1 joined at step $joined and left at step $left"
grep -q '^\[worker 0\] worker 0 done: mode sync, steps 1800, version 1800' "$log" || fail "worker 0 did not finish 1800 steps"
echo "PASS (worker 1 joined at step $joined, left at step $left)"
