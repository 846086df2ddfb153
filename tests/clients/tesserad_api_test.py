#!/usr/bin/python3
"""The real tesserad, driven over REST by plain HTTP clients (Python 3 standard library).

Against one daemon serving a random-weight gen-model (with an API key, a prompt limit and a
drain timeout), on ephemeral ports:
  auth      a wrong or missing key is 401 as OpenAI words it; /health, /ready, /metrics stay open
  limit     an oversized prompt is 400 naming the limit (max-prompt-tokens)
  batch     64 concurrent streaming completions (prompt lengths, max_tokens and seeds differ,
            temperature 0.8) all complete, and each equals the same request sent alone
            afterwards (same seed, same text, same finish_reason and token count)
  structured 32 streams constrained by a JSON schema and 32 unconstrained ones at once: every
            constrained answer parses and has the schema's shape (checked here by hand), and
            each unconstrained one equals the same request alone
  cancel    leaving a stream mid-way frees the request's KV blocks: /metrics shows
            tessera_kv_cache_blocks{state="used"} and tessera_num_requests_running back at 0
  fuzz      200 requests at temperature 1.5 (completions and chat, streamed or not, with n,
            stop strings, penalties, top_p/top_k/min_p, logprobs): no 5xx, every body and
            every SSE event parses as JSON
  drain     SIGTERM during generation: the running streams finish in full, a new request is
            refused (connection refused or 503), the daemon exits 0 within the drain timeout
and against a daemon with --max-num-seqs 1 --max-waiting-requests 2:
  queue     requests beyond the queue get 429 with Retry-After and an OpenAI error body.
The batch check runs on its own daemon on the default (fast) path: decode rows take
per-vector kernels and prompt rows the kernels of a prefill batch however their chunks fall,
whose bits depend on the row alone, so a sequence's logits do not depend on its batch, on
every CPU (--batch-exact runs the check with --exact instead).

  tesserad_api_test.py --tesserad PATH --tessera PATH [--worker PATH] [--work-dir DIR]
      [--only NAME,...] [--batch-exact] [--daemon-arg=ARG ...]

Exit 0 when every check passed, 1 otherwise.
"""

import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_tally import FAILURES, check, report  # noqa: E402
from tesserad_harness import Tesserad  # noqa: E402

API_KEY = "sk-tesserad-api-test"
MAX_PROMPT_TOKENS = 256
DRAIN_TIMEOUT_S = 30
WORDS = ("the quick brown fox jumps over a lazy dog while seven tired engineers "
         "measure tokens per second on two shared cores").split()


