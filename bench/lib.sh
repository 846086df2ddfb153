# Shell helpers shared by the bench/ scripts (sourced, not run).

# wait_http_200 URL PID SECONDS: polls URL until it answers 200; fails when PID exits first
# or after SECONDS.
wait_http_200() {
  local url=$1 pid=$2 limit=$3 code i
  for ((i = 0; i < limit * 5; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url" || true)
    [[ $code == 200 ]] && return 0
    sleep 0.2
  done
  return 1
}

# tessera_binaries SCRIPT BUILD: sets $tessera and $tesserad from the build tree BUILD, or
# exits naming what is missing.
tessera_binaries() {
  tessera=$2/bin/tessera
  tesserad=$2/bin/tesserad
  local b
  for b in "$tessera" "$tesserad"; do
    [[ -x $b ]] || { echo "$1: $b is missing (build first)" >&2; exit 1; }
  done
}

# bench_model ARCH PRESET QUANT: prints the path of that `tessera gen-model` file (seed 1) in
# $TMPDIR/tessera-bench-models, generating it the first time. Needs $tessera.
bench_model() {
  local cache=${TMPDIR:-/tmp}/tessera-bench-models
  local f=$cache/$1-$2-${3,,}.gguf
  mkdir -p "$cache"
  if [[ ! -s $f ]]; then
    echo "generating $f" >&2
    "$tessera" gen-model --arch "$1" --preset "$2" --quant "$3" --seed 1 --out "$f" >&2
  fi
  echo "$f"
}
