#!/usr/bin/env bash
# Faults through the real binaries on loopback: 2 sync shards, 3 workers, one
# epoch of Fashion-MNIST (312 steps of batch 64 per worker), and one fault
# injected once shard 0 has passed step FAULT_AT. Each scenario checks what
# must hold and prints its figures: when the fault was detected, when
# training went on, the steps lost, and the final accuracy against a
# fault-free run with the same seed (run first, in the same test).
#
#   worker_killed     kill -9 worker 2: the servers drop it once its lease
#                     expires (--worker_timeout=3), workers 0 and 1 finish,
#                     accuracy >= 0.80, the servers' logs name worker 2
#   worker_rejoins    the same, then worker 2 is started again: it rejoins at
#                     the servers' step and every worker finishes
#   server_restarted  kill -9 shard 1 and restart it on the same address from
#                     its checkpoint (every 50 steps): the workers retry, put
#                     it back at their step from their copy, and the saved
#                     model equals the fault-free run's bit for bit (nothing
#                     lost or applied twice; the same float sums in the same
#                     order, so exact on any CPU)
#   corrupt_checkpoint  every server stops after 30 steps (checkpoints every
#                     10) and shard 0's newest checkpoint is damaged: it
#                     falls back to step 20's, shard 1 restores step 30's;
#                     the restarted workers roll shard 1 back to step 20,
#                     the newest checkpoint both have, resume there, and the
#                     40-step model equals a fault-free run's bit for bit
#   async_server_restarted  async mode: kill -9 shard 1 and restart it empty:
#                     the freshest worker copy comes back, every worker
#                     finishes, accuracy >= 0.80; prints the pushes lost
#   quorum            --sync_quorum=2 of 3 with worker 2 slowed down
#                     (--slowdown=4): its late gradients are answered
#                     "dropped" and counted, and every worker finishes
#
# usage: fault_test.sh SCENARIO PS_SERVER PS_WORKER PS_CTL
set -euo pipefail
SCENARIO="$1" SERVER="$2" WORKER="$3" CTL="$4"
T="${TEST_TMPDIR:-$(mktemp -d)}"
FAULT_AT=100
LEASE=3
MODE=sync
COMMON=(--num_workers=3 --seed=7 --log_every=0 --threads=1 --retry_timeout=60)
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true' EXIT
source "$(dirname "$0")/wait_lib.sh"

