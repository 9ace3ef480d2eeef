#!/usr/bin/env bash
# Runs tests/deploy_config_check.py (see its docstring) on the files under
# deploy/ and .dockerignore with this build's binaries, then its self-check.
#
# usage: deploy_config_test.sh CHECK_PY PS_SERVER PS_WORKER PS_CTL PS_BENCH
set -euo pipefail
exec /usr/bin/python3 "$1" --root=. --bin=ps_server="$2" --bin=ps_worker="$3" \
  --bin=ps_ctl="$4" --bin=ps_bench="$5"
