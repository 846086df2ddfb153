#!/usr/bin/env bash
# Compares Tessera with llama.cpp side by side on this machine, in one go, default flags on both
# sides, and prints ratio tables (markdown). See bench/README.md, "Side by side with llama.cpp".
#
#   bench/compare_llama_cpp.sh [--baseline DIR] [--build DIR] [--threads "1 2"]
#                              [--models "q4km q8_0"] [--moe MOE.gguf] [--quick] [--out FILE.md]
#
# --baseline DIR  what ../shared/baseline/build.sh made: DIR/bin/llama-bench, llama-server and
#                 DIR/models/llama124m-{q4km,q8_0}.gguf (default ${TMPDIR:-/tmp}/tessera-baseline)
# --build DIR     Tessera build tree with bin/tessera, bin/tesserad (default build/default)
# --threads LIST  thread counts for the offline runs (default "1 2")
# --models LIST   which of the baseline's models to run offline: q4km, q8_0 (default both)
# --moe FILE      also run the offline comparison on FILE (e.g. from `tessera gen-model --arch
#                 deepseek2 --preset moe-1g --quant Q8_0`), with the last of --threads
# --quick         one repetition of each measurement instead of 3
# --out FILE      also write the report to FILE
#
# Offline: `llama-bench -m F -t T -p 512 -n 128 -d 0,512 -o json` (pp512, and tg128 from an
# empty context and at depth 512, avg_ts) against `tessera
# generate --model F --threads T --prompt-tokens <512 fixed ids> --max-tokens 128 --temperature 0
# --json` (prefill / decode tok/s of its summary), run alternately, median of R runs. Serving
# (Q4_K_M, 2 threads): `tessera bench --prompt-len 128 --gen-len 64 --json` at concurrency 1, 8,
# 32 against `llama-server -t 2 -np 32 -c 16384`, then against `tesserad --threads-per-worker 2`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
baseline=${TMPDIR:-/tmp}/tessera-baseline
build=$root/build/default
threads="1 2"
models="q4km q8_0"
moe=""
quick=0
out=""
port_llama=18181
port_http=18080
port_grpc=15051

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

while (($#)); do
  case $1 in
    --baseline) baseline=${2:?--baseline DIR}; shift 2 ;;
    --build) build=${2:?--build DIR}; shift 2 ;;
    --threads) threads=${2:?--threads LIST}; shift 2 ;;
    --models) models=${2:?--models LIST}; shift 2 ;;
    --moe) moe=${2:?--moe FILE}; shift 2 ;;
    --quick) quick=1; shift ;;
    --out) out=${2:?--out FILE}; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "compare_llama_cpp.sh: unknown argument '$1'" >&2; usage 2 >&2 ;;
  esac
done

