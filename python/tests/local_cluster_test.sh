#!/usr/bin/env bash
# deploy/local_cluster.sh --worker_cmd runs Python workers: 2 servers on
# unix sockets (the launcher's default; PS_SERVERS=unix:...) and 2 workers of python/tests/toy_worker.py,
# which connect with ps.connect_from_env(). In sync mode both must end at
# version 30 with the same weights (checksum), the loss down tenfold.
#
# usage: local_cluster_test.sh LAUNCHER PS_SERVER TOY_WORKER
set -euo pipefail
here="${TEST_SRCDIR}/${TEST_WORKSPACE}"
export PYTHONPATH="$here/python"
log="$TEST_TMPDIR/cluster.log"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$1" --server_bin="$2" --servers=2 --workers=2 --mode=sync --lr=0.05 \
  --worker_cmd="/usr/bin/python3 -u $(cd "$(dirname "$3")" && pwd)/$(basename "$3")" 2>&1 |
  tee "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "the launcher failed"
[ "$(grep -c '^\[server [01]\] security: plaintext on a unix socket$' "$log")" -eq 2 ] ||
  fail "the servers did not both serve on a unix socket"
grep -qE '^local_cluster: .* at unix:/[^,]+/shard-0.sock,unix:/' "$log" ||
  fail "the workers were not given unix: addresses"
for w in 0 1; do
  grep -qE "^\[worker $w\] worker $w: sync, version 30, loss" "$log" || fail "worker $w did not finish 30 steps"
done
sums=$(grep -oE 'checksum [0-9a-f]+' "$log" | sort -u | wc -l)
[ "$sums" -eq 1 ] || fail "the workers ended with different weights"
echo "PASS"
