#!/usr/bin/env bash
# The alerting rules: `promtool check rules alerts.yml` must pass, and
# `promtool test rules alerts_test.yml` (each alert fires with its series and
# stays quiet in a close case) must pass. promtool comes with Debian's
# prometheus package (deploy/setup_debian.sh).
#
# usage: rules_test.sh ALERTS_YML ALERTS_TEST_YML
set -euo pipefail
command -v promtool >/dev/null || { echo "FAIL: promtool not found (apt-get install prometheus)" >&2; exit 1; }
rules="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
tests="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
[ "$(dirname "$rules")" = "$(dirname "$tests")" ] || { echo "FAIL: $1 and $2 must share a folder" >&2; exit 1; }
promtool check rules "$rules"
# alerts_test.yml names alerts.yml relative to its own folder.
cd "$(dirname "$tests")"
promtool test rules "$(basename "$tests")"
echo PASS
