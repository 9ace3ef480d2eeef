#!/usr/bin/env bash
# The example flag files of deploy/flags/ work with the real binaries: two
# shards and two workers start from them (certificates from make_certs.sh,
# at the paths the files name, moved under a temporary folder) and train two
# sync steps over mutual TLS with tokens; and a flag file with an unknown flag
# fails the start clearly.
#
# usage: flagfile_test.sh PS_SERVER PS_WORKER MAKE_CERTS SERVER_FLAGS WORKER_FLAGS
set -uo pipefail
source "$(dirname "$0")/wait_lib.sh"
SERVER="$1" WORKER="$2" MAKE_CERTS="$3" SERVER_FLAGS="$4" WORKER_FLAGS="$5"
T="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }
trap cleanup EXIT

fail() { echo "FAIL $1"; shift; [ $# -gt 0 ] && head -20 "$@"; failures=$((failures + 1)); }
ok() { echo "ok   $1"; }

"$MAKE_CERTS" "$T/certs" --servers=2 --workers=2 >/dev/null || { echo "make_certs failed"; exit 1; }
# The files as a deployment would have them, with /certs/ under $T.
sed "s|/certs/|$T/certs/|g" "$SERVER_FLAGS" >"$T/ps_server.flags"
sed "s|/certs/|$T/certs/|g" "$WORKER_FLAGS" >"$T/ps_worker.flags"

# Each shard: the file, then what a test on one machine must override.
for s in 0 1; do
  "$SERVER" --flagfile="$T/ps_server.flags" --shard_id="$s" --listen=127.0.0.1:0 \
    --health_listen=127.0.0.1:0 --checkpoint_dir="$T/ckpt" --port_file="$T/server-$s.port" \
    --tls_cert="$T/certs/server-$s.pem" --tls_key="$T/certs/server-$s.key" \
    >"$T/server-$s.log" 2>&1 &
  pids+=($!)
done
for s in 0 1; do
  wait_for_file 10 "$T/server-$s.port"
  if grep -q "shard $s/2, sync mode, 2 workers, lr 0.1, .*worker lease 10s" "$T/server-$s.log" &&
     grep -q "security: mutual TLS + bearer tokens; health probes" "$T/server-$s.log"; then
    ok "shard $s starts from ps_server.flags and reports its configuration"
  else
    fail "shard $s from ps_server.flags" "$T/server-$s.log"
  fi
done
servers="$(cat "$T/server-0.port"),$(cat "$T/server-1.port")"

for w in 0 1; do
  timeout 120 "$WORKER" --flagfile="$T/ps_worker.flags" --servers="$servers" --worker_id="$w" \
    --tls_cert="$T/certs/worker-$w.pem" --tls_key="$T/certs/worker-$w.key" \
    --auth_token_file="$T/certs/worker-$w.token" --max_steps=2 >"$T/worker-$w.log" 2>&1 &
  pids+=($!)
  worker_pids[$w]=$!
done
for w in 0 1; do
  if wait "${worker_pids[$w]}"; then
    ok "worker $w trains from ps_worker.flags"
  else
    fail "worker $w from ps_worker.flags" "$T/worker-$w.log"
  fi
done

# A flag file with a flag the binary does not have: refused before it starts.
cp "$T/ps_server.flags" "$T/bad.flags"
echo "--no_such_flag=1" >>"$T/bad.flags"
out=$(timeout 10 "$SERVER" --flagfile="$T/bad.flags" --listen=127.0.0.1:0 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && grep -q "no_such_flag" <<<"$out" && ! grep -q "listening on" <<<"$out"; then
  ok "an unknown flag in a flag file fails the start (exit $rc)"
else
  fail "unknown flag in a flag file: exit $rc, output: $out"
fi
out=$(timeout 10 "$SERVER" --flagfile="$T/nonexistent.flags" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && grep -q "nonexistent.flags" <<<"$out"; then
  ok "a missing flag file fails the start (exit $rc)"
else
  fail "missing flag file: exit $rc, output: $out"
fi

echo "$failures failures"
[ "$failures" -eq 0 ]
