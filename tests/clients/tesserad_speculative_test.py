#!/usr/bin/python3
"""Speculative decoding through real tesserad processes and their tessera-worker: the same
requests to a daemon with `--speculative ngram` (or `mtp`) and to one without return the
same tokens and log-probabilities (greedy and seeded sampling, 32 requests at once), and the
speculating daemon's /metrics show drafts made (and, for n-grams, accepted).

The models are the tiny llama at Q8_0 (made with `tessera gen-model`) and the embedded
default model (float32 weights), or --model: integer and float products alike must give a
verified row the bits a one-token step gives it, whatever else the step holds. With --mtp,
the small glm-dsa preset at Q8_0 (GLM-5's shape with its NextN/MTP block) and
`--speculative mtp`: its drafts come from the model's own MTP head, run on every rank
(--tp 2: the sampled tokens cross the ranks before it); a random model's MTP head seldom
guesses right, so only drafts made are required there.

Usage: tesserad_speculative_test.py --tesserad PATH --tessera PATH [--worker PATH] [--tp N]
                                     [--mtp]
Python 3 standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tesserad_harness import Tesserad  # noqa: E402


def post(base, body):
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def run_all(base, bodies):
    out = [None] * len(bodies)

    def one(i):
        out[i] = post(base, bodies[i])
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def metric(base, name):
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tesserad", required=True)
    p.add_argument("--worker")
    p.add_argument("--tp", default="1")
    p.add_argument("--model", default="")
    p.add_argument("--tessera", help="the tessera tool, to make the Q8_0 model")
    p.add_argument("--mtp", action="store_true",
                   help="--speculative mtp on the small glm-dsa model instead of ngram")
    args = p.parse_args()
    work = tempfile.TemporaryDirectory()
    models = [args.model]
    if args.mtp and not args.model:
        dsa = os.path.join(work.name, "glm-dsa-small-q8.gguf")
        subprocess.run([args.tessera, "gen-model", "--arch", "glm-dsa", "--preset", "small",
                        "--quant", "Q8_0", "-o", dsa], check=True)
        models = [dsa]
    elif not args.model:
        q8 = os.path.join(work.name, "tiny-q8.gguf")
        subprocess.run([args.tessera, "gen-model", "--arch", "llama", "--preset", "tiny",
                        "--quant", "Q8_0", "-o", q8], check=True)
        models = [q8, ""]  # "": the embedded default model
    failures = sum(compare(args, model) for model in models)
    if args.mtp:
        # A model without the block (the embedded default model) is refused at start.
        check = subprocess.run([args.tesserad, "--speculative", "mtp", "--check"],
                               capture_output=True, text=True, timeout=120)
        if check.returncode == 0 or "multi-token-prediction block" not in check.stderr:
            print(f"FAIL: --speculative mtp on a model without an MTP block: exit "
                  f"{check.returncode}, {check.stderr.strip()[-300:]!r}")
            failures += 1
    print("ok" if failures == 0 else f"{failures} failures")
    return 1 if failures else 0


def compare(args, model):
    """Failures of the speculating daemon against the plain one on `model`."""
    print(f"model: {model or 'the embedded default model'}")
    bodies = []
    for i in range(32):
        words = ["alpha beta gamma", "one two three four", "red green", "x y z w v"][i % 4]
        body = {"prompt": " ".join([words] * (6 + i % 5)), "max_tokens": 40, "ignore_eos": True,
                "logprobs": 1, "temperature": 0 if i % 2 == 0 else 0.8, "seed": 100 + i}
        bodies.append(body)
    common = ["--tp", args.tp] + (["--model", model] if model else [])
    results = {}
    method = "mtp" if args.mtp else "ngram"
    for mode in ("none", method):
        daemon = Tesserad(args.tesserad, common + ["--speculative", mode, "--ngram-min", "1"],
                          args.worker)
        daemon.start(ready_timeout=120)
        try:
            results[mode] = run_all(daemon.http, bodies)
            if mode != "none":
                drafted = metric(daemon.http, "tessera_spec_decode_num_draft_tokens_total")
                accepted = metric(daemon.http, "tessera_spec_decode_num_accepted_tokens_total")
        finally:
            daemon.stop()
    failures = 0
    for i, (a, b) in enumerate(zip(results["none"], results[method])):
        la, lb = a["choices"][0]["logprobs"], b["choices"][0]["logprobs"]
        if la["tokens"] != lb["tokens"] or la["token_logprobs"] != lb["token_logprobs"]:
            failures += 1
            print(f"FAIL request {i}: outputs differ with speculation")
    print(f"speculating daemon: {int(drafted)} drafted tokens, {int(accepted)} accepted")
    if drafted == 0 or (accepted == 0 and not args.mtp):
        print("FAIL: no draft was made or accepted: the comparison proves nothing")
        failures += 1
    return failures

if __name__ == "__main__":
    sys.exit(main())