reps=3
((quick)) && reps=1
read -r -a thread_list <<<"$threads"
read -r -a model_list <<<"$models"
((${#thread_list[@]})) || { echo "compare_llama_cpp.sh: --threads is empty" >&2; exit 2; }

llama_bench=$baseline/bin/llama-bench
llama_server=$baseline/bin/llama-server
tessera=$build/bin/tessera
tesserad=$build/bin/tesserad
for f in "$llama_bench" "$llama_server"; do
  [[ -x $f ]] || { echo "compare_llama_cpp.sh: $f missing: run ../shared/baseline/build.sh" >&2; exit 1; }
done
for f in "$tessera" "$tesserad"; do
  [[ -x $f ]] || { echo "compare_llama_cpp.sh: $f missing: build Tessera first" >&2; exit 1; }
done
for m in "${model_list[@]}"; do
  [[ -f $baseline/models/llama124m-$m.gguf ]] ||
    { echo "compare_llama_cpp.sh: $baseline/models/llama124m-$m.gguf missing" >&2; exit 1; }
done
[[ -z $moe || -f $moe ]] || { echo "compare_llama_cpp.sh: $moe missing" >&2; exit 1; }
serve_model=$baseline/models/llama124m-q4km.gguf
[[ -f $serve_model ]] || { echo "compare_llama_cpp.sh: $serve_model missing" >&2; exit 1; }

work=$(mktemp -d)
server_pid=""

stop_server() {
  [[ -n $server_pid ]] || return 0
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
cleanup() {
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# Helpers in Python (json module): parsing, medians, ratios and the markdown rows.
cat >"$work/helper.py" <<'PY'
import json, statistics, sys

def load_last(path, key):
    """The last JSON object line of path that has key (tessera generate prints one per token)."""
    last = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and key in obj:
                last = obj
    if last is None:
        raise SystemExit(f"{path}: no JSON object with {key}")
    return last

def num(v):
    return f"{v:,.0f}" if v >= 1000 else f"{v:.1f}"

def med(vals):
    vals = [float(v) for v in vals if v != "-"]
    return statistics.median(vals) if vals else None

def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"

cmd = sys.argv[1]
if cmd == "llama-bench":           # FILE -> "pp_ts tg_ts tg_ts_at_depth_512"
    rows = json.load(open(sys.argv[2]))
    def ts(prompt, depth):
        return [r["avg_ts"] for r in rows
                if (r.get("n_prompt", 0) > 0) == prompt and (r.get("n_gen", 0) > 0) != prompt
                and r.get("n_depth", 0) == depth]
    pp, tg, tg_deep = ts(True, 0), ts(False, 0), ts(False, 512)
    if not pp or not tg or not tg_deep:
        raise SystemExit(f"{sys.argv[2]}: no pp/tg rows")
    print(pp[0], tg[0], tg_deep[0])
elif cmd == "llama-commit":        # FILE -> build_commit
    rows = json.load(open(sys.argv[2]))
    print(rows[0].get("build_commit", "?") if rows else "?")
elif cmd == "generate":            # FILE -> "prefill decode completion_tokens finish_reason"
    s = load_last(sys.argv[2], "decode_tokens_per_s")
    print(s["prefill_tokens_per_s"], s["decode_tokens_per_s"], s["completion_tokens"],
          s.get("finish_reason", "?"))
elif cmd == "bench":               # FILE -> "generated_tok_s failed requests"
    s = json.load(open(sys.argv[2]))
    print(s["generated_tokens_per_s"], s["failed"], s["requests"])
elif cmd == "bench-failures":      # FILE -> one line per failure kind: "count x message"
    s = json.load(open(sys.argv[2]))
    for kind, count in sorted(s.get("failures", {}).items()):
        msg = " ".join(str(s.get("failure_messages", {}).get(kind, kind)).split())
        print(f"{count} x {msg[:200]}")
elif cmd == "offline-row":
    # label threads lpp ltg ltgd tpp ttg min_completion max_tokens (each a ';'-list of runs,
    # '-' = failed)
    label, t, lpp, ltg, ltgd, tpp, ttg, comp, max_tokens = sys.argv[2:11]
    v = [med(x.split(";")) for x in (lpp, ltg, ltgd, tpp, ttg)]
    cells = [label, t] + [num(x) if x is not None else "failed" for x in v]
    rp = v[3] / v[0] if v[0] and v[3] is not None else None
    rd0 = v[4] / v[1] if v[1] and v[4] is not None else None
    rd = v[4] / v[2] if v[2] and v[4] is not None else None
    cells += [f"{r:.2f}x" if r is not None else "-" for r in (rp, rd0, rd)]
    met = []
    if rp is not None:
        met.append("prefill " + ("met" if rp >= 1.3 else "**below**"))
    if rd is not None:
        met.append("decode " + ("met" if rd >= 1.0 else "**below**"))
    comps = [int(c) for c in comp.split(";") if c != "-"]
    notes = []
    if comps and min(comps) < int(max_tokens):
        notes.append(f"Tessera stopped at EOS after {min(comps)} of {max_tokens} tokens")
    cells += [", ".join(met) or "-", "; ".join(notes)]
    print("| " + " | ".join(cells) + " |")
elif cmd == "serve-row":
    # C ltoks lfailed lrequests ttoks tfailed trequests (';'-lists, '-' = run failed)
    c, ltok, lf, lr, ttok, tf, tr = sys.argv[2:9]
    lv, tv = med(ltok.split(";")), med(ttok.split(";"))
    def fails(f, r):
        f = [int(x) for x in f.split(";") if x != "-"]
        r = [int(x) for x in r.split(";") if x != "-"]
        return f"{sum(f)} of {sum(r)}" if r else "no run"
    want = 1.0 if int(c) == 1 else 1.5
    rv = tv / lv if lv and tv is not None else None
    target = "-"
    if rv is not None:
        tfail = sum(int(x) for x in tf.split(";") if x != "-")
        target = "met" if rv >= want and tfail == 0 else "**below**"
        target += f" (>= {want:.1f}x, 0 failed)"
    print(f"| {c} | {num(lv) if lv is not None else 'failed'} | "
          f"{num(tv) if tv is not None else 'failed'} | "
          f"{f'{rv:.2f}x' if rv is not None else '-'} | {fails(lf, lr)} | {fails(tf, tr)} | {target} |")
else:
    raise SystemExit("unknown helper command " + cmd)
PY
helper() { python3 "$work/helper.py" "$@"; }

# 512 fixed prompt ids: a seeded pseudo-random list in [100, 31000).
prompt_ids=$(python3 -c '
import random
r = random.Random(20261129)
print(",".join(str(r.randrange(100, 31000)) for _ in range(512)))')

started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
run_no=0
llama_commit=""

# One llama-bench run: sets res_pp, res_tg ("-" when it failed).
run_llama_bench() { # FILE THREADS
  local f=$1 t=$2 o parsed
  run_no=$((run_no + 1))
  o=$work/llama-bench.$run_no.json
  res_pp=-; res_tg=-; res_tgd=-
  if "$llama_bench" -m "$f" -t "$t" -p 512 -n 128 -d 0,512 -o json >"$o" 2>"$o.err" &&
    parsed=$(helper llama-bench "$o" 2>>"$o.err"); then
    read -r res_pp res_tg res_tgd <<<"$parsed"
    [[ -n $llama_commit ]] || llama_commit=$(helper llama-commit "$o" 2>/dev/null || echo "?")
  else
    log "llama-bench failed ($f, -t $t): $(tail -n 3 "$o.err" | tr '\n' ' ')"
  fi
}

# One tessera generate run: sets res_prefill, res_decode, res_completion, res_finish.
run_tessera_generate() { # FILE THREADS
  local f=$1 t=$2 o parsed
  run_no=$((run_no + 1))
  o=$work/generate.$run_no.jsonl
  res_prefill=-; res_decode=-; res_completion=-; res_finish=-
  if "$tessera" generate --model "$f" --threads "$t" --prompt-tokens "$prompt_ids" \
    --max-tokens 128 --temperature 0 --json >"$o" 2>"$o.err" &&
    parsed=$(helper generate "$o" 2>>"$o.err"); then
    read -r res_prefill res_decode res_completion res_finish <<<"$parsed"
  else
    log "tessera generate failed ($f, --threads $t): $(tail -n 3 "$o.err" | tr '\n' ' ')"
  fi
}

offline_rows=()
offline() { # LABEL FILE THREADS
  local label=$1 f=$2 t=$3 r side order lpp=() ltg=() ltgd=() tpp=() ttg=() comp=()
  for ((r = 1; r <= reps; r++)); do
    # Alternate, and swap the order every other repetition (ABBA), so that noise and cache
    # warmth hit both sides alike.
    order="llama tessera"
    ((r % 2)) || order="tessera llama"
    for side in $order; do
      if [[ $side == llama ]]; then
        run_llama_bench "$f" "$t"
        lpp+=("$res_pp"); ltg+=("$res_tg"); ltgd+=("$res_tgd")
        log "$label -t $t run $r/$reps: llama.cpp pp512 $res_pp tg128 $res_tg" \
          "tg128@d512 $res_tgd tok/s"
      else
        run_tessera_generate "$f" "$t"
        tpp+=("$res_prefill"); ttg+=("$res_decode"); comp+=("$res_completion")
        log "$label --threads $t run $r/$reps: Tessera prefill $res_prefill decode $res_decode tok/s" \
          "($res_completion tokens, finish $res_finish)"
      fi
    done
  done
  local IFS=';'
  offline_rows+=("$(helper offline-row "$label" "$t" "${lpp[*]}" "${ltg[*]}" "${ltgd[*]}" "${tpp[*]}" "${ttg[*]}" "${comp[*]}" 128)")
}

port_free() { # PORT: true when nothing listens on 127.0.0.1:PORT
  python3 -c '
import socket, sys
s = socket.socket()
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) != 0 else 1)' "$1"
}

# wait_http_200 URL PID SECONDS
source "$root/bench/lib.sh"

# tessera bench runs against URL for each concurrency; fills serve_{tok,failed,req}_<side>_<C>.
declare -A serve_tok serve_failed serve_req
serve_runs() { # SIDE URL
  local side=$1 url=$2 c r o tok failed req parsed line
  for c in 1 8 32; do
    for ((r = 1; r <= reps; r++)); do
      run_no=$((run_no + 1))
      o=$work/bench.$run_no.json
      # tessera bench exits 1 when every request failed; its JSON still says so. Each run
      # draws its prompts from its own seeds, so that no prompt repeats one a server has seen
      # (llama-server's slots would otherwise reuse a cached prompt and skip its prefill).
      "$tessera" bench --url "$url" --concurrency "$c" --prompt-len 128 --gen-len 64 \
        --seed $((run_no * 1000000)) --json >"$o" 2>"$o.err" || true
      if parsed=$(helper bench "$o" 2>>"$o.err"); then
        read -r tok failed req <<<"$parsed"
        log "$side concurrency $c run $r/$reps: $tok generated tok/s, $failed of $req failed"
        while IFS= read -r line; do
          serve_notes+=("$side, concurrency $c, run $r/$reps: $line")
        done < <(helper bench-failures "$o" 2>/dev/null || true)
      else
        log "$side concurrency $c run $r/$reps: tessera bench failed: $(tail -n 3 "$o.err" | tr '\n' ' ')"
        tok=-; failed=-; req=-
      fi
      serve_tok[$side,$c]+="${serve_tok[$side,$c]:+;}$tok"
      serve_failed[$side,$c]+="${serve_failed[$side,$c]:+;}$failed"
      serve_req[$side,$c]+="${serve_req[$side,$c]:+;}$req"
    done
  done
}

# ---- (a) offline, the baseline's llama 124m models ----
for m in "${model_list[@]}"; do
  case $m in
    q4km) label="llama 124m Q4_K_M" ;;
    q8_0) label="llama 124m Q8_0" ;;
    *) label="llama124m-$m" ;;
  esac
  for t in "${thread_list[@]}"; do
    offline "$label" "$baseline/models/llama124m-$m.gguf" "$t"
  done
done

# ---- (c) offline, an MoE file ----
if [[ -n $moe ]]; then
  offline "$(basename "$moe")" "$moe" "${thread_list[-1]}"
fi

# ---- (b) serving, Q4_K_M, 2 threads ----
serve_notes=()
for p in "$port_llama" "$port_http" "$port_grpc"; do
  port_free "$p" || { echo "compare_llama_cpp.sh: port $p is in use" >&2; exit 1; }
done
log "starting llama-server on 127.0.0.1:$port_llama"
"$llama_server" -m "$serve_model" -t 2 -np 32 -c 16384 --host 127.0.0.1 --port "$port_llama" \
  >"$work/llama-server.log" 2>&1 &
server_pid=$!
if wait_http_200 "http://127.0.0.1:$port_llama/health" "$server_pid" 180; then
  serve_runs llama-server "http://127.0.0.1:$port_llama"
else
  serve_notes+=("llama-server did not become healthy: $(tail -n 3 "$work/llama-server.log" | tr '\n' ' ')")
  log "${serve_notes[-1]}"
fi
stop_server

log "starting tesserad on 127.0.0.1:$port_http (gRPC $port_grpc)"
"$tesserad" --model "$serve_model" --threads-per-worker 2 --host 127.0.0.1 \
  --http-port "$port_http" --grpc-port "$port_grpc" >"$work/tesserad.log" 2>&1 &
server_pid=$!
if wait_http_200 "http://127.0.0.1:$port_http/ready" "$server_pid" 300; then
  serve_runs tesserad "http://127.0.0.1:$port_http"
else
  serve_notes+=("tesserad did not become ready: $(tail -n 3 "$work/tesserad.log" | tr '\n' ' ')")
  log "${serve_notes[-1]}"
fi
stop_server

# ---- report ----
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(($(date +%s) - t_start))
cpu_name=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
cpu_family=$(lscpu | sed -n 's/^CPU family:[[:space:]]*//p' | head -n 1)
cpu_model=$(lscpu | sed -n 's/^Model:[[:space:]]*//p' | head -n 1)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "unknown")
if [[ -n $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
  commit+="+dirty"
fi

report() {
  echo "# Tessera vs llama.cpp, side by side"
  echo
  echo "- CPU: ${cpu_name:-unknown} (family ${cpu_family:-?}, model ${cpu_model:-?}), $(nproc) cores"
  echo "- load average (1/5/15 min): $load_start at start, $load_end at end"
  echo "- date: $started; $((elapsed / 60)) min $((elapsed % 60)) s"
  echo "- Tessera: commit $commit, $build"
  echo "- llama.cpp: commit ${llama_commit:-?}, $baseline"
  echo "- median of $reps run(s) per figure; default flags on both sides"
  echo
  echo "The figures belong to the CPU named above; they do not carry over to another machine."
  # The load at the end includes this run's own threads; the one at the start says whether
  # other work was already there.
  if python3 -c 'import sys; sys.exit(0 if float(sys.argv[2]) > 0.5 * int(sys.argv[1]) else 1)' \
    "$(nproc)" "${load_start%% *}"; then
    echo
    echo "**Warning: the machine was busy at the start (1-minute load average above half the cores):"
    echo "other work shared the cores, and the figures below are as much noise as measurement.**"
  fi
  echo
  echo "## Offline: llama-bench -p 512 -n 128 -d 0,512 vs tessera generate (512-token prompt, 128 tokens, greedy)"
  echo
  echo "| model | threads | llama.cpp pp512 tok/s | llama.cpp tg128 tok/s | llama.cpp tg128 @ depth 512 | Tessera prefill tok/s | Tessera decode tok/s | ratio prefill | ratio decode vs tg128 | ratio decode vs tg128 @ d512 | targets (prefill >= 1.3x, decode >= 1.0x at the same depth) | notes |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${offline_rows[@]}"
  echo
  echo "Ratio = Tessera / llama.cpp. Tessera's decode runs after its 512-token prompt (context 512-640),"
  echo "as llama-bench's tg128 at depth 512 does; its plain tg128 starts from an empty context."
  echo
  echo "## Serving: tessera bench --prompt-len 128 --gen-len 64 (llama 124m Q4_K_M, 2 threads)"
  echo
  echo "llama-server -t 2 -np 32 -c 16384 vs tesserad --threads-per-worker 2; generated tokens/s."
  echo
  echo "| concurrency | llama-server tok/s | tesserad tok/s | ratio | failed (llama-server) | failed (tesserad) | target |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  local c
  for c in 1 8 32; do
    helper serve-row "$c" \
      "${serve_tok[llama-server,$c]:--}" "${serve_failed[llama-server,$c]:--}" "${serve_req[llama-server,$c]:--}" \
      "${serve_tok[tesserad,$c]:--}" "${serve_failed[tesserad,$c]:--}" "${serve_req[tesserad,$c]:--}"
  done
  echo
  echo "Tokens/s count the completion tokens of successful requests only. Failures, with the server's"
  echo "message:"
  echo
  if ((${#serve_notes[@]})); then
    printf -- '- %s\n' "${serve_notes[@]}"
  else
    echo "- none"
  fi
}

report >"$work/report.md"
cat "$work/report.md"
if [[ -n $out ]]; then
  cp "$work/report.md" "$out"
  log "report written to $out"
fi
