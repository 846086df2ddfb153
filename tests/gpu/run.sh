#!/usr/bin/env bash
# The one script for a GPU machine (issue #12, item 4): configure and build the CUDA backend
# for the local GPU's architecture only, run every ctest labelled `gpu` (each kernel against
# the CPU reference on random data), then the decode/prefill benchmark next to a
# device-to-device copy measured in the same run, and print a summary table. Budget: 8 minutes
# on one H100/H200-class GPU.
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
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
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
# the benchmark.
mapfile -t gpu_tests < <(ctest --test-dir "$build" -L gpu -N | sed -n 's/^ *Test *#[0-9]*: *//p')
step "build ${#gpu_tests[@]} gpu tests + cuda_bench with $jobs jobs"
timeout "$(remaining)" cmake --build "$build" -j "$jobs" --target "${gpu_tests[@]}" cuda_bench \
  >"$log_dir/build.log" 2>&1 || { tail -n 40 "$log_dir/build.log"; echo "run.sh: build failed" >&2; exit 1; }

step "ctest -L gpu"
test_status=0
timeout "$(remaining)" ctest --test-dir "$build" -L gpu --output-on-failure --timeout 180 \
  2>&1 | tee "$log_dir/ctest.log" || test_status=1

step "benchmark"
bench_status=0
timeout "$(remaining)" "$build/bench/cuda_bench" 2>&1 | tee "$log_dir/bench.log" || bench_status=1

printf '\n== summary (%ds, %s, sm_%s)\n' "$SECONDS" "$gpu_name" "$arch"
printf '%-28s %-10s %s\n' "gpu test" "result" "seconds"
sed -n 's/^ *[0-9]*\/[0-9]* *Test *#[0-9]*: *\([^ ]*\) [.* ]*\([A-Za-z*][A-Za-z *]*[A-Za-z]\) *\([0-9.]*\) sec.*/\1 \2 \3/p' \
  "$log_dir/ctest.log" | while read -r name result secs; do
  printf '%-28s %-10s %s\n' "$name" "$result" "$secs"
done
grep -E "tests passed|tests failed" "$log_dir/ctest.log" || true
# A skip means the test saw no device although nvidia-smi lists one: a broken setup.
skipped=$(grep -c '\*\*\*Skipped' "$log_dir/ctest.log" || true)
if (( skipped > 0 )); then
  echo "run.sh: $skipped gpu test(s) skipped although nvidia-smi lists $gpu_count GPU(s)" >&2
  test_status=1
fi
echo
grep -E "^(device|d2d_copy_GBps|type|q[0-9]|iq|f16|prefill)" "$log_dir/bench.log" || echo "(no benchmark figures)"
if (( gpu_count > 1 )); then
  echo "TP=1 vs TP=$gpu_count on GPUs: not run (the GPU executor is not written yet)"
fi
echo "whole-model logits GPU vs CPU: not run (the GPU executor is not written yet)"
(( SECONDS <= budget )) || echo "run.sh: over the ${budget}s budget (${SECONDS}s)" >&2
(( test_status == 0 && bench_status == 0 ))
