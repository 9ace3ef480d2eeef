#!/usr/bin/env bash
# Faults of the on-disk tier (--table_memory_budget --table_dir, RocksDB)
# through the real binaries on loopback, with ps_worker --model=ctr (async,
# so that a run of one worker is deterministic). One scenario per target:
#
#   unwritable_dir   --table_dir under a regular file: ps_server exits
#                    within seconds with an error status (not a signal) and
#                    a message naming the path. Then (where this machine can
#                    mount in a private mount namespace) a --table_dir on a
#                    read-only tmpfs: the table cannot be made, the worker
#                    fails with an error naming the shard's folder and the
#                    reason, and the server goes on serving and stops cleanly
#   full_disk        the table dir is a 4 MiB tmpfs (a private mount
#                    namespace) and the budget holds ~130 rows: the rows
#                    overflow memory, fill the disk, and the tier refuses the
#                    writes. The server must not crash; the worker finishes
#                    300 steps; the log says the tier refused the writes,
#                    naming the folder and "No space left on device" (the
#                    first refusal, then a line per 10,000); /metrics counts
#                    ps_server_embedding_tier_writes_total{result="failed"};
#                    and the rows kept in memory are served: the trained
#                    model equals bit for bit the one of a run with every row
#                    in memory (run first, same seed), which a lost row (a
#                    fresh one in its place) would change
#   killed_during_writeback  async, 2 workers, a budget of ~650 rows (rows
#                    written back to the tier on every call) and checkpoints
#                    every 50 versions, every other one a delta (the full
#                    ones snapshot the tier): once the tier's writes are seen going
#                    on, kill -9 the server, restart it with the same flags;
#                    it empties the table dir, restores its newest checkpoint
#                    (the rows on disk included), the workers put their newer
#                    copy on top of it, and both finish their 300 steps
#
# usage: table_tier_fault_test.sh SCENARIO PS_SERVER PS_WORKER
set -euo pipefail
SCENARIO="$1" SERVER="$2" WORKER="$3"
T="${TEST_TMPDIR:-$(mktemp -d)}"
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true' EXIT
source "$(dirname "$0")/wait_lib.sh"

