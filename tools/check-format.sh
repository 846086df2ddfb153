#!/usr/bin/env bash
# Checks that every C++, CUDA and protobuf source tracked by git is clang-formatted (the
# style in .clang-format); exits 1 naming the files that are not. With --fix, formats them in
# place instead. The test suite runs the check (ctest test `format_check`), so CI does too.
# Vendored files (proto/grpc/: gRPC's reflection protocol as published) are left as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
case "${1:-}" in
  --fix) fix=1 ;;
  "") ;;
  *) echo "usage: tools/check-format.sh [--fix]" >&2; exit 2 ;;
esac
if ! command -v clang-format >/dev/null; then
  echo "SKIP: clang-format not found (Debian package clang-format; tools/install-deps.sh)"
  exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIP: not a git checkout, so there is no list of tracked sources to check"
  exit 77
fi
files=()
while IFS= read -r f; do
  [ -f "$f" ] && files+=("$f")  # not a file deleted in the work tree but not yet in git
done < <(git ls-files -- '*.cc' '*.h' '*.cu' '*.cuh' '*.proto' ':!:proto/grpc/**')
if [ "$fix" -eq 1 ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! out=$(clang-format --dry-run -Werror "${files[@]}" 2>&1); then
  echo "These files are not clang-formatted (run tools/check-format.sh --fix):"
  grep -o '^[^:]*:[0-9]*:[0-9]*: error' <<<"$out" | cut -d: -f1 | sort | uniq -c
  exit 1
fi
echo "format_check: ${#files[@]} files clang-formatted ($(clang-format --version | head -1))"
