#!/usr/bin/env bash
# Every example in deploy/configs validates with `tesserad --config X --check` (no workers
# start): the GLM-5 configs against the glm5-shape gen-model (the real GLM-5 UD-Q4_K_XL
# shapes as a sparse 10-part split set), the CPU one against a small llama.
# usage: configs_check_test.sh TESSERAD TESSERA SOURCE_DIR
set -euo pipefail
tesserad=$1 tessera=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$tessera" gen-model --arch glm-dsa --preset glm5-shape -o "$tmp/glm5.gguf" >/dev/null
"$tessera" gen-model --arch llama --preset small --quant Q8_0 -o "$tmp/llama.gguf" >/dev/null
glm5="$tmp/glm5.gguf-00001-of-00010.gguf"
status=0
for config in "$src"/deploy/configs/*.yaml; do
  case "$(basename "$config")" in
    glm5-* | multi-host*) model=$glm5 ;;
    *) model="$tmp/llama.gguf" ;;
  esac
  if out=$("$tesserad" --config "$config" --model "$model" --check 2>&1); then
    echo "ok   $(basename "$config"): $out"
  else
    echo "FAIL $(basename "$config"): $out"
    status=1
  fi
done
# A config that cannot work is refused with the reason (TP 16 does not divide GLM-5's
# expert FFN into whole quant blocks).
if out=$("$tesserad" --config "$src/deploy/configs/glm5-8gpu.yaml" --model "$glm5" --tp 16 \
  --gpus 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 --check 2>&1); then
  echo "FAIL: --tp 16 on GLM-5 was accepted"
  status=1
elif [[ "$out" != *"cannot be split 16 ways"*"valid --tp values: 1, 2, 4, 8"* ]]; then
  echo "FAIL: unexpected error for --tp 16: $out"
  status=1
else
  echo "ok   --tp 16 refused: ${out:0:160}..."
fi
exit $status