fail() {
  echo "FAIL: $*" >&2
  for f in "$T"/*.log; do echo "--- $f"; tail -15 "$f"; done >&2
  exit 1
}
now() { date +%s.%N; }
secs() { /usr/bin/python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

# start_server NAME S LISTEN [FLAGS...]: shard S of 2; sets server_pid[S].
declare -A server_pid=() addr=()
start_server() {
  local name="$1" s="$2" listen="$3"
  shift 3
  rm -f "$T/$name.$s.port"
  "$SERVER" --listen="$listen" --port_file="$T/$name.$s.port" --shard_id="$s" --num_shards=2 \
    --num_workers=3 --mode=$MODE --worker_timeout=$LEASE "$@" >>"$T/$name.server$s.log" 2>&1 &
  server_pid[$s]=$!
  pids+=($!)
  wait_for_file 30 "$T/$name.$s.port" || fail "$name: shard $s did not start"
  addr[$s]=$(cat "$T/$name.$s.port")
}
start_servers() {  # NAME [FLAGS...]
  local name="$1"
  shift
  start_server "$name" 0 127.0.0.1:0 "$@"
  start_server "$name" 1 127.0.0.1:0 "$@"
  servers="${addr[0]},${addr[1]}"
}
stop_servers() {
  kill "${server_pid[0]}" "${server_pid[1]}" 2>/dev/null || true
  wait "${server_pid[0]}" "${server_pid[1]}" 2>/dev/null || true
}

# start_worker NAME W [FLAGS...]: sets worker_pid[W].
declare -A worker_pid=()
start_worker() {
  local name="$1" w="$2"
  shift 2
  "$WORKER" --servers="$servers" --worker_id="$w" "${COMMON[@]}" "$@" \
    >>"$T/$name.worker$w.log" 2>&1 &
  worker_pid[$w]=$!
  pids+=($!)
}
start_workers() {  # NAME [FLAGS for worker 0...]; ALL_WORKERS: flags for all
  local name="$1"
  shift
  start_worker "$name" 1 "${ALL_WORKERS[@]+"${ALL_WORKERS[@]}"}"
  start_worker "$name" 2 "${ALL_WORKERS[@]+"${ALL_WORKERS[@]}"}"
  start_worker "$name" 0 "${ALL_WORKERS[@]+"${ALL_WORKERS[@]}"}" "$@"
}
ALL_WORKERS=()
# worker_ok W: waits for worker W; true if it exited 0. (Not in a $(...)
# subshell: only this shell can wait for its children.)
worker_ok() { wait "${worker_pid[$1]}"; }

version_of() {  # shard 0's version, or nothing
  "$CTL" status --servers="${addr[0]}" --timeout=2 2>/dev/null |
    grep -o '"version":"[0-9]*"' | grep -o '[0-9]*' || true
}
wait_for_version() {  # V TIMEOUT: the version reached
  wait_for_number "$2" "$1" version_of || fail "shard 0 did not reach version $1 within $2 s"
}
# line_time FILE PATTERN TIMEOUT: the time the line appeared.
line_time() {
  WAIT_POLL=0.05 wait_for_line "$3" "$1" "$2" || fail "no line /$2/ in $1 within $3 s"
  now
}
accuracy() { grep -o 'final test_accuracy [0-9.]*' "$1" | awk '{print $3}'; }

# The fault-free run: its accuracy and model.
reference() {
  start_servers ref
  local t0
  t0=$(now)
  start_workers ref --save_model="$T/ref_model"
  for w in 0 1 2; do
    worker_ok $w || fail "fault-free run: worker $w failed"
  done
  ref_s=$(secs "$t0" "$(now)")
  stop_servers
  ref_acc=$(accuracy "$T/ref.worker0.log")
  echo "fault-free run: ${ref_s} s, final test_accuracy $ref_acc"
}

worker_fault() {  # REJOIN (0|1)
  local rejoin="$1"
  reference
  start_servers run
  # The rejoin must happen mid-run: every worker is slowed down (4x its
  # compute time), so the epoch takes several times the detection time.
  [ "$rejoin" = 0 ] || ALL_WORKERS=(--slowdown=3)
  start_workers run
  local v killed dropped back resumed
  v=$(wait_for_version $FAULT_AT 120)
  kill -9 "${worker_pid[2]}"
  killed=$(now)
  echo "killed worker 2 at shard 0 version $v"
  dropped=$(line_time "$T/run.server0.log" "worker 2 dropped" $((LEASE + 30)))
  line_time "$T/run.server1.log" "worker 2 dropped" 30 >/dev/null
  local at_drop
  at_drop=$(version_of)
  if [ "$rejoin" = 1 ]; then
    start_worker run 2 "${ALL_WORKERS[@]}"
    resumed=$(line_time "$T/run.worker2.log" "resuming there" 60)
    back=$(line_time "$T/run.server0.log" "worker 2 is back" 30)
    local at
    at=$(grep -m1 -o 'servers are at step [0-9]*' "$T/run.worker2.log" | grep -o '[0-9]*$')
    [ "$at" -lt 312 ] || fail "worker 2 rejoined only after the run ended (step $at)"
  fi
  for w in 0 1; do
    worker_ok $w || fail "worker $w did not finish after worker 2 was killed"
  done
  if [ "$rejoin" = 1 ]; then
    worker_ok 2 || fail "the restarted worker 2 did not finish"
    grep -q "worker 2 done: mode sync, steps 312, version 312" "$T/run.worker2.log" ||
      fail "the restarted worker 2 did not end at step 312"
  fi
  local done_t acc
  done_t=$(now)
  acc=$(accuracy "$T/run.worker0.log")
  /usr/bin/python3 -c "import sys; a=float(sys.argv[1]); sys.exit(0 if a >= 0.80 else 1)" "$acc" ||
    fail "final accuracy $acc < 0.80"
  grep -q "steps 312, version 312" "$T/run.worker0.log" || fail "worker 0 did not run all 312 steps"
  echo "detection: worker 2 dropped $(secs "$killed" "$dropped") s after the kill (--worker_timeout=$LEASE), at version $at_drop"
  echo "steps lost: 0 (every step closed; those after the drop average workers 0 and 1)"
  if [ "$rejoin" = 1 ]; then
    echo "rejoin: restarted worker 2 resumed at the servers' step $(secs "$killed" "$resumed") s after the kill: $(grep -m1 'resuming there' "$T/run.worker2.log")"
  fi
  echo "run finished $(secs "$killed" "$done_t") s after the kill; final test_accuracy $acc (fault-free: $ref_acc)"
  stop_servers
}

server_restarted() {
  reference
  local ckpt=(--checkpoint_dir="$T/ckpt1" --checkpoint_every=50)
  start_server run 0 127.0.0.1:0
  start_server run 1 127.0.0.1:0 "${ckpt[@]}"
  servers="${addr[0]},${addr[1]}"
  start_workers run --save_model="$T/run_model"
  local v killed back
  v=$(wait_for_version $FAULT_AT 120)
  kill -9 "${server_pid[1]}"
  killed=$(now)
  echo "killed shard 1 at shard 0 version $v"
  line_time "$T/run.worker0.log" "unavailable" 30 >/dev/null
  sleep 1
  start_server run 1 "${addr[1]}" "${ckpt[@]}"
  back=$(now)
  # Worker 0 retries until the shard is back at its step: from a worker's
  # copy, or from the checkpoint alone if it was written at that very step.
  local recovered
  recovered=$(line_time "$T/run.worker0.log" "went through" 60)
  for w in 0 1 2; do
    worker_ok $w || fail "worker $w did not finish after shard 1 restarted"
  done
  grep -q "steps 312, version 312" "$T/run.worker0.log" || fail "worker 0 did not end at step 312"
  echo "shard 1 restarted $(secs "$killed" "$back") s after the kill; $(grep 'restored checkpoint\|no checkpoint' "$T/run.server1.log" | tail -1)"
  echo "recovery: worker 0's step went through $(secs "$back" "$recovered") s after the restart;" \
    "$(grep -m1 'restored to version' "$T/run.server1.log" ||
       echo "its checkpoint was already at the workers' step")"
  echo "worker 0: $(grep -m1 'unavailable' "$T/run.worker0.log")"
  echo "steps lost: 0"
  same_model "$T/ref_model" "$T/run_model" "the model with a restarted shard"
  echo "final test_accuracy $(accuracy "$T/run.worker0.log") (fault-free: $ref_acc)"
  stop_servers
}

# same_model A B WHAT: the .npy files of A and B are equal bit for bit.
same_model() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import glob, os, sys, numpy as np
a_dir, b_dir, what = sys.argv[1:4]
names = sorted(os.path.basename(p) for p in glob.glob(f"{a_dir}/*.npy"))
assert names and names == sorted(os.path.basename(p) for p in glob.glob(f"{b_dir}/*.npy")), names
for n in names:
    a, b = np.load(f"{a_dir}/{n}"), np.load(f"{b_dir}/{n}")
    assert np.array_equal(a, b), f"{n}: {what} differs by {np.abs(a - b).max()}"
print(f"{what}: equal to the fault-free run's bit for bit")
PY
}

corrupt_checkpoint() {
  # The fault-free run: 40 steps.
  start_servers ref
  ALL_WORKERS=(--max_steps=40)
  start_workers ref --save_model="$T/ref_model"
  for w in 0 1 2; do worker_ok $w || fail "fault-free run: worker $w failed"; done
  stop_servers
  # 30 steps, checkpoints every 10, then every server stops.
  local ckpt=(--checkpoint_dir="$T/ckpt" --checkpoint_every=10)
  start_servers first "${ckpt[@]}"
  ALL_WORKERS=(--max_steps=30)
  start_workers first
  for w in 0 1 2; do worker_ok $w || fail "first run: worker $w failed"; done
  stop_servers
  local newest="$T/ckpt/shard-0-of-2-v00000000000000000030.ckpt"
  [ -e "$newest" ] || fail "no $newest: $(ls "$T/ckpt")"
  # Flip one byte in the middle of the weights: the checksum no longer holds.
  local size
  size=$(stat -c %s "$newest")
  printf '\xff' | dd of="$newest" bs=1 seek=$((size / 2)) conv=notrunc status=none
  start_servers second "${ckpt[@]}"
  grep -q "v00000000000000000030.ckpt" "$T/second.server0.log" ||
    fail "shard 0 did not mention the damaged checkpoint"
  grep -q "shard 0: restored checkpoint .*v00000000000000000020.ckpt (version 20)" "$T/second.server0.log" ||
    fail "shard 0 did not fall back to step 20"
  grep -q "shard 1: restored checkpoint .*v00000000000000000030.ckpt (version 30)" "$T/second.server1.log" ||
    fail "shard 1 did not restore step 30"
  echo "$(grep -m1 'v00000000000000000030' "$T/second.server0.log")"
  echo "$(grep -m1 'restored checkpoint' "$T/second.server0.log")"
  echo "$(grep -m1 'restored checkpoint' "$T/second.server1.log")"
  # The workers put the shards back on their newest common checkpoint (20)
  # and resume there; the run ends as the fault-free one, bit for bit.
  ALL_WORKERS=(--max_steps=40)
  start_workers second --save_model="$T/run_model"
  for w in 0 1 2; do worker_ok $w || fail "second run: worker $w failed"; done
  grep -q "shard 1: rolled back from version 30 to checkpoint .*v00000000000000000020.ckpt (version 20)" \
    "$T/second.server1.log" || fail "shard 1 did not roll back to the common step 20"
  grep -q "the servers are at step 20; resuming there" "$T/second.worker0.log" ||
    fail "worker 0 did not resume at step 20"
  grep -q "steps 40, version 40" "$T/second.worker0.log" || fail "the resumed run did not reach step 40"
  echo "$(grep -m1 'rolled back' "$T/second.server1.log")"
  echo "$(grep -m1 'resum' "$T/second.worker0.log")"
  echo "steps lost: 10 (30 to 20, computed again)"
  same_model "$T/ref_model" "$T/run_model" "the model resumed from the common checkpoint"
  echo "final test_accuracy $(accuracy "$T/second.worker0.log") (fault-free: $(accuracy "$T/ref.worker0.log"))"
  stop_servers
}

async_server_restarted() {
  MODE=async
  # Worker 0's final wait for all W x 312 pushes cannot be met once pushes
  # were lost with the shard: it gives up after --wait_timeout.
  COMMON+=(--wait_timeout=5)
  reference
  start_servers run
  start_workers run
  local v killed back
  v=$(wait_for_version 300 120)
  kill -9 "${server_pid[1]}"
  killed=$(now)
  echo "killed shard 1 at shard 0 version $v (pushes applied)"
  line_time "$T/run.worker0.log" "unavailable" 30 >/dev/null
  start_server run 1 "${addr[1]}"
  back=$(now)
  local restored
  restored=$(line_time "$T/run.server1.log" "restored to version" 60)
  for w in 0 1 2; do worker_ok $w || fail "worker $w did not finish after shard 1 restarted"; done
  local acc status versions
  acc=$(accuracy "$T/run.worker0.log")
  /usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.80 else 1)" "$acc" ||
    fail "final accuracy $acc < 0.80"
  status=$("$CTL" status --servers="$servers" --timeout=5)
  versions=$(grep -o '"version":"[0-9]*"' <<<"$status" | grep -o '[0-9]*' | tr '\n' ' ')
  echo "recovery: $(grep -m1 'restored to version' "$T/run.server1.log") $(secs "$back" "$restored") s after its restart"
  echo "shard versions at the end (pushes applied; 936 without loss): $versions"
  echo "pushes lost on shard 1: $((936 - $(echo $versions | awk '{print $2}')))"
  echo "worker 0: $(grep -m1 'not every worker' "$T/run.worker0.log" || echo 'every push arrived')"
  echo "final test_accuracy $acc (fault-free: $ref_acc)"
  stop_servers
}

quorum() {
  reference
  start_servers run --sync_quorum=2
  local t0
  t0=$(now)
  start_worker run 1
  start_worker run 2 --slowdown=4
  start_worker run 0
  for w in 0 1 2; do worker_ok $w || fail "worker $w failed with --sync_quorum=2"; done
  local took status dropped
  took=$(secs "$t0" "$(now)")
  status=$("$CTL" status --servers="$servers" --timeout=5)
  dropped=$(grep -o '"pushes_dropped":"[0-9]*"' <<<"$status" | grep -o '[0-9]*' | awk '{s += $1} END {print s + 0}')
  [ "${dropped:-0}" -gt 0 ] || fail "no push was counted as dropped: $status"
  grep -q "shards dropped this gradient" "$T/run.worker2.log" ||
    fail "worker 2 was not told its gradients were dropped"
  echo "quorum 2 of 3, worker 2 slowed 4x: ${took} s (fault-free, all 3 at full speed: ${ref_s} s)"
  echo "pushes dropped (both shards): $dropped; worker 2: $(grep -m1 'dropped this' "$T/run.worker2.log")"
  echo "worker 2: $(grep 'done:' "$T/run.worker2.log")"
  echo "final test_accuracy $(accuracy "$T/run.worker0.log") (fault-free: $ref_acc)"
  stop_servers
}

case "$SCENARIO" in
  worker_killed) worker_fault 0 ;;
  worker_rejoins) worker_fault 1 ;;
  server_restarted) server_restarted ;;
  async_server_restarted) async_server_restarted ;;
  corrupt_checkpoint) corrupt_checkpoint ;;
  quorum) quorum ;;
  *) echo "unknown scenario $SCENARIO" >&2; exit 2 ;;
esac
echo PASS