fail() {
  echo "FAIL: $*" >&2
  for f in "$T"/*.log; do
    [ -e "$f" ] || continue
    echo "--- $f"
    tail -25 "$f"
  done >&2
  exit 1
}
now() { date +%s.%N; }
secs() { /usr/bin/python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

# skip REASON: the whole scenario cannot run on this machine.
skip() { skip_test "$SCENARIO" "$1"; }

# can_mount: true if this process may mount a tmpfs in a private mount
# namespace (root, or CAP_SYS_ADMIN); the reason in $mount_error if not.
can_mount() {
  mkdir -p "$T/probe"
  mount_error=$(unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs "$1"' sh "$T/probe" 2>&1)
}
# in_tmpfs SIZE_KIB rw|ro DIR: sets tmpfs to the prefix of a command that
# runs it in a private mount namespace with a tmpfs of SIZE_KIB on DIR (gone
# with the process; unshare and sh exec it, so its pid is the command's).
in_tmpfs() {
  tmpfs=(unshare -m sh -c 'mount -t tmpfs -o "$1" tmpfs "$2" && shift 2 && exec "$@"' sh
    "size=${1}k,$2" "$3")
}
# tmpfs_opts PID DIR: the options of the tmpfs PID sees on DIR, or nothing.
tmpfs_opts() {
  awk -v d="$2" '$2 == d && $3 == "tmpfs" { print $4 }' "/proc/$1/mounts" 2>/dev/null || true
}

# wait_exit PID SECONDS: waits for PID (a child of this shell) to exit;
# its status in $exit_rc. False if it still runs after SECONDS.
_gone() { ! kill -0 "$1" 2>/dev/null; }
wait_exit() {
  wait_until "$2" _gone "$1" || return 1
  exit_rc=0
  wait "$1" 2>/dev/null || exit_rc=$?
}

# start_server NAME LISTEN [FLAGS...]: an async ps_server with /metrics,
# under "${tmpfs[@]}" if set; sets server_pid, addr and url.
NW=1
tmpfs=()
start_server() {
  local name="$1" listen="$2"
  shift 2
  rm -f "$T/$name.port"
  "${tmpfs[@]+"${tmpfs[@]}"}" "$SERVER" --listen="$listen" --port_file="$T/$name.port" \
    --num_workers=$NW --mode=async --metrics_listen=127.0.0.1:0 "$@" >>"$T/$name.server.log" 2>&1 &
  server_pid=$!
  pids+=($!)
  wait_for_file 30 "$T/$name.port" || fail "$name: ps_server did not start"
  wait_for_line 10 "$T/$name.server.log" 'metrics on' || fail "$name: ps_server printed no /metrics URL"
  addr=$(cat "$T/$name.port")
  url=$(grep -oE 'metrics on https?://[0-9.]+:[0-9]+/metrics' "$T/$name.server.log" | tail -1 | cut -d' ' -f3)
}
# stop_server NAME: SIGTERM; it must exit 0 within 30 s.
stop_server() {
  kill -TERM "$server_pid"
  wait_exit "$server_pid" 30 || fail "$1: ps_server still runs 30 s after SIGTERM"
  [ "$exit_rc" = 0 ] || fail "$1: ps_server exited with status $exit_rc after SIGTERM"
}

# The CTR workload: 128 examples a step, 26 ids each.
CTR=(--model=ctr --batch_size=128 --threads=1 --ctr_eval_examples=2000 --log_every=0 --progress=off)
# start_worker NAME W [FLAGS...]: sets worker_pid[W].
declare -A worker_pid=()
start_worker() {
  local name="$1" w="$2"
  shift 2
  "$WORKER" --servers="$addr" --worker_id="$w" --num_workers=$NW "${CTR[@]}" "$@" \
    >>"$T/$name.worker$w.log" 2>&1 &
  worker_pid[$w]=$!
  pids+=($!)
}
# worker_done NAME W SECONDS: worker W exited 0 within SECONDS.
worker_done() {
  wait_exit "${worker_pid[$2]}" "$3" || fail "$1: worker $2 still runs after $3 s"
  [ "$exit_rc" = 0 ] || fail "$1: worker $2 exited with status $exit_rc"
}

# metric REGEX: the sum of the samples of the server's /metrics (at $url)
# whose name and labels match the ERE REGEX (0 if none); fails if /metrics
# cannot be read.
metric() {
  local text
  text=$(curl -sf --max-time 5 "$url") || return 1
  awk -v re="$1" '$1 ~ re { s += $2 } END { printf "%d\n", s }' <<<"$text"
}
TIER_OK='^ps_server_embedding_tier_writes_total\{.*result="ok"'
TIER_FAILED='^ps_server_embedding_tier_writes_total\{.*result="failed"'

unwritable_dir() {
  # 1. Under a regular file: the directory cannot be made at start.
  touch "$T/afile"
  local dir="$T/afile/tier" t0 took
  t0=$(now)
  "$SERVER" --listen=127.0.0.1:0 --port_file="$T/file.port" --num_workers=1 \
    --table_memory_budget=1048576 --table_dir="$dir" >"$T/file.server.log" 2>&1 &
  pids+=($!)
  wait_exit $! 15 || fail "ps_server still runs 15 s after starting with --table_dir=$dir"
  took=$(secs "$t0" "$(now)")
  [ "$exit_rc" != 0 ] || fail "ps_server exited 0 with --table_dir=$dir"
  [ "$exit_rc" -lt 128 ] || fail "ps_server died of signal $((exit_rc - 128)) with --table_dir=$dir"
  grep -qF -- "$dir" "$T/file.server.log" || fail "ps_server's error does not name $dir"
  [ ! -s "$T/file.port" ] || fail "ps_server served with --table_dir=$dir"
  echo "--table_dir under a regular file: exit status $exit_rc after ${took} s: $(cat "$T/file.server.log")"

  # 2. On a read-only file system: the server starts (the folder exists),
  # the table's tier cannot be made when the worker creates the table.
  if ! can_mount; then
    echo "SKIPPED (read-only --table_dir): cannot mount a tmpfs in a private mount namespace: $mount_error"
    return
  fi
  dir="$T/ro"
  mkdir -p "$dir"
  in_tmpfs 1024 ro "$dir"
  start_server ro 127.0.0.1:0 --table_memory_budget=1048576 --table_dir="$dir"
  tmpfs=()
  [[ ",$(tmpfs_opts "$server_pid" "$dir")," == *,ro,* ]] ||
    fail "ps_server does not see a read-only tmpfs on $dir: '$(tmpfs_opts "$server_pid" "$dir")'"
  start_worker ro 0 --max_steps=20 --retry_timeout=10
  wait_exit "${worker_pid[0]}" 60 || fail "ro: the worker still runs 60 s after it started"
  [ "$exit_rc" != 0 ] || fail "ro: the worker trained with its table on a read-only --table_dir"
  [ "$exit_rc" -lt 128 ] || fail "ro: the worker died of signal $((exit_rc - 128))"
  grep -F -- "$dir/shard-0" "$T/ro.worker0.log" | grep -q "Read-only file system" ||
    fail "ro: the worker's error does not name $dir/shard-0 and the reason"
  kill -0 "$server_pid" 2>/dev/null || fail "ro: ps_server died"
  [ "$(metric '^ps_server_model_version$')" = 0 ] || fail "ro: ps_server applied updates"
  echo "read-only --table_dir: worker exit status $exit_rc: $(grep -F -- "$dir/shard-0" "$T/ro.worker0.log" | head -1)"
  stop_server ro
  echo "read-only --table_dir: ps_server went on serving and stopped cleanly (exit 0)"
}

full_disk() {
  can_mount || skip "cannot mount a tmpfs in a private mount namespace: $mount_error"
  local steps=300
  # Every row in memory: the model the tiered run must equal.
  start_server ref 127.0.0.1:0
  local t0
  t0=$(now)
  start_worker ref 0 --max_steps=$steps --save_model="$T/ref_model"
  worker_done ref 0 120
  echo "every row in memory: $(secs "$t0" "$(now)") s; $(grep 'done:' "$T/ref.worker0.log")"
  stop_server ref

  local dir="$T/tier"
  mkdir -p "$dir"
  in_tmpfs 4096 rw "$dir"
  # 20,000 bytes: ~130 rows of 16 floats and AdaGrad's 16 in memory.
  start_server run 127.0.0.1:0 --table_memory_budget=20000 --table_dir="$dir"
  tmpfs=()
  [[ ",$(tmpfs_opts "$server_pid" "$dir")," == *,rw,*,size=4096k,* ]] ||
    fail "ps_server does not see a 4 MiB tmpfs on $dir: '$(tmpfs_opts "$server_pid" "$dir")'"
  t0=$(now)
  start_worker run 0 --max_steps=$steps --save_model="$T/run_model"
  worker_done run 0 120
  echo "with the disk full: $(secs "$t0" "$(now)") s; $(grep 'done:' "$T/run.worker0.log")"
  kill -0 "$server_pid" 2>/dev/null || fail "ps_server died"
  grep -q "worker 0 done: mode async, steps $steps, version $steps," "$T/run.worker0.log" ||
    fail "the worker did not train its $steps steps"

  local ok failed disk rows lines
  ok=$(metric "$TIER_OK") || fail "cannot read $url"
  failed=$(metric "$TIER_FAILED") || fail "cannot read $url"
  disk=$(metric '^ps_server_embedding_lookups_total\{.*where="disk"') || fail "cannot read $url"
  rows=$(metric '^ps_server_embedding_rows\{') || fail "cannot read $url"
  echo "/metrics: tier writes ok $ok, failed $failed; rows read back from disk $disk; rows in memory $rows"
  [ "$failed" -gt 0 ] || fail "no tier write failed: the disk never filled"
  [ "$ok" -gt 0 ] || fail "no tier write went through: the tier never worked"
  [ "$disk" -gt 0 ] || fail "no row was read back from the tier"
  # The refusal: the first one, then one line per 10,000.
  local refusal="the tier refused [0-9]+ row writes since start; [0-9]+ rows in memory, past --table_memory_budget"
  grep -E "$refusal" "$T/run.server.log" >"$T/refusals.txt" || fail "no tier refusal in the log"
  # The first line comes with the call that saw the first refusal (one call
  # may be refused a few rows): far fewer than the 10,000 between lines.
  local first
  first=$(head -1 "$T/refusals.txt" | sed -E 's/.*the tier refused ([0-9]+) row writes.*/\1/')
  [ "$first" -lt 1000 ] || fail "the first refusal was not logged (the first line says $first)"
  if grep -vqF -- "row tier $dir/shard-0/ctr." "$T/refusals.txt"; then
    fail "a refusal line does not name the folder $dir/shard-0/ctr.N"
  fi
  if grep -vqF "No space left on device" "$T/refusals.txt"; then
    fail "a refusal line does not say \"No space left on device\""
  fi
  lines=$(wc -l <"$T/refusals.txt")
  [ "$lines" -le $((failed / 10000 + 2)) ] ||
    fail "$lines refusal lines for $failed refused writes: more than one per 10,000"
  echo "refusals logged: $lines lines; the first: $(head -1 "$T/refusals.txt")"
  # The rows kept in memory were served as they were: the same model.
  diff -r "$T/ref_model" "$T/run_model" >/dev/null ||
    fail "the model trained with the disk full differs from the one with every row in memory"
  [ "$(grep -o 'final AUC [0-9.]* log_loss [0-9.]*' "$T/run.worker0.log")" = \
    "$(grep -o 'final AUC [0-9.]* log_loss [0-9.]*' "$T/ref.worker0.log")" ] ||
    fail "the held-out AUC differs from the run with every row in memory"
  echo "model: equal to the one with every row in memory bit for bit ($(cd "$T/run_model" && echo *))"
  stop_server run
  echo "ps_server stopped cleanly (exit 0)"
}

