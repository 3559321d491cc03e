"""Load a YAML document and check it against one of our JSON Schemas, with errors people can act on.

Shared by the config loader, the manifest reader and `validate`: every problem becomes one line
`file:line: key.path: what is wrong (the fix)`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from reconciler.errors import UserError


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A schema shipped with the package (`config`, `manifest`, `plan`)."""
    text = resources.files("reconciler").joinpath("schemas", f"{name}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def read_yaml(path: Path, label: str | None = None) -> Any:
    """Round-trip load (keeps line numbers); a missing file or bad YAML is a UserError."""
    label = label or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"{label}: file not found (pass --config FILE or set ASG_RECONCILER_CONFIG)"
        ) from None
    except OSError as exc:
        raise UserError(f"{label}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{label}: not a text file (expected UTF-8 YAML)") from None
    return parse_yaml(text, label)


def parse_yaml(text: str, label: str) -> Any:
    try:
        return YAML(typ="rt").load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{label}{line}: not valid YAML: {problem}") from None


def _line_of(document: Any, path: list[str | int]) -> int | None:
    """Line of the deepest key along `path` that exists in the round-trip document."""
    node, line = document, None
    for key in path:
        if isinstance(node, CommentedMap) and key in node:
            line = node.lc.key(key)[0] + 1
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and key < len(node):
            line = node.lc.item(key)[0] + 1
            node = node[key]
        else:
            break
    if line is None and isinstance(document, CommentedMap | CommentedSeq):
        line = document.lc.line + 1
    return line


_DURATION_WORDS = re.compile(r"^\s*([0-9]+)\s*(h|hours?|m|min|mins|minutes?|s|sec|secs|seconds?)\s*$")


def _duration_hint(value: Any) -> str:
    match = _DURATION_WORDS.match(str(value))
    if match:
        return f"use {match[1]}{match[2][0]}"
    if isinstance(value, int | float):
        return f"use {value}s or {value}m"
    return "use Go-style durations such as 30s, 10m, 1h30m"


def _message(error: jsonschema.ValidationError) -> str:
    """One error as `what is wrong (the fix)`, using the schema's `x-hint` where it has one."""
    hint = None
    for candidate in (error, error.parent):
        if candidate is not None and isinstance(candidate.schema, dict) and "x-hint" in candidate.schema:
            hint = candidate.schema["x-hint"]
            break
    value = json.dumps(error.instance, default=str)
    schema: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    validator_value: Any = error.validator_value
    if error.validator == "additionalProperties":
        instance: Any = error.instance
        known_keys = sorted(schema.get("properties", {}))
        extra = sorted(set(instance) - set(known_keys))
        guesses = [m for key in extra for m in difflib.get_close_matches(key, known_keys, n=1)]
        hint = (
            f"did you mean {', '.join(guesses)}?" if guesses else f"known keys here: {', '.join(known_keys)}"
        )
        return f"unknown key {', '.join(map(repr, extra))} ({hint})"
    if error.validator == "required":
        return f"{error.message} (add it)"
    if hint == "duration":
        return f"{value} is not a duration ({_duration_hint(error.instance)})"
    if error.validator == "enum":
        return f"{value} is not one of {', '.join(map(str, validator_value))}"
    if error.validator == "type":
        base = f"{value} is not of type {validator_value}"
        if not hint and validator_value == "boolean":
            hint = "use true or false"
        return f"{base} ({hint})" if hint else base
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        word = "at least" if "inimum" in str(error.validator) else "at most"
        return f"{value} is out of range (use a value {word} {validator_value})"
    if hint:
        return f"{value} is not valid ({hint})"
    return error.message


def _best(errors: Iterator[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    """One error per location, preferring the most specific (oneOf branches collapse to the parent)."""
    chosen: dict[tuple[Any, ...], jsonschema.ValidationError] = {}
    for error in errors:
        key = tuple(error.absolute_path)
        if key not in chosen:
            chosen[key] = error
    return sorted(chosen.values(), key=lambda e: [str(p) for p in e.absolute_path])


def check(document: Any, schema_name: str, label: str) -> list[Problem]:
    """Every schema problem of `document`, each naming file, line, key path and the fix."""
    schema = load_schema(schema_name)
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for error in _best(validator.iter_errors(_plain(document))):
        path = list(error.absolute_path)
        line = _line_of(document, path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            # point at the unknown key itself, not at the mapping holding it
            known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            extra = sorted(set(error.instance) - set(known))
            line = _line_of(document, [*path, extra[0]]) if extra else line
        problems.append(Problem(label, line, ".".join(str(p) for p in path), _message(error)))
    return problems


def _plain(node: Any) -> Any:
    """ruamel's round-trip types as plain JSON types (jsonschema checks `dict`/`list`/`str`)."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


def plain(node: Any) -> Any:
    return _plain(node)


def fill_defaults(document: dict[str, Any], schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A copy of `document` with every `default` of the schema filled in, recursively for objects."""
    result = dict(document)
    for key, sub in schema.get("properties", {}).items():
        sub = _resolve(sub, root)
        if key not in result and "default" in sub:
            result[key] = json.loads(json.dumps(sub["default"]))
        if isinstance(result.get(key), dict) and sub.get("type") == "object":
            result[key] = fill_defaults(result[key], sub, root)
    return result


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not ref:
        return schema
    target: Any = root
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    merged = dict(target)
    merged.update({k: v for k, v in schema.items() if k != "$ref"})
    return merged
