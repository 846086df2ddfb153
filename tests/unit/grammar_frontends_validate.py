#!/usr/bin/env python3
"""`tessera grammar --sample` against independent validators.

For a dozen JSON Schemas (nested objects, bounded arrays, enums, $ref recursion, anyOf,
formats, integer ranges, patterns, additionalProperties schemas, ...) it samples 200
documents each and validates them with the `jsonschema` package (Draft202012Validator with a
FormatChecker for date, time, date-time, uuid and email); regex samples are checked with
Python's re.fullmatch. It also checks the command's exit codes and error messages.

Usage: grammar_frontends_validate.py --tessera build/default/bin/tessera
Exits 77 (skipped) when jsonschema cannot be imported (Debian: python3-jsonschema).
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import uuid

SAMPLES = 200

SCHEMAS = {
    "nested objects": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                    "geo": {
                        "type": "object",
                        "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                        "required": ["lat", "lon"],
                        "additionalProperties": False,
                    },
                },
                "required": ["zip"],
            },
        },
        "required": ["name", "address"],
        "additionalProperties": False,
    },
    "arrays with bounds": {
        "type": "array",
        "items": {
            "type": "array",
            "items": {"type": "integer", "minimum": -5, "maximum": 5},
            "minItems": 2,
            "maxItems": 4,
        },
        "minItems": 1,
        "maxItems": 3,
    },
    "enums": {
        "type": "object",
        "properties": {
            "colour": {"enum": ["red", "green", "blue"]},
            "mixed": {"enum": ["x", 3.5, None, True, {"a": [1, "é"]}]},
            "level": {"type": "integer", "enum": [1, 2, "3"]},
            "fixed": {"const": "always"},
        },
        "required": ["colour", "mixed", "level", "fixed"],
    },
    "$ref recursion": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "maxLength": 8},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3},
                },
                "required": ["label"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    },
    "anyOf": {
        "type": "array",
        "items": {
            "anyOf": [
                {"type": "string", "maxLength": 3},
                {"type": "integer", "exclusiveMinimum": 100},
                {"type": "null"},
                {"type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"]},
            ]
        },
    },
    "formats": {
        "type": "object",
        "properties": {
            "day": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "time"},
            "when": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
            "mail": {"type": "string", "format": "email"},
        },
        "required": ["day", "at", "when", "id", "mail"],
        "additionalProperties": False,
    },
    "integer ranges": {
        "type": "object",
        "properties": {
            "percent": {"type": "integer", "minimum": 0, "maximum": 100},
            "negative": {"type": "integer", "minimum": -1000, "maximum": -10},
            "open": {"type": "integer", "exclusiveMinimum": 7, "exclusiveMaximum": 1000},
            "int32": {"type": "integer", "format": "int32"},
            "big": {"type": "integer", "minimum": 9007199254740993},
        },
        "required": ["percent", "negative", "open", "int32", "big"],
    },
    "patterns": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{2}\\d{3}$"},
            "somewhere": {"type": "string", "pattern": "ab+c"},
            "tag": {"type": "string", "pattern": "^(?:foo|bar)-[a-f0-9]{4}$"},
            "accents": {"type": "string", "pattern": "^é+[^a-z]?$"},
            "quoted": {"type": "string", "pattern": '^"[\\\\n]*"$'},
        },
        "required": ["code", "somewhere", "tag", "accents", "quoted"],
    },
    "additionalProperties schema": {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": {"type": "string", "maxLength": 4},
    },
    "prefixItems": {
        "type": "array",
        "prefixItems": [{"type": "string", "format": "date"}, {"type": "number"}, {"type": "boolean"}],
        "items": False,
        "minItems": 2,
    },
    "allOf and nullable": {
        "$defs": {
            "base": {
                "type": "object",
                "properties": {"id": {"type": "integer", "minimum": 1}},
                "required": ["id"],
            }
        },
        "allOf": [
            {"$ref": "#/$defs/base"},
            {"properties": {"note": {"type": "string", "nullable": True}, "flag": {"type": ["boolean", "null"]}}},
        ],
    },
    "number bounds": {
        "type": "array",
        "items": {
            "anyOf": [
                {"type": "number", "minimum": -2, "exclusiveMaximum": 3},
                {"type": "number"},
            ]
        },
    },
    "openai strict mode": {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "explanation": {"type": "string"},
                        "output": {"type": "string"},
                    },
                    "required": ["explanation", "output"],
                    "additionalProperties": False,
                },
            },
            "final_answer": {"type": "string"},
            "confidence": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        },
        "required": ["steps", "final_answer", "confidence"],
        "additionalProperties": False,
    },
}

# Patterns whose ECMAScript and Python (re.ASCII) readings agree on what they match.
REGEXES = [
    "[A-Z]{2}-\\d{4}",
    "(ab|c)*d?",
    "x(y|z)+?|w{0,2}",
    "[^a-c]\\w\\W",
    "(?:\\d{1,3}\\.){3}\\d{1,3}",
    "\\(\\d+(\\.\\d*)?\\)",
    "[\\u00e0-\\u00ff]+ .\\x41",
    "(a|b?)*c",
]


def run(tessera, *args):
    return subprocess.run([tessera, "grammar", *args], capture_output=True, text=True)


def samples(tessera, *args, seed=1):
    r = run(tessera, *args, "--sample", str(SAMPLES), "--seed", str(seed))
    if r.returncode != 0:
        raise AssertionError(f"tessera grammar {' '.join(args)} failed: {r.stderr}")
    # One JSON string per "\n" (str.splitlines would also split at U+2028 and friends).
    lines = r.stdout.split("\n")[:-1]
    if len(lines) != SAMPLES:
        raise AssertionError(f"expected {SAMPLES} lines, got {len(lines)}")
    return [json.loads(line) for line in lines]


# RFC 3339 section 5.6, checked with the standard library's calendar.
TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))", re.ASCII)


def is_date(s):
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", s, re.ASCII):
        return False
    try:
        datetime.date.fromisoformat(s)
        return True
    except ValueError:
        return False


def is_time(s):
    m = TIME.fullmatch(s)
    if not m:
        return False
    hour, minute, second = int(m[1]), int(m[2]), int(m[3])
    if hour > 23 or minute > 59 or second > 60:
        return False
    return m[6] is None or (int(m[6]) <= 23 and int(m[7]) <= 59)


def is_date_time(s):
    date, sep, time = s.partition("T")
    return sep == "T" and is_date(date) and is_time(time)


def is_uuid(s):
    try:
        uuid.UUID(s)
    except ValueError:
        return False
    return len(s) == 36 and all(s[i] == "-" for i in (8, 13, 18, 23))


# RFC 5321 mailbox with a dot-atom local part, and its length limits.
ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
EMAIL = re.compile(rf"{ATEXT}(\.{ATEXT})*@{LABEL}(\.{LABEL})+", re.ASCII)


def is_email(s):
    return bool(EMAIL.fullmatch(s)) and len(s.split("@")[0]) <= 64 and len(s) <= 254


def format_checker(jsonschema):
    """The five formats checked by the functions above and, for date, uuid and email, also by
    the library's own checks (Debian 12's jsonschema has no RFC 3339 time/date-time check
    without rfc3339-validator, and its "time" is draft 3's %H:%M:%S)."""
    library = jsonschema.FormatChecker()
    checker = jsonschema.FormatChecker(())
    own = {"date": is_date, "time": is_time, "date-time": is_date_time, "uuid": is_uuid,
           "email": is_email}
    for name, check in own.items():
        theirs = library.checkers.get(name) if name in ("date", "uuid", "email") else None

        def both(value, check=check, theirs=theirs):
            if not check(value):
                return False
            if theirs is None:
                return True
            func, raises = theirs
            try:
                return bool(func(value))
            except raises:
                return False

        checker.checks(name)(both)
    return checker


