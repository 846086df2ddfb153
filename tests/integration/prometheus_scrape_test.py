#!/usr/bin/python3
"""A real Prometheus scrapes a running tesserad under a short load; then every metric of
ServingMetrics has samples in Prometheus, every PromQL query of the Grafana dashboard returns
data (a number, not NaN: histogram_quantile over zero rates is NaN and means an unfed
metric), and every alert rule of deploy/prometheus/alerts.yml is healthy and its
condition's left-hand side returns data (its comparison is false on a healthy daemon, so the
full expression may rightly return nothing).

Metrics must be fed, not just exist: every counter and histogram the load should move (REST
and, where Python's grpc module is installed, gRPC requests; tokens; steps; latencies; at
TP > 1 the all-reduces) must have grown in Prometheus past its value before the load, and
the gauges read at scrape time (running requests, KV cache use) must have been seen above
zero by scrapes taken during the load, the worker and readiness gauges at their up values.
CMake runs it at TP 2 (`-- --tp 2`). --static-target skips those checks, and accepts NaN
(every rate of a fixed exposition is 0), for a target that serves a fixed exposition
(fake_tesserad.py).

Usage:
  prometheus_scrape_test.py --tesserad PATH [--model GGUF] [--source-dir DIR]
                            [--prometheus PATH] [--keep] [--static-target]
                            [-- EXTRA TESSERAD FLAGS]

Environment equivalents: TESSERA_TESSERAD, TESSERA_TEST_MODEL, PROMETHEUS, TESSERAD_ARGS.
Without --model tesserad serves its embedded default model. Exit 0 pass, 1 fail, 77 skip
(no tesserad binary, or no prometheus). Standard library only.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RATE_WINDOW = "1m"  # what $__rate_interval becomes; scrapes are every 1s


def log(*args):
    print("prometheus_scrape_test:", *args, flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=10):
    """(status, body text); status 0 when the connection failed."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, ConnectionError, socket.timeout, OSError):
        return 0, ""


class Failures:
    def __init__(self):
        self.items = []

    def add(self, message):
        log("FAIL:", message)
        self.items.append(message)


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr):
        """(ok, result list or error text) of an instant query."""
        url = self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        status, text = http("GET", url)
        try:
            doc = json.loads(text)
        except ValueError:
            return False, f"HTTP {status}: {text[:200]}"
        if doc.get("status") != "success":
            return False, f"{doc.get('errorType')}: {doc.get('error')}"
        return True, doc["data"]["result"]

    def get(self, path):
        status, text = http("GET", self.base + path)
        if status != 200:
            return None
        return json.loads(text)["data"]


def wait_until(predicate, timeout, what, proc=None, proc_log=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}"
                               + tail(proc_log))
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}" + tail(proc_log))


def tail(path, lines=30):
    if not path or not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return "\n--- last lines of " + path + " ---\n" + "".join(f.readlines()[-lines:])


def prometheus_config(source_dir, target, work):
    """deploy/prometheus/prometheus.yml aimed at `target`, scraping and evaluating every 1s."""
    with open(os.path.join(source_dir, "deploy/prometheus/prometheus.yml")) as f:
        text = f.read()
    edits = [
        ("127.0.0.1:8080", target),
        ("scrape_interval: 5s", "scrape_interval: 1s"),
        ("scrape_timeout: 5s", "scrape_timeout: 1s"),
        ("evaluation_interval: 5s", "evaluation_interval: 1s"),
        ("- alerts.yml", "- " + os.path.join(source_dir, "deploy/prometheus/alerts.yml")),
    ]
    for old, new in edits:
        if text.count(old) != 1:
            raise RuntimeError(f"deploy/prometheus/prometheus.yml changed shape: '{old}' "
                               "does not occur exactly once; update this test")
        text = text.replace(old, new)
    path = os.path.join(work, "prometheus.yml")
    with open(path, "w") as f:
        f.write(text)
    return path


def serving_metric_names(source_dir):
    with open(os.path.join(source_dir, "controller/metrics/serving_metrics.cc")) as f:
        return sorted(set(re.findall(r'"(tessera_[a-z0-9_]+)"', f.read())))


