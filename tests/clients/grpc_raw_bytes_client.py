#!/usr/bin/python3
"""A gRPC client that sends hand-encoded bytes to tessera.v1.Inference, as a hostile or buggy
client would: no .proto, no generated code, no serializer (grpcio's raw channel methods).

Checks, each against the status code and the field the details name:
  - bytes that are not protobuf, a proto3 string that is not UTF-8 (Chat content, Generate
    request_id, Tokenize text): INVALID_ARGUMENT naming the message type and the field;
  - a 1 MB request_id, a 300-byte model name, 17 stop strings: INVALID_ARGUMENT naming the
    field and the limit; role "wizard": INVALID_ARGUMENT naming messages[0].role; a negative
    stop token id: the error names the real vocabulary, not [0, 0);
  - `authorization` sent twice, or `Bearer  KEY` with two spaces: UNAUTHENTICATED;
  - GetModelInfo's path is a file name without directories;
  - a well-formed Generate still streams and finishes;
  - the server's log has protobuf's complaint in the daemon's format and no raw
    "[libprotobuf ERROR" line.

  grpc_raw_bytes_client.py --server PATH/test_grpc_server
  grpc_raw_bytes_client.py --tesserad PATH/tesserad --worker PATH/tessera-worker

Exit 0 when every check passed, 1 otherwise, 77 when python3-grpcio is missing (skip).
"""

import argparse
import os
import subprocess
import sys
import threading

from check_tally import check, report  # beside this script

try:
    import grpc
except ImportError as e:  # pragma: no cover - environment without the Debian packages
    print(f"SKIP: {e} (install python3-grpcio)")
    sys.exit(77)

TIMEOUT_S = 30
API_KEY = "raw-bytes-test-key"


# --- protobuf wire format, by hand (https://protobuf.dev/programming-guides/encoding/) ------

def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def length_delimited(number, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def varint_field(number, value):
    return varint(number << 3) + varint(value & 0xFFFFFFFFFFFFFFFF)


def fields(data):
    """(number, wire type, value) of each field of a message; values of wire type 2 as bytes."""
    i, out = 0, []
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            size, i = read_varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, wire, value))
    return out


def read_varint(data, i):
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, i


# tessera.v1 field numbers (proto/tessera/v1/inference.proto).
def generate_request(text=None, request_id=None, model=None, options=b""):
    out = b""
    if model is not None:
        out += length_delimited(1, model)
    if text is not None:
        out += length_delimited(2, text)
    if options:
        out += length_delimited(6, options)
    if request_id is not None:
        out += length_delimited(7, request_id)
    return out


def chat_request(role, content):
    return length_delimited(2, length_delimited(1, role) + length_delimited(2, content))


# --- calls ----------------------------------------------------------------------------------

class Client:
    def __init__(self, target, api_key):
        self.channel = grpc.insecure_channel(target)
        grpc.channel_ready_future(self.channel).result(timeout=TIMEOUT_S)
        self.metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()

    def stream(self, method, payload, metadata=None):
        """(status code, details, chunks) of a server-streaming call with raw bytes."""
        call = self.channel.unary_stream(f"/tessera.v1.Inference/{method}",
                                         request_serializer=None, response_deserializer=None)
        chunks = []
        try:
            for chunk in call(payload, timeout=TIMEOUT_S,
                              metadata=self.metadata if metadata is None else metadata):
                chunks.append(chunk)
            return grpc.StatusCode.OK, "", chunks
        except grpc.RpcError as e:
            return e.code(), e.details() or "", chunks

    def unary(self, method, payload, metadata=None):
        call = self.channel.unary_unary(f"/tessera.v1.Inference/{method}",
                                        request_serializer=None, response_deserializer=None)
        try:
            answer = call(payload, timeout=TIMEOUT_S,
                          metadata=self.metadata if metadata is None else metadata)
            return grpc.StatusCode.OK, "", answer
        except grpc.RpcError as e:
            return e.code(), e.details() or "", None


def expect_invalid(result, *needles, what):
    code, details = result[0], result[1]
    check(code == grpc.StatusCode.INVALID_ARGUMENT and all(n in details for n in needles),
          f"{what}: {code.name} {details[:160]!r}")


