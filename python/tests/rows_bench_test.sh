#!/usr/bin/env bash
# python/rows_bench.py --quick: the C++ and Python rows calls on one server.
# Passes only if the script exits 0 and prints, for pull_rows, push_rows and
# push_pull_rows, positive C++ and Python medians and a count of call pairs.
#
# usage: rows_bench_test.sh ROWS_BENCH_PY PS_SERVER
set -euo pipefail
here="${TEST_SRCDIR}/${TEST_WORKSPACE}"
log="$TEST_TMPDIR/rows_bench.log"
fail() { echo "FAIL: $*" >&2; exit 1; }
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

rc=0
timeout 120 /usr/bin/python3 -u "$1" --quick --ps_server="$(abs "$2")" \
  --pythonpath="$here/python" 2>&1 | tee "$log" || rc=$?
[ "$rc" -eq 0 ] || fail "rows_bench.py exited $rc"
grep -qE '^op +C\+\+ p50 us +Python p50 us +overhead us +ratio +pairs' "$log" || fail "no table header"
for op in pull_rows push_rows push_pull_rows; do
  line=$(grep -E "^$op " "$log") || fail "no row for $op"
  read -r _ cpp py _ ratio pairs <<<"$line"
  for v in "$cpp" "$py" "$ratio"; do
    awk -v v="$v" 'BEGIN{exit !(v + 0 > 0)}' || fail "$op: '$v' is not positive"
  done
  [[ "$pairs" =~ ^[1-9][0-9]*$ ]] || fail "$op: pairs '$pairs'"
done
echo PASS
