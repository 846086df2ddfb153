#!/usr/bin/python3
"""Tools, tool calls and reasoning in gRPC Chat, from a client that knows only reflection.

Like grpc_reflection_client.py (whose reflection client it uses), it holds no .proto: the
message classes come from the server's descriptors and requests are JSON dicts, as grpcurl -d
writes them. The truth is independent of Tessera: json.loads and python3-jsonschema (Debian's,
draft 2020-12 with its format checker) on what the chunks carry.

Two modes, against a running tesserad (tesserad_harness.py starts one):
  tools      a template that writes tool calls (--chat-template glm4): describe shows the new
             fields with their comments; named forced calls (tool_choice_function) at
             temperature 1.0 stream exactly one call of that function, its pieces in the
             chunks' tool_calls (assembled by index, as OpenAI clients do), whose arguments
             validate against the tool's schema, finish_reason
             "tool_calls"; "required" without parallel calls gives one valid call; a
             conversation with the assistant's tool_calls and the tool's result renders (more
             prompt tokens than without the calls) and continues; bad fields are
             INVALID_ARGUMENT naming them; "auto" requests end normally with JSON arguments.
  reasoning  a template whose generation prompt opens <think> (think_template.jinja): the
             chunks carry reasoning_content (no text), usage.reasoning_tokens equals
             completion_tokens; chat_template_kwargs_json {"enable_thinking": false} turns
             it off.

  grpc_tool_calls_client.py --target 127.0.0.1:50051 [--api-key KEY] --mode tools|reasoning
      [--forced N] [--transcript]

Exit 0 when every check passed, 1 otherwise, 77 when python3-grpcio or python3-jsonschema is
missing (skip).
"""

import argparse
import concurrent.futures
import json
import sys

from check_tally import check, report  # beside this script

try:
    import grpc
    import jsonschema
    from google.protobuf import json_format, message_factory
    from grpc_reflection_client import REFLECTION_PACKAGES, ReflectionClient
except ImportError as e:  # pragma: no cover - environment without the Debian packages
    print(f"SKIP: {e} (install python3-grpcio python3-protobuf python3-jsonschema)")
    sys.exit(77)

TIMEOUT_S = 300
CONCURRENCY = 8

# Parameters a random model can finish: strings and arrays bounded (as tool_calls_test.mjs).
SCHEMAS = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 16},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    "create_event": {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 20},
            "date": {"type": "string", "format": "date"},
            "attendees": {"type": "array", "items": {"type": "string", "format": "email"},
                          "maxItems": 2},
            "priority": {"type": "integer", "minimum": 0, "maximum": 3},
            "private": {"type": "boolean"},
        },
        "required": ["title", "date", "priority"],
        "additionalProperties": False,
    },
}
TOOLS = [{"type": "function",
          "function": {"name": name, "description": f"The {name.replace('_', ' ')} tool",
                       "parametersJson": json.dumps(schema)}}
         for name, schema in SCHEMAS.items()]
