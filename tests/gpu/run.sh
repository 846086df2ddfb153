#!/usr/bin/env bash
# The one script for a GPU machine (issue #12, item 4): configure and build the CUDA backend
# for the local GPU's architecture only, run every ctest labelled `gpu` (each kernel against
# the CPU reference on random data; whole-model logits of the GPU executor against the CPU
# executor for every architecture; TP=1 vs TP=N when several GPUs exist), then the kernel
# benchmark and the executor's decode/prefill benchmark next to a device-to-device copy
# measured in the same run, and print a summary table. Budget: 8 minutes on one
# H100/H200-class GPU.
#
#   tests/gpu/run.sh [--build-dir DIR] [--jobs N]
#
# TESSERA_BUILD_TYPE (default Release) picks the CMake build type.
#
# Needs nvcc (PATH or /usr/local/cuda/bin), cmake, ninja or make, and the Debian packages of
# tools/install-deps.sh. Exit status: 0 when every gpu test passed, 1 otherwise.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="$root/build/gpu"
jobs=$(nproc)
budget=480

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

log_dir="$build/gpu-run"
mkdir -p "$log_dir"
remaining() { echo $(( budget - SECONDS > 10 ? budget - SECONDS : 10 )); }
step() { printf '\n== %s (%ds elapsed)\n' "$1" "$SECONDS"; }

if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null || { echo "run.sh: nvcc not found (install the CUDA toolkit)" >&2; exit 1; }
command -v nvidia-smi >/dev/null || { echo "run.sh: nvidia-smi not found: no NVIDIA driver" >&2; exit 1; }

# The local GPU's compute capability, e.g. "9.0" -> 90; CMake's "native" as a fallback.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
[[ "$arch" =~ ^[0-9]+$ ]] || arch=native
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
gpu_count=$(nvidia-smi --list-gpus | wc -l)

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

step "configure ($gpu_name, sm_$arch, $gpu_count GPU(s))"
timeout "$(remaining)" cmake -S "$root" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE="${TESSERA_BUILD_TYPE:-Release}" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DTESSERA_TESTS=ON -DTESSERA_BENCH=ON >"$log_dir/configure.log" 2>&1 ||
  { tail -n 30 "$log_dir/configure.log"; echo "run.sh: configure failed (see tools/install-deps.sh)" >&2; exit 1; }
grep -q "CUDA backend ON" "$log_dir/configure.log" ||
  { echo "run.sh: CMake did not enable the CUDA backend (see $log_dir/configure.log)" >&2; exit 1; }

# Only what the run needs: the gpu-labelled tests (their targets share the tests' names) and
# the benchmarks.
mapfile -t gpu_tests < <(ctest --test-dir "$build" -L gpu -N | sed -n 's/^ *Test *#[0-9]*: *//p')
step "build ${#gpu_tests[@]} gpu tests + cuda_bench + gpu_executor_bench with $jobs jobs"
timeout "$(remaining)" cmake --build "$build" -j "$jobs" --target "${gpu_tests[@]}" cuda_bench \
  gpu_executor_bench >"$log_dir/build.log" 2>&1 ||
  { tail -n 40 "$log_dir/build.log"; echo "run.sh: build failed" >&2; exit 1; }

step "ctest -L gpu"
test_status=0
timeout "$(remaining)" ctest --test-dir "$build" -L gpu --output-on-failure --timeout 180 \
  2>&1 | tee "$log_dir/ctest.log" || test_status=1

# What the tests printed (ctest keeps every test's output there, passed or not).
test_log="$build/Testing/Temporary/LastTest.log"
[[ -f "$test_log" ]] || test_log="$log_dir/ctest.log"

step "benchmark"
bench_status=0
timeout "$(remaining)" "$build/bench/cuda_bench" 2>&1 | tee "$log_dir/bench.log" || bench_status=1

step "executor benchmark"
timeout "$(remaining)" "$build/bench/gpu_executor_bench" 2>&1 | tee "$log_dir/exec_bench.log" ||
  bench_status=1

