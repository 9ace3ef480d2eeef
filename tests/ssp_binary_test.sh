#!/usr/bin/env bash
# SSP with a straggler, through the real binaries. 2 ps_servers with
# --mode=ssp --staleness=1 and 3 ps_workers, worker 2 slowed 3x with
# --slowdown: `ps_ctl status` must then show that
#   - no applied gradient was more than 1 step stale (max_step_staleness,
#     measured from the version each gradient was computed on, so a worker
#     that ran ahead without waiting would show up), and
#   - the fast workers were held (pulls_held > 0: a pull is held only when
#     its worker is S + 1 = 2 steps ahead of the slowest live one),
# and every worker reached the last step. Also: the flags' bad input exits 2
# naming the flag.
#
# usage: ssp_binary_test.sh PS_SERVER PS_WORKER PS_CTL
set -euo pipefail
SERVER="$1" WORKER="$2" CTL="$3"
T="${TEST_TMPDIR:-$(mktemp -d)}"
STEPS=40
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null || true' EXIT
source "$(dirname "$0")/wait_lib.sh"

fail() {
  echo "FAIL: $*" >&2
  for f in "$T"/*.log; do echo "--- $f"; tail -15 "$f"; done >&2
  exit 1
}

# Bad input: exit 2 and a message naming the flag.
expect_exit2() {  # PATTERN FLAGS...
  local pattern="$1" rc=0
  shift
  "$SERVER" --listen=127.0.0.1:0 "$@" >"$T/bad.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "ps_server $* exited $rc, not 2: $(cat "$T/bad.out")"
  grep -q -- "$pattern" "$T/bad.out" || fail "ps_server $*: no '$pattern' in: $(cat "$T/bad.out")"
}
expect_exit2 "--staleness must be >= 0, got -1" --mode=ssp --staleness=-1
expect_exit2 "--staleness applies to --mode=ssp only" --mode=async --staleness=2
expect_exit2 "--staleness applies to --mode=ssp only" --staleness=0
expect_exit2 "known: sync, async, ssp" --mode=bsp

addr=()
for s in 0 1; do
  "$SERVER" --listen=127.0.0.1:0 --port_file="$T/$s.port" --shard_id=$s --num_shards=2 \
    --num_workers=3 --mode=ssp --staleness=1 >"$T/server$s.log" 2>&1 &
  pids+=($!)
  wait_for_file 30 "$T/$s.port" || fail "shard $s did not start"
  addr[$s]=$(cat "$T/$s.port")
done
grep -q "ssp mode, 3 workers.*at most 1 steps ahead" "$T/server0.log" ||
  fail "the server does not say it runs SSP with S = 1"
servers="${addr[0]},${addr[1]}"

workers=()
for w in 0 1 2; do
  extra=()
  [ "$w" != 2 ] || extra=(--slowdown=3)
  "$WORKER" --servers="$servers" --worker_id=$w --num_workers=3 --max_steps=$STEPS \
    --batch_size=32 --hidden=64 --seed=7 --log_every=0 --threads=1 --wait_timeout=60 \
    "${extra[@]+"${extra[@]}"}" >"$T/worker$w.log" 2>&1 &
  workers+=($!)
  pids+=($!)
done
for w in 0 1 2; do wait "${workers[$w]}" || fail "worker $w failed"; done
grep -q "mode ssp" "$T/worker0.log" || fail "worker 0 does not report mode ssp"

status=$("$CTL" status --servers="$servers" --timeout=5)
echo "$status"
/usr/bin/python3 - "$STEPS" <<PY || fail "ps_ctl status does not show a bounded, holding SSP run"
import json, sys
steps = int(sys.argv[1])
shards = [json.loads(line) for line in """$status""".splitlines() if line.startswith("{")]
assert len(shards) == 2, shards
held = 0
for st in shards:
    assert st["mode"] == "MODE_SSP", st["mode"]
    assert st["staleness_bound"] == 1, st
    assert [int(s) for s in st["worker_steps"]] == [steps] * 3, st["worker_steps"]
    stale = int(st.get("max_step_staleness", 0))
    assert stale <= 1, f"shard {st.get('shard_id', 0)} applied a gradient {stale} steps stale"
    held += int(st.get("pulls_held", 0))
    print(f"shard {st.get('shard_id', 0)}: worker steps {st['worker_steps']}, "
          f"max staleness {stale} steps ({st.get('max_staleness', 0)} versions), "
          f"pulls held {st.get('pulls_held', 0)}")
assert held > 0, "no fast worker's pull was ever held"
PY
echo PASS
