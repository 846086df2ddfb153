#!/usr/bin/python3
"""Static checks of deploy/grafana/tessera-dashboard.json (no Grafana, no daemon needed).

- importable shape: a `datasource` variable of type datasource (Prometheus) that every panel
  and query uses, a `model_name` variable, unique panel ids;
- the panels are the ones the Observability issue lists, in its order;
- every query names only metrics that controller/metrics/serving_metrics.cc registers;
- every query is valid PromQL: they are written, template variables substituted, into a
  recording-rule file that `promtool check rules` must accept (skipped without promtool).

Usage: grafana_dashboard_check.py SOURCE_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Transcribed from issue #10 item 3: "request rate by outcome, TTFT and TPOT p50/p95/p99,
# end-to-end latency, tokens/s in and out, running/waiting, KV usage, worker up and restarts,
# step and all-reduce time, load progress". Each pattern must match one panel title, in order.
EXPECTED_PANELS = [
    r"request rate by outcome",
    r"time to first token.*p50.*p95.*p99",
    r"time per output token.*p50.*p95.*p99",
    r"end-to-end.*latency",
    r"tokens per second.*in.*out",
    r"running.*waiting",
    r"kv cache usage",
    r"workers? up.*restarts",
    r"step.*all-reduce",
    r"load progress",
    r"prefix cache hit rate",  # issue #21 item 4
    r"speculative decoding.*acceptance length",  # issue #24 item 6
]

# What Grafana substitutes at query time, with values a short test window can satisfy.
SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "5m",
}


def substitute(expr, model_name="tiny"):
    for k, v in SUBSTITUTIONS.items():
        expr = expr.replace(k, v)
    return expr.replace("${model_name}", model_name).replace("$model_name", model_name)


def dashboard_queries(dashboard):
    """(panel title, expr) for every query of every panel, rows included."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", ""), t["expr"]))
            walk(p.get("panels", []))

    walk(dashboard.get("panels", []))
    return out


def registered_metric_names(source_dir):
    path = os.path.join(source_dir, "controller/metrics/serving_metrics.cc")
    with open(path, encoding="utf-8") as f:
        return set(re.findall(r'"(tessera_[a-z0-9_]+)"', f.read()))


def referenced_metrics(expr):
    names = set()
    for name in re.findall(r"\b(tessera_[a-z0-9_]+)\b", expr):
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        names.add(name)
    return names


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    source_dir = sys.argv[1]
    path = os.path.join(source_dir, "deploy/grafana/tessera-dashboard.json")
    with open(path, encoding="utf-8") as f:
        dashboard = json.load(f)
    errors = []

    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        errors.append("no template variable `datasource` of type datasource for prometheus")
    if "model_name" not in variables:
        errors.append("no template variable `model_name`")

    panels = dashboard.get("panels", [])
    ids = [p.get("id") for p in panels]
    if len(set(ids)) != len(ids):
        errors.append(f"panel ids repeat: {ids}")
    titles = [p.get("title", "") for p in panels]
    if len(titles) != len(EXPECTED_PANELS):
        errors.append(f"{len(titles)} panels, the issue lists {len(EXPECTED_PANELS)}: {titles}")
    for pattern, title in zip(EXPECTED_PANELS, titles):
        if not re.search(pattern, title, re.IGNORECASE):
            errors.append(f"panel '{title}' is not the issue's '{pattern}'")
    for p in panels:
        uses = [p.get("datasource")] + [t.get("datasource") for t in p.get("targets", [])]
        for u in uses:
            if not u or u.get("uid") != "${datasource}":
                errors.append(f"panel '{p.get('title')}' does not use ${{datasource}}: {u}")
        if not p.get("targets"):
            errors.append(f"panel '{p.get('title')}' has no query")

    known = registered_metric_names(source_dir)
    queries = dashboard_queries(dashboard)
    for title, expr in queries:
        names = referenced_metrics(expr)
        if not names:
            errors.append(f"panel '{title}': query names no tessera_ metric: {expr}")
        for name in sorted(names - known):
            errors.append(f"panel '{title}': {name} is not registered by ServingMetrics")

    promtool = shutil.which("promtool")
    if promtool is None:
        print("SKIP part: promtool not found; PromQL syntax not checked")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            rules = os.path.join(tmp, "dashboard_rules.yml")
            with open(rules, "w", encoding="utf-8") as f:
                f.write("groups:\n  - name: dashboard\n    rules:\n")
                for i, (_, expr) in enumerate(queries):
                    f.write(f"      - record: dashboard:query_{i}\n")
                    f.write(f"        expr: {json.dumps(substitute(expr))}\n")
            r = subprocess.run([promtool, "check", "rules", rules], capture_output=True, text=True)
            if r.returncode != 0:
                errors.append("promtool rejects a dashboard query:\n" + r.stdout + r.stderr)

    for e in errors:
        print("FAIL:", e)
    print(f"{len(panels)} panels, {len(queries)} queries, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
