#!/usr/bin/env python3
"""tesserad with real worker processes, driven over HTTP:

1. kill -9 of a worker during a streaming generation: the stream ends with an error that
   names the worker, the group restarts, the next request succeeds;
2. kill -9 of tesserad: its spawned workers exit (no orphans);
3. multi-host: tesserad --external-workers, two tessera-worker processes started by hand
   with Gloo bound to different loopback addresses (127.0.0.2, 127.0.0.3) serve a
   completion; killing tesserad makes the external workers exit.

usage: daemon_workers_test.py TESSERAD TESSERA_WORKER TESSERA(CLI)
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_ready(base, proc, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"tesserad exited early with {proc.returncode}")
        try:
            status, _ = http("GET", base + "/ready", timeout=2)
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("tesserad never became ready")


def children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def wait_gone(pids, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def completion(base, max_tokens=8):
    return http("POST", base + "/v1/completions",
                {"model": MODEL_NAME, "prompt": "hello", "max_tokens": max_tokens,
                 "temperature": 0})


MODEL_NAME = None


def start_daemon(tesserad, model, extra, log):
    port, gport = free_port(), free_port()
    args = [tesserad, "--model", model, "--http-port", str(port), "--grpc-port", str(gport),
            "--threads-per-worker", "1", "--restart-backoff", "200ms",
            "--heartbeat-interval", "100ms", "--heartbeat-timeout", "3s"] + extra
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    return proc, f"http://127.0.0.1:{port}"


def test_kill_worker_mid_stream(tesserad, model, log):
    global MODEL_NAME
    proc, base = start_daemon(tesserad, model, ["--tp", "2"], log)
    try:
        wait_ready(base, proc)
        MODEL_NAME = json.loads(http("GET", base + "/v1/models")[1])["data"][0]["id"]
        workers = children(proc.pid)
        assert len(workers) == 2, f"expected 2 workers, found {workers}"
        req = urllib.request.Request(
            base + "/v1/completions", method="POST",
            data=json.dumps({"model": MODEL_NAME, "prompt": "hello", "max_tokens": 3000,
                             "temperature": 0, "ignore_eos": True, "stream": True}).encode(),
            headers={"Content-Type": "application/json"})
        events = []
        with urllib.request.urlopen(req, timeout=60) as r:
            killed = False
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data:"):
                    continue
                events.append(line)
                if len(events) == 5 and not killed:
                    os.kill(workers[1], signal.SIGKILL)
                    killed = True
        text = "\n".join(events)
        assert killed, "the stream ended before the worker was killed"
        assert '"error"' in text, "the stream did not end with an error event:\n" + text[-500:]
        err = [json.loads(e[5:]) for e in events if '"error"' in e][-1]["error"]
        assert "rank" in err["message"] and ("killed" in err["message"] or
                                              "signal" in err["message"]), err
        print("stream error:", err["message"])
        # The group restarts and the next request succeeds.
        deadline = time.time() + 30
        while time.time() < deadline:
            status, body = completion(base)
            if status == 200:
                break
            time.sleep(0.3)
        assert status == 200, (status, body)
        metrics = http("GET", base + "/metrics")[1]
        assert 'tessera_worker_restarts_total{model_name="' in metrics
        print("after restart:", json.loads(body)["choices"][0]["text"][:40].encode())

        # 2. kill -9 of tesserad: its workers follow.
        workers = children(proc.pid)
        assert len(workers) == 2, workers
        proc.kill()
        proc.wait()
        assert wait_gone(workers), f"workers {workers} outlived their controller"
        print("spawned workers exited with their controller")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_external_workers_on_two_addresses(tesserad, worker, model, log):
    control = free_port()
    proc, base = start_daemon(tesserad, model,
                              ["--tp", "2", "--external-workers", "--control-port",
                               str(control)], log)
    ws = []
    try:
        for rank, addr in ((0, "127.0.0.2"), (1, "127.0.0.3")):
            ws.append(subprocess.Popen([worker, "--controller", f"127.0.0.1:{control}",
                                        "--rank", str(rank), "--comm-interface", addr],
                                       stdout=log, stderr=log))
        wait_ready(base, proc)
        status, body = completion(base)
        assert status == 200, (status, body)
        ready = json.loads(http("GET", base + "/ready")[1])
        assert all(r["loaded"] for r in ready["ranks"]), ready
        print("external workers served:", json.loads(body)["usage"])
        proc.kill()
        proc.wait()
        assert wait_gone([w.pid for w in ws]), "external workers outlived their controller"
        for w in ws:
            w.wait()
        print("external workers exited with their controller")
    finally:
        for p in [proc] + ws:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_gives_up_but_stays_up(tesserad, model, log):
    """Workers that cannot start: after --max-worker-restarts failures the daemon stays up,
    not ready, and keeps serving /health and /metrics."""
    proc, base = start_daemon(tesserad, model,
                              ["--worker-binary", "/bin/false", "--max-worker-restarts", "2",
                               "--restart-backoff", "100ms"], log)
    try:
        deadline = time.time() + 30
        ready = None
        while time.time() < deadline:
            try:
                status, body = http("GET", base + "/ready", timeout=2)
                ready = json.loads(body)
                if "gave up" in json.dumps(ready):
                    break
            except OSError:
                pass
            time.sleep(0.2)
        assert ready is not None and "gave up" in json.dumps(ready), ready
        assert status == 503, status
        assert http("GET", base + "/health")[0] == 200
        metrics = http("GET", base + "/metrics")[1]
        assert 'tessera_ready{model_name=' in metrics and "tessera_worker_up" in metrics
        status, body = completion(base)
        assert status == 503, (status, body)
        assert proc.poll() is None, "tesserad died with its workers"
        print("gave up, still serving /health and /metrics:", ready["workers"][:80])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_tp_matches_in_process(cli, model, tmp):
    """tessera eval-logits --tp 2 (two worker processes) against the in-process run."""
    import struct
    outs = {}
    for tp in (None, 2):
        out = os.path.join(tmp, f"logits-{tp}.f32")
        args = [cli, "eval-logits", "--model", model, "--tokens", "1,5,9,200,31,7", "--exact",
                "--threads", "1", "--out", out]
        if tp:
            args += ["--tp", str(tp)]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out, "rb") as f:
            data = f.read()
        outs[tp] = struct.unpack(f"<{len(data) // 4}f", data)
    worst = max(abs(a - b) for a, b in zip(outs[None], outs[2]))
    assert len(outs[None]) == len(outs[2]) and worst < 2e-3, worst
    print(f"eval-logits --tp 2 vs in-process: max |diff| {worst:.2e}")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    tesserad, worker, cli = sys.argv[1:4]
    for b in (tesserad, worker, cli):
        if not os.access(b, os.X_OK):
            print(f"SKIP: {b} is not built")
            return 77
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "llama-small.gguf")
        subprocess.run([cli, "gen-model", "--arch", "llama", "--preset", "small", "--quant",
                        "Q8_0", "--out", model], check=True, stdout=subprocess.DEVNULL)
        log_path = os.path.join(tmp, "daemon.log")
        with open(log_path, "w") as log:
            try:
                test_cli_tp_matches_in_process(cli, model, tmp)
                test_kill_worker_mid_stream(tesserad, model, log)
                test_external_workers_on_two_addresses(tesserad, worker, model, log)
                test_gives_up_but_stays_up(tesserad, model, log)
            except Exception:
                log.flush()
                with open(log_path) as f:
                    sys.stderr.write("--- daemon log (tail) ---\n" + f.read()[-6000:])
                raise
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