killed_during_writeback() {
  NW=2
  local dir="$T/tier" steps=300
  # ~650 rows in memory: every call writes rows back to the tier.
  # Incremental checkpoints: v50 full (the tier as RocksDB's snapshot), v100
  # a delta on it.
  local flags=(--table_memory_budget=100000 --table_dir="$dir" --checkpoint_dir="$T/ckpt"
    --checkpoint_every=50 --checkpoint_full_every=2)
  local wflags=(--max_steps="$steps" --ctr_vocab=20000 --retry_timeout=60 --wait_timeout=5)
  start_server run 127.0.0.1:0 "${flags[@]}"
  local t0
  t0=$(now)
  start_worker run 1 "${wflags[@]}"
  start_worker run 0 "${wflags[@]}"
  # Kill it between two checkpoints, the tier's writes going on.
  wait_for_line 60 "$T/run.server.log" 'checkpoint v100 written' || fail "no checkpoint v100 within 60 s"
  wait_for_number 60 115 metric '^ps_server_model_version$' >/dev/null || fail "version 115 not reached"
  local ok1 ok2 version
  ok1=$(metric "$TIER_OK") || fail "cannot read $url"
  ok2=$(wait_for_number 10 $((ok1 + 1)) metric "$TIER_OK") || fail "the tier's writes did not go on"
  version=$(metric '^ps_server_model_version$') || fail "cannot read $url"
  kill -9 "$server_pid"
  local killed
  killed=$(now)
  wait_exit "$server_pid" 10 || fail "ps_server still runs 10 s after kill -9"
  echo "killed ps_server at version $version, $(secs "$t0" "$killed") s in; tier writes going on ($ok1, then $ok2)"
  [ -n "$(ls -A "$dir/shard-0" 2>/dev/null)" ] || fail "nothing in $dir/shard-0 at the kill"
  # What an earlier run left in the table dir: gone once it restarts.
  touch "$dir/shard-0/left-by-the-killed-run"
  wait_for_line 30 "$T/run.worker0.log" 'unavailable' || fail "worker 0 did not see the server go"
  start_server run2 "$addr" "${flags[@]}"
  local back mem_rows disk_rows
  back=$(now)
  # At once, before the workers' retries add many rows: the checkpoint's
  # rows (~90,000 at version 100), nearly all of them back on disk.
  mem_rows=$(metric '^ps_server_embedding_rows\{') || fail "cannot read $url"
  disk_rows=$(metric '^ps_server_embedding_disk_rows\{') || fail "cannot read $url"
  wait_for_line 30 "$T/run2.server.log" 'restored checkpoint|no checkpoint in' ||
    fail "the restarted server said nothing of its checkpoint"
  local restored restored_v
  restored=$(grep -E 'shard 0: restored checkpoint .* \(version [0-9]+\)' "$T/run2.server.log") ||
    fail "the restarted server did not restore its checkpoint: $(grep -E 'checkpoint' "$T/run2.server.log" | tr '\n' '|')"
  restored_v=$(sed -nE 's/.*\(version ([0-9]+)\).*/\1/p' <<<"$restored")
  echo "restarted $(secs "$killed" "$back") s after the kill: $restored"
  grep -q 'a full one and 1 delta' <<<"$restored" ||
    fail "the restart did not apply the delta on the full checkpoint: $restored"
  ls "$T/ckpt"/shard-0-of-1-v*.tiers/0/*.sst >/dev/null 2>&1 ||
    fail "no RocksDB snapshot of the tier next to the full checkpoints in $T/ckpt"
  echo "rows at the restart: $mem_rows in memory, $disk_rows on disk"
  [ $((mem_rows + disk_rows)) -ge 40000 ] ||
    fail "the restarted server holds $mem_rows rows in memory and $disk_rows on disk, not the checkpoint's"
  # The workers' recovery: their copy, on top of the checkpoint's rows.
  wait_for_line 60 "$T/run2.server.log" "restored to version [0-9]+ from worker [01]'s copy" ||
    fail "no worker put its copy back within 60 s of the restart"
  grep -qE "restored to version [0-9]+ from worker [01]'s copy \(the shard was at version $restored_v\)" \
    "$T/run2.server.log" || fail "the first worker copy did not go on top of checkpoint version $restored_v"
  echo "recovery: $(grep -m1 'restored to version' "$T/run2.server.log")"
  for w in 0 1; do
    worker_done run $w 120
    grep -q "worker $w done: mode async, steps $steps," "$T/run.worker$w.log" ||
      fail "worker $w did not finish its $steps steps"
  done
  echo "both workers finished $(secs "$killed" "$(now)") s after the kill; $(grep 'done:' "$T/run.worker0.log")"
  [ ! -e "$dir/shard-0/left-by-the-killed-run" ] || fail "the restarted server did not empty $dir/shard-0"
  kill -0 "$server_pid" 2>/dev/null || fail "the restarted ps_server died"
  echo "/metrics of the restarted server: tier writes ok $(metric "$TIER_OK"), failed $(metric "$TIER_FAILED");" \
    "rows in memory $(metric '^ps_server_embedding_rows\{'), on disk $(metric '^ps_server_embedding_disk_rows\{')"
  stop_server run2
}

case "$SCENARIO" in
  unwritable_dir) unwritable_dir ;;
  full_disk) full_disk ;;
  killed_during_writeback) killed_during_writeback ;;
  *) echo "unknown scenario $SCENARIO" >&2; exit 2 ;;
esac
echo PASS
