#!/usr/bin/env bash
# Prefix caching on vs off, in one run, on the models at hand: two tesserad at once, one with
# its default (--enable-prefix-caching) and one with --no-enable-prefix-caching, each under the
# same three `tessera bench` loads (sent to one daemon at a time, the other idle), then a
# markdown table of TTFT and throughput with the ratios. See bench/README.md, "Prefix caching".
#
#   bench/prefix_cache_bench.sh [--build DIR] [--model FILE]... [--threads N] [--quick]
#                               [--out FILE.md]
#
# --model FILE   a GGUF to serve (repeatable; default: the 124M llama Q4_K_M and the deepseek2
#                "small" Q4_K_M (MLA cache) from `tessera gen-model`, made once in $TMPDIR)
# --build DIR    Tessera build tree with bin/tessera and bin/tesserad (default build/default)
# --threads N    --threads-per-worker (default: the CPUs)
# --quick        smaller loads (2 conversations, 8 shared-prefix requests, 32 standard requests,
#                one standard run each instead of 3, 16, 64 and 3)
# --out FILE     also write the report to FILE
#
# Loads (streaming, --logprobs so that every token is an event):
#   multi-turn   N conversations x 4 turns, one client: a 1,800-token first prompt, then each
#                turn adds the previous 32-token answer and 100 new tokens (turn 3: ~2,060
#                tokens, turn 4: ~2,200): TTFT per turn
#   shared       one 1,000-token system prompt, then 32 tokens of each request's own, 16 tokens
#                generated, 4 clients
#   standard     prompt 128 / 64 generated at concurrency 32, prompts that share nothing: what
#                the lookups cost when nothing matches; off and on alternately, 3 times each
#                (--quick: once), medians
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/default
models=()
threads=$(nproc)
quick=0
out=""
# The daemon without prefix caching listens on these ports + 1.
port_http=18090
port_grpc=15061

usage() {
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --model) models+=("$2"); shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --out) out=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "prefix_cache_bench.sh: unknown argument $1" >&2; usage 2 ;;
  esac
done

source "$root/bench/lib.sh"
tessera_binaries prefix_cache_bench.sh "$build"
python=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/prefix_cache_bench.XXXXXX")
trap 'stop_server; rm -rf "$work"' EXIT
log() { echo "[prefix_cache_bench] $*" >&2; }

