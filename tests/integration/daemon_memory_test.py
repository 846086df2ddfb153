#!/usr/bin/python3
"""tesserad gives the memory of large requests back: after three rounds of 1-3.6 MB
request bodies (a 1.5-million-word completion prompt, 30,000 one-letter chat messages, one
3.6-million-character chat message; each refused with 400 as too long, after the parsing,
rendering and tokenizing that make the garbage), its resident set size returns to within 2x
of its idle value. Without the fixed malloc thresholds and the trimming
(controller/daemon/memory_trimmer.h) it stays at about 2.7x with either one alone.

Usage: daemon_memory_test.py TESSERAD. Exit 0 pass, 1 fail, 77 skip (no /proc).
Standard library only.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SKIP = 77


def log(*args):
    print("daemon_memory_test:", *args, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc/PID/status")


def post(base, path, body):
    req = urllib.request.Request(base + path, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if not os.path.exists("/proc/self/status"):
        log("SKIP: no /proc to read the resident set size from")
        return SKIP
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    work = tempfile.mkdtemp(prefix="tessera-mem-")
    daemon_log = os.path.join(work, "tesserad.log")
    cmd = [sys.argv[1], "--host", "127.0.0.1", "--http-port", str(port),
           "--grpc-port", str(free_port()), "--threads-per-worker", "1"]
    daemon = subprocess.Popen(cmd, stdout=open(daemon_log, "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 90
        while True:
            if daemon.poll() is not None:
                log(f"FAIL: tesserad exited with {daemon.returncode}")
                return 1
            try:
                with urllib.request.urlopen(base + "/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.time() > deadline:
                log("FAIL: tesserad never became ready")
                return 1
            time.sleep(0.25)
        time.sleep(2)  # let start-up settle
        idle = rss_mib(daemon.pid)
        bodies = [
            ("/v1/completions", {"prompt": "x " * 1_500_000, "max_tokens": 4}),
            ("/v1/chat/completions",
             {"messages": [{"role": "user", "content": "a"}] * 30000, "max_tokens": 4}),
            ("/v1/chat/completions",
             {"messages": [{"role": "user", "content": "hello " * 600_000}], "max_tokens": 4}),
        ]
        bodies = [(path, json.dumps(body).encode()) for path, body in bodies]
        log(f"idle: {idle:.1f} MiB; sending 3 rounds of bodies of "
            + ", ".join(f"{len(b) / 1e6:.1f} MB" for _, b in bodies))
        peak = idle
        for _ in range(3):
            for path, body in bodies:
                status = post(base, path, body)
                if status != 400:
                    log(f"FAIL: {path} with a {len(body)}-byte body answered {status}, "
                        "not 400 (too long)")
                    return 1
                peak = max(peak, rss_mib(daemon.pid))
        deadline = time.time() + 10
        now = rss_mib(daemon.pid)
        while now > 2 * idle and time.time() < deadline:
            time.sleep(0.5)
            now = rss_mib(daemon.pid)
        log(f"resident: idle {idle:.1f} MiB, highest seen {peak:.1f} MiB, "
            f"after the requests {now:.1f} MiB")
        if now > 2 * idle:
            log(f"FAIL: {now:.1f} MiB is more than 2x the idle {idle:.1f} MiB 10 s after "
                "the large requests")
            return 1
        with urllib.request.urlopen(base + "/health", timeout=5) as r:
            if r.status != 200:
                log(f"FAIL: /health answered {r.status} afterwards")
                return 1
        log("PASS")
        return 0
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=15)
        except subprocess.TimeoutExpired:
            daemon.kill()


if __name__ == "__main__":
    sys.exit(main())
