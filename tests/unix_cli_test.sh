#!/usr/bin/env bash
# The real binaries on unix sockets. ps_server refuses a socket folder that
# others can enter, or a missing one (exit 2, naming --listen, the folder and
# its mode); on a 0700 folder it serves, and ps_ctl reaches it in plaintext
# without --insecure (health, status); a second server on the same socket is
# refused ("address in use") and the first keeps serving; SIGTERM removes
# the socket file; after kill -9 the file stays and the next server
# replaces it; --health_listen takes no unix: address.
#
# usage: unix_cli_test.sh PS_SERVER PS_CTL
set -uo pipefail
SERVER="$1" CTL="$2"
failures=0
source "$(dirname "$0")/wait_lib.sh"
source "$(dirname "$0")/expect_lib.sh"

check() {  # check NAME COMMAND...: COMMAND succeeds
  local name="$1"; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}

# The folder lives under TEST_TMPDIR; a socket path holds 107 bytes at most,
# so the sockets are named through a short link when TEST_TMPDIR is long.
T="$(mktemp -d "$TEST_TMPDIR/unix.XXXXXX")"
D="$T"
if [ ${#T} -gt 70 ]; then
  D="$(mktemp -u /tmp/ps-unix-cli.XXXXXX)"
  ln -s "$T" "$D"
fi
PIDS=()
trap 'kill -9 "${PIDS[@]}" 2>/dev/null; [ "$D" = "$T" ] || rm -f "$D"' EXIT
S="unix:$D/shard-0.sock"
ARGS=(--num_workers=1 --shutdown_grace=1)

chmod 0755 "$T"
expect "server refuses a socket folder of mode 0755" 2 \
  "--listen=unix:$D/shard-0.sock: the socket's folder $D has mode 0755 and owner uid $(id -u)" \
  "$SERVER" --listen="$S" "${ARGS[@]}"
chmod 0700 "$T"
expect "server refuses a missing socket folder" 2 "--listen=unix:$D/none/s.sock: the socket's folder $D/none cannot be used" \
  "$SERVER" --listen="unix:$D/none/s.sock" "${ARGS[@]}"
expect "server refuses a relative socket path" 2 "needs an absolute path" \
  "$SERVER" --listen=unix:shard-0.sock "${ARGS[@]}"
expect "server refuses a unix: --health_listen" 2 "--health_listen takes HOST:PORT only" \
  "$SERVER" --listen="$S" --health_listen="unix:$D/health.sock" "${ARGS[@]}"

# start NAME: a server on $S, its output in $T/NAME.out; sets PID.
start() {
  rm -f "$T/$1.port"
  "$SERVER" --listen="$S" --port_file="$T/$1.port" "${ARGS[@]}" >"$T/$1.out" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  wait_for_file 20 "$T/$1.port" || { echo "FAIL server $1 did not start:"; cat "$T/$1.out"; exit 1; }
}

start first
check "the port file names the socket" grep -qx "$S" "$T/first.port"
check "the server says who can connect" grep -q "unix socket: any process of this user (uid $(id -u)) and root can connect" "$T/first.out"
check "the server says it serves plaintext on a unix socket" grep -qx "security: plaintext on a unix socket" "$T/first.out"
check "no plaintext warning on a unix socket" bash -c "! grep -q WARNING '$T/first.out'"
expect "ps_ctl health over the unix socket" 0 "$S SERVING" "$CTL" health --servers="$S"
expect "ps_ctl status over the unix socket" 0 "\"server\":\"$S\"" "$CTL" status --servers="$S"
expect "a second server on a live socket is refused" 2 "address in use" \
  "$SERVER" --listen="$S" "${ARGS[@]}"
expect "the first server still serves" 0 "SERVING" "$CTL" health --servers="$S"
kill -TERM "$PID"
wait "$PID"
check "SIGTERM: the server exits 0" test $? -eq 0
check "SIGTERM removes the socket file" test ! -e "$D/shard-0.sock"

start killed
kill -9 "$PID"
wait "$PID" 2>/dev/null
check "kill -9 leaves the socket file" test -S "$D/shard-0.sock"
start replacing
check "the next server replaces the stale socket" \
  grep -q "removed the stale socket $D/shard-0.sock" "$T/replacing.out"
expect "and serves on it" 0 "$S SERVING" "$CTL" health --servers="$S"
kill -TERM "$PID"
wait "$PID"

echo "$failures failures"
[ "$failures" -eq 0 ]
