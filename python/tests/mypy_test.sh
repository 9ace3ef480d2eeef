#!/usr/bin/env bash
# //python:mypy_test: Debian's mypy --strict, with python/pyproject.toml's
# [tool.mypy] settings, on the `ps` package's sources (python/src/ps; the
# extension is typed by its stub, _ps.pyi), the example, the benchmark,
# server_process.py and make_wheel.py. Passes only when mypy finds no error;
# prints them otherwise.
set -euo pipefail
cd "${TEST_SRCDIR:?}/${TEST_WORKSPACE:?}/python"
unset PYTHONPATH MYPYPATH
exec /usr/bin/python3 -m mypy --strict --config-file pyproject.toml \
  --cache-dir "${TEST_TMPDIR:?}/mypy_cache" \
  src/ps examples/fashion_mnist_cnn.py bench.py bench_worker.py rows_bench.py server_process.py make_wheel.py