def check_cli(tessera):
    failures = []

    def expect(args, code, stderr_has=None, stdin=None):
        r = subprocess.run([tessera, "grammar", *args], capture_output=True, text=True, input=stdin)
        if r.returncode != code or (stderr_has and stderr_has not in r.stderr):
            failures.append(f"tessera grammar {args}: exit {r.returncode}, stderr {r.stderr!r}; "
                            f"expected exit {code} with {stderr_has!r}")
        return r

    expect([], 2, "give exactly one of")
    expect(["--regex", "a", "--choice", "b"], 2, "give exactly one of")
    expect(["--sample"], 2, "unexpected argument '--sample'")
    expect(["--regex", "a", "--sample", "x"], 2, "--sample needs a count")
    if expect(["--help"], 0).stdout.find("--json-schema FILE") < 0:
        failures.append("--help does not describe --json-schema")
    expect(["--regex", "a)"], 1, "regex at offset 1: unbalanced ')'")
    expect(["--json-schema", "-"], 1,
           "json_schema at /properties/age: unsupported keyword 'multipleOf'",
           stdin='{"properties": {"age": {"type": "integer", "multipleOf": 5}}}')
    expect(["--json-schema", "-"], 1, "is not valid JSON", stdin="{")
    expect(["--json-schema", "/nonexistent/schema.json"], 1, "cannot read /nonexistent/schema.json")
    expect(["--gbnf", "-"], 1, "grammar line 1, column 10: undefined rule 'valeu'",
           stdin="root ::= valeu")
    r = expect(["--gbnf", "-"], 0, stdin='root ::= "a" [0-9]{2}')
    if r.stdout != 'root ::= "a" [0-9]{2}':
        failures.append(f"--gbnf prints the grammar as it is, got {r.stdout!r}")
    r = expect(["--choice", "yes", "--choice", "no\nway", "--sample", "50"], 0)
    if sorted(set(json.loads(line) for line in r.stdout.split("\n")[:-1])) != ["no\nway", "yes"]:
        failures.append(f"--choice samples: {r.stdout!r}")
    r = expect(["--json-object", "--sample", "30", "--seed", "4"], 0)
    for line in r.stdout.split("\n")[:-1]:
        if not isinstance(json.loads(json.loads(line)), dict):
            failures.append(f"--json-object sample is not an object: {line}")
    r1 = expect(["--regex", "[a-z]{3,}", "--sample", "5", "--seed", "9"], 0)
    r2 = expect(["--regex", "[a-z]{3,}", "--sample", "5", "--seed", "9"], 0)
    if r1.stdout != r2.stdout:
        failures.append("the same seed gave different samples")
    r = expect(["--regex", "x{1000}", "--sample", "1", "--max-bytes", "500"], 1, "cannot end within 500 bytes")
    r = expect(["--json-schema", "-", "--max-whitespace", "0"], 0, stdin='{"type": "array"}')
    if "ws" in r.stdout:
        failures.append(f"--max-whitespace 0 still writes whitespace: {r.stdout}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tessera", required=True, help="the tessera binary")
    args = parser.parse_args()
    if not os.access(args.tessera, os.X_OK):
        print(f"SKIP: {args.tessera} is not built")
        return 77

    failures = check_cli(args.tessera)

    for pattern in REGEXES:
        compiled = re.compile(pattern, re.ASCII)
        for s in samples(args.tessera, "--regex", pattern):
            if not compiled.fullmatch(s):
                failures.append(f"regex {pattern!r}: sample {s!r} does not match")

    try:
        import jsonschema
    except ImportError:
        for f in failures:
            print("FAIL:", f)
        print("SKIP: the JSON Schema part needs jsonschema (Debian package python3-jsonschema, "
              "installed by tools/install-deps.sh)")
        return 1 if failures else 77
    checker = format_checker(jsonschema)
    with tempfile.TemporaryDirectory() as tmp:
        for seed, (name, schema) in enumerate(SCHEMAS.items()):
            jsonschema.Draft202012Validator.check_schema(schema)
            validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
            path = os.path.join(tmp, "schema.json")
            with open(path, "w") as f:
                json.dump(schema, f)
            bad = 0
            for text in samples(args.tessera, "--json-schema", path, seed=seed):
                try:
                    doc = json.loads(text)
                except ValueError as e:
                    failures.append(f"{name}: not JSON ({e}): {text!r}")
                    continue
                errors = list(validator.iter_errors(doc))
                if errors:
                    bad += 1
                    if bad <= 3:
                        failures.append(f"{name}: {errors[0].message} in {text!r}")
            print(f"{name}: {SAMPLES} samples, {SAMPLES - bad} valid")

    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
