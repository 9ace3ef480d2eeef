#!/usr/bin/env bash
# Installs the Debian 12 packages that building, testing and running this
# project need. Idempotent: when everything is present it installs nothing
# and touches no network. Runs apt-get through sudo when not root.
#
#   deploy/setup_debian.sh           build, run and test (the README's command)
#   deploy/setup_debian.sh --build   only what `bazel build` needs (the image
#                                    build stages of deploy/Dockerfile*)
set -euo pipefail

case "${1:-}" in
  "") build_only=0 ;;
  --build) build_only=1 ;;
  *) echo "usage: setup_debian.sh [--build]" >&2; exit 2 ;;
esac

PACKAGES=(
  # Build: Bazel, the C++ toolchain, code generators and libraries.
  bazel-bootstrap g++ pkgconf
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libgtest-dev libgmock-dev libopenblas-dev zlib1g-dev
  # The Python package (//python:ps, //python:wheel): Python's headers and
  # pybind11 (deploy/Dockerfile's python target builds it).
  python3-dev pybind11-dev
  # /metrics: prometheus-cpp's data model and text format, served over
  # HTTP(S) by cpp-httplib (with OpenSSL).
  prometheus-cpp-dev libcpp-httplib-dev libssl-dev
  # The embedding tables' on-disk tier.
  librocksdb-dev
  # etcd's v3 API (.proto files) for the coordinator's client (coord/,
  # third_party/etcd.bzl).
  golang-etcd-server-dev
)
if [ "$build_only" -eq 0 ]; then
  PACKAGES+=(
    # The default workload: Fashion-MNIST IDX files in /usr/share/datasets/fashion-mnist.
    dataset-fashion-mnist
    # Tests: numpy checks the .npy model files, yaml reads the cluster configs;
    # iproute2 for network namespaces.
    python3 python3-numpy python3-yaml iproute2 procps
    # `ps_bench consistency --png` draws with matplotlib.
    python3-matplotlib
    # The metrics tests: promtool checks the exposition and the alert rules,
    # and a real Prometheus scrapes a local cluster.
    prometheus
    # The Python package's tests load it beside torch (CPU) and grpcio;
    # //python:mypy_test type-checks it with mypy --strict.
    python3-torch python3-grpcio mypy
    # //python:wheel_test installs the wheel with pip into a venv.
    python3-venv python3-pip
    # TLS: deploy/make_certs.sh (local_cluster.sh, the security tests).
    openssl
    # The coordinator of elastic clusters: etcd for //tests:coordinator_test
    # and docs/elastic.md's runs.
    etcd-server etcd-client
    # Fuzzing: tests/fuzz/run_fuzz.sh (run by .ci/run) builds with clang-14 and
    # links libFuzzer and the sanitizer runtimes, which are in libclang-rt-14-dev
    # (only recommended by clang-14, and recommends are not installed here).
    clang-14 libclang-rt-14-dev
    # .ci/run's tools/format_check.sh: clang-format-diff.
    clang-format
  )
  # Tests: //tests:deploy_config_test renders the Kubernetes overlays with
  # `kubectl kustomize`. Debian's kubernetes-client (kubectl 1.20) is added
  # only where no kubectl exists (the kubectl packages of other apt
  # repositories own /usr/bin/kubectl too, and apt refuses to install both),
  # and only on Debian.
  if ! command -v kubectl >/dev/null && grep -qx 'ID=debian' /etc/os-release; then
    PACKAGES+=(kubernetes-client)
  fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup_debian: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo)
echo "setup_debian: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup_debian: done"
