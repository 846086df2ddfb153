#!/usr/bin/env bash
# The serving loop's own time under load: tesserad at TP 1 and TP 2 (CPU workers) under
# `tessera bench --prompt-len 128 --gen-len 64` at concurrency 1, 8 and 32, and from the
# daemon's /metrics over each load:
#
#   step      mean tessera_step_duration_seconds: the engine's hand-off of a step to its result
#   compute   mean tessera_worker_compute_seconds: rank 0's own time in the step
#   control   step - compute: the control plane's round trip (hand-off, wake-ups, results,
#             and at TP 2 waiting for the slower rank)
#   control median / p90   the same per step, from tessera_step_control_seconds's buckets
#             (interpolated within the bucket, as Prometheus's histogram_quantile does)
#   to the workers / back to the controller   its two halves (tessera_step_handoff_seconds):
#             the hand-off until the last rank took the step, and the last rank's finish
#             until the controller held every result
#   gap       mean and median tessera_step_gap_seconds: the scheduler's time between a step's
#             result and the next step's hand-off (applying results, scheduling, building
#             the step; event delivery overlaps the next step unless
#             --no-overlap-delivery)
#   all-reduces  the step's all-reduce time (tessera_allreduce_seconds per step; part of
#             compute)
#   tok/s     generated tokens per second (tessera bench)
#
#   bench/step_overhead_bench.sh [--build DIR] [--model FILE] [--threads N] [--tp "1 2"]
#                                [--concurrency "1 8 32"] [--no-overlap-delivery]
#                                [--tesserad-arg ARG]... [--out FILE.md]
#
# --build DIR    Tessera build tree with bin/tessera and bin/tesserad (default build/default)
# --model FILE   the GGUF to serve (default: the 124M llama at Q8_0 from `tessera gen-model`,
#                made once in $TMPDIR; Q8_0 so that it splits at TP 2)
# --threads N    --threads-per-worker at TP 1 (default: the CPUs); at TP N each worker gets
#                1/N of them
# --tp LIST      the TP sizes to run (default "1 2")
# --concurrency LIST  the loads to run (default "1 8 32")
# --no-overlap-delivery     passed to tesserad (delivery between steps)
# --tesserad-arg ARG        one more argument for tesserad (repeat for more), e.g.
#                           --tesserad-arg --cpu-collectives --tesserad-arg gloo
# --out FILE     also write the report to FILE
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/lib.sh"
build=$root/build/default
model=""
threads=$(nproc)
tp_sizes="1 2"
loads="1 8 32"
out=""
daemon_args=()
port_http=18190
port_grpc=15161

usage() {
  sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --tp) tp_sizes=$2; shift 2 ;;
    --concurrency) loads=$2; shift 2 ;;
    --no-overlap-delivery) daemon_args+=(--no-overlap-delivery); shift ;;
    --tesserad-arg) daemon_args+=("$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "step_overhead_bench.sh: unknown argument $1" >&2; usage 2 ;;
  esac
done

for v in $tp_sizes $loads $threads; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "step_overhead_bench.sh: '$v' is not a positive integer (--tp, --concurrency, --threads)" >&2; exit 2; }
done
tessera_binaries step_overhead_bench.sh "$build"
python=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/step_overhead_bench.XXXXXX")
pid=""
stop_server() {
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}
trap 'stop_server; rm -rf "$work"' EXIT
log() { echo "[step_overhead_bench] $*" >&2; }

[[ -n $model ]] || model=$(bench_model llama 124m Q8_0)

# The histograms' sums and counts, and the gap's buckets, from one scrape.
scrape() { curl -s --max-time 5 "http://127.0.0.1:$port_http/metrics" >"$1"; }

