#!/usr/bin/env python3
"""Speculative decoding on the path users run: tesserad with and without --speculative ngram
(or --method mtp: the model's own MTP block), side by side in one run.

For each setting (none, then the method at each K), the script starts tesserad on MODEL, sends
REQUESTS greedy completions one after another (a single stream: decode speed is what
speculation changes) of a repetitive prompt (a code snippet repeated, so that prompt lookup
finds n-grams), each generating TOKENS tokens with ignore_eos, and prints the decode rate
(completion tokens over the wall time of the requests), the mean acceptance length (1 +
accepted drafts per verified decode, from /metrics) and the ratio to the run without
speculation. Settings alternate ROUNDS times; medians are printed at the end.

Usage: bench/spec_decode_bench.py --tesserad build/default/bin/tesserad --model M.gguf
           [--k 1,2,4] [--rounds 3] [--requests 4] [--tokens 128] [--threads 2]
           [--method ngram|mtp]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

PROMPT = ("def add(a, b):\n    return a + b\n\n" * 12) + "def add(a, b):\n"


def http(method, url, body=None, timeout=600):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def metric(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def run_setting(args, speculative, k, port):
    cmd = [args.tesserad, "--model", args.model, "--host", "127.0.0.1", "--http-port", str(port),
           "--grpc-port", "0", "--threads-per-worker", str(args.threads),
           "--speculative", speculative]
    if speculative != "none":
        cmd += ["--num-speculative-tokens", str(k), "--ngram-min", str(args.ngram_min)]
    log = tempfile.TemporaryFile()
    daemon = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                if http("GET", base + "/ready", timeout=2)[0] == 200:
                    break
            except Exception:
                pass
            if time.time() > deadline or daemon.poll() is not None:
                log.seek(0)
                sys.exit(f"tesserad did not become ready:\n{log.read().decode()[-2000:]}")
            time.sleep(0.5)
        body = {"prompt": PROMPT, "max_tokens": args.tokens, "temperature": 0,
                "ignore_eos": True}
        http("POST", base + "/v1/completions", {**body, "max_tokens": 4})  # warm-up
        before = http("GET", base + "/metrics")[1]
        tokens = 0
        t0 = time.time()
        for _ in range(args.requests):
            out = json.loads(http("POST", base + "/v1/completions", body)[1])
            tokens += out["usage"]["completion_tokens"]
        seconds = time.time() - t0
        after = http("GET", base + "/metrics")[1]
        drafts = metric(after, "tessera_spec_decode_num_drafts_total") - metric(
            before, "tessera_spec_decode_num_drafts_total")
        drafted = metric(after, "tessera_spec_decode_num_draft_tokens_total") - metric(
            before, "tessera_spec_decode_num_draft_tokens_total")
        accepted = metric(after, "tessera_spec_decode_num_accepted_tokens_total") - metric(
            before, "tessera_spec_decode_num_accepted_tokens_total")
        return {"tok_s": tokens / seconds, "drafts": drafts, "drafted": drafted,
                "accepted": accepted,
                "acceptance_length": 1 + accepted / drafts if drafts else 1.0}
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tesserad", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--k", default="1,2,4")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=4)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ngram-min", type=int, default=1)
    p.add_argument("--port", type=int, default=18190)
    p.add_argument("--method", default="ngram", choices=["ngram", "mtp"],
                   help="the drafter: prompt lookup, or the model's MTP block (a model with "
                        "nextn_predict_layers > 0)")
    args = p.parse_args()
    settings = [("none", 0)] + [(args.method, int(k)) for k in args.k.split(",")]
    results = {s: [] for s in settings}
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*:\s*(.*)", f.read()).group(1)
    except Exception:
        pass
    print(f"# {args.model}, {args.requests} x {args.tokens} greedy tokens per setting, "
          f"threads {args.threads}, {os.cpu_count()} CPUs ({cpu})")
    for r in range(args.rounds):
        for s in settings:
            res = run_setting(args, s[0], s[1], args.port)
            results[s].append(res)
            print(f"round {r + 1} {s[0]:5} K={s[1]}: {res['tok_s']:7.1f} tok/s, acceptance "
                  f"length {res['acceptance_length']:.2f} ({int(res['accepted'])} of "
                  f"{int(res['drafted'])} drafted tokens in {int(res['drafts'])} decodes)",
                  flush=True)
    base = statistics.median(x["tok_s"] for x in results[settings[0]])
    print("\n| setting | decode tok/s (median) | ratio | mean acceptance length |")
    print("| --- | --- | --- | --- |")
    for s in settings:
        rate = statistics.median(x["tok_s"] for x in results[s])
        length = statistics.median(x["acceptance_length"] for x in results[s])
        name = "none" if s[0] == "none" else f"{s[0]} K={s[1]}"
        print(f"| {name} | {rate:.1f} | {rate / base:.2f} | {length:.2f} |")


if __name__ == "__main__":
    main()
