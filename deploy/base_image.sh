#!/usr/bin/env bash
# Makes the base images that deploy/Dockerfile and deploy/Dockerfile.cuda
# build on, without a registry: an air-gapped cluster, or a CI machine that
# reaches only its Debian mirror.
#
#   deploy/base_image.sh            debian:12 and debian:12-slim
#   deploy/base_image.sh --cuda     also ps-cuda-devel:<ver> and ps-cuda-runtime:<ver>
#
# debian:12 and debian:12-slim come from `debootstrap --variant=minbase
# bookworm` against the Debian mirror this host's apt uses (apt-get
# indextargets), and carry that mirror in /etc/apt/sources.list.d/
# debian.sources. Like the official images (debuerreotype) they keep no apt
# lists, caches or logs, and configure apt to keep none after each install;
# -slim also excludes documentation, man pages and locales from every later
# dpkg install.
#
# --cuda copies the CUDA toolkit of this host ($CUDA_PATH, default
# /usr/local/cuda, which must hold bin/nvcc) into two images, at the same
# path as here: ps-cuda-devel (debian:12 + nvcc, headers, CUDA runtime and
# cuBLAS: what `bazel build --config=cuda` needs) and ps-cuda-runtime
# (debian:12-slim + the CUDA runtime and cuBLAS shared libraries). <ver> is
# nvcc's release, e.g. 13.0. The GPU driver (libcuda.so.1) is not in either:
# the NVIDIA Container Toolkit mounts the host's at run time.
#
# An image that already exists is kept (the script says so), unless --force.
# Needs root (debootstrap) and a Docker daemon; installs debootstrap with apt
# when missing. Options:
#   --force          rebuild images that exist
#   --mirror=URL     Debian mirror for debootstrap and the images' apt
#                    (default: this host's, else http://deb.debian.org/debian)
#   --cuda           also the CUDA images
# Environment: DOCKER (default docker), CUDA_PATH.
set -euo pipefail

