#!/usr/bin/env bash
# /metrics of the real binaries: a ps_server and a ps_worker started with
# --metrics_listen=127.0.0.1:0 train a few sync steps; each endpoint is
# scraped once the worker is done (it keeps serving for --metrics_linger),
# `promtool check metrics` (Debian's prometheus package) must say nothing
# about either, and the values must be the run's: the server's model
# version and the worker's steps, samples and version equal the steps
# trained. Then the same with mutual TLS (deploy/make_certs.sh): the reader
# certificate may scrape both, a worker certificate gets 403. Then a
# --model=ctr worker: scraped twice while it trains, its steps counter is
# above 0 and then higher; at the end it equals the steps trained, and the
# evaluation's AUC gauges are there.
#
# usage: metrics_test.sh PS_SERVER PS_WORKER MAKE_CERTS
set -uo pipefail
SERVER="$1" WORKER="$2" MAKE_CERTS="$3"
T=$(mktemp -d "${TEST_TMPDIR:-/tmp}/metrics.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
source "$(dirname "$0")/wait_lib.sh"
failures=0
STEPS=5
BATCH=16

ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

command -v promtool >/dev/null || { echo "FAIL promtool not found (apt-get install prometheus)"; exit 1; }
command -v curl >/dev/null || { echo "FAIL curl not found"; exit 1; }

# url LOG: the /metrics URL a binary printed at startup.
url() { grep -oE 'metrics on https?://[0-9.]+:[0-9]+/metrics' "$1" | head -1 | cut -d' ' -f3; }

# run NAME CURL_ARGS...: starts a server and a worker (with the extra
# flags in SERVER_FLAGS and WORKER_FLAGS), waits for the worker to finish
# training; sets SERVER_URL and WORKER_URL.
run() {
  local name="$1"
  "$SERVER" --listen=127.0.0.1:0 --port_file="$T/$name.port" --num_workers=1 --mode=sync \
    --metrics_listen=127.0.0.1:0 "${SERVER_FLAGS[@]}" >"$T/$name.server.log" 2>&1 &
  pids+=($!)
  wait_for_file 20 "$T/$name.port" && wait_for_line 10 "$T/$name.server.log" 'metrics on' ||
    { fail "$name: ps_server did not start"; cat "$T/$name.server.log"; return 1; }
  "$WORKER" --servers="$(cat "$T/$name.port")" --worker_id=0 --num_workers=1 \
    --max_steps=$STEPS --batch_size=$BATCH --log_every=0 --threads=1 --progress=off \
    --metrics_listen=127.0.0.1:0 --metrics_linger=120 "${WORKER_FLAGS[@]}" \
    >"$T/$name.worker.log" 2>&1 &
  pids+=($!)
  wait_for_line 120 "$T/$name.worker.log" 'serving /metrics for' ||
    { fail "$name: ps_worker did not finish"; cat "$T/$name.worker.log"; return 1; }
  SERVER_URL=$(url "$T/$name.server.log")
  WORKER_URL=$(url "$T/$name.worker.log")
  ok "$name: started, server at $SERVER_URL, worker at $WORKER_URL"
}

# check NAME URL CURL_ARGS...: scrapes URL into $T/NAME.txt; promtool says
# nothing about it.
check() {
  local name="$1" u="$2"
  shift 2
  if ! curl -sSf --max-time 10 "$@" "$u" -o "$T/$name.txt"; then
    fail "$name: scraping $u"
    return 1
  fi
  local out
  out=$(promtool check metrics <"$T/$name.txt" 2>&1)
  local rc=$?
  if [ $rc -eq 0 ] && [ -z "$out" ]; then
    ok "$name: promtool check metrics: nothing to say ($(grep -vc '^#' "$T/$name.txt") samples)"
  else
    fail "$name: promtool check metrics (exit $rc): $out"
  fi
}

# value NAME SERIES WANT: the sample SERIES (name and labels, exactly) of
# $T/NAME.txt is WANT.
value() {
  local got
  got=$(awk -v s="$2" '$1 == s { print $2; exit }' "$T/$1.txt")
  if [ "$got" = "$3" ]; then ok "$1: $2 = $3"; else fail "$1: $2 = '${got}', want $3"; fi
}

# has NAME PATTERN: a line of $T/NAME.txt matches PATTERN (an ERE).
has() {
  if grep -qE -- "$2" "$T/$1.txt"; then ok "$1: has /$2/"; else fail "$1: no line matches /$2/"; fi
}

# --- plaintext on loopback ---
SERVER_FLAGS=() WORKER_FLAGS=()
if run plain; then
  check plain_server "$SERVER_URL"
  check plain_worker "$WORKER_URL"
  value plain_server ps_server_model_version $STEPS
  value plain_worker ps_worker_steps_total $STEPS
  value plain_worker ps_worker_samples_total $((STEPS * BATCH))
  value plain_worker ps_worker_model_version $STEPS
  value plain_worker ps_worker_step_compute_seconds_count $STEPS
  value plain_worker ps_worker_step_communication_seconds_count $STEPS
  value plain_worker ps_worker_retries_total 0
  has plain_worker '^ps_build_info\{mode="sync",version="[0-9.]+",worker="0"\} 1$'
  has plain_worker '^ps_worker_test_accuracy 0\.[0-9]+'
  has plain_worker '^ps_worker_loss [0-9.]+'
fi
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
pids=()

# --- mutual TLS ---
"$MAKE_CERTS" "$T/pki" --servers=1 --workers=1 >/dev/null || { fail "make_certs"; exit 1; }
P="$T/pki"
SERVER_FLAGS=(--tls_ca="$P/ca.pem" --tls_cert="$P/server-0.pem" --tls_key="$P/server-0.key")
WORKER_FLAGS=(--tls_ca="$P/ca.pem" --tls_cert="$P/worker-0.pem" --tls_key="$P/worker-0.key")
READER=(--cacert "$P/ca.pem" --cert "$P/reader.pem" --key "$P/reader.key")
AS_WORKER=(--cacert "$P/ca.pem" --cert "$P/worker-0.pem" --key "$P/worker-0.key")
if run tls; then
  case "$SERVER_URL $WORKER_URL" in
    https://*" https://"*) ok "tls: both serve https" ;;
    *) fail "tls: want https URLs, got $SERVER_URL $WORKER_URL" ;;
  esac
  check tls_server "$SERVER_URL" "${READER[@]}"
  check tls_worker "$WORKER_URL" "${READER[@]}"
  value tls_worker ps_worker_steps_total $STEPS
  value tls_server ps_server_model_version $STEPS
  for which in server worker; do
    u=$SERVER_URL
    [ $which = worker ] && u=$WORKER_URL
    code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "${AS_WORKER[@]}" "$u")
    if [ "$code" = 403 ]; then ok "tls: the $which refuses worker-0's certificate (403)"
    else fail "tls: the $which answered worker-0's certificate with '$code', want 403"; fi
  done
