#!/usr/bin/env bash
# ps_ctl top against real ps_servers with mutual TLS (certificates from
# deploy/make_certs.sh): two sync shards trained 20 steps by two workers,
# then `top --iterations=2` with the reader's certificate shows both shards
# at version 20 with lifetime latencies, then zero rates; the workers' steps
# and lags; plain lines (no escape codes) when stdout is not a terminal; a
# worker's certificate is refused (exit 1, DENIED); a stopped shard is DOWN;
# bad flags exit 2 naming the flag; SIGINT during an endless run exits 0.
#
# usage: top_test.sh PS_SERVER PS_WORKER PS_CTL MAKE_CERTS
set -uo pipefail
SERVER="$1" WORKER="$2" CTL="$3" MAKE_CERTS="$4"
T=$(mktemp -d "${TEST_TMPDIR:-/tmp}/top.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
source "$(dirname "$0")/wait_lib.sh"
source "$(dirname "$0")/expect_lib.sh"
failures=0

"$MAKE_CERTS" "$T/pki" --servers=2 --workers=2 >/dev/null || { echo "FAIL make_certs"; exit 1; }
P="$T/pki"
as() {  # as IDENTITY: the TLS flags for that identity's certificate
  echo "--tls_ca=$P/ca.pem --tls_cert=$P/$1.pem --tls_key=$P/$1.key"
}

addrs=()
for s in 0 1; do
  "$SERVER" --listen=127.0.0.1:0 --port_file="$T/s$s.port" --num_workers=2 --num_shards=2 \
    --shard_id=$s --worker_timeout=0 --tls_cert="$P/server-$s.pem" --tls_key="$P/server-$s.key" \
    --tls_ca="$P/ca.pem" >"$T/s$s.log" 2>&1 &
  pids+=($!)
  wait_for_file 10 "$T/s$s.port" || { echo "FAIL shard $s did not start"; cat "$T/s$s.log"; exit 1; }
  addrs+=("$(cat "$T/s$s.port")")
done
S="${addrs[0]},${addrs[1]}"
server1_pid=${pids[1]}

wpids=()
for w in 0 1; do
  timeout 120 "$WORKER" --servers="$S" --worker_id=$w --num_workers=2 --max_steps=20 \
    $(as worker-$w) >"$T/w$w.log" 2>&1 &
  wpids+=($!)
done
for w in 0 1; do
  wait "${wpids[$w]}" || { echo "FAIL worker $w"; cat "$T/w$w.log"; exit 1; }
done

# The traffic counters behind IN_B/S and OUT_B/S (ps_ctl status): 40 F32
# gradients of the shard's size in, and every pull's weights out.
for s in 0 1; do
  json=$("$CTL" status --servers="${addrs[$s]}" $(as reader) 2>&1)
  field() { grep -oE "\"$1\":\"?[0-9]+" <<<"$json" | grep -oE "[0-9]+$"; }
  n=$(field num_elements) pulls=$(field pulls_served)
  in=$(field bytes_received) sent=$(field bytes_sent)
  if [ -n "$n" ] && [ "${pulls:-0}" -gt 0 ] && [ "$in" = "$((40 * 4 * n))" ] &&
    [ "$sent" = "$((pulls * 4 * n))" ]; then
    echo "ok   shard $s counted $in bytes in (40 x 4 x $n), $sent out ($pulls pulls)"
  else
    echo "FAIL shard $s bytes: in=$in sent=$sent, num_elements=$n pulls_served=$pulls: $json"
    failures=$((failures + 1))
  fi
done

# check NAME PATTERN: the last top output ($out) matches the ERE PATTERN.
check() {
  if grep -qE -- "$2" <<<"$out"; then
    echo "ok   $1"
  else
    echo "FAIL $1: want /$2/ in:"
    echo "$out"
    failures=$((failures + 1))
  fi
}

out=$(timeout 20 "$CTL" top --servers="$S" --iterations=2 $(as reader) 2>&1)
rc=$?
[ "$rc" -eq 0 ] && echo "ok   top --iterations=2 as reader exits 0" ||
  { echo "FAIL top as reader: exit $rc"; failures=$((failures + 1)); }
check "two polls" "ps_ctl top: poll 2 at "
[ "$(grep -c "^ps_ctl top: poll" <<<"$out")" -eq 2 ] && echo "ok   exactly two polls" ||
  { echo "FAIL not two polls"; failures=$((failures + 1)); }
check "the columns" \
  "^SHARD +SERVER +MODE +VERSION +STEPS/S +LIVE +DROPPED +WAITING +PUSH_P50 +PUSH_P99 +PULL_P50 +PULL_P99 +IN_B/S +OUT_B/S$"
first=$(sed -n '/poll 1 at/,/poll 2 at/p' <<<"$out")
second=$(sed -n '/poll 2 at/,$p' <<<"$out")
# Poll 1: version 20, no rate yet, latencies of the whole run (a bucket bound).
lat="([0-9.]+(us|ms|s)|\+Inf)"
for s in 0 1; do
  a=${addrs[$s]}
  out=$first check "poll 1: shard $s at version 20 with 2 live workers and lifetime latencies" \
    "^$s +$a +sync +20 +- +2 +0 +0 +$lat +$lat +$lat +$lat +- +-$"
  out=$second check "poll 2: shard $s idle: 0 steps/s, no calls, 0 bytes/s" \
    "^$s +$a +sync +20 +0\.0 +2 +0 +0 +- +- +- +- +0 +0$"
done
check "worker rows: step 20, no lag" "^0 +live +20 +0$"
check "worker 1 too" "^1 +live +20 +0$"
if grep -q $'\033' <<<"$out"; then
  echo "FAIL escape codes in output that is not a terminal"
  failures=$((failures + 1))
else
  echo "ok   plain lines when stdout is not a terminal"
fi

expect "a worker's certificate is refused" 1 \
  "DENIED: PERMISSION_DENIED: .*worker-0 may not call /ps.v1.ParameterServer/GetStatus" \
  "$CTL" top --servers="$S" --iterations=5 $(as worker-0)
expect "the admin's certificate works too" 0 "^0 +${addrs[0]} +sync +20 " \
  "$CTL" top --servers="$S" --iterations=1 $(as admin)
expect "no certificate: refused at the handshake, so DOWN" 0 "^- +${addrs[0]} +DOWN " \
  "$CTL" top --servers="$S" --iterations=1 --tls_ca="$P/ca.pem"
expect "--interval=0 exits 2 naming the flag" 2 "--interval must be > 0" \
  "$CTL" top --servers="$S" --interval=0 $(as reader)
expect "--iterations=-1 exits 2 naming the flag" 2 "--iterations must be >= 0" \
  "$CTL" top --servers="$S" --iterations=-1 $(as reader)

# SIGINT during an endless run: exit 0 once the signal is in.
"$CTL" top --servers="$S" --interval=0.5 $(as reader) >"$T/endless.out" 2>&1 &
top_pid=$!
if wait_for_line 10 "$T/endless.out" "poll 2 at"; then
  kill -INT "$top_pid"
  gone() { ! kill -0 "$top_pid" 2>/dev/null; }
  if wait_until 10 gone; then
    wait "$top_pid"
    rc=$?
    [ "$rc" -eq 0 ] && echo "ok   SIGINT ends top with exit 0" ||
      { echo "FAIL SIGINT: exit $rc"; cat "$T/endless.out"; failures=$((failures + 1)); }
  else
    echo "FAIL top still runs 10 s after SIGINT"
    kill -9 "$top_pid"
    failures=$((failures + 1))
  fi
else
  echo "FAIL the endless top printed no second poll:"
  cat "$T/endless.out"
  kill -9 "$top_pid"
  failures=$((failures + 1))
fi

# A shard that stopped is DOWN; the other still shows.
kill "$server1_pid"
wait "$server1_pid" 2>/dev/null
expect "a stopped shard shows as DOWN" 0 "${addrs[1]} DOWN: UNAVAILABLE" \
  "$CTL" top --servers="$S" --iterations=1 --interval=2 $(as reader)
expect "the shard that answers still shows" 0 "^0 +${addrs[0]} +sync +20 " \
  "$CTL" top --servers="$S" --iterations=1 --interval=2 $(as reader)

[ "$failures" -eq 0 ] && echo PASS || echo "FAILED: $failures"
exit "$failures"
