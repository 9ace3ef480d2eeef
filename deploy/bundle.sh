#!/usr/bin/env bash
# Packs the built binaries with the shared libraries they need into one folder
# that runs on a machine with no package manager (e.g. a lent GPU machine):
#
#   bazel build --config=cuda //... && deploy/bundle.sh /tmp/ps-bundle
#   # on the other machine:
#   . /tmp/ps-bundle/env.sh && ps_worker --help
#
# Layout: bin/ (binaries, local_cluster.sh, make_certs.sh and this machine's
# openssl, which local_cluster.sh runs for its TLS certificates, run_on_gpu.sh), lib/ (every shared
# library the binaries load except glibc's own and the NVIDIA driver's
# libcuda, which must come from the target machine), data/fashion-mnist/ (the
# dataset, so workers need no Debian package), env.sh (puts bin/ on PATH and
# lib/ on LD_LIBRARY_PATH) and MANIFEST (what went in, with sizes).
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: deploy/bundle.sh OUT_DIR [options]

options:
  --binary=PATH     a binary to pack (repeatable); default: the ps_server,
                    ps_worker, ps_ctl, ps_bench, compute_bench, backend_test
                    and backend_training_test that bazel-bin holds (those
                    present; ps_server and ps_worker are required)
  --no_cuda_libs    leave out libcudart and libcublas*: for targets that have
                    the CUDA toolkit already (libcublasLt alone is ~500 MB)
  --no_dataset      leave out Fashion-MNIST
  --dataset_dir=DIR where Fashion-MNIST is (default /usr/share/datasets/fashion-mnist)
  -h, --help        this text
USAGE
}

die() { echo "bundle: $*" >&2; exit 2; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT=""
BINARIES=()
CUDA_LIBS=1
DATASET=1
DATASET_DIR=/usr/share/datasets/fashion-mnist
while [ $# -gt 0 ]; do
  case "$1" in
    --binary=*) BINARIES+=("${1#*=}") ;;
    --no_cuda_libs) CUDA_LIBS=0 ;;
    --no_dataset) DATASET=0 ;;
    --dataset_dir=*) DATASET_DIR="${1#*=}" ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option '$1'" ;;
    *) [ -z "$OUT" ] || die "one OUT_DIR only, got '$OUT' and '$1'"; OUT="$1" ;;
  esac
  shift
done
[ -n "$OUT" ] || { usage >&2; die "missing OUT_DIR"; }

if [ ${#BINARIES[@]} -eq 0 ]; then
  for b in server/ps_server worker/ps_worker; do
    [ -x "$ROOT/bazel-bin/$b" ] || die "$ROOT/bazel-bin/$b not found: bazel build //... first"
    BINARIES+=("$ROOT/bazel-bin/$b")
  done
  for b in tools/ctl/ps_ctl tools/bench/ps_bench tools/bench/compute_bench \
           worker/compute/backend_test worker/mlp/backend_training_test; do
    [ -x "$ROOT/bazel-bin/$b" ] && BINARIES+=("$ROOT/bazel-bin/$b")
  done
fi

# make_certs.sh needs openssl, which a bare machine may lack.
OPENSSL=$(command -v openssl) || die "openssl not found (apt-get install openssl): local_cluster.sh needs it"
BINARIES+=("$OPENSSL")

mkdir -p "$OUT/bin" "$OUT/lib"
for b in "${BINARIES[@]}"; do
  [ -x "$b" ] || die "$b is not an executable file"
  cp -L "$b" "$OUT/bin/"
done
cp "$ROOT/deploy/local_cluster.sh" "$ROOT/deploy/etcd_lib.sh" "$ROOT/deploy/make_certs.sh" "$ROOT/tests/gpu/run_on_gpu.sh" \
  "$OUT/bin/"

# glibc and the loader must be the target's own; so must the driver's libcuda.
skip='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv|libcuda)\.so'
[ $CUDA_LIBS -eq 1 ] || skip="${skip%)*}|libcudart|libcublas|libcublasLt)\\.so"
missing=()
while read -r name path; do
  if [ "$path" = "not" ]; then missing+=("$name"); continue; fi
  [[ "$name" =~ $skip ]] && continue
  [ -f "$path" ] && cp -L "$path" "$OUT/lib/$name"
done < <(for b in "${BINARIES[@]}"; do ldd "$b"; done | awk '/=>/ {print $1, $3}' | sort -u)
[ ${#missing[@]} -eq 0 ] || die "libraries not found by ldd: ${missing[*]}"

if [ $DATASET -eq 1 ]; then
  [ -d "$DATASET_DIR" ] || die "no dataset at $DATASET_DIR (apt-get install dataset-fashion-mnist, or --no_dataset)"
  mkdir -p "$OUT/data/fashion-mnist"
  cp "$DATASET_DIR"/*-ubyte.gz "$OUT/data/fashion-mnist/"
fi

cat >"$OUT/env.sh" <<'ENV'
# Source this: puts the bundle's binaries on PATH and its libraries first on
# LD_LIBRARY_PATH. PS_BUNDLE is the bundle's folder.
PS_BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PS_BUNDLE
export PATH="$PS_BUNDLE/bin:$PATH"
export LD_LIBRARY_PATH="$PS_BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ENV
folders=(bin lib)
[ $DATASET -eq 0 ] || folders+=(data)
(cd "$OUT" && find "${folders[@]}" -type f | sort | xargs du -k) >"$OUT/MANIFEST"
echo "bundle: $(ls "$OUT/bin" | wc -l) files in bin/, $(ls "$OUT/lib" | wc -l) libraries, $(du -sh "$OUT" | cut -f1) in $OUT"