fi

for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
pids=()

# --- --model=ctr: the same run loop and reporter, scraped while it trains ---
CTR_STEPS=3000
# ctr_steps: the worker's ps_worker_steps_total now (an integer).
ctr_steps() {
  curl -sf --max-time 5 "$WORKER_URL" | awk '$1 == "ps_worker_steps_total" { print int($2) }'
}
ctr() {
  "$SERVER" --listen=127.0.0.1:0 --port_file="$T/ctr.port" --num_workers=1 --mode=sync \
    >"$T/ctr.server.log" 2>&1 &
  pids+=($!)
  wait_for_file 20 "$T/ctr.port" || { fail "ctr: ps_server did not start"; return 1; }
  "$WORKER" --model=ctr --servers="$(cat "$T/ctr.port")" --worker_id=0 --num_workers=1 \
    --max_steps=$CTR_STEPS --batch_size=32 --ctr_examples=100000 --ctr_vocab=10000 \
    --ctr_eval_examples=1000 --ctr_dim=4 --ctr_hidden=8 --log_every=0 --threads=1 \
    --progress=off --metrics_listen=127.0.0.1:0 --metrics_linger=120 >"$T/ctr.worker.log" 2>&1 &
  pids+=($!)
  wait_for_line 60 "$T/ctr.worker.log" 'metrics on' ||
    { fail "ctr: ps_worker did not open /metrics"; cat "$T/ctr.worker.log"; return 1; }
  WORKER_URL=$(url "$T/ctr.worker.log")
  local first second
  first=$(wait_for_number 60 1 ctr_steps) ||
    { fail "ctr: ps_worker_steps_total stayed at 0 (or unscrapable) while it trained"; return 1; }
  second=$(wait_for_number 60 $((first + 1)) ctr_steps) ||
    { fail "ctr: ps_worker_steps_total stayed at $first"; return 1; }
  if [ "$first" -lt $CTR_STEPS ]; then
    ok "ctr: scraped while training: ps_worker_steps_total $first, then $second"
  else
    fail "ctr: the run ended before the first scrape ($first steps): nothing was seen moving"
  fi
  wait_for_line 120 "$T/ctr.worker.log" 'serving /metrics for' ||
    { fail "ctr: ps_worker did not finish"; cat "$T/ctr.worker.log"; return 1; }
  check ctr_worker "$WORKER_URL"
  value ctr_worker ps_worker_steps_total $CTR_STEPS
  value ctr_worker ps_worker_samples_total $((CTR_STEPS * 32))
  value ctr_worker ps_worker_model_version $CTR_STEPS
  value ctr_worker ps_worker_step_communication_seconds_count $CTR_STEPS
  has ctr_worker '^ps_build_info\{mode="sync",version="[0-9.]+",worker="0"\} 1$'
  has ctr_worker '^ps_worker_auc 0\.[0-9]+'
  has ctr_worker '^ps_worker_log_loss [0-9.]+'
  has ctr_worker '^ps_worker_best_auc 0\.[0-9]+'
}
ctr

if [ $failures -gt 0 ]; then echo "$failures FAILED"; exit 1; fi
echo PASS
