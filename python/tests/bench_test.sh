#!/usr/bin/env bash
# python/bench.py --quick: the three configs (2 Python workers on a sync
# ps_server, 2 C++ ps_workers on it, 2-process DDP over gloo) each run for
# about 2 s. Passes only if the script exits 0 and its table has a row for
# every config with a positive samples/s; a config that fails prints FAILED
# in its row and makes the script exit 1, which fails this test.
#
# usage: bench_test.sh BENCH_PY PS_SERVER PS_WORKER
set -euo pipefail
here="${TEST_SRCDIR}/${TEST_WORKSPACE}"
log="$TEST_TMPDIR/bench.log"
fail() { echo "FAIL: $*" >&2; exit 1; }
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

rc=0
timeout 240 /usr/bin/python3 -u "$1" --quick --ps_server="$(abs "$2")" \
  --ps_worker="$(abs "$3")" --pythonpath="$here/python" 2>&1 | tee "$log" || rc=$?
[ "$rc" -eq 0 ] || fail "bench.py exited $rc"
grep -q '^machine: ' "$log" || fail "no machine line"
grep -q '^threads per worker process: 1 ' "$log" || fail "no thread settings line"
grep -qE '^config +samples/s +vs C\+\+ workers +vs DDP' "$log" || fail "no table header"
for row in "ps_server + 2 Python workers (torch)" "ps_server + 2 C++ ps_workers" \
           "PyTorch DDP (gloo, 2 processes)"; do
  line=$(grep -F "$row" "$log" | tail -1) || fail "no row for: $row"
  rate=$(echo "${line#"$row"}" | awk '{print $1}')
  [[ "$rate" =~ ^[0-9]+$ ]] && [ "$rate" -gt 0 ] || fail "row '$row': samples/s '$rate'"
  for r in $(echo "${line#"$row"}" | awk '{print $2, $3}'); do
    [[ "$r" =~ ^[0-9]+\.[0-9]+$ ]] && awk -v r="$r" 'BEGIN{exit !(r > 0)}' ||
      fail "row '$row': ratio '$r'"
  done
done
echo "PASS"
