#!/usr/bin/python3
"""A gRPC client that knows only server reflection, against a Tessera gRPC endpoint.

It holds no .proto and no generated code for Tessera: it asks the server's reflection
service (grpc.reflection.v1, else v1alpha, as grpcurl does) for the list of services and the file
that defines tessera.v1.Inference, builds message classes from those descriptors, and then
streams a Generate call built from a JSON dict, as grpcurl -d would. Python's grpcio from
Debian (python3-grpcio) ships no reflection client, so the reflection messages themselves
are declared here from their published definition (grpc/reflection/v1alpha/reflection.proto).

Checks: the services include tessera.v1.Inference, grpc.health.v1.Health and reflection;
Generate is a server-streaming method GenerateRequest -> GenerateResponse; a streamed
generation yields token ids, and its last chunk (only) carries finish_reason and usage whose
completion_tokens counts the ids received; health (also built from reflection) answers
SERVING without an API key; with a
key configured, a call without it is UNAUTHENTICATED. With --server, also the drain: SIGTERM
during a stream lets it finish, refuses a new call with UNAVAILABLE, and the server exits 0.

  grpc_reflection_client.py --server PATH/test_grpc_server   # starts and stops it
  grpc_reflection_client.py --target 127.0.0.1:50051 [--api-key KEY] [--prompt TEXT]
      [--reflection grpc.reflection.v1alpha]

Exit 0 when every check passed, 1 otherwise, 77 when python3-grpcio is missing (skip).
"""

import argparse
import json
import signal
import subprocess
import sys
import time

from check_tally import check, report  # beside this script

try:
    import grpc
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
except ImportError as e:  # pragma: no cover - environment without the Debian packages
    print(f"SKIP: {e} (install python3-grpcio python3-protobuf)")
    sys.exit(77)

# Asked in this order, as grpcurl does: v1, then v1alpha when v1 is UNIMPLEMENTED.
REFLECTION_PACKAGES = ["grpc.reflection.v1", "grpc.reflection.v1alpha"]
HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"
TIMEOUT_S = 30


def reflection_messages(package):
    """Message classes for the subset of reflection.proto this client uses (the same
    messages in v1 and v1alpha; only the package differs)."""
    f = descriptor_pb2.FileDescriptorProto()
    f.name = f"tessera_test/{package}_subset.proto"
    f.package = package
    f.syntax = "proto3"
    T = descriptor_pb2.FieldDescriptorProto

    def message(name, fields):
        m = f.message_type.add()
        m.name = name
        oneofs = {}
        for number, field_name, kind, label, type_name, oneof in fields:
            fd = m.field.add()
            fd.name, fd.number, fd.type, fd.label = field_name, number, kind, label
            if type_name:
                fd.type_name = type_name
            if oneof is not None:
                if oneof not in oneofs:
                    oneofs[oneof] = len(m.oneof_decl)
                    m.oneof_decl.add().name = oneof
                fd.oneof_index = oneofs[oneof]

    OPT, REP = T.LABEL_OPTIONAL, T.LABEL_REPEATED
    S, B, I, M = T.TYPE_STRING, T.TYPE_BYTES, T.TYPE_INT32, T.TYPE_MESSAGE
    pkg = f".{package}."
    message("ServerReflectionRequest", [
        (1, "host", S, OPT, None, None),
        (3, "file_by_filename", S, OPT, None, "message_request"),
        (4, "file_containing_symbol", S, OPT, None, "message_request"),
        (7, "list_services", S, OPT, None, "message_request"),
    ])
    message("FileDescriptorResponse", [(1, "file_descriptor_proto", B, REP, None, None)])
    message("ServiceResponse", [(1, "name", S, OPT, None, None)])
    message("ListServiceResponse", [(1, "service", M, REP, pkg + "ServiceResponse", None)])
    message("ErrorResponse", [(1, "error_code", I, OPT, None, None),
                              (2, "error_message", S, OPT, None, None)])
    message("ServerReflectionResponse", [
        (1, "valid_host", S, OPT, None, None),
        (2, "original_request", M, OPT, pkg + "ServerReflectionRequest", None),
        (4, "file_descriptor_response", M, OPT, pkg + "FileDescriptorResponse", "message_response"),
        (6, "list_services_response", M, OPT, pkg + "ListServiceResponse", "message_response"),
        (7, "error_response", M, OPT, pkg + "ErrorResponse", "message_response"),
    ])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    factory = message_factory.MessageFactory(pool)
    get = lambda n: factory.GetPrototype(pool.FindMessageTypeByName(f"{package}.{n}"))
    return get("ServerReflectionRequest"), get("ServerReflectionResponse")


