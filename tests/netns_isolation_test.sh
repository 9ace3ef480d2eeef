#!/usr/bin/env bash
# The namespace cluster stays inside what it created:
#   - each host has exactly two addresses, 127.0.0.1 and its own in the test
#     subnet, and no IPv6 address;
#   - inside each host, every TCP/UDP listener is bound to the host's test
#     address or to 127.0.0.1 (the servers: their test address, port 50051);
#   - every connection a worker opens goes to an address in the test subnet;
#   - the root namespace gains no interface, address, route or listener, and
#     the test subnet overlaps none of its addresses or routes;
#   - `down` leaves alone a namespace with the cluster's prefix that it did
#     not create (and one recorded in its state whose inode changed), `up`
#     refuses an id whose prefix is in use, and afterwards no namespace,
#     /etc/netns entry or state of the cluster is left.
#
# usage: netns_isolation_test.sh NETNS_CLUSTER PS_SERVER PS_WORKER PS_CTL
set -euo pipefail
source "$(dirname "$0")/netns_lib.sh"
netns_init "$@"

# A namespace that this test creates to play "someone else's" namespace.
DECOY="psns-$ID-decoy"
NETNS_EXTRA_CLEANUP='ip netns del "$DECOY" 2>/dev/null'

root_state() {
  echo "# links"; ip -o link show | awk -F': ' '{print $2}' | sort
  echo "# addresses"; ip -o addr show | awk '{print $2, $4}' | sort
  echo "# routes"; ip route show table all | sort
}
root_listeners() { ss -Htlnup | sort; }
before_state=$(root_state)
before_listeners=$(root_listeners)

up --servers=2 --workers=3 -- --max_steps=200 --log_every=0
source <(grep '^SUBNET=' "/run/psns/$ID/config")
echo "test subnet $SUBNET.0/24"
in_subnet() { [[ "$1" == "$SUBNET".* ]]; }

# Workers' connections, sampled while they train.
conns=""
connected() {
  conns=$(cluster exec ps-worker-0 -- ss -Htn state established | awk '{print $4}')
  [ -n "$conns" ]
}
wait_until 30 connected || fail "ps-worker-0 opened no connection within 30 s"
for w in 0 1 2; do
  for peer in $(cluster exec ps-worker-$w -- ss -Htn | awk '{print $5}'); do
    in_subnet "${peer%:*}" || fail "ps-worker-$w has a connection to $peer, outside $SUBNET.0/24"
    echo "ps-worker-$w -> $peer"
  done
done

for host in $(awk '{print $1}' "/run/psns/$ID/hosts"); do
  addr=$(awk -v h="$host" '$1 == h {print $2}' "/run/psns/$ID/hosts")
  in_subnet "$addr" || fail "$host has address $addr outside $SUBNET.0/24"
  got=$(cluster exec "$host" -- ip -o addr show | awk '{print $2, $3, $4}' | sort | tr '\n' ';')
  want="eth0 inet $addr/24;lo inet 127.0.0.1/8;"
  [ "$got" = "$want" ] || fail "$host: addresses '$got', expected '$want'"
  listeners=$(cluster exec "$host" -- ss -Htlnup | awk '{print $5}')
  for l in $listeners; do
    [[ "${l%:*}" == "$addr" || "${l%:*}" == 127.0.0.1 ]] ||
      fail "$host: something listens on $l, beyond $addr and 127.0.0.1"
  done
  case "$host" in
    ps-server-*) [ "$listeners" = "$addr:50051" ] || fail "$host listens on '$listeners', expected $addr:50051" ;;
    *) [ -z "$listeners" ] || fail "$host (a worker) listens on $listeners" ;;
  esac
  echo "$host: addresses ${got//;/ }listeners: ${listeners:-none}"
done

cluster wait --timeout=120 || fail "a worker failed"

# Nothing in the root namespace: no new interface, address or route, no
# listener of the cluster's processes, nothing bound in the test subnet.
[ "$(root_state)" = "$before_state" ] ||
  fail "the root namespace changed: $(diff <(echo "$before_state") <(root_state) || true)"
for p in $(for ns in $(ip netns list | awk -v p="psns-$ID-" 'index($1, p) == 1 {print $1}'); do ip netns pids "$ns"; done); do
  ! root_listeners | grep -q "pid=$p," || fail "process $p of the cluster listens in the root namespace"
done
! root_listeners | grep -qF " $SUBNET." || fail "something in the root namespace listens in $SUBNET.0/24"
new=$(comm -13 <(echo "$before_listeners") <(root_listeners) || true)
echo "root namespace: interfaces, addresses and routes unchanged; listeners new since the start (not the cluster's): ${new:-none}"
# The subnet overlaps none of the root namespace's addresses and routes.
! ip -o -4 addr show | grep -qF " $SUBNET." || fail "the root namespace has an address in $SUBNET.0/24"
! ip -4 route show table all | grep -qF "$SUBNET." || fail "the root namespace routes $SUBNET.0/24"

# Ownership: a namespace with the cluster's prefix that `up` did not create.
ip netns add "$DECOY"
if up --servers=1 --workers=1 2>"$TEST_TMPDIR/up2.err"; then fail "a second up with the same id succeeded"; fi
grep -q "exist already" "$TEST_TMPDIR/up2.err" || fail "second up: unexpected error: $(cat "$TEST_TMPDIR/up2.err")"
# ...and one recorded in the state file whose inode is not the one created.
echo "$DECOY 1" >>"/run/psns/$ID/namespaces"
cluster down 2>&1 | tee "$TEST_TMPDIR/down.log"
grep -q "leaving $DECOY alone" "$TEST_TMPDIR/down.log" || fail "down did not say it leaves $DECOY alone"
ip netns list | grep -qx "$DECOY\( .*\)\?" || fail "down removed $DECOY, which it did not create"
ip netns del "$DECOY"

left=$(ip netns list | awk -v p="psns-$ID-" 'index($1, p) == 1')
[ -z "$left" ] || fail "namespaces left after down: $left"
! compgen -G "/etc/netns/psns-$ID-*" >/dev/null || fail "/etc/netns entries left after down"
[ ! -e "/run/psns/$ID" ] || fail "state /run/psns/$ID left after down"
[ "$(root_state)" = "$before_state" ] || fail "the root namespace changed after down"
echo "down removed every namespace, /etc/netns entry and state file of cluster $ID, and left $DECOY alone"
echo PASS
