#!/usr/bin/env bash
# Runs the official OpenAI SDK (npm `openai`, tests/clients/node_modules) against a REST
# server: by default tests/clients' test_http_server (the real gateway over a scripted echo
# engine); or `--url URL [--model NAME]` for a daemon that is already running.
#
#   run_openai_sdk_test.sh --server PATH/test_http_server
#   run_openai_sdk_test.sh --url http://127.0.0.1:8080 [--api-key KEY]
#   run_openai_sdk_test.sh --daemon PATH/tesserad [--api-key KEY]
#
# --test FILE.mjs runs another test of this folder the same way (default
# openai_sdk_test.mjs; structured_output_test.mjs needs a real daemon).
#
# --daemon-arg ARG (repeatable) passes ARG to that tesserad (e.g. --chat-template glm4).
#
# --daemon starts that tesserad on ephemeral ports (with the embedded default model, and a key)
# through tesserad_harness.py, runs the test against it in --url mode, and checks that it
# drains and exits 0 on SIGTERM.
#
# With --url and no --api-key the daemon is taken to run without a key (the wrong-key test
# is skipped).
# Exit 77 (ctest: skipped) when node or the npm packages are missing
# (`npm ci --prefix tests/clients` installs them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
server="" url="" api_key="" model="" daemon="" test_file="openai_sdk_test.mjs"
daemon_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --server) server="$2"; shift 2 ;;
    --url) url="$2"; shift 2 ;;
    --daemon) daemon="$2"; shift 2 ;;
    --api-key) api_key="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --test) test_file="$2"; shift 2 ;;
    --daemon-arg) daemon_args+=("--daemon-arg=$2"); shift 2 ;;
    *) echo "usage: $0 (--server PATH | --url URL | --daemon PATH) [--api-key KEY] [--model NAME] [--test FILE.mjs]" >&2
       exit 2 ;;
  esac
done
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
for pkg in openai ajv ajv-formats; do
  [ -d "$here/node_modules/$pkg" ] || {
    echo "SKIP: the $pkg npm package is missing; run: npm ci --prefix tests/clients"; exit 77; }
done

if [ -n "$daemon" ]; then
  exec /usr/bin/python3 "$here/tesserad_harness.py" --tesserad "$daemon" \
    --api-key "${api_key:-sk-tessera-test}" "${daemon_args[@]}" -- bash "$0" --url "{http}" --api-key "{api_key}" \
    --test "$test_file"
fi

pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
if [ -n "$server" ]; then
  api_key="${api_key:-sk-tessera-test}"
  out="$(mktemp)"
  "$server" --api-key "$api_key" >"$out" &
  pid=$!
  for _ in $(seq 1 200); do
    grep -q "listening on" "$out" && break
    kill -0 "$pid" 2>/dev/null || { echo "test server exited early" >&2; exit 1; }
    sleep 0.05
  done
  address="$(sed -n 's/^listening on //p' "$out")"
  rm -f "$out"
  [ -n "$address" ] || { echo "test server did not report its address" >&2; exit 1; }
  url="http://$address"
  export TESSERA_EXPECT_ECHO=1  # the scripted engine generates its prompt back
fi
[ -n "$url" ] || { echo "give --server or --url" >&2; exit 2; }
TESSERA_URL="$url" TESSERA_API_KEY="$api_key" TESSERA_MODEL="$model" \
  node "$here/$test_file"
if [ -n "$pid" ]; then
  # A drained shutdown exits 0.
  kill -TERM "$pid"
  wait "$pid"
  pid=""
fi
