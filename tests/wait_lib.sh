# Bounded waits for the shell tests: sourced by them (and by netns_lib.sh).
# Every wait has a deadline in whole seconds; none waits forever. Each polls
# every $WAIT_POLL seconds (0.1 by default; set it for one call with
# `WAIT_POLL=0.2 wait_until ...`) and returns 1 once the deadline has passed,
# leaving the message to the caller:
#
#   wait_until SECONDS CMD [ARGS...]
#       runs CMD (a command or a shell function, in this shell: it may set
#       variables) until it succeeds
#   wait_for_file SECONDS FILE
#       until FILE exists and is not empty (a --port_file being written)
#   wait_for_line SECONDS FILE PATTERN
#       until a line of FILE (which may not exist yet) matches the ERE PATTERN
#   wait_for_number SECONDS MIN CMD [ARGS...]
#       runs CMD until it prints a number >= MIN, and prints that number
#
# and, for a test that cannot run on this machine:
#
#   skip_test CASE REASON
#       prints "SKIPPED: REASON", marks test case CASE skipped in the
#       test.xml (Bazel 4 has no skipped status: the test passes, and
#       .ci/run lists the skipped cases) and exits 0
#
# usage: source "$(dirname "$0")/wait_lib.sh"  (a data dependency of the test)

wait_until() {
  local deadline=$(( $(date +%s) + $1 ))
  shift
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep "${WAIT_POLL:-0.1}"
  done
}

wait_for_file() {
  wait_until "$1" test -s "$2"
}

wait_for_line() {
  wait_until "$1" grep -sqE -- "$3" "$2"
}

# MIN CMD [ARGS...]: CMD printed a number >= MIN (kept in _wait_number).
_wait_number_at_least() {
  local min="$1"
  shift
  _wait_number=$("$@") && [ "${_wait_number:-0}" -ge "$min" ]
}

wait_for_number() {
  local secs="$1"
  shift
  wait_until "$secs" _wait_number_at_least "$@" || return 1
  echo "$_wait_number"
}

skip_test() {
  echo "SKIPPED: $2"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    local esc
    esc=$(sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"$2")
    cat >"$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" skipped="1">
  <testsuite name="$TEST_TARGET" tests="1" skipped="1">
    <testcase name="$1" status="run" result="skipped" classname="$TEST_TARGET"><skipped message="$esc"/></testcase>
  </testsuite>
</testsuites>
XML
  fi
  exit 0
}
