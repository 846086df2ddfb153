#!/usr/bin/python3
"""Automatic prefix caching through the real daemon at tensor parallelism 2.

Two tesserad, each with two CPU workers (--tp 2) on a generated deepseek2 model (MLA's latent
cache, MoE): one with prefix caching (the default), one with --no-enable-prefix-caching as the
cold truth. Over REST, as a chat client would:
- a four-turn conversation (each prompt = the previous prompt and new tokens): every turn gives
  the cold daemon's tokens and log-probabilities (|delta| <= 1e-3, the conformance Tier 1), and
  usage.prompt_tokens_details.cached_tokens is exactly the previous prompt's full 16-token
  blocks;
- streamed answers carry the same field in their usage chunk;
- cache_salt: another salt never hits, the same salt does; a salt of the wrong type is a 400;
- POST /reset_prefix_cache needs the API key (401), then empties the cache (the
  next turn has 0 cached tokens); on the cold daemon it is a 400 naming the flag;
- /metrics: tessera_prefix_cache_queries_total and _hits_total equal the prompt and cached
  tokens the responses reported.

Usage: tesserad_prefix_cache_test.py --tesserad PATH --tessera PATH [--worker PATH]
       [--work-dir DIR]
Python 3 standard library only.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_tally import FAILURES, check, report  # noqa: E402
from tesserad_api_test import Client  # noqa: E402
from tesserad_harness import Tesserad  # noqa: E402

API_KEY = "sk-tesserad-prefix-test"
BLOCK = 16
MAX_TOKENS = 8


def tokens(n, seed):
    return [3 + (41 * i + 7 * seed + 5) % 240 for i in range(n)]


def complete(client, prompt, salt=None, stream=False):
    """A greedy completion of token ids: (token ids, logprobs, usage)."""
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True,
            "logprobs": 5}
    if salt is not None:
        body["cache_salt"] = salt
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        out = client.stream("/v1/completions", body)
        if out["status"] != 200:
            raise RuntimeError(f"HTTP {out['status']}: {out['body'][:200]!r}")
        lps = []
        for e in out["events"]:
            for c in e.get("choices", []):
                lps += (c.get("logprobs") or {}).get("token_logprobs") or []
        return None, lps, out["usage"]
    status, _, raw = client.post("/v1/completions", body)
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {raw[:200]!r}")
    answer = json.loads(raw)
    lp = answer["choices"][0]["logprobs"]
    return lp["tokens"], lp["token_logprobs"], answer["usage"]


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r"\{[^}]*\} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tesserad", required=True)
    parser.add_argument("--tessera", required=True, help="the tessera CLI (gen-model)")
    parser.add_argument("--worker")
    parser.add_argument("--work-dir")
    args = parser.parse_args()
    work = args.work_dir or tempfile.mkdtemp(prefix="tesserad_prefix_cache_test.")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "deepseek2-tiny-q8_0.gguf")
    if not os.path.exists(model):
        gen = subprocess.run([args.tessera, "gen-model", "--arch", "deepseek2", "--preset", "tiny",
                              "--quant", "Q8_0", "--seed", "3", "--out", model],
                             capture_output=True, text=True)
        if gen.returncode != 0:
            print(f"FAIL tessera gen-model: {gen.stderr}")
            return 1

    common = ["--model", model, "--tp", "2", "--threads-per-worker", "1",
              "--kv-block-size", str(BLOCK)]
    warm_d = Tesserad(args.tesserad, common, args.worker, API_KEY)
    cold_d = Tesserad(args.tesserad, common + ["--no-enable-prefix-caching"], args.worker,
                      API_KEY)
    t_start = time.monotonic()
    try:
        warm_d.start(ready_timeout=120)
        cold_d.start(ready_timeout=120)
        warm, cold = Client(warm_d.http, API_KEY), Client(cold_d.http, API_KEY)
        print(f"tesserad --tp 2: REST {warm_d.http} (prefix caching), {cold_d.http} (off)")
        sent_prompt = sent_cached = 0

        # A four-turn conversation: each prompt extends the previous one (the answers are
        # left out here: their token ids do not come back over REST; the engine test covers
        # answers fed back).
        history = []
        for turn in range(4):
            previous = len(history)
            history = history + tokens(11 + 7 * turn, 10 + turn)
            got_text, got_lp, usage = complete(warm, history)
            want_text, want_lp, cold_usage = complete(cold, history)
            sent_prompt += usage["prompt_tokens"]
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            sent_cached += cached
            check(got_text == want_text,
                  f"turn {turn + 1}: the same tokens as the daemon without prefix caching")
            delta = max((abs(a - b) for a, b in zip(got_lp, want_lp)), default=0.0)
            check(len(got_lp) == len(want_lp) == MAX_TOKENS and delta <= 1e-3,
                  f"turn {turn + 1}: log-probabilities within 1e-3 of it (largest {delta:.2e})")
            # The previous prompt's full blocks were computed (its answer's blocks hold tokens
            # this prompt does not repeat).
            want = previous // BLOCK * BLOCK
            check(cached == want,
                  f"turn {turn + 1}: cached_tokens {cached} = the previous prompt's full "
                  f"blocks ({want})")
            check(cold_usage["prompt_tokens_details"]["cached_tokens"] == 0,
                  f"turn {turn + 1}: the daemon without prefix caching reports 0 cached tokens")
        # Streaming: the usage chunk carries the field too.
        _, _, usage = complete(warm, history, stream=True)
        sent_prompt += usage["prompt_tokens"]
        sent_cached += usage["prompt_tokens_details"]["cached_tokens"]
        check(usage["prompt_tokens_details"]["cached_tokens"] > 0,
              "streamed: the usage chunk reports cached tokens "
              f"({usage['prompt_tokens_details']['cached_tokens']})")

        # cache_salt.
        shared = tokens(3 * BLOCK + 5, 50)
        for salt, want, what in ((None, 0, "first time: nothing cached"),
                                 (None, 3 * BLOCK, "again without a salt: its 3 full blocks hit"),
                                 ("tenant-a", 0, "a salt does not hit the unsalted blocks"),
                                 ("tenant-a", 3 * BLOCK, "the same salt hits"),
                                 ("tenant-b", 0, "another salt does not hit tenant-a's blocks")):
            _, _, usage = complete(warm, shared, salt=salt)
            sent_prompt += usage["prompt_tokens"]
            sent_cached += usage["prompt_tokens_details"]["cached_tokens"]
            check(usage["prompt_tokens_details"]["cached_tokens"] == want,
                  f"cache_salt {salt}: {what} ({usage['prompt_tokens_details']['cached_tokens']})")
        status, _, raw = warm.post("/v1/completions", {"prompt": shared, "cache_salt": 7})
        check(status == 400 and json.loads(raw)["error"].get("param") == "cache_salt",
              f"cache_salt 7: 400 naming the parameter ({status})")

        # POST /reset_prefix_cache.
        status, _, _ = warm.request("POST", "/reset_prefix_cache", {}, api_key="")
        check(status == 401, f"/reset_prefix_cache without the key: 401 ({status})")
        status, _, raw = cold.request("POST", "/reset_prefix_cache", {})
        check(status == 400 and b"no-enable-prefix-caching" in raw,
              f"/reset_prefix_cache with prefix caching off: 400 naming the flag ({status})")
        _, _, usage = complete(warm, shared, salt="tenant-a")
        sent_prompt += usage["prompt_tokens"]
        sent_cached += usage["prompt_tokens_details"]["cached_tokens"]
        status, _, raw = warm.request("POST", "/reset_prefix_cache", {})
        check(status == 200, f"/reset_prefix_cache: 200 ({status} {raw[:80]!r})")
        _, _, usage = complete(warm, shared, salt="tenant-a")
        sent_prompt += usage["prompt_tokens"]
        check(usage["prompt_tokens_details"]["cached_tokens"] == 0,
              "after the reset the same prompt finds nothing cached")

        # Metrics: the counters equal what the responses reported.
        status, _, raw = warm.request("GET", "/metrics")
        text = raw.decode()
        queries = metric(text, "tessera_prefix_cache_queries_total")
        hits = metric(text, "tessera_prefix_cache_hits_total")
        check(queries == sent_prompt,
              f"tessera_prefix_cache_queries_total {queries} = prompt tokens sent {sent_prompt}")
        check(hits == sent_cached,
              f"tessera_prefix_cache_hits_total {hits} = cached tokens reported {sent_cached}")
        check(warm_d.stop() == 0, "tesserad (prefix caching) exits 0 on SIGTERM")
        check(cold_d.stop() == 0, "tesserad (no prefix caching) exits 0 on SIGTERM")
    except Exception as e:  # noqa: BLE001 - a crash of the test is a failure with its cause
        check(False, f"unexpected error: {e!r}")
    finally:
        for d in (warm_d, cold_d):
            code = d.stop(timeout=30)
            if FAILURES and d.proc is not None:
                print(f"tesserad log ({d.http}, exit {code}):\n{d.log_text(40)}")
            d.kill()
    return report(f", {time.monotonic() - t_start:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