class ReflectionClient:
    def __init__(self, channel, packages):
        for package in packages:
            self.package = package
            self.request_cls, self.response_cls = reflection_messages(package)
            self.call = channel.stream_stream(
                f"/{package}.ServerReflection/ServerReflectionInfo",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=self.response_cls.FromString)
            try:
                self.list_services()
                return
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
        raise RuntimeError("the server implements no reflection service")

    def ask(self, **field):
        request = self.request_cls(**field)
        responses = list(self.call(iter([request]), timeout=TIMEOUT_S))
        if len(responses) != 1:
            raise RuntimeError(f"reflection: expected one response, got {len(responses)}")
        r = responses[0]
        if r.WhichOneof("message_response") == "error_response":
            raise RuntimeError(f"reflection error {r.error_response.error_code}: "
                               f"{r.error_response.error_message}")
        return r

    def list_services(self):
        r = self.ask(list_services="")
        return [s.name for s in r.list_services_response.service]

    def pool_for_symbol(self, symbol):
        """A DescriptorPool holding the file defining `symbol` and its dependencies."""
        files = {}
        pending = list(self.ask(file_containing_symbol=symbol)
                       .file_descriptor_response.file_descriptor_proto)
        while pending:
            fd = descriptor_pb2.FileDescriptorProto.FromString(pending.pop())
            if fd.name in files:
                continue
            files[fd.name] = fd
            for dep in fd.dependency:
                if dep not in files:
                    pending.extend(self.ask(file_by_filename=dep)
                                   .file_descriptor_response.file_descriptor_proto)
        pool = descriptor_pool.DescriptorPool()
        added = set()
        while len(added) < len(files):  # dependencies first
            for name, fd in files.items():
                if name not in added and all(d in added for d in fd.dependency):
                    pool.Add(fd)
                    added.add(name)
        return pool, files


