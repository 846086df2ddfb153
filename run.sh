#!/usr/bin/env bash
# Builds Tessera (installing missing Debian packages first) and runs it on the embedded
# default model: a small synthetic GGUF that the project generates itself.
set -euo pipefail
cd "$(dirname "$0")"
tools/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
model=build/default/models/tessera-default.gguf
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  build/default/bin/tessera gen-model --arch llama --preset tiny -o "$model"
fi
# Until the daemon lands, the main job is offline generation on the default model. Extra
# arguments go to `tessera generate` (e.g. ./run.sh --prompt "Hello" --seed 7).
if [ $# -eq 0 ]; then
  set -- --prompt "Once upon a time" --max-tokens 48 --seed 1
fi
build/default/bin/tessera generate --model "$model" "$@"
