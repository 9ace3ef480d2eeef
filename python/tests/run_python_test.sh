#!/usr/bin/env bash
# Runs a Python test of the `ps` package with Debian's python3 (which has
# numpy), the package from this build on PYTHONPATH.
#   run_python_test.sh TEST.py PS_SERVER [MAKE_CERTS]
set -euo pipefail
here="${TEST_SRCDIR:-$PWD/..}/${TEST_WORKSPACE:-ps}"
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
export PS_SERVER_BIN="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
if [ $# -ge 3 ]; then
  export PS_MAKE_CERTS_BIN="$(cd "$(dirname "$3")" && pwd)/$(basename "$3")"
fi
exec /usr/bin/python3 -u "$1"
