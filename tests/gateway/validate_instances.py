#!/usr/bin/env python3
"""Validates structured outputs against their JSON schemas with a real validator.

Usage: validate_instances.py FILE.jsonl

Each line of FILE is {"schema": <schema>, "instance_text": <text the server wrote>}.
A line fails when its text does not parse as JSON (strictly: no NaN/Infinity, no
duplicate keys) or when python3-jsonschema's Draft 2020-12 validator (prefixItems
is 2020-12) finds an error. Prints every failure (schema, instance, error) and
exits 1 on any, 0 otherwise; 2 when jsonschema cannot be imported; 3 on bad input.

Formats: Debian's python3-jsonschema 4.10 with Draft202012Validator.FORMAT_CHECKER
checks `date` (datetime.date.fromisoformat), `uuid` (uuid.UUID and the hyphens)
and `email` (only that it holds an "@"); it checks `time` and `date-time` only
when the optional rfc3339-validator package is installed, which Debian 12 does
not ship. (The generic FormatChecker() would be wrong here: its `time` is
Draft 3's HH:MM:SS and refuses RFC 3339's offset.) So every format the gateway
supports is also checked below by hand, strictly per RFC 3339 / RFC 4122, whatever
the installed validator does.
"""

import datetime
import json
import re
import sys
import uuid

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError as e:  # the test skips (or fails under CI=true) on exit code 2
    print(f"jsonschema is not importable: {e}")
    sys.exit(2)

# RFC 3339 section 5.6: full-time = partial-time time-offset.
TIME_RE = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")
DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# A plain addr-spec: local@domain, a dot-atom local part and a dotted host name.
EMAIL_RE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
                      r"@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+")


def strict_date(s):
    if not DATE_RE.fullmatch(s):
        return "not YYYY-MM-DD"
    try:
        datetime.date.fromisoformat(s)  # rejects 2023-02-30, 2023-04-31, 2023-02-29
    except ValueError as e:
        return f"not a calendar date ({e})"
    return None


def strict_time(s):
    return None if TIME_RE.fullmatch(s) else "not an RFC 3339 full-time (HH:MM:SS[.f](Z|+HH:MM))"


def strict_date_time(s):
    parts = re.split(r"[Tt]", s, maxsplit=1)
    if len(parts) != 2:
        return "no 'T' between date and time"
    return strict_date(parts[0]) or strict_time(parts[1])


def strict_uuid(s):
    if not UUID_RE.fullmatch(s):
        return "not 8-4-4-4-12 hex digits"
    uuid.UUID(s)
    return None


def strict_email(s):
    if len(s.split("@")[0]) > 64 or not EMAIL_RE.fullmatch(s):
        return "not a plain addr-spec local@host.domain"
    return None


STRICT_FORMATS = {"date": strict_date, "time": strict_time, "date-time": strict_date_time,
                  "uuid": strict_uuid, "email": strict_email}


def format_errors(schema, instance, root, path="$"):
    """Our own strict format checks: walks the instance beside the schema
    (following properties, items, prefixItems, $ref, anyOf/allOf branches) and
    returns the errors of every string whose schema names a format."""
    errors = []
    if not isinstance(schema, dict):
        return errors
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref == "#":
            target = root
        elif ref.startswith("#/"):
            target = root
            for part in ref[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
        else:
            return [f"{path}: cannot follow $ref {ref!r}"]
        errors += format_errors(target, instance, root, path)
    for branch in schema.get("allOf", []):
        errors += format_errors(branch, instance, root, path)
    if "anyOf" in schema:
        # The instance must pass the formats of at least one branch it validates against.
        ok = False
        branch_errors = []
        for branch in schema["anyOf"]:
            if not Draft202012Validator({**branch, "$defs": root.get("$defs", {}), "definitions": root.get("definitions", {})}).is_valid(instance):
                continue
            e = format_errors(branch, instance, root, path)
            if not e:
                ok = True
                break
            branch_errors += e
        if not ok:
            errors += branch_errors or [f"{path}: matches no anyOf branch"]
    if isinstance(instance, str) and "format" in schema and schema["format"] in STRICT_FORMATS:
        why = STRICT_FORMATS[schema["format"]](instance)
        if why:
            errors.append(f"{path}: {instance!r} is not a valid {schema['format']}: {why}")
    if isinstance(instance, dict):
        props = schema.get("properties", {})
        for key, value in instance.items():
            if key in props:
                errors += format_errors(props[key], value, root, f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += format_errors(schema["additionalProperties"], value, root, f"{path}.{key}")
    if isinstance(instance, list):
        prefix = schema.get("prefixItems", [])
        for i, value in enumerate(instance):
            sub = prefix[i] if i < len(prefix) else schema.get("items")
            errors += format_errors(sub, value, root, f"{path}[{i}]")
    return errors


def no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"duplicate object keys {dup}")
    return dict(pairs)


def no_constants(name):
    raise ValueError(f"{name} is not JSON")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 3
    checker = Draft202012Validator.FORMAT_CHECKER
    lines = failures = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            lines += 1
            try:
                case = json.loads(line)
                schema, text = case["schema"], case["instance_text"]
            except (ValueError, KeyError) as e:
                print(f"line {n}: not a {{schema, instance_text}} record: {e}")
                return 3
            problems = []
            try:
                instance = json.loads(text, object_pairs_hook=no_duplicate_keys, parse_constant=no_constants)
            except ValueError as e:
                problems.append(f"does not parse as JSON: {e}")
            else:
                try:
                    Draft202012Validator.check_schema(schema)
                except jsonschema.exceptions.SchemaError as e:
                    problems.append(f"the schema itself is invalid: {e.message}")
                else:
                    validator = Draft202012Validator(schema, format_checker=checker)
                    for err in validator.iter_errors(instance):
                        problems.append(f"at {err.json_path}: {err.message}")
                    problems += format_errors(schema, instance, schema)
            if problems:
                failures += 1
                print(f"FAIL line {n}\n  schema:   {json.dumps(schema)}\n  instance: {text}")
                for p in problems:
                    print(f"  error:    {p}")
    try:
        from importlib.metadata import version
        jsonschema_version = version("jsonschema")
    except Exception:  # noqa: BLE001 - only for the summary line
        jsonschema_version = "?"
    print(f"validate_instances: {lines - failures} of {lines} instances valid "
          f"(jsonschema {jsonschema_version}, {sys.executable})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