def dashboard_queries(source_dir):
    with open(os.path.join(source_dir, "deploy/grafana/tessera-dashboard.json")) as f:
        dashboard = json.load(f)
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"panel '{p.get('title')}' {t.get('refId')}", t["expr"]))
            walk(p.get("panels", []))

    walk(dashboard.get("panels", []))
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        # Grafana's label_values(METRIC, LABEL) is not PromQL; this asks the same question.
        m = re.fullmatch(r"\s*label_values\((.+),\s*(\w+)\)\s*", q or "")
        if m:
            q = f"group by ({m.group(2)}) ({m.group(1)})"
        out.append((f"variable ${v['name']}", q))
    return out


def substitute(expr, model_name):
    for k, v in {"$__rate_interval": RATE_WINDOW, "$__interval": "15s", "$__range": "5m",
                 "${model_name}": model_name, "$model_name": model_name}.items():
        expr = expr.replace(k, v)
    return expr


def strip_comparison(expr):
    """`lhs > 0.95` -> `lhs`: the part of an alert condition that must return data."""
    m = re.fullmatch(r"(.*?)\s*(==|!=|>=|<=|>|<)\s*(bool\s+)?[-+0-9.eE]+\s*", expr, re.S)
    return m.group(1) if m else expr


def parse_exposition(text):
    """[(name, {label: value}, value)] of a text-format exposition (values as floats)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?', line)
        if not m:
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            pass
    return out


def total(samples, name, **labels):
    """The sum of the samples of `name` whose labels include `labels`."""
    return sum(v for n, l, v in samples
               if n == name and all(l.get(k) == want for k, want in labels.items()))


# What the load (REST completions, one gRPC call) must move: (series, labels, why). The
# histograms by their _count. At TP > 1 the all-reduces too.
def moving_series(world_size, grpc_sent):
    series = [
        ("tessera_request_success_total", {}, "finished requests"),
        ("tessera_prompt_tokens_total", {}, "prefilled prompt tokens"),
        ("tessera_generation_tokens_total", {}, "generated tokens"),
        ("tessera_http_requests_total", {"route": "/v1/completions", "status": "200"},
         "answered completions"),
        ("tessera_time_to_first_token_seconds_count", {}, "first tokens"),
        ("tessera_inter_token_latency_seconds_count", {}, "tokens after the first"),
        ("tessera_e2e_request_latency_seconds_count", {}, "finished requests"),
        ("tessera_request_queue_time_seconds_count", {}, "admitted requests"),
        ("tessera_request_prefill_time_seconds_count", {}, "prefilled requests"),
        ("tessera_request_decode_time_seconds_count", {}, "decoded requests"),
        ("tessera_request_prompt_tokens_count", {}, "finished requests"),
        ("tessera_request_generation_tokens_count", {}, "finished requests"),
        ("tessera_step_duration_seconds_count", {"phase": "prefill"}, "prefill steps"),
        ("tessera_step_duration_seconds_count", {"phase": "decode"}, "decode steps"),
        ("tessera_worker_compute_seconds_count", {}, "steps timed by rank 0"),
        ("tessera_step_gap_seconds_count", {}, "steps that followed a step at once"),
    ]
    if world_size > 1:
        series.append(("tessera_allreduce_seconds_count", {}, f"all-reduces at TP {world_size}"))
    if grpc_sent:
        series.append(("tessera_grpc_requests_total",
                       {"method": "/tessera.v1.Inference/ListModels", "code": "OK"},
                       "a gRPC ListModels call"))
    return series


def promql(name, labels):
    selector = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"sum({name}{{{selector}}})" if selector else f"sum({name})"


def numbers(result):
    """The values of an instant query's result that are numbers (not NaN)."""
    out = []
    for r in result:
        try:
            v = float(r["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if v == v:
            out.append(v)
    return out


def grpc_list_models(address):
    """Calls Inference/ListModels once (an empty request message); False when Python's grpc
    module is missing."""
    try:
        import grpc  # python3-grpcio
    except ImportError:
        return False
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary("/tessera.v1.Inference/ListModels",
                                   request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        call(b"", timeout=10)
    return True


class GaugeWatcher:
    """Scrapes tesserad's /metrics every 50 ms while the load runs and keeps the largest
    value each watched gauge showed: gauges set at scrape time must move under load."""
    WATCHED = [("tessera_num_requests_running", {}), ("tessera_kv_cache_usage_perc", {}),
               ("tessera_kv_cache_blocks", {"state": "used"})]

    def __init__(self, url):
        self.url = url
        self.peak = {name: 0.0 for name, _ in self.WATCHED}
        self.scrapes = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        while not self.stop.is_set():
            status, text = http("GET", self.url, timeout=5)
            if status == 200:
                self.scrapes += 1
                samples = parse_exposition(text)
                for name, labels in self.WATCHED:
                    self.peak[name] = max(self.peak[name], total(samples, name, **labels))
            self.stop.wait(0.05)


def send_load(http_base, model, watcher, requests_total=8, concurrency=4, max_seconds=60):
    """At least `requests_total` completions, `concurrency` at a time, and more until the
    watcher has scraped /metrics a few times while they ran: on a fast machine the first
    eight can finish between two of its scrapes (50 ms apart), and a gauge that no scrape
    sees under load proves nothing either way."""
    results = []
    lock = threading.Lock()
    body = {"model": model, "prompt": "hello", "max_tokens": 24}
    deadline = time.monotonic() + max_seconds
    first_scrape = watcher.scrapes

    def worker():
        while True:
            with lock:
                enough = (len(results) >= requests_total
                          and watcher.scrapes - first_scrape >= 5)
                if enough or time.monotonic() > deadline:
                    return
            status, text = http("POST", http_base + "/v1/completions", body, timeout=120)
            with lock:
                results.append((status, text[:300]))

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run(args, work, failures):
    http_port, grpc_port, prom_port = free_port(), free_port(), free_port()
    http_base = f"http://127.0.0.1:{http_port}"
    daemon_log = os.path.join(work, "tesserad.log")
    cmd = [args.tesserad, "--host", "127.0.0.1", "--http-port", str(http_port),
           "--grpc-port", str(grpc_port)]
    if args.model:
        cmd += ["--model", args.model]
    cmd += args.extra
    log("starting", " ".join(shlex.quote(c) for c in cmd))
    daemon = prom = None
    try:
        daemon = subprocess.Popen(cmd, stdout=open(daemon_log, "w"), stderr=subprocess.STDOUT)
        wait_until(lambda: http("GET", http_base + "/ready", timeout=2)[0] == 200, 90,
                   "tesserad /ready", daemon, daemon_log)
        status, text = http("GET", http_base + "/metrics")
        if status != 200 or "tessera_build_info" not in text:
            failures.add(f"GET /metrics answered {status} without tessera_build_info")

        prom_log = os.path.join(work, "prometheus.log")
        config = prometheus_config(args.source_dir, f"127.0.0.1:{http_port}", work)
        prom_cmd = [args.prometheus, f"--config.file={config}",
                    f"--storage.tsdb.path={os.path.join(work, 'data')}",
                    f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"]
        log("starting", " ".join(prom_cmd))
        prom = subprocess.Popen(prom_cmd, stdout=open(prom_log, "w"), stderr=subprocess.STDOUT)
        p = Prometheus(prom_port)
        wait_until(lambda: http("GET", p.base + "/-/ready", timeout=2)[0] == 200, 60,
                   "prometheus /-/ready", prom, prom_log)
        wait_until(lambda: p.query('up{job="tesserad"} == 1')[1], 30,
                   "a first successful scrape of tesserad", prom, prom_log)

        status, text = http("GET", http_base + "/v1/models")
        try:
            model = json.loads(text)["data"][0]["id"]
        except (ValueError, KeyError, IndexError):
            failures.add(f"GET /v1/models answered {status}: {text[:200]}")
            model = "default"
        status, text = http("GET", http_base + "/metrics")
        before = parse_exposition(text)
        world_size = len({l.get("rank") for n, l, _ in before if n == "tessera_worker_up"}) or 1
        watcher = GaugeWatcher(http_base + "/metrics")
        watcher.thread.start()
        log(f"sending load at TP {world_size}: at least 8 completions of 'hello' (max_tokens 24, "
            f"4 at a time, until 5 scrapes of /metrics ran during them) to model {model}")
        try:
            results = send_load(http_base, model, watcher)
            log(f"sent {len(results)} completions")
        finally:
            watcher.stop.set()
            watcher.thread.join()
        bad = [r for r in results if r[0] != 200]
        for status, text in bad:
            failures.add(f"POST /v1/completions answered {status}: {text}")
        if not args.static_target:
            # Gauges are read when scraped: right after the last answer nothing is running
            # (a poller would still show the load for up to its period).
            status, text = http("GET", http_base + "/metrics")
            after = parse_exposition(text)
            for name in ("tessera_num_requests_running", "tessera_num_requests_waiting"):
                if total(after, name) != 0:
                    failures.add(f"{name} is {total(after, name)} right after the load ended")
        grpc_sent = False
        if not args.static_target:
            try:
                grpc_sent = grpc_list_models(f"127.0.0.1:{grpc_port}")
            except Exception as e:  # grpc.RpcError and connection errors alike
                failures.add(f"gRPC ListModels failed: {e}")
            if not grpc_sent:
                log("python's grpc module is missing (python3-grpcio): no gRPC traffic, so "
                    "tessera_grpc_requests_total is not required to move")

        # Wait until Prometheus has scraped the tokens, then a few more scrapes so that every
        # rate window holds points from after the load.
        def generated():
            ok, result = p.query("sum(tessera_generation_tokens_total)")
            return ok and result and float(result[0]["value"][1]) > 0
        wait_until(generated, 30, "a scrape showing generated tokens", prom, prom_log)
        time.sleep(3)

        ok, result = p.query("tessera_build_info")
        model_name = result[0]["metric"].get("model_name", "") if ok and result else ""
        if not model_name:
            failures.add("tessera_build_info has no model_name in Prometheus")

        metadata = p.get("/api/v1/metadata") or {}
        names = serving_metric_names(args.source_dir)
        for name in names:
            kind = (metadata.get(name) or [{}])[0].get("type")
            series = [name + s for s in ("_bucket", "_sum", "_count")] if kind == "histogram" \
                else [name]
            if kind is None:
                failures.add(f"{name}: Prometheus has no metadata (HELP/TYPE) for it")
            for s in series:
                ok, result = p.query(s)
                if not ok or not result:
                    failures.add(f"{s}: no samples in Prometheus ({result if not ok else 'empty'})")
        log(f"checked {len(names)} metric names")

        if not args.static_target:
            check_fed(p, before, world_size, grpc_sent, watcher, failures)

        queries = dashboard_queries(args.source_dir)
        for where, expr in queries:
            q = substitute(expr, model_name)
            ok, result = p.query(q)
            if not ok:
                failures.add(f"dashboard {where}: error {result}: {q}")
            elif not (result if args.static_target else numbers(result)):
                failures.add(f"dashboard {where}: no data"
                             f"{' (only NaN)' if result else ''}: {q}")
        log(f"evaluated {len(queries)} dashboard queries")

        with open(os.path.join(args.source_dir, "deploy/prometheus/alerts.yml")) as f:
            expected_alerts = len(re.findall(r"^\s*- alert:", f.read(), re.M))

        def evaluated_rules():
            data = p.get("/api/v1/rules") or {}
            rules = [r for g in data.get("groups", []) for r in g.get("rules", [])]
            done = all(not r.get("lastEvaluation", "").startswith("0001") for r in rules)
            return rules if rules and done else None
        rules = wait_until(evaluated_rules, 30, "the alert rules' first evaluation", prom, prom_log)
        if len(rules) != expected_alerts:
            failures.add(f"Prometheus loaded {len(rules)} rules, alerts.yml has {expected_alerts}")
        for r in rules:
            if r.get("health") != "ok":
                failures.add(f"alert {r['name']}: health {r.get('health')}: {r.get('lastError')}")
            ok, result = p.query(r["query"])
            if not ok:
                failures.add(f"alert {r['name']}: error {result}: {r['query']}")
            lhs = strip_comparison(r["query"])
            ok, result = p.query(lhs)
            if not ok or not (result if args.static_target else numbers(result)):
                failures.add(f"alert {r['name']}: no data for {lhs}"
                             f"{' (only NaN)' if ok and result else ''}")
        log(f"evaluated {len(rules)} alert rules")
    finally:
        stop(prom)
        stop(daemon)
    if failures.items:
        log("tesserad log:" + tail(daemon_log))


def check_fed(p, before, world_size, grpc_sent, watcher, failures):
    """Every series the load should move has grown in Prometheus past its value before the
    load; the scrape-time gauges moved while it ran; the up gauges are up."""
    moved = 0
    for name, labels, why in moving_series(world_size, grpc_sent):
        was = total(before, name, **labels)
        ok, result = p.query(promql(name, labels))
        now = numbers(result) if ok else []
        if not now or now[0] <= was:
            failures.add(f"{promql(name, labels)} did not move under load ({why}): "
                         f"{was} before, {now[0] if now else 'nothing'} after")
        else:
            moved += 1
    log(f"{moved} counters and histograms moved under load")
    log(f"{watcher.scrapes} scrapes during the load saw at most "
        + ", ".join(f"{k} {v}" for k, v in watcher.peak.items()))
    if watcher.scrapes == 0:
        failures.add("no scrape of /metrics succeeded during the load")
    for name, value in watcher.peak.items():
        if value <= 0:
            failures.add(f"{name} stayed at 0 in every scrape during the load")
    for rank in range(world_size):
        for name in ("tessera_worker_up", "tessera_model_load_progress"):
            ok, result = p.query(f'{name}{{rank="{rank}"}}')
            if not ok or numbers(result) != [1.0]:
                failures.add(f"{name}{{rank=\"{rank}\"}} is not 1: {result}")
    for expr, want in (("tessera_ready", "== 1"), ("tessera_model_load_seconds", "> 0"),
                       ('tessera_kv_cache_blocks{state="free"}', "> 0")):
        ok, result = p.query(f"{expr} {want}")
        if not ok or not numbers(result):
            failures.add(f"{expr} is not {want}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tesserad", default=os.environ.get("TESSERA_TESSERAD", ""))
    parser.add_argument("--model", default=os.environ.get("TESSERA_TEST_MODEL", ""))
    parser.add_argument("--source-dir", default=SOURCE_DIR)
    parser.add_argument("--prometheus", default=os.environ.get("PROMETHEUS", "prometheus"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--static-target", action="store_true",
                        help="the target serves a fixed exposition: skip the checks that "
                             "metrics move under load")
    parser.add_argument("extra", nargs="*", help="extra tesserad flags (after --)")
    args = parser.parse_args()
    args.extra = args.extra or shlex.split(os.environ.get("TESSERAD_ARGS", ""))

    if not args.tesserad or not os.access(args.tesserad, os.X_OK):
        log(f"SKIP: no tesserad binary at '{args.tesserad}' (build the tesserad target, or "
            "pass --tesserad PATH / TESSERA_TESSERAD)")
        return SKIP
    prometheus = shutil.which(args.prometheus)
    if prometheus is None:
        log("SKIP: prometheus not found (Debian package prometheus; tools/install-deps.sh)")
        return SKIP
    args.prometheus = prometheus
    if args.model and not os.path.exists(args.model):
        log(f"FAIL: model {args.model} does not exist")
        return 1

    work = tempfile.mkdtemp(prefix="tessera-prom-")
    failures = Failures()
    try:
        run(args, work, failures)
    except RuntimeError as e:
        failures.add(str(e))
    finally:
        if args.keep or failures.items:
            log("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failures.items:
        log(f"{len(failures.items)} failures")
        return 1
    log("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
