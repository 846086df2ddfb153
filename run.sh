#!/usr/bin/env bash
# Builds Tessera (installing missing Debian packages first) and starts the daemon, tesserad,
# on the embedded default model: a small synthetic GGUF the project generates itself (into
# ~/.cache/tessera on first use). Extra arguments go to tesserad (e.g. ./run.sh --http-port
# 9000, or ./run.sh --model /srv/models/model.gguf --tp 2). Ctrl-C drains and stops it.
set -euo pipefail
cd "$(dirname "$0")"
tools/install-deps.sh
# The same configuration as ./test.sh (no flags here or there), so neither undoes the other.
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
http_port=8080 grpc_port=50051
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --http-port) http_port="${args[$((i + 1))]:-$http_port}" ;;
    --http-port=*) http_port="${args[$i]#*=}" ;;
    --grpc-port) grpc_port="${args[$((i + 1))]:-$grpc_port}" ;;
    --grpc-port=*) grpc_port="${args[$i]#*=}" ;;
  esac
done
cat <<TRY
tesserad is starting; once it logs "ready", try:

  curl -s localhost:${http_port}/v1/completions -H 'Content-Type: application/json' \\
       -d '{"model": "tessera-synthetic-llama-tiny", "prompt": "Once upon a time", "max_tokens": 16}'
  curl -sN localhost:${http_port}/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16, "stream": true}'
  curl -s localhost:${http_port}/metrics | grep tessera_
  grpcurl -plaintext localhost:${grpc_port} list
  grpcurl -plaintext -d '{"text": "Once upon a time", "options": {"max_tokens": 16}}' \\
       localhost:${grpc_port} tessera.v1.Inference/Generate

(The default model has random weights: expect word salad. Serve a real model with --model FILE.)
TRY
exec build/default/bin/tesserad "$@"