if [[ ${#models[@]} -eq 0 ]]; then
  models+=("$(bench_model llama 124m Q4_K_M)" "$(bench_model deepseek2 small Q4_K_M)")
fi

conversations=3 shared_requests=16 standard_requests=64 reps=3
if [[ $quick == 1 ]]; then conversations=2 shared_requests=8 standard_requests=32 reps=1; fi

pids=()
stop_server() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
wait_ready() { wait_http_200 "http://127.0.0.1:$2/ready" "$1" 300; } # PID PORT

# bench NAME MODE ARGS...: one tessera bench run against the daemon with prefix caching `on`
# or `off`, JSON into $work/NAME.json.
bench() {
  local name=$1 port=$port_http
  [[ $2 == off ]] && port=$((port_http + 1))
  shift 2
  "$tessera" bench --url "http://127.0.0.1:$port" --stream --logprobs --json "$@" \
    >"$work/$name.json" 2>"$work/$name.err" || {
    log "tessera bench $name failed: $(tail -n 2 "$work/$name.err" | tr '\n' ' ')"
  }
}

t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for m in "${models[@]}"; do
  tag=$(basename "$m" .gguf)
  ready=1
  for mode in on off; do
    flag=() port=$port_http grpc=$port_grpc
    if [[ $mode == off ]]; then
      flag=(--no-enable-prefix-caching) port=$((port_http + 1)) grpc=$((port_grpc + 1))
    fi
    log "$tag: tesserad ${flag[*]:-(prefix caching on)} on port $port"
    "$tesserad" --model "$m" --threads-per-worker "$threads" --host 127.0.0.1 \
      --http-port "$port" --grpc-port "$grpc" --max-model-len 4096 "${flag[@]}" \
      >"$work/$tag-$mode.log" 2>&1 &
    pids+=($!)
    if ! wait_ready "${pids[-1]}" "$port"; then
      log "tesserad did not become ready: $(tail -n 3 "$work/$tag-$mode.log" | tr '\n' ' ')"
      ready=0
    fi
  done
  if [[ $ready == 1 ]]; then
    for mode in off on; do
      bench "$tag-$mode-turns" "$mode" --turns 4 --conversations "$conversations" \
        --concurrency 1 --prompt-len 1800 --turn-len 100 --gen-len 32 --seed 1000
      bench "$tag-$mode-shared" "$mode" --shared-prefix 1000 --prompt-len 32 --gen-len 16 \
        --requests "$shared_requests" --concurrency 4 --seed 2000
    done
    for ((r = 0; r < reps; r++)); do
      for mode in off on; do
        # Each run its own prompts (seed), so that nothing matches on either daemon.
        bench "$tag-$mode-standard-$r" "$mode" --concurrency 32 --requests "$standard_requests" \
          --prompt-len 128 --gen-len 64 --seed $((3000 + 1000 * r))
      done
    done
  fi
  stop_server
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)

report=$("$python" - "$work" "$cpu" "$threads" "$load_start" "$load_end" \
  "$(($(date +%s) - t_start))" "$reps" "${models[@]}" <<'EOF'
import json, os, statistics, sys
work, cpu, threads, load0, load1, secs, reps = sys.argv[1:8]
models = sys.argv[8:]
def read(name):
    try:
        with open(os.path.join(work, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"
def ms(p, key="p50"):
    return f"{p[key]:.0f}" if p else "-"
print(f"CPU: {cpu}; tesserad --threads-per-worker {threads}; load average {load0} -> {load1}; "
      f"{secs} s\n")
for m in models:
    tag = os.path.basename(m)[:-5]
    print(f"### {tag}\n")
    on, off = read(tag + "-on-turns"), read(tag + "-off-turns")
    print("| multi-turn (1,800 tokens, then +32 answer +100 per turn) | off: TTFT p50 / p99 ms "
          "| on: TTFT p50 / p99 ms | TTFT p50 off/on | cached prompt tokens (on) |")
    print("| --- | --- | --- | --- | --- |")
    if on and off:
        for t_on, t_off in zip(on.get("by_turn", []), off.get("by_turn", [])):
            a, b = t_off["ttft_ms"], t_on["ttft_ms"]
            print(f"| turn {t_on['turn']} | {ms(a)} / {ms(a, 'p99')} | {ms(b)} / {ms(b, 'p99')} "
                  f"| {ratio(a and a['p50'], b and b['p50'])} | |")
        print(f"| all turns: generated tok/s | {off['generated_tokens_per_s']:.1f} "
              f"| {on['generated_tokens_per_s']:.1f} "
              f"| {ratio(on['generated_tokens_per_s'], off['generated_tokens_per_s'])} on/off "
              f"| {on['cached_tokens']} of {on['prompt_tokens']} |")
    print()
    on, off = read(tag + "-on-shared"), read(tag + "-off-shared")
    print("| load | off: TTFT p50 / p99 ms | on: TTFT p50 / p99 ms | TTFT p50 off/on "
          "| off: gen tok/s | on: gen tok/s | on/off | failed off / on |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    def median_run(mode):
        runs = [read(f"{tag}-{mode}-standard-{r}") for r in range(int(reps))]
        runs = [r for r in runs if r]
        if not runs:
            return None
        tok = statistics.median(r["generated_tokens_per_s"] for r in runs)
        return min(runs, key=lambda r: abs(r["generated_tokens_per_s"] - tok))
    for name, label in (("shared", "shared prefix (1,000-token system prompt + 32)"),
                        ("standard", f"standard c32, nothing shared (128 / 64), median of {reps}")):
        if name == "standard":
            on, off = median_run("on"), median_run("off")
        else:
            on, off = read(f"{tag}-on-{name}"), read(f"{tag}-off-{name}")
        if not (on and off):
            print(f"| {label} | - | - | - | - | - | - | - |")
            continue
        print(f"| {label} | {ms(off['ttft_ms'])} / {ms(off['ttft_ms'], 'p99')} "
              f"| {ms(on['ttft_ms'])} / {ms(on['ttft_ms'], 'p99')} "
              f"| {ratio(off['ttft_ms'] and off['ttft_ms']['p50'], on['ttft_ms'] and on['ttft_ms']['p50'])} "
              f"| {off['generated_tokens_per_s']:.1f} | {on['generated_tokens_per_s']:.1f} "
              f"| {ratio(on['generated_tokens_per_s'], off['generated_tokens_per_s'])} "
              f"| {off['failed']} / {on['failed']} |")
    runs = {mode: [read(f"{tag}-{mode}-standard-{r}") for r in range(int(reps))]
            for mode in ("off", "on")}
    print("\nstandard runs, generated tok/s in run order: " + "; ".join(
        f"{mode} " + ", ".join(f"{r['generated_tokens_per_s']:.1f}" if r else "-" for r in rs)
        for mode, rs in runs.items()))
    print()
EOF
)
echo "$report"
[[ -n $out ]] && echo "$report" >"$out"
exit 0