def health_status(channel, reflection):
    """grpc.health.v1.Health/Check built from the served descriptors, as grpcurl would.
    Returns the status enum's name ("SERVING", ...)."""
    pool, _ = reflection.pool_for_symbol("grpc.health.v1.Health")
    factory = message_factory.MessageFactory(pool)
    request_cls = factory.GetPrototype(pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest"))
    response_type = pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")
    response_cls = factory.GetPrototype(response_type)
    call = channel.unary_unary(HEALTH_CHECK_METHOD,
                               request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=response_cls.FromString)
    response = call(request_cls(), timeout=TIMEOUT_S)
    return response_type.fields_by_name["status"].enum_type.values_by_number[response.status].name


def describe_method(files, service, method):
    for fd in files.values():
        for s in fd.service:
            if f"{fd.package}.{s.name}" == service:
                for m in s.method:
                    if m.name == method:
                        return m
    return None


def run(target, api_key, prompt, expect_echo, packages):
    channel = grpc.insecure_channel(target)
    grpc.channel_ready_future(channel).result(timeout=TIMEOUT_S)
    reflection = ReflectionClient(channel, packages)
    print("reflection:", reflection.package)

    services = reflection.list_services()
    print("services:", " ".join(sorted(services)))
    check("tessera.v1.Inference" in services, "list: tessera.v1.Inference")
    check("grpc.health.v1.Health" in services, "list: grpc.health.v1.Health")
    check(any(s.startswith("grpc.reflection.") for s in services), "list: reflection")

    pool, files = reflection.pool_for_symbol("tessera.v1.Inference")
    service = pool.FindServiceByName("tessera.v1.Inference")
    check({"Generate", "Chat", "Tokenize", "Detokenize", "ListModels", "GetModelInfo"}
          <= set(service.methods_by_name), "describe: Inference has all six methods")
    generate = describe_method(files, "tessera.v1.Inference", "Generate")
    if not check(generate is not None and generate.server_streaming and
                 not generate.client_streaming, "describe: Generate is server-streaming"):
        raise RuntimeError("cannot go on without a server-streaming Generate")
    check(generate.input_type == ".tessera.v1.GenerateRequest" and
          generate.output_type == ".tessera.v1.GenerateResponse",
          f"describe: Generate({generate.input_type}) returns (stream {generate.output_type})")

    comments = [loc.leading_comments for fd in files.values()
                for loc in fd.source_code_info.location if loc.leading_comments]
    print(f"describe: {len(comments)} documented elements")
    if reflection.package == "grpc.reflection.v1":
        check(any("Generates a completion" in c for c in comments),
              "describe: the .proto comments come with the descriptors (v1)")

    factory = message_factory.MessageFactory(pool)
    request_cls = factory.GetPrototype(pool.FindMessageTypeByName("tessera.v1.GenerateRequest"))
    response_cls = factory.GetPrototype(pool.FindMessageTypeByName("tessera.v1.GenerateResponse"))
    body = {"text": prompt,
            "sampling": {"temperature": 0, "seed": "7"},
            "options": {"maxTokens": 64, "logprobs": True}}
    request = json_format.ParseDict(body, request_cls())
    print("Generate", json.dumps(body))
    call = channel.unary_stream("/tessera.v1.Inference/Generate",
                                request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=response_cls.FromString)
    metadata = [("authorization", f"Bearer {api_key}")] if api_key else None
    chunks = list(call(request, timeout=TIMEOUT_S, metadata=metadata))
    ids = [t for c in chunks for t in c.token_ids]
    text = "".join(c.text for c in chunks)
    print(f"received {len(chunks)} chunks, {len(ids)} tokens, text {text!r}")
    check(len(chunks) >= 1 and len(ids) >= 1, "generate: tokens arrive")
    last = chunks[-1] if chunks else response_cls()
    check(last.finish_reason in ("stop", "length"), f"generate: last finish_reason {last.finish_reason!r}")
    check(all(not c.finish_reason for c in chunks[:-1]), "generate: finish_reason only on the last")
    check(last.HasField("usage") and last.usage.completion_tokens == len(ids) and
          last.usage.prompt_tokens > 0,
          f"generate: usage {json_format.MessageToDict(last.usage)} counts {len(ids)} tokens")
    check(sum(len(c.logprobs) for c in chunks) == len(ids), "generate: one logprob per token")
    if expect_echo:
        check(text == prompt, "generate: the echo engine returns the prompt")
    else:
        # Prefix caching (a real daemon): the same 40 token ids twice under one salt; the
        # second call's usage counts the two full 16-token blocks the first computed.
        ids_body = {"tokenIds": {"ids": [3 + (7 * i) % 200 for i in range(40)]},
                    "sampling": {"temperature": 0}, "options": {"maxTokens": 2,
                                                                "cacheSalt": "reflection"}}
        cached = []
        for _ in range(2):
            reply = list(call(json_format.ParseDict(ids_body, request_cls()), timeout=TIMEOUT_S,
                              metadata=metadata))
            cached.append(reply[-1].usage.cached_tokens if reply else -1)
        check(cached == [0, 32], f"generate: usage.cached_tokens {cached} (cold, then 2 blocks)")

        # Structured output: a choice and a JSON schema (as JSON text) constrain a random
        # model at temperature 1; checked here with json, not by the server.
        choices = ["north", "south", "east", "west"]
        schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1,
                                                         "maximum": 9}},
                  "required": ["n"], "additionalProperties": False}
        for i, so in enumerate(({"choice": {"choices": choices}},
                                {"jsonSchema": json.dumps(schema)})):
            so_body = {"text": prompt, "sampling": {"temperature": 1.0, "seed": str(11 + i)},
                       "options": {"maxTokens": 64, "structuredOutput": so}}
            reply = list(call(json_format.ParseDict(so_body, request_cls()), timeout=TIMEOUT_S,
                              metadata=metadata))
            out = "".join(c.text for c in reply)
            finish = reply[-1].finish_reason if reply else ""
            if "choice" in so:
                valid = out in choices
            else:
                try:
                    doc = json.loads(out)
                    valid = (isinstance(doc, dict) and list(doc) == ["n"] and
                             type(doc["n"]) is int and 1 <= doc["n"] <= 9)
                except ValueError:
                    valid = False
            check(valid and finish == "stop",
                  f"generate: structured_output {list(so)[0]} gives {out!r} ({finish})")
        bad = {"text": prompt, "options": {"structuredOutput": {"regex": "a(b"}}}
        try:
            list(call(json_format.ParseDict(bad, request_cls()), timeout=TIMEOUT_S,
                      metadata=metadata))
            check(False, "generate: an invalid regex is refused")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "regex" in e.details(),
                  f"generate: an invalid regex is {e.code().name}: {e.details()}")

    check(health_status(channel, reflection) == "SERVING", "health: SERVING without an API key")
    if api_key:
        try:
            list(call(request, timeout=TIMEOUT_S))
            check(False, "auth: a call without the key is refused")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.UNAUTHENTICATED,
                  f"auth: a call without the key is {e.code().name}")
    return channel, call, request_cls, metadata


