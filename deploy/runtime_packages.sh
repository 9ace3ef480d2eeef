#!/usr/bin/env bash
# Prints, one per line, the Debian packages whose shared libraries the given
# binaries load (as ldd resolves them, symlinks such as Debian's OpenBLAS
# alternative followed). The Dockerfiles' build stages run it on the built
# binaries, and their runtime stages install exactly those packages.
#
#   deploy/runtime_packages.sh bazel-bin/server/ps_server bazel-bin/worker/ps_worker
#
# Left out: libraries under /usr/local/cuda (the CUDA runtime base image has
# them) and libcuda.so.1, which the NVIDIA container runtime mounts from the
# host driver. Fails, naming the library, if one is not found or belongs to no
# package.
set -euo pipefail

usage() { echo "usage: deploy/runtime_packages.sh BINARY..."; }
[ $# -gt 0 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac

declare -A libs=()  # resolved path -> path as ldd printed it
for bin in "$@"; do
  [ -f "$bin" ] || { echo "runtime_packages: $bin: no such file" >&2; exit 1; }
  ldd_out=$(ldd "$bin") || { echo "runtime_packages: ldd $bin failed (not a dynamic binary?)" >&2; exit 1; }
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue  # the vdso and the loader
    if [ "$path" = "not" ]; then
      [[ "$name" == libcuda.so* ]] && continue
      echo "runtime_packages: $bin needs $name, which is not found" >&2
      exit 1
    fi
    real=$(realpath "$path")
    [[ "$real" == /usr/local/cuda* ]] && continue
    libs[$real]=$path
  done <<<"$ldd_out"
done

# dpkg knows a file by the path its package installed it at; with merged /usr
# that may be the resolved path, the path ldd printed, or either without /usr.
# One dpkg -S per spelling, for all libraries at once ("pkg:arch: path", or
# "pkg1, pkg2: path" when several packages ship a file).
declare -A owner=()
for spelling in real ldd unusr; do
  queries=()
  for real in "${!libs[@]}"; do
    [ -z "${owner[$real]:-}" ] || continue
    case $spelling in
      real) queries+=("$real") ;;
      ldd) queries+=("${libs[$real]}") ;;
      unusr) queries+=("${real#/usr}") ;;
    esac
  done
  [ ${#queries[@]} -gt 0 ] || break
  while IFS= read -r line; do
    file=${line##*: }
    pkg=$(cut -d: -f1 <<<"$line" | cut -d, -f1)
    for real in "${!libs[@]}"; do
      if [ "$file" = "$real" ] || [ "$file" = "${libs[$real]}" ] || [ "$file" = "${real#/usr}" ]; then
        owner[$real]=$pkg
      fi
    done
  done < <(dpkg -S "${queries[@]}" 2>/dev/null | grep -v '^diversion ' || true)
done

for real in "${!libs[@]}"; do
  [ -n "${owner[$real]:-}" ] || { echo "runtime_packages: no package owns $real (${libs[$real]})" >&2; exit 1; }
done
printf '%s\n' "${owner[@]}" | sort -u
