#!/usr/bin/env python3
"""Validates JSON files against a JSON Schema (draft 2020-12).

Usage: tools/validate_schema.py [--expect-invalid] [--max-errors N] SCHEMA FILE...

  tools/validate_schema.py traces/trace-v1.schema.json traces/tiny-ws2.json
  tools/validate_schema.py reports/report-v1.schema.json tests/golden/*.json

Prints one line per FILE: "FILE: ok", or "FILE: FAIL: " followed by the first errors, each with
the JSON path of the offending value ($.policies[0].peak.phase). Besides the schema it rejects
what Python's json module would let through but bucketsim's readers do not: a key given twice
in one object, and NaN / Infinity literals.

With --expect-invalid the sense is reversed, for negative tests: a FILE passes when it is valid
JSON that the schema rejects ("FILE: rejected as expected: <errors>").

Exit status: 0 every FILE passed, 1 some FILE failed (invalid, unreadable or not JSON),
2 bad usage or an unusable SCHEMA, 3 the jsonschema package is missing.

Needs Python 3 and the `jsonschema` package (4.0 or later; Debian: python3-jsonschema). When
the python3 that runs it lacks the package and /usr/bin/python3 is another interpreter (a pyenv
or virtualenv python3 first on PATH), the script re-runs itself with /usr/bin/python3.
"""

import argparse
import json
import os
import sys

SYSTEM_PYTHON = "/usr/bin/python3"
REEXEC_GUARD = "BUCKETSIM_VALIDATE_SCHEMA_REEXEC"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_JSONSCHEMA = 0, 1, 2, 3
MAX_MESSAGE = 240


def import_validator():
    """Returns (Draft202012Validator, best_match), re-executing under the system python or
    exiting with EXIT_NO_JSONSCHEMA when the package is not there."""
    try:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import best_match
        return Draft202012Validator, best_match
    except ImportError as error:
        reason = str(error)
    if (not os.environ.get(REEXEC_GUARD) and os.path.exists(SYSTEM_PYTHON)
            and os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON)):
        os.environ[REEXEC_GUARD] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    sys.stderr.write(
        f"validate_schema: the Python package 'jsonschema' (4.0 or later, for draft 2020-12) is "
        f"not available to {sys.executable} ({reason}).\n"
        f"validate_schema: install it with:  apt-get install python3-jsonschema  "
        f"(tools/setup.sh does this) and run the script with /usr/bin/python3\n")
    sys.exit(EXIT_NO_JSONSCHEMA)


class InputError(Exception):
    """The file cannot be read or is not JSON as bucketsim reads it."""


def _reject_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise InputError(f"key '{key}' is given twice in one object")
        obj[key] = value
    return obj


def _reject_constant(name):
    raise InputError(f"'{name}' is not JSON (JSON has no NaN or Infinity)")


def load_json(path):
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8: {error}") from None
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicates,
                          parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise InputError(f"not JSON: {error}") from None


def json_path(path_elements):
    out = "$"
    for element in path_elements:
        if isinstance(element, int):
            out += f"[{element}]"
        elif element.isidentifier():
            out += f".{element}"
        else:
            out += "[" + json.dumps(element) + "]"
    return out


def shorten(text):
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


def explain(error, best_match):
    """The most useful errors behind `error`. For oneOf/anyOf (a trace event's kind) the
    branches whose `const` discriminator did not match are dropped, so an alloc event with a bad
    field reports that field, not "is not valid under any of the given schemas"."""
    if error.validator not in ("oneOf", "anyOf") or not error.context:
        return [error]
    branches = {}
    for sub in error.context:
        branches.setdefault(sub.schema_path[0] if sub.schema_path else None, []).append(sub)
    matching = [subs for subs in branches.values()
                if not any(sub.validator == "const" for sub in subs)]
    if len(matching) == 1:
        found = []
        for sub in matching[0]:
            found.extend(explain(sub, best_match))
        return found
    return [best_match(error.context) or error]


def describe(error):
    return f"{json_path(error.absolute_path)}: {shorten(error.message)}"


def schema_errors(validator, document, best_match, limit):
    messages = []
    for error in validator.iter_errors(document):
        for detail in explain(error, best_match):
            messages.append(describe(detail))
    total = len(messages)
    shown = messages[:limit]
    if total > limit:
        shown.append(f"... and {total - limit} more")
    return total, shown


def main(argv):
    parser = argparse.ArgumentParser(
        prog="validate_schema.py",
        description="Validate JSON files against a JSON Schema (draft 2020-12).")
    parser.add_argument("schema", metavar="SCHEMA")
    parser.add_argument("files", metavar="FILE", nargs="+")
    parser.add_argument("--expect-invalid", action="store_true",
                        help="pass only when every FILE is valid JSON the schema rejects")
    parser.add_argument("--max-errors", type=int, default=3, metavar="N",
                        help="errors shown per file (default 3)")
    args = parser.parse_args(argv)
    if args.max_errors < 1:
        parser.error("--max-errors must be at least 1")

    Validator, best_match = import_validator()
    try:
        schema = load_json(args.schema)
        Validator.check_schema(schema)
    except InputError as error:
        sys.stderr.write(f"validate_schema: schema {args.schema}: {error}\n")
        return EXIT_USAGE
    except Exception as error:  # jsonschema.exceptions.SchemaError
        sys.stderr.write(f"validate_schema: schema {args.schema} is not a valid draft 2020-12 "
                         f"schema: {shorten(str(getattr(error, 'message', error)))}\n")
        return EXIT_USAGE
    validator = Validator(schema)

    failed = 0
    for path in args.files:
        try:
            document = load_json(path)
        except InputError as error:
            print(f"{path}: FAIL: {error}")
            failed += 1
            continue
        total, shown = schema_errors(validator, document, best_match, args.max_errors)
        if args.expect_invalid:
            if total:
                print(f"{path}: rejected as expected: " + "; ".join(shown))
            else:
                print(f"{path}: FAIL: valid, but it was expected to be rejected")
                failed += 1
        elif total:
            print(f"{path}: FAIL: {total} error(s): " + "; ".join(shown))
            failed += 1
        else:
            print(f"{path}: ok")
    sys.stdout.flush()
    return EXIT_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