def check_drain(server, call, request_cls, metadata, prompt):
    """SIGTERM while a stream is running: the stream finishes, a new call is refused with
    UNAVAILABLE, and the server exits 0."""
    request = json_format.ParseDict({"text": prompt}, request_cls())
    stream = call(request, timeout=TIMEOUT_S, metadata=metadata)
    chunks = [next(stream)]
    server.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    try:
        list(call(request, timeout=TIMEOUT_S, metadata=metadata))
        check(False, "drain: a new call after SIGTERM is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNAVAILABLE, f"drain: a new call is {e.code().name}")
    chunks += list(stream)
    text = "".join(c.text for c in chunks)
    check(text == prompt and chunks[-1].finish_reason == "stop",
          f"drain: the running stream finished ({chunks[-1].finish_reason!r}, {len(text)} chars)")
    check(server.wait(timeout=TIMEOUT_S) == 0, "drain: the server exits 0")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", help="test_grpc_server binary to start and stop")
    parser.add_argument("--target", help="host:port of a running server")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--prompt", default="Hello from a reflection-only client")
    parser.add_argument("--reflection", choices=REFLECTION_PACKAGES,
                        help="ask only this reflection version (default: v1, else v1alpha)")
    args = parser.parse_args()
    packages = [args.reflection] if args.reflection else REFLECTION_PACKAGES
    if bool(args.server) == bool(args.target):
        parser.error("give exactly one of --server and --target")

    server = None
    target = args.target
    try:
        if args.server:
            # 20 ms a token: a generation is long enough to send SIGTERM in the middle.
            cmd = [args.server, "--port", "0", "--token-delay-ms", "20"]
            api_key = args.api_key or "client-test-key"
            cmd += ["--api-key", api_key]
            server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            line = server.stdout.readline().strip()
            if not line.startswith("listening on "):
                print(f"FAIL server did not start: {line!r}")
                return 1
            target = line[len("listening on "):]
            _, call, request_cls, metadata = run(target, api_key, args.prompt, True, packages)
            check_drain(server, call, request_cls, metadata, args.prompt)
        else:
            channel, *_ = run(target, args.api_key, args.prompt, False, packages)
            channel.close()
    except (grpc.RpcError, grpc.FutureTimeoutError, RuntimeError, StopIteration) as e:
        check(False, f"unexpected error: {e!r}")
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
    return report()


if __name__ == "__main__":
    sys.exit(main())
