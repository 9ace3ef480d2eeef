#!/usr/bin/env bash
# deploy/bundle.sh packs binaries with every non-glibc shared library they
# load: with only the bundle's env.sh, each binary resolves those libraries
# inside the bundle, and a worker trains from the bundled dataset.
#
# usage: bundle_test.sh BUNDLE_SH PS_SERVER PS_WORKER
set -euo pipefail
BUNDLE_SH="$1" SERVER="$2" WORKER="$3"
fail() { echo "FAIL: $*" >&2; exit 1; }

out="$TEST_TMPDIR/bundle"
"$BUNDLE_SH" "$out" --binary="$SERVER" --binary="$WORKER"
for f in bin/ps_server bin/ps_worker bin/local_cluster.sh bin/make_certs.sh bin/openssl \
         bin/run_on_gpu.sh env.sh MANIFEST \
         data/fashion-mnist/train-images-idx3-ubyte.gz; do
  [ -e "$out/$f" ] || fail "bundle lacks $f"
done
. "$out/env.sh"
[ "$PS_BUNDLE" = "$(cd "$out" && pwd)" ] || fail "env.sh set PS_BUNDLE=$PS_BUNDLE"
for b in ps_server ps_worker; do
  # Every library but glibc's resolves to the bundle.
  outside=$(ldd "$out/bin/$b" | awk '/=>/ {print $1, $3}' |
    grep -vE '^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt)\.so' |
    grep -v " $PS_BUNDLE/lib/" || true)
  [ -z "$outside" ] || fail "$b loads libraries from outside the bundle: $outside"
done
grep -q "libgrpc" "$out/MANIFEST" || fail "MANIFEST does not list libgrpc"
ps_worker --standalone --max_steps=3 --dataset_dir="$PS_BUNDLE/data/fashion-mnist" |
  grep -q "done" || fail "the bundled worker did not train"
run_on_gpu.sh --help | grep -q -- "--out=FILE" || fail "run_on_gpu.sh --help"
# A bundle without the CUDA tools is refused with a message, not run.
if msg=$(run_on_gpu.sh --out="$TEST_TMPDIR/r.txt" 2>&1); then fail "run_on_gpu.sh ran without compute_bench"; fi
grep -q "config=cuda" <<<"$msg" || fail "run_on_gpu.sh said: $msg"
if "$BUNDLE_SH" 2>/dev/null; then fail "bundle.sh without OUT_DIR should fail"; fi
"$BUNDLE_SH" "$TEST_TMPDIR/lean" --binary="$SERVER" --no_dataset || fail "bundle.sh --no_dataset failed"
[ ! -e "$TEST_TMPDIR/lean/data" ] && [ -s "$TEST_TMPDIR/lean/MANIFEST" ] || fail "--no_dataset bundle"
echo PASS
