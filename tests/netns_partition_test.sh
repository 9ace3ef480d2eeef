#!/usr/bin/env bash
# A network partition in sync mode, and its end: 2 servers and 3 workers
# train; once the shards are past version 20, ps-worker-2's cable to the
# bridge is cut (`ip link set ... down` on its end of the bridge) for CUT
# seconds, then plugged back in. What must happen:
#   - the servers drop worker 2 once its lease expires (--worker_timeout=3)
#     and log it; the sync steps go on with workers 0 and 1 meanwhile (the
#     version moves while the link is down);
#   - ps-worker-2 notices the dead link by its keepalive pings, and retries
#     (--retry_timeout) instead of failing;
#   - when the link returns, worker 2 reconnects, the servers log it back,
#     its pending gradient is answered "dropped" (or "duplicate", when it
#     had arrived before the cut and only the reply was lost) and it
#     continues from the servers' current step;
#   - every worker finishes, and nothing waits on the servers at the end.
# The test prints what happened, with timings.
#
# usage: netns_partition_test.sh NETNS_CLUSTER PS_SERVER PS_WORKER PS_CTL
set -euo pipefail
source "$(dirname "$0")/netns_lib.sh"
netns_init "$@"

LEASE=3          # the servers' --worker_timeout
KEEPALIVE=2      # the workers' --keepalive: a dead link shows within ~2x this
CUT=15           # seconds the link stays down
SERVERS=ps-server-0:50051,ps-server-1:50051

# Long enough for the link to return while training still runs: 4 epochs
# (312 steps each with 3 workers), every worker slowed to 4x its compute
# time; the steps without worker 2 went about 35 a second here.
EPOCHS=4
STEPS=$((312 * EPOCHS))
up --mode=sync --servers=2 --workers=3 --server_flag=--worker_timeout=$LEASE -- \
  --epochs=$EPOCHS --keepalive=$KEEPALIVE --retry_timeout=120 --slowdown=3

shard_version() {
  ctl ps-server-0 status --servers=ps-server-0:50051 --timeout=2 |
    grep -o '"version":"[0-9]*"' | grep -o '[0-9]*'
}
# wait_log HOST PATTERN TIMEOUT: seconds since the cut when the line appeared.
wait_log() {
  WAIT_POLL=0.2 wait_until "$3" logged "$1" "$2" || fail "$1 logged no /$2/ within $3 s"
  echo $(( $(date +%s) - cut ))
}

v=$(WAIT_POLL=0.2 wait_for_number 60 20 shard_version) ||
  fail "training did not reach version 20 within 60 s"
cluster link ps-worker-2 down
cut=$(date +%s)
echo "cut ps-worker-2's link at shard 0 version $v"

dropped_s=$(wait_log ps-server-0 "worker 2 dropped" $((LEASE + 20)))
v_drop=$(shard_version)
noticed_s=$(wait_log ps-worker-2 "unavailable" $((4 * KEEPALIVE + 20)))
left=$(( cut + CUT - $(date +%s) ))
[ $left -le 0 ] || sleep $left
v_back=$(shard_version)
[ "$v_back" -gt "$v_drop" ] || fail "the servers did not move on without worker 2 (version $v_drop at the drop, $v_back at the end of the cut)"
cluster link ps-worker-2 up
up_s=$(( $(date +%s) - cut ))

back_s=$(wait_log ps-server-0 "worker 2 is back" 60)
v_rejoin=$(cluster logs ps-server-0 | grep -m1 -o 'worker 2 is back (at step [0-9]*' | grep -o '[0-9]*$')
[ "$v_rejoin" -lt $STEPS ] || fail "worker 2 came back only after the run had ended (step $v_rejoin)"
# Its pending gradient is dropped (or, if it had arrived before the cut, a
# duplicate): either way it goes on at the servers' step.
moved_s=$(wait_log ps-worker-2 "dropped this gradient|moved on to step" 30)
cluster wait --timeout=300 || fail "not every worker finished after the link returned"

status=$(ctl ps-server-0 status --servers=$SERVERS --timeout=5) ||
  fail "servers do not answer status after the partition"
[ "$(grep -c '"waiting_calls":"0"' <<<"$status")" -eq 2 ] || fail "calls still waiting on the servers: $status"

echo "--- a sync worker cut off for ${CUT} s (lease ${LEASE} s, keepalive ${KEEPALIVE} s)"
echo "servers dropped worker 2 ${dropped_s} s after the cut: $(cluster logs ps-server-0 | grep -m1 'worker 2 dropped')"
echo "steps went on without it: version $v_drop at the drop, $v_back when the link returned"
echo "ps-worker-2 noticed ${noticed_s} s after the cut: $(cluster logs ps-worker-2 | grep -m1 'unavailable')"
echo "link back at ${up_s} s; servers saw worker 2 back at ${back_s} s: $(cluster logs ps-server-0 | grep -m1 'worker 2 is back')"
echo "ps-worker-2: $(cluster logs ps-worker-2 | grep -m1 -E 'dropped this gradient|moved on to step')"
for w in 0 1 2; do echo "ps-worker-$w: $(cluster logs ps-worker-$w | tail -1)"; done
acc=$(cluster logs ps-worker-0 | grep -o 'final test_accuracy [0-9.]*' | awk '{print $3}')
/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.80 else 1)" "$acc" ||
  fail "final accuracy $acc < 0.80"
echo PASS
