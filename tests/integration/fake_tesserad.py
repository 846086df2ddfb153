#!/usr/bin/python3
"""A stand-in for tesserad with the same command line and HTTP routes, serving a fixed
/metrics text: it lets prometheus_scrape_test.py be checked against a real Prometheus
before the daemon exists. Not a model server: completions are canned.

Usage: fake_tesserad.py (--metrics-file FILE | --metrics-command PROGRAM) [--host H]
                        [--http-port P] [--grpc-port G] ...
--metrics-command runs PROGRAM once and serves what it prints.
"""
import argparse
import json
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics-file")
    parser.add_argument("--metrics-command")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--http-port", type=int, default=8080)
    args, _ = parser.parse_known_args()
    if args.metrics_command:
        metrics = subprocess.run([args.metrics_command], check=True, stdout=subprocess.PIPE).stdout
    else:
        with open(args.metrics_file, "rb") as f:
            metrics = f.read()

    class Handler(BaseHTTPRequestHandler):
        def reply(self, status, body, content_type="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/metrics":
                self.reply(200, metrics, "text/plain; version=0.0.4; charset=utf-8")
            elif self.path in ("/health", "/ready"):
                self.reply(200, b'{"status":"ok"}')
            elif self.path == "/v1/models":
                self.reply(200, json.dumps(
                    {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode())
            else:
                self.reply(404, b'{"error":{"message":"not found"}}')

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            self.rfile.read(length)
            if self.path == "/v1/completions":
                self.reply(200, json.dumps({"object": "text_completion", "choices": [
                    {"index": 0, "text": " world", "finish_reason": "length"}]}).encode())
            else:
                self.reply(404, b'{"error":{"message":"not found"}}')

        def log_message(self, *a):
            pass

    ThreadingHTTPServer((args.host, args.http_port), Handler).serve_forever()


if __name__ == "__main__":
    sys.exit(main())
