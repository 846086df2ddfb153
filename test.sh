#!/usr/bin/env bash
# Builds Tessera and runs every test: the main build's ctest suite, then the GGUF reader's
# corruption tests under AddressSanitizer + UndefinedBehaviorSanitizer and a bounded
# libFuzzer run (ctest labels `sanitize` and `fuzz`, built by clang in build/sanitize).
set -euo pipefail
cd "$(dirname "$0")"
tools/install-deps.sh
jobs=$(nproc)
# The official OpenAI SDK for the client tests, pinned by tests/clients/package-lock.json
# (from the npm registry); those tests report as skipped where npm is missing.
if command -v npm >/dev/null; then
  npm ci --prefix tests/clients --no-audit --no-fund --loglevel=error >/dev/null
fi

# The same configuration as ./run.sh: CUDA code compiles for the GPUs present, or for sm_90
# alone on a machine without one (TESSERA_CUDA_ARCHS; see the README).
cmake --preset default >/dev/null
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"

cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs"
