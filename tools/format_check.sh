#!/usr/bin/env bash
# Checks that the C++ lines changed since BASE are formatted as .clang-format
# says, with clang-format-diff (Debian's clang-format package): only the
# changed lines and what clang-format joins to them, so that old code is
# reformatted when it is next touched, not in one sweeping commit.
#
#   tools/format_check.sh [--fix] [BASE]
#
# BASE: a commit; default: the parent of the commit that added .clang-format,
# so every C++ line written or changed since the tree adopted the format is
# checked (committed or not). Exit 1, printing the diff that would format
# them, when some are not; --fix applies it instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fix=0
if [ "${1:-}" = "--fix" ]; then fix=1; shift; fi
base=${1:-}
if [ -z "$base" ]; then
  added=$(git log --diff-filter=A --format=%H -- .clang-format | tail -1)
  [ -n "$added" ] || { echo "format_check: .clang-format is not committed" >&2; exit 2; }
  base="$added^"
fi
differ=$(command -v clang-format-diff || command -v clang-format-diff-14 || true)
[ -n "$differ" ] || { echo "format_check: clang-format-diff not found (apt-get install clang-format)" >&2; exit 2; }
regex='.*\.(cc|h|cu)'
if [ "$fix" -eq 1 ]; then
  git diff -U0 --no-color "$base" -- '*.cc' '*.h' '*.cu' | "$differ" -p1 -regex "$regex" -sort-includes -i
  exit 0
fi
out=$(git diff -U0 --no-color "$base" -- '*.cc' '*.h' '*.cu' | "$differ" -p1 -regex "$regex" -sort-includes)
if [ -n "$out" ]; then
  printf '%s\n' "$out"
  echo "format_check: C++ lines changed since $(git rev-parse --short "$base") are not formatted" \
    "as .clang-format says (the diff above formats them; tools/format_check.sh --fix applies it)" >&2
  exit 1
fi
echo "format_check: every C++ line changed since $(git rev-parse --short "$base") is formatted"
