#!/usr/bin/env bash
# Times `tessera inspect` on a sparse 10-part, 100,000-tensor split set (about 826 GB of
# logical size, no disk space used). Prints wall time and peak RSS for 5 runs, warm cache.
#   bench/inspect_split_set.sh [BUILD_DIR=build/default] [PARTS=10] [TENSORS=100000]
set -euo pipefail
build=${1:-build/default}
parts=${2:-10}
tensors=${3:-100000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
first=$("$build/bench/gguf_make_split_set" "$dir/big" "$parts" "$tensors")
echo "set: $parts parts, $tensors tensors, logical size $(du -sh --apparent-size "$dir" | cut -f1)," \
     "on disk $(du -sh "$dir" | cut -f1)"
"$build/bin/tessera" inspect "$first" | head -4
for mode in "" "--json" "--json --tensors"; do
  read -r -a flags <<<"$mode"
  for _ in 1 2 3 4 5; do
    /usr/bin/time -f "inspect $mode: %e s wall, %M KiB peak RSS" \
      "$build/bin/tessera" inspect "$first" "${flags[@]}" >/dev/null
  done
done