printf '\n== summary (%ds, %s, sm_%s)\n' "$SECONDS" "$gpu_name" "$arch"
printf '%-28s %-10s %s\n' "gpu test" "result" "seconds"
sed -n 's/^ *[0-9]*\/[0-9]* *Test *#[0-9]*: *\([^ ]*\) [.* ]*\([A-Za-z*][A-Za-z *]*[A-Za-z]\) *\([0-9.]*\) sec.*/\1 \2 \3/p' \
  "$log_dir/ctest.log" | while read -r name result secs; do
  printf '%-28s %-10s %s\n' "$name" "$result" "$secs"
done
grep -E "tests passed|tests failed" "$log_dir/ctest.log" || true
# A skip means the test saw no device although nvidia-smi lists one: a broken setup. The TP
# test skips by design with a single GPU.
mapfile -t skipped < <(sed -n 's/^ *[0-9]*\/[0-9]* *Test *#[0-9]*: *\([^ ]*\) .*\*\*\*Skipped.*/\1/p' \
  "$log_dir/ctest.log")
unexpected=()
for name in "${skipped[@]}"; do
  [[ "$name" == cuda_tp_executor_test ]] && (( gpu_count < 2 )) && continue
  unexpected+=("$name")
done
if (( ${#unexpected[@]} > 0 )); then
  echo "run.sh: gpu test(s) skipped although nvidia-smi lists $gpu_count GPU(s): ${unexpected[*]}" >&2
  test_status=1
fi

# key=value lines printed by the tests, as table columns.
columns() {
  awk -v keys="$1" 'BEGIN { n = split(keys, k, " ") }
    { delete v; for (i = 2; i <= NF; i++) { p = index($i, "="); if (p) v[substr($i, 1, p - 1)] = substr($i, p + 1) }
      line = ""; for (j = 1; j <= n; j++) line = line sprintf("%-14s", (k[j] in v) ? v[k[j]] : "-"); print line }'
}
echo
echo "whole-model logits, GPU vs CPU exact (max_abs over the rows made with the CPU's routing/keys;"
echo "rel = max_abs / max|logit|; bound_rel = the test's bound; experts/dsa_keys: sets equal)"
logit_keys="arch quant dtype max_abs rel bound_rel rows_compared argmax experts dsa_keys"
if grep -q '^logits_vs_cpu ' "$test_log"; then
  # shellcheck disable=SC2086  # one column per key
  printf '%-14s' $logit_keys
  echo
  grep -h '^logits_vs_cpu ' "$test_log" | columns "$logit_keys"
else
  echo "(no logits_vs_cpu lines: cuda_executor_test did not run)"
fi
grep -h -E '^(cuda_graphs|batch_invariance|kv_plan|device_memory) ' "$test_log" || true
echo
echo "kernels vs CPU (max_rel_err), GEMV ceilings, prefill GEMM (cuBLAS vs tensor-core tiles):"
grep -E "^(device|d2d_copy_GBps|type|q[0-9]|iq|f16|prefill)" "$log_dir/bench.log" || echo "(no benchmark figures)"
echo
echo "issue 27's kernels vs what they replace (one GEMV pass for 64 rows, experts sorted by"
echo "expert, tiled prefill attention and its tensor-core GQA form, sampling on the device):"
grep -E "^issue27_" "$log_dir/bench.log" || echo "(no issue 27 figures)"
echo
echo "executor (decode: GBps = weight bytes per step / step time; frac_of_d2d = GBps / d2d copy):"
grep -E "^(exec_|prefill_512|decode_b)" "$log_dir/exec_bench.log" || echo "(no executor benchmark figures)"
echo
if (( gpu_count > 1 )); then
  grep -h '^tp_vs_tp1 ' "$test_log" || echo "TP=1 vs TP=N: no tp_vs_tp1 lines (see $log_dir/ctest.log)"
else
  echo "TP=1 vs TP=N: not run (1 GPU; cuda_tp_executor_test needs 2 or more)"
fi
(( SECONDS <= budget )) || echo "run.sh: over the ${budget}s budget (${SECONDS}s)" >&2
(( test_status == 0 && bench_status == 0 ))
