#!/usr/bin/env bash
# A network partition in sync mode: 2 servers and 3 workers train; once the
# shards are past version 20, ps-worker-2's cable to the bridge is cut
# (`ip link set ... down` on its end of the bridge). Nothing may hang for
# ever:
#   - ps-worker-0 and ps-worker-1 fail within their wait (10 s) plus a margin,
#     with DEADLINE_EXCEEDED from the server, naming worker 2 as missing;
#   - the servers stay up and healthy, report worker 2 in waiting_for, and
#     hold no waiting calls;
#   - ps-worker-2 itself fails once its connections' keepalive pings go
#     unanswered (--keepalive=5: within about 10 s), with an error naming a
#     shard, well before its calls' deadline (wait + 60 s RPC allowance).
# The test prints what happened, with timings.
#
# usage: netns_partition_test.sh NETNS_CLUSTER PS_SERVER PS_WORKER PS_CTL
set -euo pipefail
source "$(dirname "$0")/netns_lib.sh"
netns_init "$@"

WAIT=10          # the servers' --pull_timeout and the workers' --wait_timeout
KEEPALIVE=5      # the workers' --keepalive: a dead link shows within ~2x this
MARGIN=20
SERVERS=ps-server-0:50051,ps-server-1:50051

# A wait is the shorter of the worker's --wait_timeout and the server's
# --pull_timeout; both are set short.
up --mode=sync --servers=2 --workers=3 --pull_timeout=$WAIT -- \
  --epochs=3 --wait_timeout=$WAIT --keepalive=$KEEPALIVE

shard_version() {
  cluster exec ps-server-0 -- "$CTL" status --servers=ps-server-0:50051 --timeout=2 |
    grep -o '"version":"[0-9]*"' | grep -o '[0-9]*'
}
deadline=$(( $(date +%s) + 60 ))
until v=$(shard_version) && [ "${v:-0}" -ge 20 ]; do
  [ "$(date +%s)" -lt $deadline ] || fail "training did not reach version 20 within 60 s"
  sleep 0.2
done
cluster link ps-worker-2 down
cut=$(date +%s)
echo "cut ps-worker-2's link at shard 0 version $v"

if cluster wait ps-worker-0 ps-worker-1 --timeout=$((WAIT + MARGIN)); then
  fail "workers 0 and 1 finished training although worker 2 was cut off"
fi
others_s=$(( $(date +%s) - cut ))
for w in 0 1; do
  [ -f "/run/psns/$ID/run/ps-worker-$w.rc" ] ||
    fail "ps-worker-$w still waiting $((WAIT + MARGIN)) s after the cut"
  msg=$(cluster logs ps-worker-$w | tail -1)
  grep -q 'DEADLINE_EXCEEDED' <<<"$msg" || fail "ps-worker-$w: no DEADLINE_EXCEEDED in: $msg"
  grep -q 'missing gradients from workers \[2\]' <<<"$msg" ||
    fail "ps-worker-$w: error does not name worker 2 as missing: $msg"
done

cluster status
status=$(cluster exec ps-server-0 -- "$CTL" status --servers=$SERVERS --timeout=5) ||
  fail "servers do not answer status after the partition"
echo "$status"
cluster exec ps-server-0 -- "$CTL" health --servers=$SERVERS --timeout=5 >/dev/null ||
  fail "servers are not SERVING after the partition"
grep -q '"waiting_for":\[[0-9,]*2\]' <<<"$status" || fail "no shard lists worker 2 in waiting_for"
[ "$(grep -c '"waiting_calls":"0"' <<<"$status")" -eq 2 ] || fail "calls still waiting on the servers"

# The cut-off worker: its keepalive pings go unanswered. It may already have
# failed while the checks above ran; its time is measured from the cut.
if cluster wait ps-worker-2 --timeout=$((2 * KEEPALIVE + MARGIN)); then
  fail "ps-worker-2 finished training although its link was cut"
fi
[ -f "/run/psns/$ID/run/ps-worker-2.rc" ] ||
  fail "ps-worker-2 still running $((2 * KEEPALIVE + MARGIN)) s after the cut"
cut_s=$(( $(stat -c %Y "/run/psns/$ID/run/ps-worker-2.rc") - cut ))
cut_msg=$(cluster logs ps-worker-2 | tail -1)
grep -q 'shard [0-9] (ps-server-[0-9]:50051)' <<<"$cut_msg" || fail "ps-worker-2's error names no shard: $cut_msg"
grep -qE 'UNAVAILABLE|DEADLINE_EXCEEDED' <<<"$cut_msg" || fail "ps-worker-2's error: $cut_msg"

echo "--- what happens today when a sync worker is cut off (wait ${WAIT} s)"
echo "ps-worker-0, ps-worker-1: failed ${others_s} s after the cut: $(cluster logs ps-worker-0 | tail -1)"
echo "servers: still SERVING; waiting_for per shard: $(grep -o '"waiting_for":\[[0-9,]*\]' <<<"$status" | tr '\n' ' ')"
echo "ps-worker-2 (cut off): failed ${cut_s} s after the cut: $cut_msg"
echo PASS
