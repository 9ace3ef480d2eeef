#!/usr/bin/env bash
# Checks that docs/architecture.md names every folder of the tree: each
# folder that holds a tracked file must appear in it as a whole path with a
# trailing slash (`server/core/`), so that a new folder is described where
# the tree is drawn. Prints the folders it misses and exits 1 if any.
#
#   tools/doc_folders_check.sh [REPO]
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"
doc=docs/architecture.md
missing=0
while read -r d; do
  [ "$d" = . ] && continue
  # F/ as a whole token: not the tail of a longer path, not followed by more path.
  if ! grep -qE "(^|[^A-Za-z0-9_./-])${d//./\\.}/([^A-Za-z0-9_./-]|\$)" "$doc"; then
    echo "doc_folders_check: $doc does not name the folder $d/" >&2
    missing=1
  fi
done < <(git ls-files | sed -E 's#/[^/]*$##; t; s#.*#.#' | sort -u)
[ "$missing" -eq 0 ] && echo "doc_folders_check: $doc names all $(git ls-files | sed -E 's#/[^/]*$##; t; s#.*#.#' | sort -u | grep -vc '^\.$') folders"
exit "$missing"
