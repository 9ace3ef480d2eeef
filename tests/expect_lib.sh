# The command-line tests' check, sourced by them (cli_test.sh,
# unix_cli_test.sh). The caller sets failures=0 first and exits non-zero
# when it is not 0 at the end.
#
#   expect NAME EXPECTED_RC PATTERN COMMAND...
#       runs COMMAND (10 s at most) and checks its exit status and that its
#       output (stdout and stderr) matches the ERE PATTERN; prints
#       "ok   NAME" or "FAIL NAME" with the output, and counts failures
#
# usage: source "$(dirname "$0")/expect_lib.sh"  (a data dependency of the test)

expect() {
  local name="$1" want_rc="$2" pattern="$3"
  shift 3
  local out rc
  out=$(timeout 10 "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $want_rc), output:"
    echo "$out" | head -20
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