class Client:
    """HTTP/1.1 requests to one daemon (a new connection each: requests run in parallel)."""

    def __init__(self, base_url, api_key=API_KEY):
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port = u.hostname, u.port
        self.api_key = api_key
        self.model = None

    def _headers(self, api_key):
        h = {"Content-Type": "application/json"}
        key = self.api_key if api_key is None else api_key
        if key:
            h["Authorization"] = f"Bearer {key}"
        return h

    def request(self, method, path, body=None, api_key=None, timeout=120):
        """(status, headers, body bytes)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers=self._headers(api_key))
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def post(self, path, body, **kw):
        return self.request("POST", path, self.with_model(body), **kw)

    def with_model(self, body):
        if self.model is None:
            status, _, raw = self.request("GET", "/v1/models")
            self.model = json.loads(raw)["data"][0]["id"]
        return dict(body, model=self.model)

    def stream(self, path, body, on_event=None, timeout=120):
        """A streamed request read to its end. Returns a dict: status, events (parsed JSON),
        done ([DONE] seen), text, finish, usage, bad (lines that are not JSON); for an error
        answer, body. on_event(index, event) is called as events arrive."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        out = {"events": [], "done": False, "text": "", "finish": None, "usage": None,
               "bad": [], "body": b""}
        try:
            conn.request("POST", path, body=json.dumps(self.with_model(body)).encode(),
                         headers=self._headers(None))
            r = conn.getresponse()
            out["status"] = r.status
            if r.status != 200:
                out["body"] = r.read()
                return out
            for raw in r:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if not line.startswith("data: "):
                    continue
                payload = line[len("data: "):]
                if payload == "[DONE]":
                    out["done"] = True
                    continue
                try:
                    event = json.loads(payload)
                except ValueError:
                    out["bad"].append(payload)
                    continue
                out["events"].append(event)
                if event.get("usage"):
                    out["usage"] = event["usage"]
                for c in event.get("choices", []):
                    out["text"] += c.get("text") or (c.get("delta") or {}).get("content") or ""
                    if c.get("finish_reason"):
                        out["finish"] = c["finish_reason"]
                if on_event:
                    on_event(len(out["events"]) - 1, event)
            return out
        finally:
            conn.close()

    def metrics(self):
        """{name: value} of the samples without labels but model_name, and name{state} for
        those with a state label (tessera_kv_cache_blocks{used})."""
        _, _, raw = self.request("GET", "/metrics", api_key="")
        values = {}
        for line in raw.decode().splitlines():
            m = re.match(r"(tessera_\w+)(?:\{(.*)\})? (\S+)$", line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            labels.pop("model_name", None)
            state = labels.pop("state", None)
            if labels:
                continue
            values[m.group(1) + (f"{{{state}}}" if state else "")] = float(m.group(3))
        return values


def error_body(raw):
    try:
        e = json.loads(raw)["error"]
        return e if isinstance(e, dict) and isinstance(e.get("message"), str) else None
    except (ValueError, KeyError, TypeError):
        return None


def prompt_of(n_words, seed):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def run_parallel(fn, args_list, threads):
    """fn(*args) for each args, on `threads` threads; results in order."""
    results = [None] * len(args_list)
    next_index = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(args_list):
                return
            try:
                results[i] = fn(*args_list[i])
            except Exception as e:  # noqa: BLE001 - reported as this request's failure
                results[i] = e

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return results


# ---------------------------------------------------------------------------------------------


def test_auth(c):
    body = {"prompt": "hi", "max_tokens": 2}
    status, _, raw = c.post("/v1/completions", body, api_key="sk-wrong")
    e = error_body(raw)
    check(status == 401 and e is not None and e.get("code") == "invalid_api_key",
          f"auth: a wrong key is 401 invalid_api_key ({status} {raw[:120]!r})")
    status, _, raw = c.post("/v1/completions", body, api_key="")
    check(status == 401 and error_body(raw) is not None, f"auth: no key is 401 ({status})")
    status, _, _ = c.request("GET", "/v1/models", api_key="")
    check(status == 401, f"auth: /v1/models without a key is 401 ({status})")
    for path in ("/health", "/ready", "/metrics"):
        status, _, _ = c.request("GET", path, api_key="")
        check(status == 200, f"auth: {path} answers without a key ({status})")
    status, _, raw = c.post("/v1/completions", body)
    check(status == 200, f"auth: the right key is served ({status})")


def test_prompt_limit(c):
    words = MAX_PROMPT_TOKENS * 2  # each word is at least one token
    status, _, raw = c.post("/v1/completions", {"prompt": prompt_of(words, 1), "max_tokens": 2})
    e = error_body(raw)
    msg = e["message"] if e else ""
    check(status == 400 and e is not None and e.get("type") == "invalid_request_error",
          f"limit: a {words}-word prompt is 400 invalid_request_error ({status})")
    check(str(MAX_PROMPT_TOKENS) in msg and "max-prompt-tokens" in msg,
          f"limit: the message names the limit: {msg!r}")
    status, _, _ = c.post("/v1/completions",
                          {"prompt": prompt_of(MAX_PROMPT_TOKENS // 4, 2), "max_tokens": 2})
    check(status == 200, f"limit: a prompt within the limit is served ({status})")


def batch_request(i):
    return {"prompt": prompt_of(1 + (i * 37) % 50, 100 + i),
            "max_tokens": 4 + (i * 11) % 21,
            "temperature": 0.8,
            "seed": 1000 + i,
            "stream": True,
            "stream_options": {"include_usage": True}}


def summary(r):
    if isinstance(r, Exception):
        return repr(r)
    return (r.get("status"), r["text"], r["finish"],
            (r["usage"] or {}).get("completion_tokens"), r["done"], len(r["bad"]))


def test_batch(c, label="batch"):
    bodies = [batch_request(i) for i in range(64)]
    barrier = threading.Barrier(64)

    def one(body):
        barrier.wait()
        return c.stream("/v1/completions", body)

    t0 = time.monotonic()
    together = run_parallel(one, [(b,) for b in bodies], 64)
    wall = time.monotonic() - t0
    ok = [r for r in together
          if not isinstance(r, Exception) and r["status"] == 200 and r["done"] and r["usage"]
          and not r["bad"] and r["finish"] in ("stop", "length")]
    tokens = sum(r["usage"]["completion_tokens"] for r in ok)
    check(len(ok) == 64, f"{label}: 64 concurrent streams complete ({len(ok)} did; "
                         f"{tokens} tokens in {wall:.2f} s, {tokens / wall:.0f} tok/s)")
    for i, r in enumerate(together):
        if r not in ok:
            print(f"     request {i}: {summary(r)!r:.300}")
    lengths_ok = all(r["usage"]["completion_tokens"] <= b["max_tokens"] and
                     (r["finish"] == "stop" or r["usage"]["completion_tokens"] == b["max_tokens"])
                     for r, b in zip(together, bodies) if r in ok)
    check(lengths_ok, f"{label}: each stops at its max_tokens or with finish_reason stop")

    t0 = time.monotonic()
    alone = [c.stream("/v1/completions", b) for b in bodies]
    wall_alone = time.monotonic() - t0
    differ = [i for i in range(64) if summary(together[i]) != summary(alone[i])]
    check(not differ, f"{label}: each equals the same request alone (same seed) "
                      f"({64 - len(differ)}/64; alone one after another: {wall_alone:.2f} s)")
    for i in differ[:5]:
        print(f"     request {i} {json.dumps({k: bodies[i][k] for k in ('max_tokens', 'seed')})}"
              f"\n       together {summary(together[i])!r:.200}\n       alone    "
              f"{summary(alone[i])!r:.200}")


RECORD_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 10},
                   "n": {"type": "integer", "minimum": 0, "maximum": 999},
                   "ok": {"type": "boolean"}},
    "required": ["name", "n", "ok"],
    "additionalProperties": False,
}


def is_record(text):
    """Whether text is a JSON document RECORD_SCHEMA accepts (checked without the server)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return (isinstance(doc, dict) and set(doc) == {"name", "n", "ok"}
            and isinstance(doc["name"], str) and 1 <= len(doc["name"]) <= 10
            and type(doc["n"]) is int and 0 <= doc["n"] <= 999 and type(doc["ok"]) is bool)


def test_structured(c):
    plain = [batch_request(i) for i in range(32)]
    constrained = [{"messages": [{"role": "user", "content": prompt_of(3 + i % 9, 500 + i)}],
                    "max_tokens": 200, "temperature": 1.0, "seed": 700 + i, "stream": True,
                    "stream_options": {"include_usage": True},
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "record", "strict": True,
                                                        "schema": RECORD_SCHEMA}}}
                   for i in range(32)]
    jobs = [("/v1/completions", b) for b in plain] + [("/v1/chat/completions", b)
                                                      for b in constrained]
    barrier = threading.Barrier(len(jobs))

    def one(path, body):
        barrier.wait()
        return c.stream(path, body)

    t0 = time.monotonic()
    together = run_parallel(one, jobs, len(jobs))
    wall = time.monotonic() - t0
    answers = together[32:]
    valid = [r for r in answers if not isinstance(r, Exception) and r["status"] == 200
             and r["finish"] == "stop" and is_record(r["text"])]
    check(len(valid) == 32, f"structured: 32 constrained streams end with stop and a valid "
                            f"record ({len(valid)} did, in {wall:.2f} s with 32 unconstrained)")
    for i, r in enumerate(answers):
        if r not in valid:
            print(f"     constrained {i}: {summary(r)!r:.300}")
    alone = [c.stream("/v1/completions", b) for b in plain]
    differ = [i for i in range(32) if summary(together[i]) != summary(alone[i])]
    check(not differ, f"structured: each unconstrained stream equals itself alone "
                      f"({32 - len(differ)}/32)")
    for i in differ[:5]:
        print(f"     request {i}\n       together {summary(together[i])!r:.200}"
              f"\n       alone    {summary(alone[i])!r:.200}")


def wait_metrics(c, predicate, timeout):
    deadline = time.monotonic() + timeout
    while True:
        m = c.metrics()
        if predicate(m):
            return m
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def test_cancel(c):
    body = c.with_model({"prompt": "a long generation to leave in the middle", "max_tokens": 3000,
                         "ignore_eos": True, "stream": True, "temperature": 0.8})
    data = json.dumps(body).encode()
    sock = socket.create_connection((c.host, c.port), timeout=30)
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: {c.host}:{c.port}\r\n"
                  f"Authorization: Bearer {c.api_key}\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n").encode() + data)
    received = bytearray()
    stop_reading = threading.Event()

    def reader():  # keeps the stream flowing while the metrics are watched
        while not stop_reading.is_set():
            try:
                chunk = sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            received.extend(chunk)

    t = threading.Thread(target=reader)
    t.start()
    deadline = time.monotonic() + 10
    while received.count(b"data: ") < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    busy = wait_metrics(c, lambda m: m.get("tessera_num_requests_running", 0) >= 1 and
                        m.get("tessera_kv_cache_blocks{used}", 0) >= 1, 10)
    used = busy.get("tessera_kv_cache_blocks{used}") if busy else None
    check(busy is not None and received.count(b"data: ") >= 2,
          f"cancel: while streaming, /metrics shows it running ({used} KV blocks used, "
          f"{received.count(b'data: ')} events so far)")
    stop_reading.set()
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    t.join()
    t0 = time.monotonic()
    idle = wait_metrics(c, lambda m: m.get("tessera_num_requests_running", 1) == 0 and
                        m.get("tessera_kv_cache_blocks{used}", 1) == 0, 5)
    freed = time.monotonic() - t0
    check(idle is not None and freed < 2.0,
          f"cancel: KV blocks and the running count back at 0 {freed:.2f} s after the "
          f"disconnect (the gauges are sampled every 0.5 s)")
    events = received.count(b"data: ")
    check(events < 3000, f"cancel: the generation did not run to its end ({events} events read)")
    status, _, _ = c.post("/v1/completions", {"prompt": "still there?", "max_tokens": 2})
    check(status == 200, f"cancel: the daemon serves the next request ({status})")


def fuzz_request(i):
    rng = random.Random(7000 + i)
    chat = rng.random() < 0.4
    stream = rng.random() < 0.5
    alphabet = WORDS + ["é", "日本", "🙂", "\n", "\t", "{}", "\"", "\\", "<|", "|>", "\u0000"]
    text = "".join(rng.choice(alphabet) + rng.choice(["", " "])
                   for _ in range(rng.randint(1, 40)))
    body = {"max_tokens": rng.randint(1, 12), "temperature": 1.5, "stream": stream}
    if rng.random() < 0.5:
        body["seed"] = rng.randint(0, 2**31)
    if rng.random() < 0.3:
        body["top_p"] = rng.choice([0.1, 0.5, 0.9, 1.0])
    if rng.random() < 0.3:
        body["top_k"] = rng.randint(1, 50)
    if stream and rng.random() < 0.5:
        body["stream_options"] = {"include_usage": True}
    if rng.random() < 0.3:
        body["n"] = rng.randint(1, 3)
    if rng.random() < 0.3:
        body["stop"] = rng.sample(alphabet, rng.randint(1, 4))
    if rng.random() < 0.3:
        body[rng.choice(["presence_penalty", "frequency_penalty"])] = rng.uniform(-2, 2)
    if rng.random() < 0.2:
        body["repetition_penalty"] = rng.uniform(0.5, 2)
    if rng.random() < 0.2:
        body["min_p"] = rng.uniform(0, 0.5)
    if chat:
        body["messages"] = [{"role": "user", "content": text}]
        return "/v1/chat/completions", body
    body["prompt"] = text
    if rng.random() < 0.3:
        body["logprobs"] = rng.randint(0, 3)
    return "/v1/completions", body


def fuzz_shape_ok(body, choices, usage):
    """n choices with indexes 0..n-1, each with a finish_reason; usage adds up."""
    n = body.get("n", 1)
    indexes = sorted({ch["index"] for ch in choices})
    finished = {ch["index"] for ch in choices if ch.get("finish_reason")}
    return (indexes == list(range(n)) and finished == set(range(n)) and
            (usage is None or usage["total_tokens"] ==
             usage["prompt_tokens"] + usage["completion_tokens"]))


def test_fuzz(c):
    def one(path, body):
        """(status, parsed as JSON, shaped as OpenAI's, excerpt)."""
        if body["stream"]:
            r = c.stream(path, body)
            if r["status"] != 200:
                return r["status"], error_body(r["body"]) is not None, True, r["body"][:200]
            parsed = r["done"] and not r["bad"] and bool(r["events"])
            choices = [ch for e in r["events"] for ch in e.get("choices", [])]
            shaped = fuzz_shape_ok(body, choices, r["usage"])
            return r["status"], parsed, shaped, r["bad"][:1] or r["events"][-1:]
        status, _, raw = c.post(path, body)
        try:
            answer = json.loads(raw)
        except ValueError:
            return status, False, False, raw[:200]
        shaped = status != 200 or fuzz_shape_ok(body, answer["choices"], answer["usage"])
        return status, True, shaped, raw[:200]

    t0 = time.monotonic()
    results = run_parallel(one, [fuzz_request(i) for i in range(200)], 8)
    wall = time.monotonic() - t0
    failed = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
    statuses = {}
    for r in results:
        if not isinstance(r, Exception):
            statuses[r[0]] = statuses.get(r[0], 0) + 1
    check(not failed, f"fuzz: 200 requests answered ({len(failed)} failed in transport; "
                      f"{wall:.2f} s; statuses {statuses})")
    for i, r in failed[:5]:
        print(f"     request {i}: {r!r}")
    five = [(i, r) for i, r in enumerate(results) if not isinstance(r, Exception) and r[0] >= 500]
    check(not five, f"fuzz: no 5xx ({len(five)})")
    unparsed = [(i, r) for i, r in enumerate(results) if not isinstance(r, Exception) and not r[1]]
    check(not unparsed, f"fuzz: every body and event parses as JSON ({len(unparsed)} do not)")
    not_ok = [(i, r) for i, r in enumerate(results) if not isinstance(r, Exception) and r[0] != 200]
    check(not not_ok, "fuzz: every (valid) request is served with 200")
    misshapen = [(i, r) for i, r in enumerate(results)
                 if not isinstance(r, Exception) and r[1] and not r[2]]
    check(not misshapen, "fuzz: n choices (indexes 0..n-1), each finished; usage adds up "
                         f"({len(misshapen)} not)")
    for i, r in (five + unparsed + not_ok + misshapen)[:8]:
        print(f"     request {i} {fuzz_request(i)}: {r!r:.300}")


def test_drain(daemon, c):
    max_tokens = 600
    body = {"prompt": "finish me after SIGTERM", "max_tokens": max_tokens, "ignore_eos": True,
            "temperature": 0.8, "stream": True, "stream_options": {"include_usage": True}}
    n = 3
    started = threading.Semaphore(0)
    term_sent = threading.Event()
    after_term = [0] * n
    last_event_at = [0.0] * n

    def one(i):
        def on_event(index, event):
            last_event_at[i] = time.monotonic()
            if index == 0:
                started.release()
            elif term_sent.is_set():
                after_term[i] += 1
        return c.stream("/v1/completions", dict(body, seed=i), on_event=on_event)

    results = [None] * n
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, one(i)))
               for i in range(n)]
    for t in threads:
        t.start()
    for _ in range(n):
        started.acquire(timeout=30)
    t0 = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    term_sent.set()
    time.sleep(0.2)
    try:
        status, _, raw = c.post("/v1/completions", {"prompt": "too late", "max_tokens": 2},
                                timeout=5)
        refused = status == 503 and error_body(raw) is not None
        how = f"{status} {raw[:100]!r}"
    except ConnectionRefusedError:
        refused, how = True, "connection refused"
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        refused, how = False, repr(e)
    check(refused, f"drain: a new request after SIGTERM is refused ({how})")
    for t in threads:
        t.join()
    full = [r for r in results
            if r and r["status"] == 200 and r["done"] and r["finish"] == "length" and r["usage"]
            and r["usage"]["completion_tokens"] == max_tokens]
    # Events already generated before SIGTERM would all be read within milliseconds; the last
    # ones arriving later show that the generations went on during the drain.
    later = [round(t - t0, 2) for t in last_event_at]
    check(len(full) == n and all(a > 0 for a in after_term) and min(later) > 0.1,
          f"drain: the {n} running streams finish in full ({len(full)} did; events after "
          f"SIGTERM: {after_term}, the last {later} s after it)")
    try:
        code = daemon.proc.wait(DRAIN_TIMEOUT_S + 5)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
        code = None
    took = time.monotonic() - t0
    check(code == 0 and took < DRAIN_TIMEOUT_S,
          f"drain: tesserad exits {code} {took:.2f} s after SIGTERM (drain timeout "
          f"{DRAIN_TIMEOUT_S} s)")


