#!/usr/bin/env python3
"""Forced tool calls (`tessera grammar --tools`) against independent checks.

For each tool-call format (glm45, deepseek_v3, deepseek_v31, hermes, llama3_json, mistral) and each way of
forcing a call (`tool_choice: "required"` with and without parallel calls, a named function),
it samples random sentences of the grammar and reads them back with a parser of the format
written here from the templates' markup (not Tessera's): the whole text must be calls and
nothing else, of an allowed function, one unless parallel calls are allowed, and each call's
arguments must validate against its tool's `parameters` with the `jsonschema` package
(Draft202012Validator, with the format checks of grammar_frontends_validate.py). GLM values
are typed as GLM's template writes them: raw text for a string parameter, JSON otherwise.

Usage: chat_tool_call_grammar_validate.py --tessera build/default/bin/tessera
Exits 77 (skipped) when jsonschema cannot be imported (Debian: python3-jsonschema).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grammar_frontends_validate import format_checker  # noqa: E402

SAMPLES = 60

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "minLength": 1, "maxLength": 30},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "when": {"type": "string", "format": "date-time"},
            },
            "required": ["location", "unit"],
            "additionalProperties": False,
        }}},
    {"type": "function", "function": {
        "name": "create_ticket",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": 40},
                "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
                "owner": {"type": "string", "format": "email"},
                "ref": {"type": "string", "format": "uuid"},
                "due": {"type": "string", "format": "date"},
                "labels": {"type": "array", "items": {"type": "string", "maxLength": 8},
                           "minItems": 1, "maxItems": 3},
                "estimate": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 100},
                                       {"type": "null"}]},
                "parent": {"$ref": "#/$defs/link"},
            },
            "required": ["title", "code", "labels"],
            "additionalProperties": False,
            "$defs": {"link": {"type": "object",
                               "properties": {"id": {"type": "integer", "minimum": 1},
                                              "kind": {"enum": ["blocks", "relates"]}},
                               "required": ["id", "kind"], "additionalProperties": False}},
        }}},
    {"type": "function", "function": {"name": "ping"}},
]

CASES = [  # (function, parallel)
    ("", True), ("", False), ("create_ticket", True), ("get_weather", False)]

FORMATS = ["glm45", "deepseek_v3", "deepseek_v31", "hermes", "llama3_json", "mistral"]

DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
DS_CALLS_END = "<｜tool▁calls▁end｜>"
DS_CALL = re.compile("<｜tool▁call▁begin｜>(.*?)<｜tool▁sep｜>(.*?)<｜tool▁call▁end｜>", re.S)
DS_V3_CALL = re.compile(
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>(.*?)\n```json\n(.*?)\n```<｜tool▁call▁end｜>", re.S)
GLM_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
GLM_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)
HERMES_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


class Malformed(Exception):
    pass


def parameters_of(name):
    for t in TOOLS:
        if t["function"]["name"] == name:
            return t["function"].get("parameters", {"type": "object", "properties": {},
                                                     "additionalProperties": False})
    raise Malformed(f"unknown function {name!r}")


def only(pattern, text):
    """The matches of `pattern`, which must cover `text` apart from whitespace."""
    found = list(pattern.finditer(text))
    rest = pattern.sub("", text)
    if rest.strip():
        raise Malformed(f"text outside the calls: {rest!r}")
    return found


def glm_value(name, key, raw):
    prop = parameters_of(name).get("properties", {}).get(key)
    if prop is None:
        raise Malformed(f"{name}: unknown parameter {key!r}")
    types = prop.get("type")
    types = types if isinstance(types, list) else [types]
    if "string" in types:
        return raw
    return json.loads(raw)


def parse(fmt, text):
    """[(name, arguments)] as the format's template writes calls."""
    if fmt == "glm45":
        calls = []
        for m in only(GLM_CALL, text):
            body = m[1]
            cut = min(i for i in (body.find("\n"), body.find("<arg_key>"), len(body)) if i >= 0)
            name = body[:cut].strip()
            pairs = only(GLM_PAIR, body[cut:])
            calls.append((name, {p[1]: glm_value(name, p[1], p[2]) for p in pairs}))
        return calls
    if fmt in ("deepseek_v3", "deepseek_v31"):
        if not (text.startswith(DS_CALLS_BEGIN) and text.endswith(DS_CALLS_END)):
            raise Malformed("not wrapped in the calls markers")
        inner = text[len(DS_CALLS_BEGIN):-len(DS_CALLS_END)]
        return [(m[1], json.loads(m[2]))
                for m in only(DS_V3_CALL if fmt == "deepseek_v3" else DS_CALL, inner)]
    if fmt == "hermes":
        calls = []
        for m in only(HERMES_CALL, text):
            j = json.loads(m[1])
            if set(j) != {"name", "arguments"}:
                raise Malformed(f"keys {sorted(j)}")
            calls.append((j["name"], j["arguments"]))
        return calls
    if fmt == "llama3_json":
        j = json.loads(text)
        if set(j) != {"name", "parameters"}:
            raise Malformed(f"keys {sorted(j)}")
        return [(j["name"], j["parameters"])]
    if fmt == "mistral":
        if not text.startswith("[TOOL_CALLS]"):
            raise Malformed("no [TOOL_CALLS]")
        calls = []
        for j in json.loads(text[len("[TOOL_CALLS]"):]):
            if set(j) != {"name", "arguments", "id"}:
                raise Malformed(f"keys {sorted(j)}")
            if not re.fullmatch(r"[A-Za-z0-9]{9}", j["id"]):
                raise Malformed(f"id {j['id']!r}")
            calls.append((j["name"], j["arguments"]))
        return calls
    raise ValueError(fmt)


