# Sourced by the network-namespace tests (netns_*_test.sh).
#
# usage in a test: source "$(dirname "$0")/netns_lib.sh"; netns_init "$@"
# where "$@" is NETNS_CLUSTER PS_SERVER PS_WORKER PS_CTL. Afterwards:
#   cluster CMD ARGS...  runs deploy/netns_cluster.sh CMD --id=$ID ARGS...
#   up ARGS...           cluster up with this build's binaries
#   ctl HOST ARGS...     ps_ctl ARGS inside HOST, with the cluster's admin
#                        certificate
#   fail MSG             prints FAIL: MSG and exits 1 (the cluster is taken down)
#   NETNS_EXTRA_CLEANUP  a command to run on exit besides taking the cluster down
#   logged HOST PATTERN  true once HOST's log has a line matching the ERE PATTERN
# and the bounded waits of wait_lib.sh.
# netns_init skips the test (prints "SKIPPED: <reason>" and exits 0) where
# this machine cannot create network namespaces, and takes the cluster down
# on exit however the test ends.

source "$(dirname "${BASH_SOURCE[0]}")/wait_lib.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }

netns_init() {
  NETNS_CLUSTER="$1" SERVER="$2" WORKER="$3" CTL="$4"
  # Unique per running test; ids are [a-z0-9]{1,8} and pids stay below 2^22.
  ID=$(printf 't%x' $$)
  local reason
  if ! reason=$("$NETNS_CLUSTER" check --id="$ID" 2>&1); then
    skip_test netns_cluster "$reason"
  fi
  trap netns_cleanup EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
}

# Runs on exit: takes the cluster down (and runs $NETNS_EXTRA_CLEANUP, a
# command a test may set), keeping the test's exit status.
netns_cleanup() {
  local rc=$?
  [ -z "${NETNS_EXTRA_CLEANUP:-}" ] || eval "$NETNS_EXTRA_CLEANUP" || true
  if [ -d "/run/psns/$ID" ]; then
    if [ $rc -ne 0 ]; then
      echo "--- logs of cluster $ID"
      cluster logs | tail -40
    fi
    cluster down || true
  fi
  exit $rc
}

cluster() {
  local cmd="$1"
  shift
  "$NETNS_CLUSTER" "$cmd" --id="$ID" "$@"
}

up() {
  cluster up --server_bin="$SERVER" --worker_bin="$WORKER" --ctl_bin="$CTL" "$@"
}

ctl() {
  local host="$1" certs="/run/psns/$ID/certs"
  shift
  cluster exec "$host" -- "$CTL" "$@" --tls_ca="$certs/ca.pem" --tls_cert="$certs/admin.pem" \
    --tls_key="$certs/admin.key"
}

logged() {
  cluster logs "$1" | grep -qE "$2"
}
