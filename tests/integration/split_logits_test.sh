#!/usr/bin/env bash
# A model split with `tessera gguf split` loads directly (any part named) and gives the same
# logits as the single file, bit for bit, in process and through two tensor-parallel worker
# processes; `tessera gguf merge` gives back a file with the same logits.
# usage: split_logits_test.sh TESSERA
set -euo pipefail
tessera=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$tessera" gen-model --arch qwen3 --preset small --quant Q4_K_M -o "$tmp/m.gguf" >/dev/null
"$tessera" gguf split --max-tensors 7 "$tmp/m.gguf" "$tmp/part" >/dev/null
parts=("$tmp"/part-*-of-*.gguf)
echo "split into ${#parts[@]} parts"
(( ${#parts[@]} > 2 ))
"$tessera" gguf merge "${parts[1]}" "$tmp/merged.gguf" >/dev/null
tokens=1,17,99,3,250,42,7
run() {  # run OUT MODEL [extra...]
  local out=$1 model=$2
  shift 2
  "$tessera" eval-logits --model "$model" --tokens "$tokens" --exact --threads 1 --out "$out" \
    "$@" 2>/dev/null
}
run "$tmp/single.f32" "$tmp/m.gguf"
run "$tmp/split.f32" "${parts[2]}"
run "$tmp/merged.f32" "$tmp/merged.gguf"
run "$tmp/single-tp2.f32" "$tmp/m.gguf" --tp 2
run "$tmp/split-tp2.f32" "${parts[0]}" --tp 2
cmp "$tmp/single.f32" "$tmp/split.f32"
cmp "$tmp/single.f32" "$tmp/merged.f32"
cmp "$tmp/single-tp2.f32" "$tmp/split-tp2.f32"
echo "split set, merged file and single file give identical logits (also at --tp 2)"