def sample(tessera, tools_file, fmt, function, parallel, seed):
    args = [tessera, "grammar", "--tools", tools_file, "--tool-format", fmt,
            "--sample", str(SAMPLES), "--seed", str(seed), "--max-bytes", "8192"]
    if function:
        args += ["--tool-function", function]
    if not parallel:
        args.append("--no-parallel-tool-calls")
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed: {r.stderr}")
    return [json.loads(line) for line in r.stdout.split("\n")[:-1]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", required=True, help="the tessera binary")
    args = parser.parse_args()
    if not os.access(args.tessera, os.X_OK):
        print(f"SKIP: {args.tessera} is not built")
        return 77
    try:
        import jsonschema
    except ImportError:
        print("SKIP: needs jsonschema (Debian package python3-jsonschema)")
        return 77
    checker = format_checker(jsonschema)
    validators = {t["function"]["name"]: jsonschema.Draft202012Validator(
        parameters_of(t["function"]["name"]), format_checker=checker) for t in TOOLS}
    failures = []
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        tools_file = os.path.join(tmp, "tools.json")
        with open(tools_file, "w") as f:
            json.dump(TOOLS, f)
        for seed, fmt in enumerate(FORMATS):
            for function, parallel in CASES:
                names = set()
                for text in sample(args.tessera, tools_file, fmt, function, parallel, seed):
                    where = f"{fmt} function={function!r} parallel={parallel}: {text!r}"
                    try:
                        calls = parse(fmt, text)
                    except (Malformed, ValueError) as e:
                        failures.append(f"{where}: {e}")
                        continue
                    if not calls or (not parallel and len(calls) != 1):
                        failures.append(f"{where}: {len(calls)} calls")
                    for name, arguments in calls:
                        names.add(name)
                        if function and name != function:
                            failures.append(f"{where}: calls {name}")
                            continue
                        if name not in validators:
                            failures.append(f"{where}: unknown function {name}")
                            continue
                        for error in validators[name].iter_errors(arguments):
                            failures.append(f"{where}: {name} arguments {arguments}: "
                                            f"{error.message}")
                        checked += 1
                expected = {function} if function else {t["function"]["name"] for t in TOOLS}
                if names != expected:
                    failures.append(f"{fmt} function={function!r}: the samples call {names}, "
                                    f"expected {expected}")
    for f in failures[:40]:
        print("FAIL:", f)
    print(f"{checked} calls checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
