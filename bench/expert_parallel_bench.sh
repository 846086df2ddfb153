#!/usr/bin/env bash
# Expert parallelism against divided experts on the user path: `tessera generate --tp N`
# (N tessera-worker processes, Gloo) on the deepseek2 moe-1g-ep preset (64 experts of 480
# columns, top-8: 15 blocks of 32 per expert, which 2 or 4 ranks cannot share evenly, so
# --tp picks expert parallelism by itself), prefill and decode tokens/s at TP 1, 2 and 4 with
# --expert-parallel and with --no-expert-parallel (the hidden dim divided unevenly), each
# alternated `runs` times; then build/default/bench/expert_traffic's bytes per rank per
# decode step on the model's own routing.
#
#   bench/expert_parallel_bench.sh [--build DIR] [--quant Q] [--runs N] [--threads N]
#
# --threads N   --threads per worker (default 1: TP 4 on a 2-core machine is then already
#               oversubscribed; say so when quoting it)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
build=$root/build/default
quant=Q8_0
runs=3
threads=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --quant) quant=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--quant Q] [--runs N] [--threads N]" >&2; exit 2 ;;
  esac
done
tessera_binaries "$0" "$build"
model=$(bench_model deepseek2 moe-1g-ep "$quant")
prompt=$(seq -s, 101 612)  # 512 prompt tokens

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs"
echo "model: $model ($(du -h --apparent-size "$model" | cut -f1))"
printf '%-4s %-20s %s\n' TP experts "prefill tok/s | decode tok/s (tokens generated); per run"
for tp in 1 2 4; do
  for mode in --expert-parallel --no-expert-parallel; do
    [[ $tp == 1 && $mode == --expert-parallel ]] && continue
    results=()
    for ((i = 0; i < runs; i++)); do
      line=$("$tessera" generate --model "$model" --prompt-tokens "$prompt" --max-tokens 64 \
               --temperature 0 --threads "$threads" --tp "$tp" "$mode" 2>&1 >/dev/null |
             grep -o '\[[0-9]* prompt tokens at [0-9.]* tok/s, [0-9]* generated at [0-9.]* tok/s' ||
             true)
      results+=("$(sed -E 's/.* at ([0-9.]+) tok\/s, ([0-9]+) generated at ([0-9.]+) tok\/s/\1 | \3 (\2)/' <<<"$line")")
    done
    label=$([[ $tp == 1 ]] && echo "whole (TP 1)" || ([[ $mode == --expert-parallel ]] && echo "expert parallel" || echo "hidden dim divided"))
    printf '%-4s %-20s %s\n' "$tp" "$label" "$(IFS=';'; echo "${results[*]}" | sed 's/;/; /g')"
  done
done
echo
"$build/bench/expert_traffic" "$model" 1 2 4
