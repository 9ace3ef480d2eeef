#!/usr/bin/env bash
# Transport security through the real binaries: a ps_server with mutual TLS
# (certificates from deploy/make_certs.sh) refuses plaintext clients, foreign
# and expired certificates at the handshake, and calls an identity may not
# make with PERMISSION_DENIED; bearer tokens; secure defaults; a server
# certificate rotated on disk is served without a restart. Each refused case
# prints the exact status it got.
#
# usage: security_test.sh PS_SERVER PS_WORKER PS_CTL AUTH_PROBE MAKE_CERTS
set -uo pipefail
SERVER="$1" WORKER="$2" CTL="$3" PROBE="$4" MAKE_CERTS="$5"
T=$(mktemp -d "${TEST_TMPDIR:-/tmp}/security.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
source "$(dirname "$0")/wait_lib.sh"
failures=0
passes=0

ok() { echo "ok   $1"; passes=$((passes + 1)); }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

# expect NAME PATTERN COMMAND...: COMMAND's output (20 s at most) must match
# PATTERN (an extended regexp); prints the line that matched, or the output.
expect() {
  local name="$1" pattern="$2"
  shift 2
  local out
  out=$(timeout 20 "$@" 2>&1)
  if grep -qE -- "$pattern" <<<"$out"; then
    ok "$name -> $(grep -m1 -E -- "$pattern" <<<"$out" | cut -c1-300)"
  else
    fail "$name: want /$pattern/, got:"
    echo "$out" | head -5
  fi
}

# start NAME ARGS...: starts a ps_server on a free loopback port; sets ADDR.
start() {
  local name="$1"
  shift
  rm -f "$T/$name.port"
  "$SERVER" --listen=127.0.0.1:0 --port_file="$T/$name.port" --num_workers=2 "$@" \
    >"$T/$name.log" 2>&1 &
  pids+=($!)
  wait_for_file 10 "$T/$name.port"
  ADDR=$(cat "$T/$name.port" 2>/dev/null) || { fail "$name did not start"; cat "$T/$name.log"; exit 1; }
}

"$MAKE_CERTS" "$T/pki" --servers=1 --workers=2 >/dev/null || { fail "make_certs"; exit 1; }
"$MAKE_CERTS" "$T/foreign" --servers=1 --workers=2 >/dev/null || { fail "make_certs (foreign)"; exit 1; }
P="$T/pki"

# A worker-1 certificate of the right CA that expired in 2020.
cat >"$T/ca.cnf" <<CNF
[ca]
default_ca = d
[d]
database = $T/index.txt
new_certs_dir = $T
serial = $T/serial
default_md = sha256
policy = p
[p]
commonName = supplied
CNF
: >"$T/index.txt"
echo 01 >"$T/serial"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$T/expired.key" 2>/dev/null
openssl req -new -key "$T/expired.key" -subj "/CN=worker-1" -out "$T/expired.csr"
openssl ca -batch -config "$T/ca.cnf" -cert "$P/ca.pem" -keyfile "$P/ca.key" -notext \
  -in "$T/expired.csr" -out "$T/expired.pem" -startdate 20200101000000Z -enddate 20200102000000Z \
  >/dev/null 2>&1 || { fail "making the expired certificate"; exit 1; }
# Expiry must be the one thing wrong with it.
verify=$(openssl verify -CAfile "$P/ca.pem" "$T/expired.pem" 2>&1)
grep -q "error 10 at 0 depth lookup: certificate has expired" <<<"$verify" &&
  [ "$(grep -c "^error [0-9]" <<<"$verify")" -eq 1 ] ||
  { fail "the expired certificate is wrong in another way: $verify"; exit 1; }

as() {  # as IDENTITY: the probe's TLS flags for that identity's certificate
  echo "--tls_ca=$P/ca.pem --tls_cert=$P/$1.pem --tls_key=$P/$1.key"
}

echo "== mutual TLS"
start mtls --tls_cert="$P/server-0.pem" --tls_key="$P/server-0.key" --tls_ca="$P/ca.pem" \
  --tls_reload_secs=1 --health_listen=127.0.0.1:0
M=$ADDR
expect "server says it serves mutual TLS" "security: mutual TLS" cat "$T/mtls.log"
expect "plaintext client refused at the handshake" "^UNAVAILABLE" "$PROBE" --server="$M" --call=GetStatus
expect "client without a certificate refused at the handshake" "^UNAVAILABLE" \
  "$PROBE" --server="$M" --call=GetStatus --tls_ca="$P/ca.pem"
expect "certificate of a foreign CA refused at the handshake" "^UNAVAILABLE" \
  "$PROBE" --server="$M" --call=GetStatus --tls_ca="$P/ca.pem" \
  --tls_cert="$T/foreign/admin.pem" --tls_key="$T/foreign/admin.key"
expect "expired certificate refused at the handshake" "^UNAVAILABLE" \
  "$PROBE" --server="$M" --call=Register --worker_id=1 --tls_ca="$P/ca.pem" \
  --tls_cert="$T/expired.pem" --tls_key="$T/expired.key"
expect "client refuses a server its CA did not sign" "^UNAVAILABLE" \
  "$PROBE" --server="$M" --call=GetStatus --tls_ca="$T/foreign/ca.pem" \
  --tls_cert="$T/foreign/admin.pem" --tls_key="$T/foreign/admin.key"
expect "client refuses a server certificate for another name" "^UNAVAILABLE.*Hostname Verification" \
  "$PROBE" --server="$M" --call=GetStatus $(as admin) --tls_server_name=ps-server-7
expect "server certificate matches --tls_server_name" "^OK" \
  "$PROBE" --server="$M" --call=GetStatus $(as admin) --tls_server_name=ps-server-0
for call in Register Heartbeat Push PushPull Pull Stream; do
  expect "worker-1 may not $call as worker 0" \
    "^PERMISSION_DENIED: worker-1 may not call $call as worker 0" \
    "$PROBE" --server="$M" --call=$call --worker_id=0 $(as worker-1)
done
expect "worker-1 may not InitParams as worker 0" \
  "^PERMISSION_DENIED: worker-1 may not call InitParams as worker 0" \
  "$PROBE" --server="$M" --call=CreateParams --worker_id=0 $(as worker-1)
expect "worker-1 may not create the parameters as itself" \
  "^PERMISSION_DENIED: worker-1 may not call InitParams with values" \
  "$PROBE" --server="$M" --call=CreateParams --worker_id=1 $(as worker-1)
expect "reader may not push" "^PERMISSION_DENIED: reader may not call /ps.v1.ParameterServer/Push$" \
  "$PROBE" --server="$M" --call=Push --worker_id=1 $(as reader)
expect "reader may not stream" "^PERMISSION_DENIED: reader may not call /ps.v1.ParameterServer/Stream" \
  "$PROBE" --server="$M" --call=Stream --worker_id=1 $(as reader)
expect "reader may not checkpoint" "^PERMISSION_DENIED: reader may not call /ps.v1.ParameterServer/Checkpoint" \
  "$PROBE" --server="$M" --call=Checkpoint $(as reader)
expect "worker may not read the status" "^PERMISSION_DENIED: worker-0 may not call /ps.v1.ParameterServer/GetStatus" \
  "$PROBE" --server="$M" --call=GetStatus $(as worker-0)
expect "worker-0 creates the parameters" "^OK" \
  "$PROBE" --server="$M" --call=CreateParams --worker_id=0 $(as worker-0)
expect "worker-1 registers as itself" "^OK" "$PROBE" --server="$M" --call=Register --worker_id=1 $(as worker-1)
expect "reader pulls" "^OK" "$PROBE" --server="$M" --call=Pull --worker_id=1 $(as reader)
expect "reader reads the status" "^OK" "$PROBE" --server="$M" --call=GetStatus $(as reader)
expect "admin may checkpoint (this server has no --checkpoint_dir)" "^FAILED_PRECONDITION" \
  "$PROBE" --server="$M" --call=Checkpoint $(as admin)
expect "admin acts as any worker" "^OK" "$PROBE" --server="$M" --call=Heartbeat --worker_id=0 $(as admin)
expect "ps_ctl status as admin" '"initialized":true' \
  "$CTL" status --servers="$M" --tls_ca="$P/ca.pem" --tls_cert="$P/admin.pem" --tls_key="$P/admin.key"
HEALTH=$(sed -n 's/.*health probes (plaintext) on //p' "$T/mtls.log")
expect "plaintext health port answers probes" "SERVING" "$CTL" health --servers="$HEALTH"
expect "health port serves nothing else" "^UNIMPLEMENTED" "$PROBE" --server="$HEALTH" --call=GetStatus
expect "ps_worker with worker-1's certificate as worker 0 fails" \
  "PERMISSION_DENIED.*worker-1 may not call Register as worker 0" \
  "$WORKER" --servers="$M" --worker_id=0 --num_workers=2 --max_steps=1 --retry_timeout=0 \
  --connect_timeout=5 $(as worker-1)

expect "ps_worker says why a server it does not trust fails" \
  "cannot register with the servers: no answer within --connect_timeout=3s; then .*certificate verify failed" \
  "$WORKER" --servers="$M" --worker_id=1 --num_workers=2 --max_steps=1 --connect_timeout=3 \
  --tls_ca="$T/foreign/ca.pem" --tls_cert="$T/foreign/worker-1.pem" --tls_key="$T/foreign/worker-1.key"
expect "ps_worker says why a server that does not trust it fails" \
  "then .*Socket closed \(the server closed the connection while it was set up" \
  "$WORKER" --servers="$M" --worker_id=1 --num_workers=2 --max_steps=1 --connect_timeout=3 \
  --tls_ca="$P/ca.pem" --tls_cert="$T/foreign/worker-1.pem" --tls_key="$T/foreign/worker-1.key"

echo "== certificate rotation without a restart"
fingerprint() {
  openssl s_client -connect "$M" -CAfile "$P/ca.pem" -cert "$P/admin.pem" -key "$P/admin.key" \
    </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256
}
before=$(fingerprint)
"$MAKE_CERTS" "$T/next" --servers=1 --workers=1 >/dev/null
cp "$P/ca.pem" "$P/ca.key" "$T/next/"  # the same CA signs the new server certificate
openssl req -new -key "$T/next/server-0.key" -subj "/O=ps/CN=server-0" -out "$T/next.csr"
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$T/next.ext"
openssl x509 -req -in "$T/next.csr" -CA "$P/ca.pem" -CAkey "$P/ca.key" -set_serial 4242 \
  -days 30 -extfile "$T/next.ext" -out "$T/next/server-0.pem" 2>/dev/null
cp "$T/next/server-0.key" "$P/server-0.key.new" && cp "$T/next/server-0.pem" "$P/server-0.pem.new"
mv "$P/server-0.key.new" "$P/server-0.key" && mv "$P/server-0.pem.new" "$P/server-0.pem"
after="$before"
rotated() {
  after=$(fingerprint)
  [ -n "$after" ] && [ "$after" != "$before" ]
}
WAIT_POLL=0.2 wait_until 10 rotated
serial=$(openssl s_client -connect "$M" -CAfile "$P/ca.pem" -cert "$P/admin.pem" \
  -key "$P/admin.key" </dev/null 2>/dev/null | openssl x509 -noout -serial)
if [ -n "$before" ] && [ "$after" != "$before" ] && [ "$serial" = "serial=1092" ]; then
  ok "the server serves the rotated certificate (serial 4242) without a restart"
else
  fail "rotation: before '$before', after '$after'"
fi
expect "clients still get in after the rotation" "^OK" \
  "$PROBE" --server="$M" --call=GetStatus $(as admin)

echo "== bearer tokens (TLS without client certificates)"
start tokens --tls_cert="$P/server-0.pem" --tls_key="$P/server-0.key" \
  --auth_token_file="$P/tokens.txt"
K=$ADDR
TLS="--tls_ca=$P/ca.pem"
echo "worker-0 0000000000000000000000000000000000000000" >"$T/wrong.token"
expect "missing token refused" "^UNAUTHENTICATED: /ps.v1.ParameterServer/GetStatus: missing bearer token" \
  "$PROBE" --server="$K" --call=GetStatus $TLS
expect "wrong token refused" "^UNAUTHENTICATED: /ps.v1.ParameterServer/GetStatus: invalid bearer token" \
  "$PROBE" --server="$K" --call=GetStatus $TLS --auth_token_file="$T/wrong.token"
expect "worker-1's token may not push as worker 0" \
  "^PERMISSION_DENIED: worker-1 may not call Push as worker 0" \
  "$PROBE" --server="$K" --call=Push --worker_id=0 $TLS --auth_token_file="$P/worker-1.token"
expect "reader's token may not push" "^PERMISSION_DENIED: reader may not call" \
  "$PROBE" --server="$K" --call=Push --worker_id=0 $TLS --auth_token_file="$P/reader.token"
expect "admin's token reads the status" "^OK" \
  "$PROBE" --server="$K" --call=GetStatus $TLS --auth_token_file="$P/admin.token"
expect "health needs no token" "^OK" "$PROBE" --server="$K" --call=Health $TLS
expect "a client sends no token in plaintext" "^INVALID_ARGUMENT: --auth_token_file needs TLS" \
  "$PROBE" --server="$K" --call=GetStatus --auth_token_file="$P/admin.token"
expect "a server takes no tokens in plaintext" "--auth_token_file needs TLS" \
  "$SERVER" --listen=127.0.0.1:0 --auth_token_file="$P/tokens.txt"

echo "== certificate and token must agree"
start both --tls_cert="$P/server-0.pem" --tls_key="$P/server-0.key" --tls_ca="$P/ca.pem" \
  --auth_token_file="$P/tokens.txt"
expect "worker-1's certificate with worker-0's token refused" \
  "^PERMISSION_DENIED: .*the certificate of worker-1 came with the token of worker-0" \
  "$PROBE" --server="$ADDR" --call=Register --worker_id=0 $(as worker-1) \
  --auth_token_file="$P/worker-0.token"
expect "certificate and token of the same worker pass" "^OK" \
  "$PROBE" --server="$ADDR" --call=Register --worker_id=1 $(as worker-1) \
  --auth_token_file="$P/worker-1.token"

echo "== secure by default"
expect "no plaintext on a non-loopback address" \
  "0.0.0.0:0 is not a loopback address.*--insecure" "$SERVER" --listen=0.0.0.0:0
rm -f "$T/insecure.port"
"$SERVER" --listen=0.0.0.0:0 --insecure --port_file="$T/insecure.port" >"$T/insecure.log" 2>&1 &
pids+=($!)
wait_for_file 10 "$T/insecure.port"
expect "--insecure serves plaintext with a warning" "WARNING: serving in plaintext \(--insecure\)" \
  cat "$T/insecure.log"
expect "default listen address is loopback" '"127.0.0.1:50051"' "$SERVER" --help
expect "worker refuses plaintext to a non-loopback server" \
  "10.255.255.1:50051 is not a loopback address.*--insecure" \
  "$WORKER" --servers=10.255.255.1:50051 --max_steps=1
expect "ps_ctl refuses plaintext to a non-loopback server" "is not a loopback address" \
  "$CTL" status --servers=10.255.255.1:50051

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
