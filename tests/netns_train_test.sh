#!/usr/bin/env bash
# The compose topology on separate hosts (network namespaces): 2 servers and
# 3 workers train the MLP for one epoch in sync mode, then in async mode,
# reaching each other by the compose names. Each run must reach test accuracy
# >= 0.80, every worker must finish, and worker 0's final version must include
# every push.
#
# usage: netns_train_test.sh NETNS_CLUSTER PS_SERVER PS_WORKER PS_CTL
set -euo pipefail
source "$(dirname "$0")/netns_lib.sh"
netns_init "$@"

for mode in sync async; do
  echo "=== $mode: 2 servers, 3 workers, 1 epoch"
  start=$(date +%s)
  up --mode=$mode --servers=2 --workers=3 -- --epochs=1 \
    --metrics_file="$TEST_TMPDIR/metrics_${mode}_{worker_id}.jsonl"
  cluster wait --timeout=300 || fail "$mode: a worker failed"
  log="$TEST_TMPDIR/$mode.log"
  cluster logs >"$log"
  cluster status
  cluster down
  grep -E '^\[ps-worker-[0-9]\] worker [0-9] done' "$log"
  [ "$(grep -c '^\[ps-server-[01]\] security: mutual TLS$' "$log")" -eq 2 ] ||
    fail "$mode: the servers did not both serve mutual TLS"

  done0=$(grep '^\[ps-worker-0\] worker 0 done' "$log") || fail "$mode: worker 0 did not finish"
  acc=$(grep -o 'final test_accuracy [0-9.]*' <<<"$done0" | awk '{print $3}')
  [ -n "$acc" ] || fail "$mode: worker 0 printed no final test accuracy"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "$mode: test accuracy $acc < 0.80"
  for w in 1 2; do
    grep -q "^\[ps-worker-$w\] worker $w done" "$log" || fail "$mode: worker $w did not finish"
  done
  steps=$(sed -E 's/.*steps ([0-9]+),.*/\1/' <<<"$done0")
  version=$(sed -E 's/.*version ([0-9]+),.*/\1/' <<<"$done0")
  want=$steps
  [ $mode = async ] && want=$((3 * steps))
  [ "$version" -eq "$want" ] || fail "$mode: worker 0 ended at version $version, expected $want"
  # The metrics file's last evaluation agrees with the printed accuracy.
  m_acc=$(grep -o '"test_accuracy": [0-9.]*' "$TEST_TMPDIR/metrics_${mode}_0.jsonl" | tail -1 | awk '{print $2}')
  awk -v a="$acc" -v b="$m_acc" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }' ||
    fail "$mode: metrics file says test_accuracy $m_acc, worker 0 printed $acc"
  echo "$mode: final test accuracy $acc, $steps steps per worker, version $version, $(( $(date +%s) - start )) s"
done

# --insecure: plaintext between the hosts (whose addresses are not
# loopback, so every binary gets --insecure): a short sync run completes.
echo "=== --insecure: 1 server, 2 workers, 20 steps"
up --insecure --servers=1 --workers=2 -- --max_steps=20
cluster wait --timeout=120 || fail "--insecure: a worker failed"
log="$TEST_TMPDIR/insecure.log"
cluster logs >"$log"
cluster down
grep -q 'WARNING: serving in plaintext (--insecure)' "$log" ||
  fail "--insecure: the server did not serve plaintext"
for w in 0 1; do
  grep -q "^\[ps-worker-$w\] worker $w done: mode sync, steps 20," "$log" ||
    fail "--insecure: worker $w did not finish 20 steps"
done
echo PASS
