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
# TP 16 (multi-host) plans too: 8 quant blocks of expert FFN cannot be shared by 16 ranks,
# so the routed experts go whole to the ranks (expert parallelism, 16 each), and the log
# says so.
if out=$("$tesserad" --config "$src/deploy/configs/glm5-8gpu.yaml" --model "$glm5" --tp 16 \
  --gpus 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 --check 2>&1) &&
  [[ "$out" == *"routed experts: expert parallel, 256 experts: 16/16/16/16/16/16/16/16/16/16/16/16/16/16/16/16"* ]]; then
  echo "ok   --tp 16: expert parallel"
else
  echo "FAIL: --tp 16 on GLM-5: $out"
  status=1
fi
# A config that cannot work is refused with the reason.
if out=$("$tesserad" --config "$src/deploy/configs/glm5-8gpu.yaml" --model "$glm5" \
  --expert-parallel sometimes --check 2>&1); then
  echo "FAIL: --expert-parallel sometimes was accepted"
  status=1
elif [[ "$out" != *"--expert-parallel"*"auto|on|off"* ]]; then
  echo "FAIL: unexpected error for --expert-parallel sometimes: $out"
  status=1
else
  echo "ok   --expert-parallel sometimes refused: ${out:0:160}..."
fi
exit $status