def run(target):
    c = Client(target, API_KEY)

    # Not protobuf at all (wire type 7 does not exist).
    garbage = b"\xff\xff\xff\xff garbage"
    expect_invalid(c.stream("Chat", garbage), "tessera.v1.ChatRequest", "wire format",
                   what="garbage Chat request")
    expect_invalid(c.stream("Generate", garbage), "tessera.v1.GenerateRequest",
                   what="garbage Generate request")
    expect_invalid(c.unary("Tokenize", garbage), "tessera.v1.TokenizeRequest",
                   what="garbage Tokenize request")

    # proto3 strings that are not UTF-8.
    expect_invalid(c.stream("Chat", chat_request("user", b"caf\xe9")), "tessera.v1.ChatRequest",
                   "messages[0].content", "UTF-8", what="Latin-1 chat content")
    expect_invalid(c.stream("Generate", generate_request(text="x", request_id=b"\xc3")),
                   "request_id", "UTF-8", what="request_id with a lone lead byte")
    expect_invalid(c.unary("Tokenize", length_delimited(2, b"\xed\xa0\x80")), "text", "UTF-8",
                   what="Tokenize text with a surrogate")

    # Client strings that would be logged or echoed.
    expect_invalid(c.stream("Generate", generate_request(text="x", request_id="r" * (1 << 20))),
                   "request_id", "256", what="1 MB request_id")
    expect_invalid(c.stream("Generate", generate_request(text="x", model="m" * 300)),
                   "model", "256", what="300-byte model name")
    stops = b"".join(length_delimited(2, f"s{i}") for i in range(17))
    expect_invalid(c.stream("Generate", generate_request(text="x", options=stops)),
                   "stop", "16", what="17 stop strings")
    expect_invalid(c.stream("Chat", chat_request("wizard", "hi")), "messages[0].role",
                   what="role wizard")
    code, details, _ = c.stream("Generate", generate_request(
        text="x", options=varint_field(3, -1)))
    check(code == grpc.StatusCode.INVALID_ARGUMENT and "stop_token_ids[0]" in details
          and "[0, 0)" not in details and "[0, " in details,
          f"negative stop token id names the vocabulary: {details!r}")

    # The API key: one entry, one space.
    listing = b""
    two = (("authorization", f"Bearer {API_KEY}"), ("authorization", f"Bearer {API_KEY}"))
    check(c.unary("ListModels", listing, metadata=two)[0] == grpc.StatusCode.UNAUTHENTICATED,
          "two authorization entries are UNAUTHENTICATED")
    spaced = (("authorization", f"Bearer  {API_KEY}"),)
    check(c.unary("ListModels", listing, metadata=spaced)[0] == grpc.StatusCode.UNAUTHENTICATED,
          "'Bearer  KEY' (two spaces) is UNAUTHENTICATED")
    check(c.unary("ListModels", listing)[0] == grpc.StatusCode.OK, "'Bearer KEY' is let in")

    # GetModelInfo names the file, not where it lives.
    code, _, answer = c.unary("GetModelInfo", b"")
    paths = [v for n, w, v in fields(answer or b"") if n == 3 and w == 2]
    check(code == grpc.StatusCode.OK and len(paths) == 1 and paths[0]
          and b"/" not in paths[0] and paths[0].endswith(b".gguf"),
          f"GetModelInfo path is a file name: {paths!r}")

    # A well-formed request still works through the raw path.
    code, details, chunks = c.stream("Generate", generate_request(
        text="Hello", request_id="raw-1", options=varint_field(1, 4)))
    last = fields(chunks[-1]) if chunks else []
    check(code == grpc.StatusCode.OK and chunks
          and all((1, 2, b"raw-1") in fields(ch) for ch in chunks)
          and any(n == 5 and v in (b"stop", b"length") for n, _, v in last),
          f"well-formed Generate streams {len(chunks)} chunks and finishes ({code.name} {details})")
    c.channel.close()


def check_log(log, what):
    check("[libprotobuf" not in log, f"{what}: no raw [libprotobuf line in the log")
    check("protobuf: String field" in log and "invalid UTF-8" in log,
          f"{what}: protobuf's complaint is in the daemon's log format")


def with_test_server(binary):
    server = subprocess.Popen([binary, "--port", "0", "--api-key", API_KEY],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              errors="replace")
    log = []
    reader = threading.Thread(target=lambda: log.extend(server.stderr), daemon=True)
    reader.start()
    try:
        line = server.stdout.readline().strip()
        if not check(line.startswith("listening on "), f"test server started: {line!r}"):
            return
        run(line[len("listening on "):])
    finally:
        server.terminate()
        server.wait(timeout=TIMEOUT_S)
        reader.join(timeout=TIMEOUT_S)
    check_log("".join(log), "test server")


def with_tesserad(binary, worker):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from tesserad_harness import Tesserad, default_cache_dir  # beside this script
    # The embedded default model, generated once into the shared test cache.
    daemon = Tesserad(binary, ["--cache-dir", default_cache_dir()], worker, API_KEY)
    try:
        daemon.start()
        run(daemon.grpc)
    finally:
        code = daemon.stop()
        daemon.kill()
    check(code == 0, f"tesserad exited {code} after SIGTERM")
    check_log("\n".join(daemon.log), "tesserad")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="test_grpc_server binary to start and stop")
    parser.add_argument("--tesserad", help="tesserad binary to start and stop")
    parser.add_argument("--worker", help="tessera-worker binary for --tesserad")
    args = parser.parse_args()
    if bool(args.server) == bool(args.tesserad):
        parser.error("give exactly one of --server and --tesserad")
    try:
        if args.server:
            with_test_server(args.server)
        else:
            with_tesserad(args.tesserad, args.worker)
    except (grpc.RpcError, grpc.FutureTimeoutError, RuntimeError, ValueError, IndexError) as e:
        check(False, f"unexpected error: {e!r}")
    return report()


if __name__ == "__main__":
    sys.exit(main())
