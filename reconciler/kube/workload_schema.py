"""Every object what-if reads, checked against the official OpenAPI schema of its kind.

`kubernetes-validate` ships the Kubernetes project's schemas per version, strict variant included
(unknown fields refused). A typo in a pull request's manifest (`resourcez:`) is otherwise read as
"no requests" and answered "no new node"; `kubectl apply` would warn and drop it, the API server
(fieldValidation=Strict) refuse it. what-if refuses it, naming the file, the line, the object and
the field. Its own type checks (`workload_shape`) run first and keep their wording; this catches
what they do not look at: unknown fields anywhere, and the types and required fields of the rest.
A kind the package has no schema for (a pod-less custom resource) is left to the reader.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping
from datetime import date, datetime
from importlib import resources
from typing import Any

import jsonschema
import referencing

_VERSION_DIR = re.compile(r"^v(?P<minor>\d+\.\d+)\.\d+-local-strict$")


@functools.cache
def schema_root() -> Any:
    """The newest strict schema directory the installed package ships (the version a pull
    request's manifests are most likely written for; older fields stay in newer schemas)."""
    base = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    found = [(d.name, _VERSION_DIR.match(d.name)) for d in base.iterdir()]
    versions = sorted((tuple(int(p) for p in m["minor"].split(".")), name) for name, m in found if m)
    return base / versions[-1][1]


def schema_version() -> str:
    match = _VERSION_DIR.match(schema_root().name)
    return match["minor"] if match else "?"


@functools.cache
def _definitions() -> Any:
    return referencing.Resource.from_contents(json.loads((schema_root() / "_definitions.json").read_text()))


@functools.cache
def _validator(kind: str, api_version: str) -> jsonschema.protocols.Validator | None:
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = schema_root() / f"{kind.lower()}-{group}.json"
    if not re.fullmatch(r"[a-z0-9-]+", f"{kind.lower()}-{group}") or not path.is_file():
        return None
    schema = json.loads(path.read_text())
    registry: Any = referencing.Registry()
    registry = referencing.Resource.from_contents(schema) @ registry  # as kubernetes-validate does
    registry = _definitions() @ registry
    validator: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(schema, registry=registry)
    return validator


def schema_problem(obj: Mapping[str, Any]) -> tuple[list[str | int], str] | None:
    """(path, what is wrong and the fix) of the first problem the official schema finds in `obj`
    (plain JSON values), or None."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return None
    validator = _validator(kind, api_version)
    if validator is None:
        return None
    errors = sorted(validator.iter_errors(_json(obj)), key=lambda e: (len(e.absolute_path), str(e.path)))
    if not errors:
        return None
    error = _deepest(errors[0])
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
        extra = sorted(set(error.instance) - set(known))
        guesses = difflib.get_close_matches(extra[0], known, n=1) if extra else []
        hint = f"did you mean {guesses[0]}?" if guesses else "Kubernetes has no such field here"
        more = f"; also {', '.join(map(repr, extra[1:]))}" if extra[1:] else ""
        return [*path, *extra[:1]], f"unknown field ({hint}){more}"
    if error.validator == "required" and isinstance(error.instance, dict):
        required: Any = error.validator_value
        missing = [str(r) for r in required if r not in error.instance]
        return [*path, *missing[:1]], "missing (the API server requires it)"
    return path, _message(error)


def _deepest(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """Of a oneOf/anyOf failure, the branch error that went furthest (the useful one)."""
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return error


def _message(error: jsonschema.ValidationError) -> str:
    value: Any = error.validator_value
    if error.validator == "type":
        wanted = [w for w in value if w != "null"] if isinstance(value, list) else [value]
        return f"expected {' or '.join(map(str, wanted))}, got {_kind_of(error.instance)}"
    if error.validator == "enum":
        return f"{_short(error.instance)} is not one of {', '.join(map(str, value))}"
    return f"not valid ({error.validator} {_short(value)})"


def _kind_of(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "true or false"}.get(
        type(value), "a number" if isinstance(value, int | float) else "null"
    )


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:60] + "..."


def _json(obj: Any) -> Any:
    """`obj` as kubectl sends it: YAML timestamps as strings (sigs.k8s.io/yaml converts them)."""
    if isinstance(obj, dict):
        return {str(k): _json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_json(v) for v in obj]
    if isinstance(obj, datetime | date):
        return obj.isoformat()
    return obj


def dotted(path: list[str | int]) -> str:
    """`spec.template.spec.containers[0].resources`, as kubectl names a field."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