DOCKER=${DOCKER:-docker}
FORCE=0
CUDA=0
MIRROR=""
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    --cuda) CUDA=1 ;;
    --mirror=*) MIRROR=${arg#--mirror=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "base_image: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

log() { echo "base_image: $*" >&2; }
die() { log "$*"; exit 1; }

"$DOCKER" info >/dev/null 2>&1 || die "no Docker daemon answers ($DOCKER info fails)"

# True when every image named exists and --force was not given.
have_images() {
  [ "$FORCE" -eq 0 ] || return 1
  local image
  for image in "$@"; do
    "$DOCKER" image inspect "$image" >/dev/null 2>&1 || return 1
  done
}

WORK=$(mktemp -d /tmp/ps-base-image.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# --- debian:12 and debian:12-slim -------------------------------------------
make_debian() {
  if have_images debian:12 debian:12-slim; then
    log "debian:12 and debian:12-slim exist; keeping them (--force rebuilds)"
    return
  fi
  [ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
      >/dev/null
  fi

  # The host's Debian mirrors, as apt resolved its sources (.list or .sources).
  local targets site security
  targets=$(apt-get indextargets --format '$(SITE) $(RELEASE)' 2>/dev/null | sort -u || true)
  site=${MIRROR:-$(awk '$2 == "bookworm" {print $1; exit}' <<<"$targets")}
  site=${site:-http://deb.debian.org/debian}
  security=$(awk '$2 == "bookworm-security" {print $1; exit}' <<<"$targets")
  security=${security:-${site%/debian}/debian-security}
  log "debootstrap bookworm from $site (security: $security)"

  local root="$WORK/rootfs"
  debootstrap --variant=minbase bookworm "$root" "$site" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }

  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $site
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # The apt and dpkg settings of the official images (debuerreotype).
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::GzipIndexes "true";' >"$root/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' \
    >"$root/etc/apt/apt.conf.d/docker-autoremove-suggests"
  echo 'force-unsafe-io' >"$root/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  printf '#!/bin/sh\n# no services start inside an image build\nexit 101\n' \
    >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
    "$root"/var/log/* "$root"/tmp/* "$root"/var/tmp/* "$root"/debootstrap
  mkdir -p "$root/var/lib/apt/lists/partial"

  tar -C "$root" --numeric-owner -c . |
    "$DOCKER" import -c 'CMD ["bash"]' -m "deploy/base_image.sh: debootstrap bookworm" - debian:12 \
      >/dev/null
  log "made debian:12 ($(image_size debian:12))"

  # -slim: no documentation, man pages or locales, now or in later installs.
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/groff/* "$root"/usr/share/info/* \
    "$root"/usr/share/lintian/* "$root"/usr/share/linda/*
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  tar -C "$root" --numeric-owner -c . |
    "$DOCKER" import -c 'CMD ["bash"]' -m "deploy/base_image.sh: debootstrap bookworm, slim" - \
      debian:12-slim >/dev/null
  log "made debian:12-slim ($(image_size debian:12-slim))"
}

image_size() {
  "$DOCKER" image inspect -f '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1 / 1e6}'
}

# --- ps-cuda-devel and ps-cuda-runtime ---------------------------------------
# Builds image $1 from a context made of a Dockerfile ($2) and the toolkit
# paths $3... (relative to the toolkit's parent directory), streamed as a tar.
build_from_toolkit() {
  local image=$1 dockerfile=$2
  shift 2
  printf '%s\n' "$dockerfile" >"$WORK/Dockerfile"
  tar -c -C "$WORK" Dockerfile -C "$(dirname "$CUDA_REAL")" "$@" |
    "$DOCKER" build -q -t "$image" - >/dev/null ||
    die "building $image failed"
  log "made $image ($(image_size "$image"))"
}

make_cuda() {
  local cuda_path=${CUDA_PATH:-/usr/local/cuda}
  [ -x "$cuda_path/bin/nvcc" ] || die "--cuda: $cuda_path/bin/nvcc not found (set CUDA_PATH)"
  CUDA_REAL=$(readlink -f "$cuda_path")
  local ver name
  ver=$("$cuda_path/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
  [ -n "$ver" ] || die "cannot read the CUDA release from $cuda_path/bin/nvcc --version"
  if have_images "ps-cuda-devel:$ver" "ps-cuda-runtime:$ver"; then
    log "ps-cuda-devel:$ver and ps-cuda-runtime:$ver exist; keeping them (--force rebuilds)"
    return
  fi
  name=$(basename "$CUDA_REAL")
  # The toolkit sits where it does here (e.g. /usr/local/cuda-13.0, with
  # /usr/local/cuda pointing at it), so --config=cuda finds it at its default
  # path and the binaries' rpath resolves in the runtime image.
  local libs=()
  local f
  for f in "$CUDA_REAL"/lib/lib{cudart,cublas,cublasLt}.so* "$CUDA_REAL"/lib/libcudart_static.a \
           "$CUDA_REAL"/lib/libcudadevrt.a "$CUDA_REAL"/lib/libculibos.a; do
    [ -e "$f" ] && libs+=("$name/lib/$(basename "$f")")
  done
  local links=("$name/lib64")
  [ -e "$CUDA_REAL/targets" ] && links+=("$name/targets")
  local env="ENV PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility \\
    NVIDIA_REQUIRE_CUDA=cuda>=$ver"
  build_from_toolkit "ps-cuda-devel:$ver" "FROM debian:12
COPY $name /usr/local/$name
RUN ln -s $name /usr/local/cuda
$env" "$name/bin" "$name/nvvm" "$name/include" "${libs[@]}" "${links[@]}"

  local runtime=()
  for f in "${libs[@]}"; do
    case "$f" in *.so*) runtime+=("$f") ;; esac
  done
  build_from_toolkit "ps-cuda-runtime:$ver" "FROM debian:12-slim
COPY $name /usr/local/$name
RUN ln -s $name /usr/local/cuda \\
    && echo /usr/local/cuda/lib64 > /etc/ld.so.conf.d/cuda.conf && ldconfig
$env" "${runtime[@]}" "${links[@]}"
}

make_debian
[ "$CUDA" -eq 0 ] || make_cuda
