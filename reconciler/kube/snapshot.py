"""Cluster state from what kubectl printed, instead of the live API (`--snapshot FILE`).

Accepted, so users can feed whatever they have:
- a `kubectl get a,b -o json` List (items carry `kind`);
- typed lists (`NodeList`, `PodList`, ...) whose items carry no `kind`;
- a stream of JSON documents back to back, as `kubectl cluster-info dump` prints them;
- a YAML stream (`---` separated), as `kubectl get -o yaml` prints;
- a directory, as `kubectl cluster-info dump --output-directory` writes it (every .json/.yaml in it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from reconciler.errors import UserError
from reconciler.kube.state import StateBuilder
from reconciler.model import ClusterState

_SUFFIXES = (".json", ".yaml", ".yml")


def read_snapshot(path: Path, now: datetime) -> ClusterState:
    builder = StateBuilder()
    files = _files(path)
    if not files:
        raise UserError(f"{path}: no .json or .yaml files in this directory (pass a kubectl dump)")
    found = 0
    for file in files:
        for kind, raw in _objects(file):
            try:
                builder.add(kind, raw)
            except UserError as exc:
                raise UserError(f"{file}: {exc}") from None
            found += 1
    if found == 0:
        raise UserError(f"{path}: no Kubernetes objects found (expected kubectl -o json or -o yaml output)")
    return builder.build(now)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
    if not path.exists():
        raise UserError(
            f"{path}: snapshot file not found (create one with kubectl get nodes,pods,... -o json)"
        )
    return [path]


def _documents(file: Path) -> Iterator[Any]:
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise UserError(f"{file}: cannot read: {exc.strerror}") from None
    stripped = data.lstrip()
    if not stripped:
        return
    if stripped[:1] in (b"{", b"["):
        try:
            yield orjson.loads(data)  # the common case: one document
            return
        except orjson.JSONDecodeError:
            pass
        yield from _json_stream(data.decode("utf-8", errors="replace"), file)
        return
    try:
        yield from YAML(typ="safe", pure=True).load_all(data.decode("utf-8", errors="replace"))
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise UserError(
            f"{file}{line}: not a kubectl snapshot: neither JSON nor YAML "
            f"({getattr(exc, 'problem', None) or 'parse error'})"
        ) from None


def _json_stream(text: str, file: Path) -> Iterator[Any]:
    """Concatenated JSON documents (`kubectl cluster-info dump`)."""
    decoder = json.JSONDecoder()
    position, length = 0, len(text)
    while True:
        while position < length and text[position] in " \t\r\n":
            position += 1
        if position >= length:
            return
        try:
            document, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise UserError(f"{file}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        yield document


def _objects(file: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for document in _documents(file):
        yield from _flatten(document, file)


def _flatten(document: Any, file: Path, inherited_kind: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if document is None:
        return
    if isinstance(document, list):
        for item in document:
            yield from _flatten(item, file, inherited_kind)
        return
    if not isinstance(document, dict):
        raise UserError(f"{file}: expected Kubernetes objects, found a {type(document).__name__}")
    kind = document.get("kind") or inherited_kind
    if "items" in document and (not kind or kind.endswith("List")):
        item_kind = kind[: -len("List")] if kind and kind != "List" else ""
        for item in document.get("items") or ():
            yield from _flatten(item, file, item_kind)
        return
    if not kind:
        raise UserError(
            f"{file}: an object without `kind` outside a typed list "
            "(use kubectl get ... -o json, which records kinds)"
        )
    yield kind, document