def test_queue(c):
    n = 10
    # Long enough that all ten arrive while the first runs: the tiny model decodes ~10-17k
    # tokens/s on 2 CPU threads, so 256 tokens took ~15-25 ms, less than ten threads may
    # take to reach the daemon on a busy 2-vCPU machine (the context holds 4,096).
    max_tokens = 2048
    barrier = threading.Barrier(n)

    def one():
        barrier.wait()
        return c.post("/v1/completions", {"prompt": "queue", "max_tokens": max_tokens,
                                          "ignore_eos": True})

    t0 = time.monotonic()
    results = run_parallel(one, [()] * n, n)
    wall = time.monotonic() - t0
    transport = [r for r in results if isinstance(r, Exception)]
    results = [r for r in results if not isinstance(r, Exception)]
    served = [r for r in results if r[0] == 200]
    refused = [r for r in results if r[0] == 429]
    check(not transport and len(served) + len(refused) == n,
          f"queue: every answer is 200 or 429 ({[r[0] for r in results]}, {transport})")
    check(len(refused) >= 1 and len(served) >= 1,
          f"queue: with max-num-seqs 1 and max-waiting-requests 2, {len(served)} of {n} "
          f"served, {len(refused)} got 429 ({wall:.2f} s)")
    check(len(served) <= 3 + 1,
          f"queue: no more than 1 running + 2 waiting (+1 freed meanwhile) are served "
          f"({len(served)})")
    bad = [(h.get("retry-after"), raw[:160]) for _, h, raw in refused
           if not (h.get("retry-after", "").isdigit() and int(h["retry-after"]) >= 1 and
                   (error_body(raw) or {}).get("type") == "rate_limit_error")]
    check(refused and not bad,
          "queue: every 429 has Retry-After (seconds) and an OpenAI rate_limit_error body: "
          + (repr(bad[0]) if bad else repr(refused[0][2][:140]) if refused else "none"))
    check(all(json.loads(r[2])["usage"]["completion_tokens"] == max_tokens for r in served),
          "queue: the served requests ran in full")


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tesserad", required=True)
    parser.add_argument("--tessera", required=True, help="the tessera CLI (gen-model)")
    parser.add_argument("--worker", help="tessera-worker (default: the one beside tesserad)")
    parser.add_argument("--work-dir", help="where the model is generated (default: a temp dir)")
    parser.add_argument("--daemon-arg", action="append", default=[],
                        help="one more tesserad argument (repeatable; --daemon-arg=--exact)")
    parser.add_argument("--batch-exact", action="store_true",
                        help="run the 64-stream equality with --exact, not on the fast path")
    parser.add_argument("--only", help="comma-separated subset: "
                        "auth,limit,batch,structured,cancel,fuzz,drain,queue")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    want = lambda name: only is None or name in only  # noqa: E731

    work = args.work_dir or tempfile.mkdtemp(prefix="tesserad_api_test.")
    os.makedirs(work, exist_ok=True)
    # The tiny llama at Q8_0 (integer products), and at F32 (the embedded default model's
    # kind, products in float) for the batch check: float kernels, not integer sums, must
    # keep a row's bits there.
    models = {}
    for quant, seed in (("Q8_0", 5), ("F32", 6)):
        models[quant] = os.path.join(work, f"llama-tiny-{quant.lower()}.gguf")
        gen = subprocess.run([args.tessera, "gen-model", "--arch", "llama", "--preset", "tiny",
                              "--quant", quant, "--seed", str(seed), "--out", models[quant]],
                             capture_output=True, text=True)
        if gen.returncode != 0:
            print(f"FAIL tessera gen-model: {gen.stderr}")
            return 1
    model, model_f32 = models["Q8_0"], models["F32"]

    t_start = time.monotonic()
    main_daemon = Tesserad(args.tesserad, ["--model", model,
                                           "--max-prompt-tokens", str(MAX_PROMPT_TOKENS),
                                           "--drain-timeout", f"{DRAIN_TIMEOUT_S}s"]
                           + args.daemon_arg, args.worker, API_KEY)
    batch_exact = args.batch_exact
    batch_daemon = Tesserad(args.tesserad, ["--model", model] + args.daemon_arg +
                            (["--exact"] if batch_exact else []), args.worker, API_KEY)
    batch_f32_daemon = Tesserad(args.tesserad, ["--model", model_f32] + args.daemon_arg +
                                (["--exact"] if batch_exact else []), args.worker, API_KEY)
    queue_daemon = Tesserad(args.tesserad, ["--model", model, "--max-num-seqs", "1",
                                            "--max-waiting-requests", "2"] + args.daemon_arg,
                            args.worker, API_KEY)
    daemons = (batch_daemon, batch_f32_daemon, main_daemon, queue_daemon)
    try:
        if want("batch"):
            batch_daemon.start()
            print(f"tesserad {' '.join(batch_daemon.args[2:]) or '(default path)'}: "
                  f"REST {batch_daemon.http}")
            t0 = time.monotonic()
            test_batch(Client(batch_daemon.http))
            print(f"     (batch: {time.monotonic() - t0:.2f} s)")
            batch_f32_daemon.start()
            t0 = time.monotonic()
            test_batch(Client(batch_f32_daemon.http), "batch f32")
            print(f"     (batch f32: {time.monotonic() - t0:.2f} s)")
            check(batch_f32_daemon.stop() == 0, "batch f32: tesserad exits 0 on SIGTERM")
        if want("structured"):
            if not batch_daemon.proc:
                batch_daemon.start()
            t0 = time.monotonic()
            test_structured(Client(batch_daemon.http))
            print(f"     (structured: {time.monotonic() - t0:.2f} s)")
        if batch_daemon.proc:
            check(batch_daemon.stop() == 0, "batch: tesserad exits 0 on SIGTERM")
        if any(want(n) for n in ("auth", "limit", "cancel", "fuzz", "drain")):
            main_daemon.start()
            c = Client(main_daemon.http)
            print(f"tesserad: REST {main_daemon.http}, serving {c.with_model({})['model']}")
            for name, fn in (("auth", test_auth), ("limit", test_prompt_limit),
                             ("cancel", test_cancel), ("fuzz", test_fuzz)):
                if want(name):
                    t0 = time.monotonic()
                    fn(c)
                    print(f"     ({name}: {time.monotonic() - t0:.2f} s)")
            if want("drain"):
                test_drain(main_daemon, c)
        if want("queue"):
            queue_daemon.start()
            test_queue(Client(queue_daemon.http))
            check(queue_daemon.stop() == 0, "queue: the second tesserad exits 0 on SIGTERM")
    except Exception as e:  # noqa: BLE001 - a crash of the test is a failure with its cause
        check(False, f"unexpected error: {e!r}")
    finally:
        for d in daemons:
            code = d.stop(timeout=DRAIN_TIMEOUT_S + 5)
            if FAILURES and d.proc is not None:
                print(f"tesserad log ({d.http}, exit {code}):\n{d.log_text(60)}")
            d.kill()
    return report(f", {time.monotonic() - t_start:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