VALIDATORS = {name: jsonschema.Draft202012Validator(
    schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for name, schema in SCHEMAS.items()}

NEW_FIELDS = {
    "tessera.v1.ChatRequest": ["tools", "tool_choice", "tool_choice_function",
                               "parallel_tool_calls", "chat_template_kwargs_json"],
    "tessera.v1.ChatMessage": ["tool_calls", "tool_call_id", "name", "reasoning_content"],
    "tessera.v1.GenerateResponse": ["reasoning_content", "tool_calls"],
    "tessera.v1.Usage": ["reasoning_tokens"],
    "tessera.v1.Tool": ["type", "function"],
    "tessera.v1.FunctionDefinition": ["name", "description", "parameters_json"],
    "tessera.v1.ToolCall": ["id", "type", "function"],
    "tessera.v1.FunctionCall": ["name", "arguments"],
    "tessera.v1.ToolCallDelta": ["index", "id", "name", "arguments"],
}


class ChatClient:
    def __init__(self, target, api_key, packages):
        self.channel = grpc.insecure_channel(target)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.reflection = ReflectionClient(self.channel, packages)
        self.pool, self.files = self.reflection.pool_for_symbol("tessera.v1.Inference")
        factory = message_factory.MessageFactory(self.pool)
        self.request_cls = factory.GetPrototype(
            self.pool.FindMessageTypeByName("tessera.v1.ChatRequest"))
        response_cls = factory.GetPrototype(
            self.pool.FindMessageTypeByName("tessera.v1.GenerateResponse"))
        self.call = self.channel.unary_stream(
            "/tessera.v1.Inference/Chat", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_cls.FromString)
        self.metadata = [("authorization", f"Bearer {api_key}")] if api_key else None

    def chat(self, body):
        """The chunks of one Chat call whose request is `body` (grpcurl's JSON)."""
        request = json_format.ParseDict(body, self.request_cls())
        return list(self.call(request, timeout=TIMEOUT_S, metadata=self.metadata))

    def error(self, body):
        """The (code name, details) a Chat call that should fail ends with."""
        try:
            self.chat(body)
            return ("OK", "")
        except grpc.RpcError as e:
            return (e.code().name, e.details())


class Call:
    """A tool call assembled from its pieces, as an OpenAI client assembles delta.tool_calls."""

    def __init__(self, first):
        self.index, self.id, self.name = first.index, first.id, first.name
        self.arguments = ""
        self.pieces = 0
        self.chunks = set()  # the chunks its pieces came in
        self.misplaced = []  # what a later piece carried that belongs on the first

    def add(self, piece, chunk_number):
        if self.pieces and (piece.id or piece.name):
            self.misplaced.append(f"piece {self.pieces} repeats id/name")
        self.arguments += piece.arguments
        self.pieces += 1
        self.chunks.add(chunk_number)


def assemble(chunks):
    calls = {}
    for n, chunk in enumerate(chunks):
        for piece in chunk.tool_calls:
            calls.setdefault(piece.index, Call(piece)).add(piece, n)
    return [calls[i] for i in sorted(calls)]


def collect(chunks):
    """The output a client assembles from the chunks."""
    calls = assemble(chunks)
    return {
        "text": "".join(c.text for c in chunks),
        "reasoning": "".join(c.reasoning_content for c in chunks),
        "calls": calls,
        "finish": chunks[-1].finish_reason if chunks else "",
        "usage": chunks[-1].usage if chunks else None,
        "finish_only_last": all(not c.finish_reason for c in chunks[:-1]),
    }


def call_problems(call, allowed):
    """What is wrong with one streamed call (empty when it is valid)."""
    problems = list(call.misplaced)
    if call.name not in allowed:
        problems.append(f"calls {call.name!r}, expected one of {allowed}")
        return problems
    if not call.id:
        problems.append("no id")
    try:
        args = json.loads(call.arguments)
    except ValueError as e:
        return problems + [f"arguments are not JSON ({e}): {call.arguments!r}"]
    errors = [e.message for e in VALIDATORS[call.name].iter_errors(args)]
    if errors:
        problems.append(f"arguments {call.arguments} break the schema: {errors}")
    return problems


def check_describe(client):
    messages = {m: client.pool.FindMessageTypeByName(m) for m in NEW_FIELDS}
    for name, fields in NEW_FIELDS.items():
        have = set(messages[name].fields_by_name)
        check(set(fields) <= have, f"describe: {name} has {', '.join(fields)}")
    chat = messages["tessera.v1.ChatRequest"]
    check(chat.fields_by_name["tools"].message_type.full_name == "tessera.v1.Tool" and
          chat.fields_by_name["parallel_tool_calls"].has_presence,
          "describe: ChatRequest.tools is a list of Tool, parallel_tool_calls optional")
    if client.reflection.package == "grpc.reflection.v1":
        comments = [loc.leading_comments for fd in client.files.values()
                    for loc in fd.source_code_info.location if loc.leading_comments]
        for phrase in ("Forces exactly one call of this function", "reasoning text generated",
                       "JSON Schema object in JSON text", "reasoning_tokens"):
            check(any(phrase in c for c in comments),
                  f"describe: the new fields are documented ({phrase!r})")


def forced_body(i, name):
    return {"messages": [{"role": "user", "content": f"Please use {name} ({i})."}],
            "tools": TOOLS, "toolChoiceFunction": name,
            "sampling": {"temperature": 1.0, "seed": str(100 + i)},
            "options": {"maxTokens": 600}}


def check_forced(client, count):
    names = list(SCHEMAS)
    jobs = [(i, names[i % len(names)]) for i in range(count)]
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(lambda job: (job, collect(client.chat(forced_body(*job)))), jobs))
    bad = []
    distinct = set()
    streamed = 0  # calls whose pieces came in more than one chunk
    for (i, name), out in results:
        problems = []
        if len(out["calls"]) != 1:
            problems.append(f"{len(out['calls'])} calls")
        else:
            problems += call_problems(out["calls"][0], [name])
            distinct.add(out["calls"][0].arguments)
            streamed += len(out["calls"][0].chunks) > 1
        if out["finish"] != "tool_calls":
            problems.append(f"finish_reason {out['finish']!r}")
        if not out["finish_only_last"]:
            problems.append("finish_reason before the last chunk")
        if out["text"].strip():
            problems.append(f"text {out['text']!r}")
        if problems:
            bad.append(f"request {i} ({name}): " + "; ".join(problems))
    for b in bad[:5]:
        print("  ", b)
    check(not bad, f"forced: {count} named calls at temperature 1.0, each one streamed call in "
                   f"tool_calls valid by jsonschema, finish_reason tool_calls ({len(bad)} bad)")
    check(len(distinct) > count // 2, f"forced: {len(distinct)} distinct argument sets")
    # A forced call streams its arguments as they are generated (the client reads as fast as
    # they come, so most calls span several chunks).
    check(streamed > 0, f"forced: {streamed} of {count} calls arrived in pieces over several "
                        "chunks, assembled by index")


def check_required(client):
    bodies = [{"messages": [{"role": "user", "content": f"Do something useful ({i})."}],
               "tools": TOOLS, "toolChoice": "required", "parallelToolCalls": False,
               "sampling": {"temperature": 1.0, "seed": str(300 + i)},
               "options": {"maxTokens": 600}} for i in range(8)]
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        outs = list(pool.map(lambda b: collect(client.chat(b)), bodies))
    ok = all(len(o["calls"]) == 1 and not call_problems(o["calls"][0], list(SCHEMAS)) and
             o["finish"] == "tool_calls" for o in outs)
    check(ok, "required: parallel_tool_calls false gives exactly one valid call "
              f"({[len(o['calls']) for o in outs]} calls)")


def check_conversation(client):
    first_body = forced_body(0, "get_weather")
    first_body["messages"][0]["content"] = "What is the weather in Oslo?"
    first = collect(client.chat(first_body))
    if not check(len(first["calls"]) == 1, "conversation: the first turn calls get_weather"):
        return
    call = first["calls"][0]
    assistant = {"role": "assistant",
                 "toolCalls": [{"id": call.id, "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments}}]}
    tool = {"role": "tool", "toolCallId": call.id, "name": call.name,
            "content": '{"temperature": 21}'}
    body = {"messages": first_body["messages"] + [assistant, tool], "tools": TOOLS,
            "sampling": {"temperature": 1.0, "seed": "8"}, "options": {"maxTokens": 24}}
    second = collect(client.chat(body))
    check(second["finish"] in ("stop", "length", "tool_calls") and second["usage"] is not None and
          second["usage"].prompt_tokens > first["usage"].prompt_tokens,
          f"conversation: the call and its result are sent back and generation continues "
          f"(prompt_tokens {first['usage'].prompt_tokens} -> {second['usage'].prompt_tokens}, "
          f"{second['finish']})")
    # The template writes the call: without it the same conversation is shorter.
    without = json.loads(json.dumps(body))
    without["messages"][1] = {"role": "assistant", "content": ""}
    shorter = collect(client.chat(without))
    check(shorter["usage"].prompt_tokens < second["usage"].prompt_tokens,
          f"conversation: the assistant's tool_calls reach the template "
          f"({shorter['usage'].prompt_tokens} prompt tokens without, "
          f"{second['usage'].prompt_tokens} with)")


def check_errors(client):
    base = {"messages": [{"role": "user", "content": "x"}], "tools": TOOLS,
            "options": {"maxTokens": 2}}

    def with_(**edit):
        body = json.loads(json.dumps(base))
        body.update(edit)
        return body

    bad_schema = json.loads(json.dumps(TOOLS))
    bad_schema[1]["function"]["parametersJson"] = '{"type": "object",'
    cases = [
        (with_(tools=bad_schema), "tools[1].function.parameters_json"),
        (with_(toolChoiceFunction="launch_rocket"), "tool_choice_function"),
        (with_(toolChoice="sometimes"), "tool_choice"),
        (with_(chatTemplateKwargsJson="[1]"), "chat_template_kwargs_json"),
        (with_(messages=[{"role": "user", "content": "x"},
                         {"role": "assistant", "toolCalls": [
                             {"id": "c", "function": {"name": "get_weather",
                                                      "arguments": "{city: Oslo}"}}]}]),
         "messages[1].tool_calls[0].function.arguments"),
        (with_(toolChoiceFunction="get_weather",
               options={"structuredOutput": {"jsonObject": True}}), "tool_choice"),
    ]
    for body, field in cases:
        code, details = client.error(body)
        check(code == "INVALID_ARGUMENT" and details.startswith(field),
              f"errors: {field} -> {code}: {details}")


def check_auto(client, count):
    bodies = [{"messages": [{"role": "user", "content": f"Maybe call a tool ({i})."}],
               "tools": TOOLS, "sampling": {"temperature": 1.0, "seed": str(500 + i)},
               "options": {"maxTokens": 48}} for i in range(count)]
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        outs = list(pool.map(lambda b: collect(client.chat(b)), bodies))
    calls = [c for o in outs for c in o["calls"]]

    def is_object(text):
        try:
            return isinstance(json.loads(text), dict)
        except ValueError:
            return False

    check(all(o["finish"] in ("stop", "length", "tool_calls") for o in outs) and
          all(c.name and c.id and is_object(c.arguments) for c in calls) and
          all(o["usage"].completion_tokens > 0 for o in outs),
          f"auto: {count} requests end normally, {len(calls)} calls with JSON object arguments")


def transcript(client):
    """One forced call as grpcurl sends it, then its chunks (one line each)."""
    schema = {"type": "object",
              "properties": {"city": {"type": "string", "maxLength": 12},
                             "unit": {"type": "string", "enum": ["c", "f"]}},
              "required": ["city", "unit"]}
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [{"function": {"name": "get_weather",
                                    "parameters_json": json.dumps(schema)}}],
            "tool_choice_function": "get_weather",
            "sampling": {"temperature": 1.0, "seed": "7"}, "options": {"max_tokens": 200}}
    print("$ grpcurl -plaintext -d '" + json.dumps(body) + "' \\\n"
          "    ADDRESS tessera.v1.Inference/Chat")
    for chunk in client.chat(body):
        print(json.dumps(json_format.MessageToDict(chunk)))


def check_reasoning(client):
    body = {"messages": [{"role": "user", "content": "Think about it."}],
            "sampling": {"temperature": 1.0, "seed": "11"},
            "options": {"maxTokens": 32, "ignoreEos": True}}
    out = collect(client.chat(body))
    usage = out["usage"]
    check(out["reasoning"] and not out["text"],
          f"reasoning: the chunks carry reasoning_content ({len(out['reasoning'])} chars), "
          f"no text")
    check(usage.completion_tokens == 32 and usage.reasoning_tokens == usage.completion_tokens,
          f"reasoning: usage.reasoning_tokens {usage.reasoning_tokens} == completion_tokens "
          f"{usage.completion_tokens}")
    again = collect(client.chat(body))
    check(again["reasoning"] == out["reasoning"], "reasoning: the same seed, the same reasoning")
    body["chatTemplateKwargsJson"] = '{"enable_thinking": false}'
    off = collect(client.chat(body))
    check(not off["reasoning"] and off["usage"].reasoning_tokens == 0 and
          off["usage"].completion_tokens == 32,
          f"reasoning: enable_thinking false through chat_template_kwargs_json gives none "
          f"(reasoning_tokens {off['usage'].reasoning_tokens}, {len(off['text'])} chars of text)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="host:port of a running tesserad")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--mode", choices=["tools", "reasoning"], required=True)
    parser.add_argument("--forced", type=int, default=50, help="named forced calls to check")
    parser.add_argument("--auto", type=int, default=50, help="'auto' requests to check")
    parser.add_argument("--transcript", action="store_true",
                        help="print one forced call's request and its chunks (one line each)")
    args = parser.parse_args()
    try:
        client = ChatClient(args.target, args.api_key, REFLECTION_PACKAGES)
        print("reflection:", client.reflection.package)
        if args.transcript:
            transcript(client)
            return 0
        check_describe(client)
        if args.mode == "tools":
            check_forced(client, args.forced)
            check_required(client)
            check_conversation(client)
            check_errors(client)
            check_auto(client, args.auto)
        else:
            check_reasoning(client)
        client.channel.close()
    except (grpc.RpcError, grpc.FutureTimeoutError, RuntimeError) as e:
        check(False, f"unexpected error: {e!r}")
    return report()


if __name__ == "__main__":
    sys.exit(main())