# report BEFORE AFTER BENCH_JSON: one table row's figures from the two scrapes.
figures() {
  "$python" - "$@" <<'PY'
import json, re, sys

def read(path):
    values = {}
    for line in open(path):
        m = re.match(r'([a-z_]+)(\{[^}]*\})?\s+(\S+)', line)
        if not m or line.startswith("#"):
            continue
        name, labels = m.group(1), m.group(2) or ""
        direction = re.search(r'direction="([^"]+)"', labels)
        if direction:  # tessera_step_handoff_seconds: one series per direction
            name = name.replace("_seconds", "_seconds:" + direction.group(1))
        le = re.search(r'le="([^"]+)"', labels)
        key = (name, le.group(1) if le else None)
        values[key] = values.get(key, 0.0) + float(m.group(3))  # summed over phases
    return values

a, b = read(sys.argv[1]), read(sys.argv[2])
d = lambda name, le=None: b.get((name, le), 0.0) - a.get((name, le), 0.0)
def mean(family):
    n = d(family + "_count")
    return d(family + "_sum") / n if n else float("nan")
step, compute = mean("tessera_step_duration_seconds"), mean("tessera_worker_compute_seconds")
gap = mean("tessera_step_gap_seconds")
to_workers = mean("tessera_step_handoff_seconds:to_workers")
to_controller = mean("tessera_step_handoff_seconds:to_controller")
# A quantile from a histogram's buckets, interpolated linearly within the bucket that holds
# it (Prometheus's histogram_quantile).
def quantile(family, q):
    name = family + "_bucket"
    counts = sorted((float(le), d(name, le)) for (n, le) in b if n == name and le != "+Inf")
    n = d(family + "_count")
    lower, below = 0.0, 0.0
    for le, cumulative in counts:
        if n and cumulative >= n * q:
            inside = cumulative - below
            return lower + (le - lower) * ((n * q - below) / inside if inside else 1.0)
        lower, below = le, cumulative
    return float("nan")
median = quantile("tessera_step_gap_seconds", 0.5)
control_median = quantile("tessera_step_control_seconds", 0.5)
control_p90 = quantile("tessera_step_control_seconds", 0.9)
bench = json.load(open(sys.argv[3]))
us = lambda s: f"{s * 1e6:,.0f}"
steps = d("tessera_step_duration_seconds_count")
allreduce = d("tessera_allreduce_seconds_sum") / steps if steps else float("nan")
print(f"{bench.get('generated_tokens_per_s', float('nan')):.1f} {us(step)} {us(compute)} "
      f"{us(step - compute)} ~{us(control_median)} ~{us(control_p90)} {us(to_workers)} "
      f"{us(to_controller)} {us(gap)} <={us(median)} "
      f"{us(allreduce)} {int(steps)} "
      f"{bench.get('failed', '-')}")
PY
}

rows=()
for tp in $tp_sizes; do
  t=$(( threads / tp > 0 ? threads / tp : 1 ))
  log "starting tesserad --tp $tp --threads-per-worker $t on $model"
  "$tesserad" --model "$model" --tp "$tp" --cpu-workers "$tp" --threads-per-worker "$t" \
    --host 127.0.0.1 --http-port "$port_http" --grpc-port "$port_grpc" "${daemon_args[@]}" \
    >"$work/tesserad-$tp.log" 2>&1 &
  pid=$!
  if ! wait_http_200 "http://127.0.0.1:$port_http/ready" "$pid" 300; then
    log "tesserad did not become ready: $(tail -n 3 "$work/tesserad-$tp.log" | tr '\n' ' ')"
    stop_server
    continue
  fi
  for c in $loads; do
    scrape "$work/before.txt"
    "$tessera" bench --url "http://127.0.0.1:$port_http" --concurrency "$c" --prompt-len 128 \
      --gen-len 64 --seed $((tp * 1000000 + c * 1000)) --json >"$work/bench.json" 2>"$work/bench.err" || true
    scrape "$work/after.txt"
    read -r tok step compute control control_median control_p90 to_workers to_controller gap median \
      allreduce steps failed \
      < <(figures "$work/before.txt" "$work/after.txt" "$work/bench.json")
    log "tp $tp c$c: $tok tok/s, step $step us, compute $compute us, control $control us" \
      "($to_workers to the workers, $to_controller back), gap $gap us"
    rows+=("| $tp | $c | $tok | $step | $compute | $control | $control_median | $control_p90 | $to_workers | $to_controller | $gap | $median | $allreduce | $steps | $failed |")
  done
  stop_server
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
family=$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
cpu_model=$(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
{
  echo "## Serving loop overhead under load ($(basename "$model"), $(nproc) CPUs: $cpu, family $family model $cpu_model)"
  echo
  echo "tessera bench --prompt-len 128 --gen-len 64; means per step in microseconds from /metrics."
  echo
  echo "| TP | concurrency | tok/s | step | compute (rank 0) | control (step - compute) | control median | control p90 | to the workers | back to the controller | scheduler gap (mean) | gap (median) | all-reduces per step | steps | failed |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee ${out:+"$out"}
