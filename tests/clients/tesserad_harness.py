#!/usr/bin/python3
"""Starts a real tesserad on ephemeral ports for client tests, and stops it with SIGTERM.

As a module: `Tesserad(binary, args).start()` then `.http`, `.grpc`, `.stop()` (tesserad_api_test.py
uses it). As a command, it runs a client against a fresh daemon, with {http}, {grpc} and
{api_key} in the client's arguments replaced by the daemon's REST URL, gRPC address and key:

  tesserad_harness.py --tesserad PATH [--worker PATH] [--api-key KEY] [--daemon-arg=ARG ...]
      -- CLIENT ARGS...

The client's exit status is returned (77 passes through: a skipped client); a client that
passed fails the run when the daemon then does not drain and exit 0 on SIGTERM.
Python 3 standard library only.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

# The daemon's startup line names both addresses (ports chosen by the kernel with port 0).
SERVING_LINE = re.compile(r"REST (http://\S+)/v1 .*gRPC (\S+?),")


class Tesserad:
    """One tesserad process. Its stderr (the log) is collected for failure messages."""

    def __init__(self, binary, args=(), worker=None, api_key=""):
        self.binary = binary
        self.args = list(args)
        self.worker = worker
        self.api_key = api_key
        self.http = None  # http://127.0.0.1:PORT
        self.grpc = None  # 127.0.0.1:PORT
        self.proc = None
        self.log = []
        self._addresses = threading.Event()

    def start(self, ready_timeout=60):
        cmd = [self.binary, "--http-port", "0", "--grpc-port", "0"]
        if self.worker:
            cmd += ["--worker-binary", self.worker]
        if self.api_key:
            cmd += ["--api-key", self.api_key]
        cmd += self.args
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True, errors="replace")
        except OSError as e:
            raise RuntimeError(f"cannot start {self.binary}: {e}") from e
        threading.Thread(target=self._read_log, daemon=True).start()
        deadline = time.monotonic() + ready_timeout
        while not self._addresses.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tesserad did not start (exit {self.proc.poll()}):\n"
                                   + self.log_text())
        # /ready answers 200 once the workers have loaded the model.
        while True:
            try:
                with urllib.request.urlopen(self.http + "/ready", timeout=5) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("tesserad did not become ready:\n" + self.log_text())
            time.sleep(0.05)

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line.rstrip("\n"))
            m = SERVING_LINE.search(line)
            if m and not self._addresses.is_set():
                self.http, self.grpc = m.group(1), m.group(2)
                self._addresses.set()

    def log_text(self, last=40):
        return "\n".join("  tesserad| " + l for l in self.log[-last:])

    def stop(self, timeout=60):
        """SIGTERM and wait: the exit status (None when it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def default_cache_dir():
    """Where the embedded default model is generated once, shared by the tests of one user."""
    return os.path.join(tempfile.gettempdir(), f"tessera-test-cache-{os.getuid()}")


def substitute(arg, values):
    for name, value in values.items():
        arg = arg.replace("{" + name + "}", value)
    return arg


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        print("usage: tesserad_harness.py --tesserad PATH [...] -- CLIENT ARGS...", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tesserad", required=True)
    parser.add_argument("--worker", help="tessera-worker (default: the one beside tesserad)")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--daemon-arg", action="append", default=[],
                        help="one more tesserad argument (repeatable; write --daemon-arg=--flag)")
    args = parser.parse_args(argv[:split])
    client = argv[split + 1:]
    if not client:
        parser.error("no client command after --")
    daemon_args = args.daemon_arg
    if not any(a.startswith("--model") or a.startswith("--cache-dir") for a in daemon_args):
        daemon_args = ["--cache-dir", default_cache_dir()] + daemon_args

    daemon = Tesserad(args.tesserad, daemon_args, args.worker, args.api_key)
    try:
        daemon.start()
        print(f"tesserad: REST {daemon.http}, gRPC {daemon.grpc}", flush=True)
        values = {"http": daemon.http, "grpc": daemon.grpc, "api_key": args.api_key}
        rc = subprocess.call([substitute(a, values) for a in client])
        code = daemon.stop()
    except RuntimeError as e:
        print(f"FAIL {e}")
        return 1
    finally:
        daemon.kill()
    if rc != 0:
        if rc != 77:
            print(daemon.log_text())
        return rc
    if code != 0:
        print(f"FAIL tesserad exited {code} after SIGTERM, expected 0\n{daemon.log_text()}")
        return 1
    print("tesserad drained and exited 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
