#!/usr/bin/python3
"""A real Prometheus scrapes a running tesserad under a short load; then every metric of
ServingMetrics has samples in Prometheus, every PromQL query of the Grafana dashboard returns
data, and every alert rule of deploy/prometheus/alerts.yml is healthy and its condition's
left-hand side returns data (its comparison is false on a healthy daemon, so the full
expression may rightly return nothing).

Usage:
  prometheus_scrape_test.py --tesserad PATH [--model GGUF] [--source-dir DIR]
                            [--prometheus PATH] [--keep] [-- EXTRA TESSERAD FLAGS]

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


def send_load(http_base, model, requests_total=8, concurrency=4):
    results = []
    lock = threading.Lock()
    body = {"model": model, "prompt": "hello", "max_tokens": 8}

    def worker(n):
        for _ in range(n):
            status, text = http("POST", http_base + "/v1/completions", body, timeout=120)
            with lock:
                results.append((status, text[:300]))

    threads = [threading.Thread(target=worker, args=(requests_total // concurrency,))
               for _ in range(concurrency)]
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
        log(f"sending load: 8 completions of 'hello' (max_tokens 8) to model {model}")
        results = send_load(http_base, model)
        bad = [r for r in results if r[0] != 200]
        for status, text in bad:
            failures.add(f"POST /v1/completions answered {status}: {text}")

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

        queries = dashboard_queries(args.source_dir)
        for where, expr in queries:
            q = substitute(expr, model_name)
            ok, result = p.query(q)
            if not ok:
                failures.add(f"dashboard {where}: error {result}: {q}")
            elif not result:
                failures.add(f"dashboard {where}: no data: {q}")
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
            if not ok or not result:
                failures.add(f"alert {r['name']}: no data for {lhs}")
        log(f"evaluated {len(rules)} alert rules")
    finally:
        stop(prom)
        stop(daemon)
    if failures.items:
        log("tesserad log:" + tail(daemon_log))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tesserad", default=os.environ.get("TESSERA_TESSERAD", ""))
    parser.add_argument("--model", default=os.environ.get("TESSERA_TEST_MODEL", ""))
    parser.add_argument("--source-dir", default=SOURCE_DIR)
    parser.add_argument("--prometheus", default=os.environ.get("PROMETHEUS", "prometheus"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
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
