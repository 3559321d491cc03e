"""Cluster state from what kubectl printed, instead of the live API (`--snapshot FILE`).

Accepted, so users can feed whatever they have:
- a `kubectl get a,b -o json` List (items carry `kind`);
- typed lists (`NodeList`, `PodList`, ...) whose items carry no `kind`;
- a stream of JSON documents back to back, as `kubectl cluster-info dump` prints them;
- a YAML stream (`---` separated), as `kubectl get -o yaml` prints;
- a directory, as `kubectl cluster-info dump --output-directory` writes it (every .json/.yaml in it).

A single JSON document (the large case) is decoded with the pruned schemas of `kube.schema`.

An empty list (`{"kind": "List", "items": []}`, what kubectl prints for a cluster with nothing in
it) is a snapshot of an empty cluster: no nodes, no pods. An empty file, or JSON with no objects and
no list, is not a snapshot. Whether a snapshot is whole enough to plan on (nodes and pods both there)
is `reconciler.domain.snapshot_completeness`'s question, asked once the ASGs are known.

Namespaces come from whatever Namespace objects the snapshot holds (`kubectl get namespaces`); a
snapshot without any (`kubectl cluster-info dump` prints none) leaves `ClusterState.namespaces` None:
not read.
"""

from __future__ import annotations

import gc
import json
import stat
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from ruamel.yaml.error import YAMLError

from reconciler.config.documents import JSON_TOO_DEEP, parse_yaml_all
from reconciler.domain.errors import UserError
from reconciler.domain.model import ClusterState
from reconciler.domain.snapshot_completeness import COMPLETE_DUMP
from reconciler.kube.autoscaler import DEFAULT_LEASE, DEFAULT_NAMESPACES, DEFAULT_STATUS_CONFIGMAP
from reconciler.kube.schema import READ_KINDS, decode_item, envelope_decoder, kind_decoder
from reconciler.kube.state import StateBuilder

_SUFFIXES = (".json", ".yaml", ".yml")
_NO_KIND = (
    "{file}: an object without `kind` outside a typed list (use kubectl get ... -o json, which records kinds)"
)

Object = tuple[str, Mapping[str, Any]]

# What a kubectl list yields for itself before its items, so an empty one still counts as kubectl
# output (an empty cluster) while an empty file does not; never a Kubernetes kind, never added.
_A_LIST: Object = ("<list>", {})


def read_snapshot(
    path: Path,
    now: datetime,
    autoscaler_names: tuple[str, str] | None = None,
    autoscaler_namespaces: tuple[str, ...] = DEFAULT_NAMESPACES,
) -> ClusterState:
    """`autoscaler_names`: cluster-autoscaler's Lease and status ConfigMap names (the defaults without);
    `autoscaler_namespaces`: where they count as evidence."""
    collecting = gc.isenabled()
    gc.disable()  # as in live listing: many long-lived objects, no cycles
    try:
        return _read_snapshot(path, now, autoscaler_names, autoscaler_namespaces)
    finally:
        if collecting:
            gc.enable()


def _read_snapshot(
    path: Path, now: datetime, autoscaler_names: tuple[str, str] | None, namespaces: tuple[str, ...]
) -> ClusterState:
    lease, status = autoscaler_names or (DEFAULT_LEASE, DEFAULT_STATUS_CONFIGMAP)
    builder = StateBuilder(lease, status, namespaces)
    files = _files(path)
    if not files:
        raise UserError(f"{path}: no .json or .yaml files in this directory (pass a kubectl dump)")
    found = 0
    for file in files:
        for found_object in read_objects(file):
            found += 1
            if found_object is _A_LIST:
                continue
            kind, raw = found_object
            builder.add(kind, raw)  # one it cannot read (schema.UNREADABLE_KEY too) is left out, warned
    if found == 0:
        raise UserError(f"{path}: no Kubernetes objects found (expected kubectl -o json or -o yaml output)")
    return builder.build(now)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
    if not path.exists():
        raise UserError(f"{path}: snapshot file not found (create one with {COMPLETE_DUMP})")
    return [path]


def _read(file: Path) -> bytes:
    try:
        if not stat.S_ISREG(file.stat().st_mode):  # a device never ends, a FIFO's open blocks for ever
            raise UserError(f"{file}: not a regular file (a FIFO, socket or device); pass a kubectl dump")
        return file.read_bytes()
    except OSError as exc:
        raise UserError(f"{file}: cannot read: {exc.strerror}") from None


def read_objects(file: Path) -> Iterator[Object]:
    try:
        yield from _parsed(file)
    except RecursionError:  # the JSON decoders recurse; YAML's depth is refused before this
        raise UserError(f"{file}: {JSON_TOO_DEEP}") from None


def _parsed(file: Path) -> Iterator[Object]:
    data = _read(file)
    stripped = data.lstrip()
    if not stripped:
        return
    if stripped[:1] == b"{":
        try:
            envelope = envelope_decoder.decode(data)
        except msgspec.DecodeError:
            pass  # not one JSON object: a stream of them, handled below
        else:
            yield from _pruned(envelope, data, file)
            return
    for document in _documents(data, file):
        yield from _flatten(document, file)


def _pruned(envelope: Mapping[str, Any], data: bytes, file: Path) -> Iterator[Object]:
    """One JSON document, decoded with the pruned schemas: only what the planner reads is built."""
    kind = envelope.get("kind") or ""
    try:
        if "items" not in envelope or (kind and not kind.endswith("List")):
            if not kind:
                raise UserError(_NO_KIND.format(file=file))
            if kind in READ_KINDS:
                yield kind, decode_item(kind, data)
            return
        if kind:
            yield _A_LIST
        item_kind = kind[: -len("List")] if kind and kind != "List" else ""
        for raw in envelope["items"]:
            this_kind = item_kind or kind_decoder.decode(raw).get("kind", "")
            if not this_kind:
                raise UserError(_NO_KIND.format(file=file))
            if this_kind in READ_KINDS:
                yield this_kind, decode_item(this_kind, raw)
    except msgspec.ValidationError as exc:
        raise UserError(f"{file}: not a valid Kubernetes object: {exc}") from None


def _documents(data: bytes, file: Path) -> Iterator[Any]:
    text = data.decode("utf-8", errors="replace")
    if data.lstrip()[:1] in (b"{", b"["):
        yield from _json_stream(text, file)
        return
    try:
        yield from parse_yaml_all(text, str(file))  # anchors and depth refused before expanding
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise UserError(
            f"{file}{line}: not a kubectl snapshot: neither JSON nor YAML "
            f"({getattr(exc, 'problem', None) or 'parse error'})"
        ) from None


def _json_stream(text: str, file: Path) -> Iterator[Any]:
    """Concatenated JSON documents (`kubectl cluster-info dump`), or a bare JSON array."""
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


def _flatten(document: Any, file: Path, inherited_kind: str = "") -> Iterator[Object]:
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
        if kind:
            yield _A_LIST
        item_kind = kind[: -len("List")] if kind and kind != "List" else ""
        for item in document.get("items") or ():
            yield from _flatten(item, file, item_kind)
        return
    if not kind:
        raise UserError(_NO_KIND.format(file=file))
    yield kind, document
