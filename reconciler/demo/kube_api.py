"""A fake Kubernetes API server over real HTTP, for the demo, the tests and the benchmarks (DESIGN §6).

It ships in the package so `asg-reconciler demo` can run the whole story, drains included, on a
machine with no cluster; nothing else in the product imports it.

No kube-apiserver can run here, so the official `kubernetes` client and `kubectl` talk to this
instead. It keeps what our code relies on faithful to the real server: typed lists with
`limit`/`continue` paging (every page at the first page's resourceVersion, one snapshot, as etcd
serves it; a token older than a compaction, `compact()`, is 410 Expired), label and field
selectors, a global resourceVersion with 409 on stale updates, merge / strategic-merge / JSON
patches, watches, the eviction subresource with PDB checks (429), `Status` error bodies, and enough
discovery for `kubectl get`.

Built for speed because a benchmark lists 150,000 ~4 KB pods through it: each object is stored once
as serialized bytes (without kind/apiVersion, as list items are printed) plus the few indexed
fields selectors need; list pages are joined bytes over per-kind sorted keys, and a continue token
is the last key served and the list's revision (a later page merges in, from the watch log, the
earlier state of what changed since). Dicts are parsed again only for writes.

Tests use `FakeKubeAPI` in-process (see tests/fixtures_kube.py); benchmarks run it in its own
process: `python -m reconciler.demo.kube_api --objects FILE.jsonl --port-file PATH`, or
`serve_in_subprocess(path)`.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import bisect
import contextlib
import copy
import functools
import gc
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from reconciler.demo import validation
from reconciler.demo.disruption import DisruptionController
from reconciler.demo.eviction import EvictionFault, evict
from reconciler.demo.replicaset import ReplicaSetController
from reconciler.demo.store import Refusal, controller_of

Obj = dict[str, Any]
Query = dict[str, str]
FaultResult = None | float | int | str | tuple[int, Obj | None]
Fault = Callable[[str, str, Query], FaultResult]
"""`fault(method, path, query)`: None to serve normally, a number of seconds to delay then serve,
`(status, body)` to answer with that (body None: a Status for the code), or `DROP` to close the
connection without answering."""

DROP = "drop"

# ------------------------------------------------------------------------------- resource table


@dataclass(frozen=True)
class Resource:
    """One served resource type: routing, discovery and which fields selectors may use."""

    kind: str
    plural: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    indexed_fields: tuple[str, ...] = ()  # field-selector labels kept per object (low cardinality)
    lazy_fields: tuple[str, ...] = ()  # field-selector labels computed from the stored bytes on use
    has_status: bool = True  # a status subresource: the main PUT/PATCH keeps status, /status keeps the rest
    field_defaults: Mapping[str, str] = field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @functools.cached_property
    def field_specs(self) -> tuple[tuple[tuple[str, ...], str], ...]:
        """(path, default) per indexed field, precomputed for bulk loads."""
        return tuple((_field_path(f), self.field_defaults.get(f, "")) for f in self.indexed_fields)

    @functools.cached_property
    def prefix(self) -> bytes:
        """Start of a single object's JSON: the stored bytes omit kind/apiVersion."""
        return b'{"kind":"%s","apiVersion":"%s",' % (self.kind.encode(), self.api_version.encode())


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

RESOURCES: tuple[Resource, ...] = (
    Resource(
        "Node",
        "nodes",
        "",
        "v1",
        False,
        ("no",),
        ("spec.unschedulable",),
        field_defaults={"spec.unschedulable": "false"},
    ),
    Resource(
        "Pod",
        "pods",
        "",
        "v1",
        True,
        ("po",),
        _POD_FIELDS,
        ("status.podIP",),
        field_defaults={"spec.hostNetwork": "false"},
    ),
    Resource("ConfigMap", "configmaps", "", "v1", True, ("cm",), has_status=False),
    Resource("Event", "events", "", "v1", True, ("ev",), _EVENT_FIELDS, has_status=False),
    Resource("Namespace", "namespaces", "", "v1", False, ("ns",), ("status.phase",)),
    Resource("PersistentVolume", "persistentvolumes", "", "v1", False, ("pv",)),
    Resource("PersistentVolumeClaim", "persistentvolumeclaims", "", "v1", True, ("pvc",)),
    Resource("DaemonSet", "daemonsets", "apps", "v1", True, ("ds",)),
    Resource("ReplicaSet", "replicasets", "apps", "v1", True, ("rs",), ("status.replicas",)),
    Resource("Deployment", "deployments", "apps", "v1", True, ("deploy",)),
    Resource("StatefulSet", "statefulsets", "apps", "v1", True, ("sts",)),
    Resource("PodDisruptionBudget", "poddisruptionbudgets", "policy", "v1", True, ("pdb",)),
    Resource("Lease", "leases", "coordination.k8s.io", "v1", True, (), has_status=False),
)

_BY_ROUTE = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_NAME: dict[str, Resource] = {}
for _r in RESOURCES:
    for _alias in (_r.kind, _r.kind.lower(), _r.plural, *_r.short_names):
        _BY_NAME[_alias] = _r
_GROUPS: dict[str, list[str]] = {}
for _r in RESOURCES:
    if _r.group and _r.version not in _GROUPS.setdefault(_r.group, []):
        _GROUPS[_r.group].append(_r.version)

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def resource_for(kind: str) -> Resource:
    """Find a resource by kind (`Pod`), plural (`pods`) or short name (`po`)."""
    res = _BY_NAME.get(kind) or _BY_NAME.get(kind.lower())
    if res is None:
        raise KeyError(f"the fake API does not serve {kind!r}")
    return res


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------------- errors


class ApiError(Exception):
    """An error answered as a `Status` object with the given HTTP code and reason."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Obj | None = None,
        *,
        list_meta: Obj | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.list_meta = list_meta

    def status(self) -> Obj:
        return status_body(self.code, self.reason, self.message, self.details, list_meta=self.list_meta)


def status_body(
    code: int, reason: str, message: str, details: Obj | None = None, *, list_meta: Obj | None = None
) -> Obj:
    """A `Status`; `list_meta` is its ListMeta (an expired list's continue token)."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": dict(list_meta or {}),
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


# storage/etcd3's answer to a continue token whose revision was compacted (with a token that goes on
# at the latest revision in the Status's metadata.continue).
_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a "
    "new list without the continue parameter, or use the continue token in this response to retrieve "
    "the remainder of the results. Continuing with the provided token results in an inconsistent list "
    "- objects that were created, modified, or deleted between the time the first chunk was returned "
    "and now may show up in the list."
)


def _details(res: Resource, name: str, **extra: Any) -> Obj:
    d: Obj = {"name": name}
    if res.group:
        d["group"] = res.group
    d["kind"] = res.plural
    d.update(extra)
    return d


def _not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(res)} "{name}" not found', _details(res, name))


def _conflict(res: Resource, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(res)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _details(res, name),
    )


def _qualified(res: Resource) -> str:
    return f"{res.plural}.{res.group}" if res.group else res.plural


# ---------------------------------------------------------------------------------- selectors


_REQ_EQ = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")
_REQ_SET = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_REQ_EXISTS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")
_REQ_CMP = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*([<>])\s*(-?[0-9]+)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses (`a in (x,y),b` is two requirements)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


LabelPredicate = Callable[[Mapping[str, str]], bool]


def parse_label_selector(text: str) -> LabelPredicate | None:
    """Compile a label selector string (=, ==, !=, in, notin, exists, !key, gt/lt); None if empty."""
    checks: list[LabelPredicate] = []
    for part in _split_top_level(text):
        if m := _REQ_SET.match(part):
            key, op = m.group(1), m.group(2)
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            if op == "in":
                checks.append(lambda lb, k=key, vs=values: lb.get(k) in vs)  # type: ignore[misc]  # mypy cannot type default-arg captures
            else:
                checks.append(lambda lb, k=key, vs=values: lb.get(k) not in vs)  # type: ignore[misc]  # mypy cannot type default-arg captures
        elif m := _REQ_EQ.match(part):
            key, op, value = m.groups()
            if op == "!=":
                checks.append(lambda lb, k=key, v=value: lb.get(k) != v)  # type: ignore[misc]  # mypy cannot type default-arg captures
            else:
                checks.append(lambda lb, k=key, v=value: lb.get(k) == v)  # type: ignore[misc]  # mypy cannot type default-arg captures
        elif m := _REQ_CMP.match(part):
            key, op, num = m.group(1), m.group(2), int(m.group(3))
            checks.append(lambda lb, k=key, o=op, n=num: _compare_label(lb.get(k), o, n))  # type: ignore[misc]  # mypy cannot type default-arg captures
        elif m := _REQ_EXISTS.match(part):
            neg, key = m.groups()
            if neg:
                checks.append(lambda lb, k=key: k not in lb)  # type: ignore[misc]  # mypy cannot type default-arg captures
            else:
                checks.append(lambda lb, k=key: k in lb)  # type: ignore[misc]  # mypy cannot type default-arg captures
        else:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part.strip()!r}")
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    return lambda lb: all(c(lb) for c in checks)


def _compare_label(value: str | None, op: str, num: int) -> bool:
    try:
        v = int(value) if value is not None else None
    except ValueError:
        return False
    return v is not None and (v > num if op == ">" else v < num)


def match_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector object: None matches nothing, `{}` matches everything."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# ---------------------------------------------------------------------------------- storage


_NO_FIELDS: Mapping[str, str] = {}


class _Entry:
    """One stored object: its bytes and what list filtering needs, immutable once built."""

    __slots__ = ("fields", "key", "labels", "name", "namespace", "raw", "rv")

    def __init__(
        self,
        key: str,
        namespace: str,
        name: str,
        raw: bytes,
        labels: Mapping[str, str],
        fields: Mapping[str, str],
        rv: int,
    ) -> None:
        self.key, self.namespace, self.name, self.raw = key, namespace, name, raw
        self.labels, self.fields, self.rv = labels, fields, rv


class _Event:
    __slots__ = ("entry", "prev", "rv", "type")

    def __init__(self, rv: int, type_: str, entry: _Entry, prev: _Entry | None) -> None:
        self.rv, self.type, self.entry, self.prev = rv, type_, entry, prev


class _Store:
    """The objects of one kind: a dict by key plus a lazily re-sorted key list for paging."""

    def __init__(self, res: Resource) -> None:
        self.res = res
        self.entries: dict[str, _Entry] = {}
        self._keys: list[str] = []
        self._sorted = True
        self.events: list[_Event] = []
        self.floor_rv = 0  # events at or below this resourceVersion were dropped

    def insert(self, entry: _Entry) -> _Entry | None:
        prev = self.entries.get(entry.key)
        self.entries[entry.key] = entry
        if prev is None and self._sorted:
            keys = self._keys
            if not keys or entry.key > keys[-1]:
                keys.append(entry.key)
            elif len(keys) < 4096:
                bisect.insort(keys, entry.key)
            else:  # bulk loads out of order: sort once when next listed
                self._sorted = False
        return prev

    def remove(self, key: str) -> _Entry | None:
        prev = self.entries.pop(key, None)
        if prev is not None and self._sorted:
            i = bisect.bisect_left(self._keys, key)
            if i < len(self._keys) and self._keys[i] == key:
                del self._keys[i]
        return prev

    def keys(self) -> list[str]:
        if not self._sorted:
            self._keys = sorted(self.entries)
            self._sorted = True
        return self._keys

    def key_range(self, namespace: str | None) -> tuple[int, int]:
        keys = self.keys()
        if namespace is None or not self.res.namespaced:
            return 0, len(keys)
        # "ns/" .. "ns0": '0' is the character after '/', so one namespace is one contiguous run.
        return bisect.bisect_left(keys, namespace + "/"), bisect.bisect_left(keys, namespace + "0")

    def in_namespace(self, key: str, namespace: str | None) -> bool:
        return namespace is None or not self.res.namespaced or key.startswith(namespace + "/")

    def state_at(self, rv: int) -> dict[str, _Entry | None]:
        """The keys changed after revision `rv`, each with its entry as of `rv` (None: absent then).
        Needs every event after `rv`: callers check `rv >= floor_rv` first."""
        changed: dict[str, _Entry | None] = {}
        for event in self.events_after(rv):
            changed.setdefault(event.entry.key, event.prev)
        return changed

    def count_at(
        self, namespace: str | None, last: str, hi: int, changed: Mapping[str, _Entry | None]
    ) -> int:
        """How many objects of the snapshot `changed` describes come after key `last` (up to index
        `hi` of the current keys): a page's remainingItemCount."""
        keys = self.keys()
        count = hi - bisect.bisect_right(keys, last, 0, hi)
        for key, entry in changed.items():
            if key > last and self.in_namespace(key, namespace):
                count += (entry is not None) - (key in self.entries)
        return count

    def compact(self, rv: int) -> None:
        """Forget the history at and below revision `rv`: nothing can be read as of before it."""
        drop = bisect.bisect_right(self.events, rv, key=lambda e: e.rv)
        del self.events[:drop]
        self.floor_rv = max(self.floor_rv, rv)

    def log(self, event: _Event, max_events: int) -> None:
        self.events.append(event)
        if len(self.events) > max_events:
            drop = len(self.events) - max_events // 2
            self.floor_rv = self.events[drop - 1].rv
            del self.events[:drop]

    def events_after(self, rv: int) -> list[_Event]:
        i = bisect.bisect_right(self.events, rv, key=lambda e: e.rv)
        return self.events[i:]


def _page_at(
    store: _Store,
    namespace: str | None,
    start_key: str | None,
    lo: int,
    hi: int,
    changed: Mapping[str, _Entry | None],
    limit: int,
    pred: Callable[[_Entry], bool] | None,
) -> tuple[list[bytes], bool, str]:
    """(items, more, last key) of a page of the store as it was before the `changed` keys changed:
    the run of current keys `lo:hi` merged with the earlier entries of the changed ones."""
    keys, entries = store.keys(), store.entries
    earlier = sorted(
        key
        for key, entry in changed.items()
        if entry is not None and store.in_namespace(key, namespace) and (start_key is None or key > start_key)
    )
    items: list[bytes] = []
    last = ""
    i, j = lo, 0
    while i < hi or j < len(earlier):
        entry: _Entry | None
        if j < len(earlier) and (i >= hi or earlier[j] < keys[i]):
            entry = changed[earlier[j]]
            j += 1
        else:
            key = keys[i]
            i += 1
            if key in changed:  # its state then is among `earlier`, or it did not exist
                continue
            entry = entries[key]
        if entry is None or (pred is not None and not pred(entry)):
            continue
        if 0 < limit == len(items):
            return items, True, last
        items.append(entry.raw)
        last = entry.key
    return items, False, last


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _field_path(label: str) -> tuple[str, ...]:
    # events: `source` means source.component
    return ("source", "component") if label == "source" else tuple(label.split("."))


def _field_value(obj: Mapping[str, Any], path: tuple[str, ...], default: str = "") -> str:
    """A field-selector label's value as the API compares it (strings; booleans as true/false)."""
    cur: Any = obj
    for part in path:
        if type(cur) is not dict:
            return default
        cur = cur.get(part)
        if cur is None:
            return default
    if cur is True or cur is False:
        return "true" if cur else "false"
    return cur if type(cur) is str else str(cur)


# -------------------------------------------------------------------------------------- patches


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# Lists the API merges by key in a strategic merge patch (patchMergeKey in the Go types) — the ones our
# objects carry. Other lists are replaced, as in a merge patch.
_SMP_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "addresses": "type",
    "hostAliases": "ip",
}
_SMP_SET_LISTS = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch, enough for what clients send: merge-key lists (containers by name,
    conditions by type...), `$patch: replace|delete`, `$deleteFromPrimitiveList`, finalizers as a set.
    Other directives (`$setElementOrder`, `$retainKeys`) are ignored."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            if isinstance(result.get(name), list):
                result[name] = [x for x in result[name] if x not in v]
            continue
        if k.startswith("$"):
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, list) and k in _SMP_MERGE_KEYS and isinstance(result.get(k), list):
            result[k] = _smp_list(result[k], v, _SMP_MERGE_KEYS[k])
        elif isinstance(v, list) and k in _SMP_SET_LISTS and isinstance(result.get(k), list):
            result[k] = result[k] + [x for x in v if x not in result[k]]
        elif isinstance(v, dict):
            if v.get("$patch") == "delete":
                result.pop(k, None)
            else:
                result[k] = strategic_merge_patch(result.get(k), v)
        else:
            result[k] = copy.deepcopy(v)
    return result


def _smp_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    out = list(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            out.append(copy.deepcopy(item))
            continue
        pos = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if pos is not None:
                del out[pos]
        elif pos is None:
            out.append(strategic_merge_patch({}, item))
        else:
            out[pos] = strategic_merge_patch(out[pos], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container_at(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for p in parts:
        try:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, "Invalid", f"jsonpatch: path {path!r} does not exist") from None
    return cur


def json_patch(doc: Obj, ops: list[Any]) -> Obj:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test) applied to a copy of `doc`."""
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, "BadRequest", f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_container_at(doc, src, op.get("from", "")))
            if kind == "move":
                doc = json_patch(doc, [{"op": "remove", "path": op["from"]}])
            doc = json_patch(doc, [{"op": "add", "path": path, "value": value}])
            continue
        if kind == "test":
            if _container_at(doc, parts, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"jsonpatch: test failed at {path!r}")
            continue
        if not parts:
            if kind in ("add", "replace"):
                doc = copy.deepcopy(op["value"])
                continue
            raise ApiError(422, "Invalid", "jsonpatch: cannot remove the whole document")
        parent = _container_at(doc, parts[:-1], path)
        last = parts[-1]
        if kind == "add":
            if isinstance(parent, list):
                idx = len(parent) if last == "-" else _index(last, len(parent) + 1, path)
                parent.insert(idx, copy.deepcopy(op["value"]))
            elif isinstance(parent, dict):
                parent[last] = copy.deepcopy(op["value"])
            else:
                raise ApiError(422, "Invalid", f"jsonpatch: cannot add at {path!r}")
        elif kind in ("remove", "replace"):
            if isinstance(parent, list):
                idx = _index(last, len(parent), path)
                if kind == "remove":
                    del parent[idx]
                else:
                    parent[idx] = copy.deepcopy(op["value"])
            elif isinstance(parent, dict) and last in parent:
                if kind == "remove":
                    del parent[last]
                else:
                    parent[last] = copy.deepcopy(op["value"])
            else:
                raise ApiError(422, "Invalid", f"jsonpatch: path {path!r} does not exist")
        else:
            raise ApiError(400, "BadRequest", f"unknown JSON patch operation {kind!r}")
    return doc


def _index(text: str, bound: int, path: str) -> int:
    try:
        i = int(text)
    except ValueError:
        raise ApiError(422, "Invalid", f"jsonpatch: bad array index in {path!r}") from None
    if not 0 <= i < bound:
        raise ApiError(422, "Invalid", f"jsonpatch: index out of range in {path!r}")
    return i


# ------------------------------------------------------------------------------------- the API


@dataclass(frozen=True)
class RecordedRequest:
    """One request as served: path without the query string, header names lower-cased, the body
    as sent (empty for none)."""

    method: str
    path: str
    query: Query
    headers: Mapping[str, str]
    body: bytes = b""

    def json(self) -> Any:
        """The body decoded from JSON; None when there is none."""
        return orjson.loads(self.body) if self.body.strip() else None


@dataclass
class _Reply:
    code: int
    body: bytes | list[bytes]  # a list is sent as is, scatter-gather, without joining


@dataclass
class _Watch:
    res: Resource
    namespace: str | None
    query: Query


_WATCHED_BY_CONTROLLERS = frozenset({"Pod", "PodDisruptionBudget", "ReplicaSet", "Deployment", "StatefulSet"})


class _View:
    """The store as the eviction subresource and the controllers see it (reconciler/demo/store.py
    `Store`); used with the lock held."""

    def __init__(self, api: FakeKubeAPI) -> None:
        self.api = api

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        res = resource_for(kind)
        entry = self.api._stores[res.kind].entries.get(_key(namespace if res.namespaced else "", name))
        return None if entry is None else self.api._decode(res, entry)

    def list(self, kind: str, namespace: str) -> list[Obj]:
        res = resource_for(kind)
        store = self.api._stores[res.kind]
        lo, hi = store.key_range(namespace)
        return [self.api._decode(res, store.entries[k]) for k in store.keys()[lo:hi]]

    def selects(self, selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
        return match_label_selector(selector, labels)

    def write(self, kind: str, obj: Obj) -> Obj:
        res = resource_for(kind)
        return self.api._decode(res, self.api._commit(res, obj))

    def create(self, kind: str, obj: Obj) -> Obj:
        res = resource_for(kind)
        meta = obj.setdefault("metadata", {})
        store = self.api._stores[res.kind]
        while not meta.get("name") or _key(meta.get("namespace", ""), meta["name"]) in store.entries:
            meta["name"] = meta.get("generateName", "") + "".join(
                secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5)
            )
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        return self.api._decode(res, self.api._commit(res, obj))

    def delete(self, kind: str, obj: Obj, grace: int | None) -> None:
        res = resource_for(kind)
        meta = obj["metadata"]
        entry = self.api._stores[res.kind].entries.get(_key(meta.get("namespace", ""), meta["name"]))
        if entry is not None:
            self.api._delete_entry(res, entry, obj, -1 if grace is None else grace)


class FakeKubeAPI:
    """The fake server and its store. Thread-safe; one lock guards every read and write."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_events: int = 200_000) -> None:
        self._host, self._port = host, port
        self.max_events = max_events
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._stores = {r.kind: _Store(r) for r in RESOURCES}
        self._rv = 1
        self._epoch = 0  # bumped by reset() and stop() so open watches end
        self._label_cache: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self._field_cache: dict[tuple[str, ...], dict[str, str]] = {}
        self._timers: list[threading.Timer] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._stats_lock = threading.Lock()
        self.fault: Fault | None = None
        self.calls: Counter[tuple[str, str]] = Counter()
        self.requests: list[RecordedRequest] = []
        self.record_requests = True
        self.validate_writes = True
        """Refuse (422 Invalid) a created, updated or patched object, or an Eviction, that a real
        server would refuse or that breaks the official OpenAPI schema (reconciler/demo/validation.py)."""
        self.pod_termination_seconds: float = 0.0
        """Seconds a deleted or evicted pod with a node stays (with deletionTimestamp) before it is
        gone, like a kubelet's graceful termination; 0 deletes at once, `math.inf` never. It is how
        long the pod's processes take to stop: a positive `gracePeriodSeconds` in the request's
        DeleteOptions (an eviction's `deleteOptions`, a delete's body or query) ends it sooner, as
        the kubelet kills what is still running when the grace period ends; 0 deletes at once."""
        self.eviction_fault: EvictionFault | None = None
        """`eviction_fault(namespace, pod)`: asked once per eviction at its first write; a status
        code forces the answer the real server gives when that write fails (409: the PDB status
        write kept conflicting; 500: etcd). Runs with the store's lock held: it may use this
        object's Python API, never the server over HTTP."""
        self.bookmark_interval: float = 60.0
        """Seconds between BOOKMARK events on a watch that asked for them (allowWatchBookmarks), as
        the API server's watch cache sends one about every minute and again as the watch's
        timeoutSeconds ends: the newest resourceVersion, so an idle watch resumes from a recent one."""
        self.disruption: DisruptionController | None = None
        self.replicasets: ReplicaSetController | None = None
        self._changes: list[tuple[str, str, str, Obj | None]] = []
        self._reacting = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeKubeAPI:
        """Bind (port 0 picks a free port) and serve in a daemon thread."""
        self._server = _Server((self._host, self._port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-kube-api",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end watches and drop kept-alive connections so clients see the server gone."""
        with self._cond:
            self._epoch += 1
            self._cancel_timers()
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._stats_lock:
            conns = list(self._connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeKubeAPI:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeKubeAPI is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out (global across kinds, as etcd's revision)."""
        return self._rv

    def reset(self) -> None:
        """Forget every object, event, fault and counter (resourceVersions keep increasing); the
        controllers are off again."""
        with self._cond:
            self.disruption = None
            self.replicasets = None
            self.eviction_fault = None
            self._stores = {r.kind: _Store(r) for r in RESOURCES}
            self._label_cache.clear()
            self._field_cache.clear()
            self._cancel_timers()
            self._epoch += 1
            self._cond.notify_all()
        with self._stats_lock:
            self.calls.clear()
            self.requests.clear()
        self.fault = None
        self.record_requests = True
        self.validate_writes = True
        self.pod_termination_seconds = 0.0
        self.bookmark_interval = 60.0

    def end_watches(self) -> None:
        """End every open watch now, as a server ends one at its timeout (a normal end: the client
        watches again from the last resourceVersion it saw)."""
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()

    def _cancel_timers(self) -> None:
        for t in self._timers:
            t.cancel()
        self._timers.clear()

    # ------------------------------------------------------------------ controllers

    def run_controllers(self, *, disruption: bool = True, replicasets: bool = False) -> None:
        """Turn on the fake's kube-controller-manager (reset() turns it off): the disruption
        controller recomputes every PodDisruptionBudget's status as pods come and go
        (reconciler/demo/disruption.py), the ReplicaSet controller replaces a pod that leaves
        (reconciler/demo/replicaset.py). Off by default: most tests write a budget's status by hand."""
        with self._cond:
            self.replicasets = ReplicaSetController() if replicasets else None
            self.disruption = DisruptionController() if disruption else None
            if self.disruption is not None:
                self.resume_disruption_controller()

    def resume_disruption_controller(self) -> None:
        """Catch up after `disruption.paused = True`: every budget's status recomputed now."""
        with self._cond:
            if self.disruption is not None:
                namespaces = sorted(
                    {e.namespace for e in self._stores["PodDisruptionBudget"].entries.values()}
                )
                self.disruption.resume(_View(self), namespaces)
                self._cond.notify_all()

    def _changed(self, kind: str, namespace: str, name: str, owner: Obj | None) -> None:
        """A write happened (lock held): let the controllers react, synchronously, to it and to
        every write they make in turn."""
        if kind not in _WATCHED_BY_CONTROLLERS:
            return
        self._changes.append((kind, namespace, name, owner))
        if self._reacting:
            return
        self._reacting = True
        try:
            view = _View(self)
            for _ in range(100_000):
                if not self._changes:
                    return
                kind, namespace, name, owner = self._changes.pop(0)
                if self.replicasets is not None:
                    self.replicasets.changed(view, kind, namespace, name, owner)
                if self.disruption is not None:
                    self.disruption.changed(view, kind, namespace, name)
            raise RuntimeError("the fake's controllers keep writing")
        finally:
            self._reacting = False
            self._changes.clear()

    # ------------------------------------------------------------------ Python API for tests

    def put(self, obj: Mapping[str, Any], kind: str | None = None) -> Obj:
        """Create or replace an object as-is (no conflict checks), as a controller would have
        written it. Kind comes from `kind` or obj['kind']; returns the stored object."""
        res = resource_for(kind or obj.get("kind") or "")
        with self._cond:
            stored = self._put(res, obj)
            self._cond.notify_all()
        return stored

    def put_many(self, objs: Iterable[Mapping[str, Any]], kind: str | None = None) -> int:
        """`put` for many objects under one lock (bulk loads); returns how many.

        Pauses the cyclic GC meanwhile: loading 150k objects otherwise spends most of its time in
        full collections over the entries already stored.
        """
        n = 0
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            with self._cond:
                fixed = resource_for(kind) if kind else None
                for obj in objs:
                    self._put(fixed or resource_for(obj.get("kind") or ""), obj)
                    n += 1
                self._cond.notify_all()
        finally:
            if was_enabled:
                gc.enable()
        return n

    def load_jsonl(self, path: str | Path) -> int:
        """Load one object per line (each with its kind), e.g. written by k8s_objects.write_jsonl."""
        with open(path, "rb") as f:
            return self.put_many(orjson.loads(line) for line in f if line and not line.isspace())

    def get_object(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        """A fresh copy of the stored object (with kind/apiVersion), or None."""
        res = resource_for(kind)
        with self._lock:
            entry = self._stores[res.kind].entries.get(
                _key((namespace or "") if res.namespaced else "", name)
            )
        return self._decode(res, entry) if entry is not None else None

    def delete_object(self, kind: str, namespace: str | None, name: str) -> bool:
        """Remove at once (no graceful termination); watchers see DELETED. False if absent."""
        res = resource_for(kind)
        with self._cond:
            store = self._stores[res.kind]
            entry = store.entries.get(_key((namespace or "") if res.namespaced else "", name))
            if entry is None:
                return False
            self._remove(res, entry)
            self._cond.notify_all()
        return True

    def objects(self, kind: str, namespace: str | None = None) -> list[Obj]:
        """Copies of every object of a kind (in one namespace if given), in list order."""
        res = resource_for(kind)
        with self._lock:
            store = self._stores[res.kind]
            lo, hi = store.key_range(namespace)
            entries = [store.entries[k] for k in store.keys()[lo:hi]]
        return [self._decode(res, e) for e in entries]

    def count(self, kind: str) -> int:
        with self._lock:
            return len(self._stores[resource_for(kind).kind].entries)

    def compact(self, revision: int | None = None) -> int:
        """etcd's compaction (kube-apiserver asks for one every 5 minutes): the history at and below
        `revision` (default: the latest) is gone, so a continue token of a list begun before it
        answers 410 Expired, and so does a watch from an older resourceVersion. Returns the
        revision. Call it from `fault` to compact between two pages of a list."""
        with self._cond:
            rv = self._rv if revision is None else min(revision, self._rv)
            for store in self._stores.values():
                store.compact(rv)
            return rv

    # ------------------------------------------------------------------ store internals (lock held)

    def _decode(self, res: Resource, entry: _Entry) -> Obj:
        body: Obj = orjson.loads(entry.raw)
        return {"kind": res.kind, "apiVersion": res.api_version, **body}

    def _full(self, res: Resource, entry: _Entry) -> bytes:
        return res.prefix + entry.raw[1:]

    def _put(self, res: Resource, src: Mapping[str, Any]) -> Obj:
        obj = dict(src)
        meta = dict(obj.get("metadata") or {})
        obj["metadata"] = meta
        if not meta.get("name"):
            raise ValueError(f"{res.kind} without metadata.name")
        if res.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        if "uid" not in meta:
            meta["uid"] = str(uuid.uuid4())
        if "creationTimestamp" not in meta:
            meta["creationTimestamp"] = _now()
        self._commit(res, obj)
        return obj

    def _commit(self, res: Resource, obj: Obj) -> _Entry:
        """Store `obj` with the next resourceVersion and log the watch event."""
        self._rv += 1
        rv = self._rv
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        obj["kind"], obj["apiVersion"] = res.kind, res.api_version
        body = {k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"}
        entry = self._entry(res, body, _dumps_exact(body), rv)
        store = self._stores[res.kind]
        old = store.insert(entry)
        store.log(_Event(rv, "MODIFIED" if old is not None else "ADDED", entry, old), self.max_events)
        if self.disruption is not None or self.replicasets is not None:
            self._changed(res.kind, entry.namespace, entry.name, controller_of(obj))
        return entry

    def _entry(self, res: Resource, body: Mapping[str, Any], raw: bytes, rv: int) -> _Entry:
        meta = body["metadata"]
        ns = meta.get("namespace", "") if res.namespaced else ""
        name = meta["name"]
        labels = meta.get("labels") or {}
        lkey = tuple(labels.items())
        shared = self._label_cache.get(lkey)
        if shared is None:
            shared = self._label_cache[lkey] = {sys.intern(k): sys.intern(v) for k, v in labels.items()}
        fields: Mapping[str, str] = _NO_FIELDS
        if res.indexed_fields:
            values = tuple(_field_value(body, path, default) for path, default in res.field_specs)
            cached = self._field_cache.get(values)
            if cached is None:
                cached = self._field_cache[values] = {
                    f: sys.intern(v) for f, v in zip(res.indexed_fields, values, strict=True)
                }
            fields = cached
        return _Entry(_key(ns, name), sys.intern(ns), name, raw, shared, fields, rv)

    def _refuse_invalid(self, res: Resource, obj: Obj, name: str) -> None:
        """422 Invalid, with the real server's message shape, for what validation.problems finds."""
        if not self.validate_writes:
            return
        problems = validation.problems({**obj, "kind": res.kind, "apiVersion": res.api_version})
        if problems:
            raise ApiError(
                422,
                "Invalid",
                f'{res.kind} "{name}" is invalid: {"; ".join(problems)}',
                _details(res, name, causes=[{"reason": "FieldValueInvalid", "message": p} for p in problems]),
            )

    def _remove(self, res: Resource, entry: _Entry) -> _Entry:
        """Delete and log DELETED with the object's final state at a new resourceVersion."""
        self._rv += 1
        body: Obj = orjson.loads(entry.raw)
        body["metadata"]["resourceVersion"] = str(self._rv)
        final = self._entry(res, body, _dumps_exact(body), self._rv)
        store = self._stores[res.kind]
        store.remove(entry.key)
        store.log(_Event(self._rv, "DELETED", final, entry), self.max_events)
        if self.disruption is not None or self.replicasets is not None:
            self._changed(res.kind, final.namespace, final.name, controller_of(body))
        return final

    # ------------------------------------------------------------------ request handling

    def _record(
        self, method: str, path: str, query: Query, headers: Iterable[tuple[str, str]], body: bytes = b""
    ) -> None:
        with self._stats_lock:
            self.calls[(method, path)] += 1
            if self.record_requests:
                lowered = {k.lower(): v for k, v in headers}
                self.requests.append(RecordedRequest(method, path, query, lowered, body))

    def handle(self, method: str, path: str, query: Query, body: bytes, content_type: str) -> _Reply | _Watch:
        """Route one request; raises ApiError for failures answered as Status objects."""
        parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        if not parts:
            return _Reply(200, orjson.dumps({"paths": ["/api", "/api/v1", "/apis", "/version"]}))
        if parts == ["version"]:
            return _Reply(200, orjson.dumps(_VERSION))
        if parts[0] in ("healthz", "readyz", "livez"):
            return _Reply(200, b"ok")
        if parts[0] == "api":
            if len(parts) == 1:
                return _Reply(200, orjson.dumps(self._api_versions()))
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return _Reply(200, orjson.dumps(_group_list()))
            if len(parts) == 2:
                if parts[1] not in _GROUPS:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return _Reply(200, orjson.dumps(_api_group(parts[1])))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if method != "GET" or not any(r.group == group and r.version == version for r in RESOURCES):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return _Reply(200, orjson.dumps(_resource_list(group, version)))

        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        res = _BY_ROUTE.get((group, version, rest[0]))
        if res is None or (namespace is not None and not res.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if name is not None and res.namespaced and namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub is not None and sub not in ("status", "eviction"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub == "eviction" and res.kind != "Pod":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

        if name is None:
            if method == "GET":
                if query.get("watch") in ("true", "1"):
                    self._predicate(res, query)  # a bad selector is a 400, before the stream starts
                    if query.get("resourceVersion", "") not in ("", "0"):
                        _int_param(query, "resourceVersion")
                    return _Watch(res, namespace, query)
                return _Reply(200, self._list(res, namespace, query))
            if method == "POST":
                if res.namespaced and namespace is None:
                    raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
                return self._create(res, namespace or "", _json(body), query)
            if method == "DELETE":
                return self._delete_collection(res, namespace, query)
            raise ApiError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        ns = namespace or ""
        if sub == "eviction":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            return self._evict(ns, name, _json(body), query)
        if method == "GET":
            with self._lock:
                entry = self._stores[res.kind].entries.get(_key(ns, name))
                if entry is None:
                    raise _not_found(res, name)
                return _Reply(200, self._full(res, entry))
        if method == "PUT":
            return self._update(res, ns, name, _json(body), query, status_only=sub == "status")
        if method == "PATCH":
            return self._patch(res, ns, name, body, content_type, query, status_only=sub == "status")
        if method == "DELETE" and sub is None:
            return self._delete(res, ns, name, _json(body) if body.strip() else {}, query)
        raise ApiError(
            405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
        )

    def _api_versions(self) -> Obj:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self._host}:{self.port}"}
            ],
        }

    # ------------------------------------------------------------------ list

    def _list(self, res: Resource, namespace: str | None, query: Query) -> list[bytes]:
        """One page. The first is served at the latest revision; every later one at the revision
        its continue token carries (the first page's), as etcd serves one consistent snapshot. A
        token from before a compaction is 410 Expired; one with revision -1 (the Expired answer's
        own) goes on at the latest."""
        limit = _int_param(query, "limit")
        pred = self._predicate(res, query)
        start_key, at = _decode_continue(query["continue"], res) if query.get("continue") else (None, -1)
        more, remaining = False, None
        last = ""
        with self._lock:
            store = self._stores[res.kind]
            if at != -1 and at < store.floor_rv:
                token = _encode_continue(res, start_key or "", -1)
                raise ApiError(410, "Expired", _INCONSISTENT_CONTINUE, list_meta={"continue": token})
            rv = self._rv if at == -1 else at
            changed = store.state_at(at) if at != -1 else {}
            keys = store.keys()
            lo, hi = store.key_range(namespace)
            if start_key is not None:
                lo = max(lo, bisect.bisect_right(keys, start_key))
            entries = store.entries
            if changed:
                items, more, last = _page_at(store, namespace, start_key, lo, hi, changed, limit, pred)
                if more and pred is None:
                    remaining = store.count_at(namespace, last, hi, changed)
            elif pred is None:
                end = hi if limit <= 0 else min(hi, lo + limit)
                items = [entries[k].raw for k in keys[lo:end]]
                if end < hi:
                    more, last, remaining = True, keys[end - 1], hi - end
            else:
                items = []
                for i in range(lo, hi):
                    e = entries[keys[i]]
                    if pred(e):
                        if 0 < limit == len(items):
                            more = True
                            break
                        items.append(e.raw)
                        last = e.key
        meta: Obj = {"resourceVersion": str(rv)}
        if more:
            meta["continue"] = _encode_continue(res, last, rv)
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        # Chunks, not one joined body: joining a 2 MB page costs more (fresh pages to fault in) than
        # the kernel's own copy of the chunks from sendmsg.
        parts = [
            b'{"kind":"%sList","apiVersion":"%s","metadata":%s,"items":['
            % (res.kind.encode(), res.api_version.encode(), orjson.dumps(meta))
        ]
        for item in items:
            parts.append(item)
            parts.append(b",")
        if items:
            parts.pop()
        parts.append(b"]}")
        return parts

    def _predicate(self, res: Resource, query: Query) -> Callable[[_Entry], bool] | None:
        """Compile labelSelector and fieldSelector into one test on stored entries."""
        checks: list[Callable[[_Entry], bool]] = []
        label_pred = parse_label_selector(query.get("labelSelector", ""))
        if label_pred is not None:
            checks.append(lambda e: label_pred(e.labels))
        for part in _split_top_level(query.get("fieldSelector", "")):
            m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
            if not m:
                raise ApiError(400, "BadRequest", f"invalid field selector: {part!r}")
            label, op, value = m.groups()
            value = value.replace("\\,", ",").replace("\\=", "=").replace("\\\\", "\\")
            getter = self._field_getter(res, label)
            if op == "!=":
                checks.append(lambda e, g=getter, v=value: g(e) != v)  # type: ignore[misc]  # mypy cannot type default-arg captures
            else:
                checks.append(lambda e, g=getter, v=value: g(e) == v)  # type: ignore[misc]  # mypy cannot type default-arg captures
        if not checks:
            return None
        if len(checks) == 1:
            return checks[0]
        return lambda e: all(c(e) for c in checks)

    def _field_getter(self, res: Resource, label: str) -> Callable[[_Entry], str]:
        if label == "metadata.name":
            return lambda e: e.name
        if label == "metadata.namespace":
            return lambda e: e.namespace
        if label in res.indexed_fields:
            return lambda e: e.fields[label]
        if label in res.lazy_fields:
            default = res.field_defaults.get(label, "")
            path = _field_path(label)
            return lambda e: _field_value(orjson.loads(e.raw), path, default)
        raise ApiError(
            400,
            "BadRequest",
            f'"{label}" is not a known field selector: only "metadata.name", '
            f'"metadata.namespace"' + "".join(f', "{f}"' for f in res.indexed_fields + res.lazy_fields),
        )

    # ------------------------------------------------------------------ writes

    def _create(self, res: Resource, namespace: str, obj: Any, query: Query) -> _Reply:
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
        _check_micro_times(res, obj)
        if obj.get("kind") not in (None, res.kind):
            raise ApiError(400, "BadRequest", f"the kind {obj.get('kind')!r} does not match {res.kind!r}")
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if res.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = namespace
        if meta.get("resourceVersion"):
            raise ApiError(400, "BadRequest", "resourceVersion should not be set on objects to be created")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(
                    422,
                    "Invalid",
                    f"{res.kind} is invalid: metadata.name: Required value: name or generateName is required",
                )
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5)
            )
        name = meta["name"]
        self._refuse_invalid(res, obj, name)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta.pop("deletionTimestamp", None)
        if "spec" in obj and res.kind not in ("Pod", "Node"):
            meta.setdefault("generation", 1)
        with self._cond:
            store = self._stores[res.kind]
            if _key(namespace, name) in store.entries:
                raise ApiError(
                    409, "AlreadyExists", f'{_qualified(res)} "{name}" already exists', _details(res, name)
                )
            if _dry_run(query):
                obj["kind"], obj["apiVersion"] = res.kind, res.api_version
                return _Reply(201, orjson.dumps(obj))
            entry = self._commit(res, obj)
            self._cond.notify_all()
            return _Reply(201, self._full(res, entry))

    def _update(
        self, res: Resource, ns: str, name: str, obj: Any, query: Query, *, status_only: bool
    ) -> _Reply:
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
        meta = obj.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        with self._cond:
            entry = self._stores[res.kind].entries.get(_key(ns, name))
            if entry is None:
                raise _not_found(res, name)
            rv = meta.get("resourceVersion")
            if rv and rv != str(entry.rv):
                raise _conflict(res, name)
            return self._write(res, entry, obj, query, status_only=status_only)

    def _patch(
        self,
        res: Resource,
        ns: str,
        name: str,
        body: bytes,
        content_type: str,
        query: Query,
        *,
        status_only: bool,
    ) -> _Reply:
        patch = _json(body) if not content_type.startswith("application/apply-patch") else _json_or_yaml(body)
        with self._cond:
            entry = self._stores[res.kind].entries.get(_key(ns, name))
            if content_type.startswith("application/apply-patch"):
                if not query.get("fieldManager"):
                    raise ApiError(
                        400, "BadRequest", "PATCH requests with apply content type require fieldManager"
                    )
                if entry is None:
                    if not isinstance(patch, dict):
                        raise ApiError(400, "BadRequest", "apply patch must be an object")
                    meta = patch.setdefault("metadata", {})
                    meta.setdefault("name", name)
                    return self._create(res, ns, patch, query)
                current = self._decode(res, entry)
                patched = merge_patch(current, patch)
            else:
                if entry is None:
                    raise _not_found(res, name)
                current = self._decode(res, entry)
                if content_type == "application/json-patch+json":
                    if not isinstance(patch, list):
                        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
                    patched = json_patch(current, patch)
                elif content_type == "application/merge-patch+json":
                    patched = merge_patch(current, patch)
                elif content_type == "application/strategic-merge-patch+json":
                    if res.kind not in (
                        "Pod",
                        "Node",
                        "ConfigMap",
                        "Event",
                        "Namespace",
                        "PersistentVolume",
                        "PersistentVolumeClaim",
                        "DaemonSet",
                        "ReplicaSet",
                        "Deployment",
                        "StatefulSet",
                        "PodDisruptionBudget",
                        "Lease",
                    ):
                        raise ApiError(415, "UnsupportedMediaType", "strategic merge patch is not supported")
                    patched = strategic_merge_patch(current, patch)
                else:
                    raise ApiError(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/json-patch+json, application/merge-patch+json, "
                        "application/apply-patch+yaml, application/strategic-merge-patch+json",
                    )
            if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
                raise ApiError(422, "Invalid", "the patch produced an invalid object")
            rv = patched["metadata"].get("resourceVersion")
            if rv and rv != str(entry.rv):
                raise _conflict(res, name)
            return self._write(res, entry, patched, query, status_only=status_only)

    def _write(self, res: Resource, entry: _Entry, new: Obj, query: Query, *, status_only: bool) -> _Reply:
        """Finish an update or patch: keep identity fields, honour the status subresource split,
        skip no-op writes (no new resourceVersion, as the real server)."""
        _check_micro_times(res, new)
        current = self._decode(res, entry)
        if res.has_status:
            if status_only:
                merged = dict(current)
                if "status" in new:
                    merged["status"] = new["status"]
                new = merged
            elif "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        meta = new["metadata"]
        cur_meta = current["metadata"]
        for k in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if k in cur_meta:
                meta[k] = cur_meta[k]
            else:
                meta.pop(k, None)
        meta["resourceVersion"] = cur_meta.get("resourceVersion")
        new["kind"], new["apiVersion"] = res.kind, res.api_version
        if "generation" in cur_meta and not status_only and new.get("spec") != current.get("spec"):
            meta["generation"] = int(cur_meta["generation"]) + 1
        self._refuse_invalid(res, new, str(meta.get("name", "")))
        if new == current:
            return _Reply(200, self._full(res, entry))
        if _dry_run(query):
            return _Reply(200, orjson.dumps(new))
        committed = self._commit(res, new)
        self._cond.notify_all()
        return _Reply(200, self._full(res, committed))

    def _delete(self, res: Resource, ns: str, name: str, options: Any, query: Query) -> _Reply:
        opts = options if isinstance(options, dict) else {}
        pre = opts.get("preconditions") or {}
        grace = opts.get("gracePeriodSeconds", _int_param(query, "gracePeriodSeconds", -1))
        with self._cond:
            entry = self._stores[res.kind].entries.get(_key(ns, name))
            if entry is None:
                raise _not_found(res, name)
            current = self._decode(res, entry)
            meta = current["metadata"]
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in "
                    f"object meta: {meta.get('uid')}",
                    _details(res, name),
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{meta.get('resourceVersion')}",
                    _details(res, name),
                )
            if _dry_run(query):
                return _Reply(200, self._full(res, entry))
            reply = self._delete_entry(res, entry, current, grace)
            self._cond.notify_all()
            return reply

    def _delete_entry(self, res: Resource, entry: _Entry, current: Obj, grace: int | None = -1) -> _Reply:
        """Delete now, or for a pod on a node with `pod_termination_seconds`, mark it terminating
        and delete it when it stops: after `pod_termination_seconds` or the grace period asked for
        (`grace` > 0), whichever is shorter."""
        meta = current["metadata"]
        delay = self.pod_termination_seconds
        if isinstance(grace, int) and grace > 0:
            delay = min(delay, float(grace))
        graceful = res.kind == "Pod" and delay > 0 and grace != 0 and current.get("spec", {}).get("nodeName")
        if graceful:
            if "deletionTimestamp" in meta:
                return _Reply(200, self._full(res, entry))
            meta["deletionTimestamp"] = _now()
            meta["deletionGracePeriodSeconds"] = int(grace if grace is not None and grace > 0 else 30)
            committed = self._commit(res, current)
            if delay != float("inf"):
                timer = threading.Timer(delay, self._finish_termination, (res, entry.key, meta["uid"]))
                timer.daemon = True
                self._timers.append(timer)
                timer.start()
            return _Reply(200, self._full(res, committed))
        final = self._remove(res, entry)
        if res.kind == "Pod":
            return _Reply(200, self._full(res, final))
        return _Reply(
            200,
            orjson.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": _details(res, entry.name, uid=meta.get("uid")),
                }
            ),
        )

    def _finish_termination(self, res: Resource, key: str, uid: str) -> None:
        with self._cond:
            entry = self._stores[res.kind].entries.get(key)
            if entry is not None and self._decode(res, entry)["metadata"].get("uid") == uid:
                self._remove(res, entry)
                self._cond.notify_all()

    def _delete_collection(self, res: Resource, namespace: str | None, query: Query) -> _Reply:
        pred = self._predicate(res, query)
        with self._cond:
            store = self._stores[res.kind]
            lo, hi = store.key_range(namespace)
            victims = [store.entries[k] for k in store.keys()[lo:hi]]
            victims = [e for e in victims if pred is None or pred(e)]
            items = []
            if not _dry_run(query):
                for e in victims:
                    items.append(self._remove(res, e).raw)
                self._cond.notify_all()
            rv = self._rv
        return _Reply(
            200,
            b'{"kind":"%sList","apiVersion":"%s","metadata":{"resourceVersion":"%d"},"items":[%s]}'
            % (res.kind.encode(), res.api_version.encode(), rv, b",".join(items)),
        )

    # ------------------------------------------------------------------ eviction

    def _evict(self, ns: str, name: str, body: Any, query: Query) -> _Reply:
        """policy/v1 Eviction, as the real server carries it out (reconciler/demo/eviction.py); a body
        that breaks the official schema is refused first (reconciler/demo/validation.py)."""
        if self.validate_writes and isinstance(body, dict):
            problems = validation.schema_problems({"kind": "Eviction", "apiVersion": "policy/v1", **body})
            if problems:
                raise ApiError(422, "Invalid", f'Eviction.policy "{name}" is invalid: {"; ".join(problems)}')
        with self._cond:
            try:
                code, status = evict(
                    _View(self), ns, name, body, dry_run=_dry_run(query), fault=self.eviction_fault
                )
            except Refusal as r:
                raise ApiError(r.code, r.reason, r.message, r.details) from None
            self._cond.notify_all()
        return _Reply(code, orjson.dumps(status))

    # ------------------------------------------------------------------ watch

    def serve_watch(self, w: _Watch, write: Callable[[bytes], None]) -> None:
        """Stream watch events as JSON lines (one chunk per batch) until timeoutSeconds, reset or stop.

        No resourceVersion (or "0") starts with ADDED for every current object, as the real server;
        a resourceVersion older than the retained events gets an ERROR event with a 410 Status, and so
        does a watch that fell behind: its next events trimmed from the log while it was writing.
        With allowWatchBookmarks, a BOOKMARK carries the newest resourceVersion every
        `bookmark_interval` seconds and as the timeout ends.
        """
        res = w.res
        timeout = float(w.query.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        bookmarks = w.query.get("allowWatchBookmarks") in ("true", "1")
        next_bookmark = time.monotonic() + self.bookmark_interval
        pred = self._predicate(res, w.query)
        ns = w.namespace

        def matches(e: _Entry | None) -> bool:
            return e is not None and (ns is None or e.namespace == ns) and (pred is None or pred(e))

        def line(type_: str, e: _Entry) -> bytes:
            return b'{"type":"%s","object":%s}\n' % (type_.encode(), self._full(res, e))

        rv_param = w.query.get("resourceVersion", "")
        with self._lock:
            store = self._stores[res.kind]
            epoch = self._epoch
            initial: list[bytes] = []
            if rv_param in ("", "0"):
                lo, hi = store.key_range(ns)
                initial = [
                    line("ADDED", store.entries[k]) for k in store.keys()[lo:hi] if matches(store.entries[k])
                ]
                since = self._rv
            else:
                try:
                    since = int(rv_param)
                except ValueError:
                    raise ApiError(400, "BadRequest", f"invalid resource version {rv_param!r}") from None
                if since < store.floor_rv:
                    gone = status_body(
                        410, "Expired", f"too old resource version: {since} ({store.floor_rv})"
                    )
                    write(b'{"type":"ERROR","object":%s}\n' % orjson.dumps(gone))
                    return
        for i in range(0, len(initial), 256):
            write(b"".join(initial[i : i + 256]))

        def bookmark(rv: int) -> bytes:
            meta = orjson.dumps({"resourceVersion": str(rv)})
            return b'{"type":"BOOKMARK","object":{"kind":"%s","apiVersion":"%s","metadata":%s}}\n' % (
                res.kind.encode(),
                res.api_version.encode(),
                meta,
            )

        while True:
            mark = b""
            with self._cond:
                while True:
                    if self._epoch != epoch:
                        return
                    store = self._stores[res.kind]
                    if since < store.floor_rv:
                        # fell behind while writing: its next events were trimmed from the log. The
                        # real watch cache ends a watcher that cannot keep up and the resume is 410;
                        # skipping to the oldest kept event would lose every event in between
                        gone = status_body(
                            410, "Expired", f"too old resource version: {since} ({store.floor_rv})"
                        )
                        mark = b'{"type":"ERROR","object":%s}\n' % orjson.dumps(gone)
                        break
                    events = store.events_after(since)
                    if events:
                        break
                    now = time.monotonic()
                    remaining = deadline - now
                    # every event of this kind up to the newest revision has been sent: it is safe
                    # to resume from
                    if bookmarks and (remaining <= 0 or now >= next_bookmark):
                        since = max(since, self._rv)
                        mark = bookmark(since)
                        next_bookmark = now + self.bookmark_interval
                        break
                    if remaining <= 0:
                        return
                    wait = min(remaining, next_bookmark - now) if bookmarks else remaining
                    self._cond.wait(max(wait, 0.0))
            if mark:
                write(mark)
                if mark.startswith(b'{"type":"ERROR"') or deadline - time.monotonic() <= 0:
                    return
                continue
            out = []
            for ev in events:
                if ev.type == "MODIFIED":
                    now, before = matches(ev.entry), matches(ev.prev)
                    if now:
                        out.append(line("MODIFIED" if before else "ADDED", ev.entry))
                    elif before:
                        out.append(line("DELETED", ev.entry))
                elif matches(ev.entry):
                    out.append(line(ev.type, ev.entry))
            since = events[-1].rv
            if out:
                write(b"".join(out))


_VERSION = {
    "major": "1",
    "minor": "31",
    "emulationMajor": "1",
    "emulationMinor": "31",
    "gitVersion": "v1.31.0-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _group_entry(group: str) -> Obj:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in _GROUPS[group]]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def _group_list() -> Obj:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group_entry(g) for g in _GROUPS]}


def _api_group(group: str) -> Obj:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group)}


def _resource_list(group: str, version: str) -> Obj:
    resources: list[Obj] = []
    for r in RESOURCES:
        if r.group != group or r.version != version:
            continue
        entry: Obj = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": _VERBS,
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.kind in ("Pod", "DaemonSet", "ReplicaSet", "Deployment", "StatefulSet"):
            entry["categories"] = ["all"]
        resources.append(entry)
        if r.has_status:
            resources.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if r.kind == "Pod":
            resources.append(
                {
                    "name": "pods/eviction",
                    "singularName": "",
                    "namespaced": True,
                    "group": "policy",
                    "version": "v1",
                    "kind": "Eviction",
                    "verbs": ["create"],
                }
            )
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


# metav1.MicroTime's parser (RFC3339Micro, "2006-01-02T15:04:05.000000Z07:00"): Go's time.Parse wants
# exactly six fractional digits there, so "...:00Z" or "...:00.25Z" is refused with a 400.
_MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")
_MICRO_TIME_FIELDS = {"Lease": ("acquireTime", "renewTime")}


def _check_micro_times(res: Resource, obj: Mapping[str, Any]) -> None:
    """A written object's MicroTime fields as the API server decodes them (a Lease's acquireTime and
    renewTime): anything but RFC3339 with six fractional digits cannot be handled."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    for name in _MICRO_TIME_FIELDS.get(res.kind, ()):
        value = spec.get(name)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.fullmatch(value)):
            raise ApiError(
                400,
                "BadRequest",
                f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: parsing time '
                f'"{value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse it as RFC3339Micro',
            )


def _dumps_exact(obj: Any) -> bytes:
    """orjson.dumps into a right-sized buffer: orjson's own result keeps its over-allocated buffer
    (~8 KB behind a 4 KB pod), which doubles the memory of 150k stored objects."""
    return bytes(memoryview(orjson.dumps(obj)))


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError as e:
        raise ApiError(400, "BadRequest", f"the body of the request could not be decoded: {e}") from None


def _json_or_yaml(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        from reconciler.config.documents import parse_yaml, yaml_loader
        from reconciler.domain.errors import UserError

        try:  # the shared guarded loader: an apply patch with an anchor bomb is refused, not expanded
            return parse_yaml(body.decode("utf-8", errors="replace"), "body", yaml_loader("safe"))
        except UserError as e:
            raise ApiError(400, "BadRequest", f"the body of the request could not be decoded: {e}") from None


def _int_param(query: Query, name: str, default: int = 0) -> int:
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid {name}: {raw!r}") from None


def _dry_run(query: Query) -> bool:
    return query.get("dryRun") == "All"


def _encode_continue(res: Resource, last_key: str, rv: int) -> str:
    token = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{res.plural}/{last_key}"})
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def _decode_continue(token: str, res: Resource) -> tuple[str, int]:
    """(the last key served, the revision the list is read at; -1: the latest), as
    `storage.DecodeContinue` checks them."""
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        start, rv = data["start"], data["rv"]
        prefix = f"{res.plural}/"
        if not isinstance(start, str) or not start.startswith(prefix) or type(rv) is not int or rv == 0:
            raise ValueError(start)
        return start[len(prefix) :], rv
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise ApiError(
            400,
            "BadRequest",
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ) from None


# ------------------------------------------------------------------------------------ HTTP layer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], api: FakeKubeAPI) -> None:
        self.api = api
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # a client hung up: not worth a traceback
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive with Content-Length; watches use chunked transfer encoding."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every keep-alive round trip waits ~40 ms for delayed ACK
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.api._stats_lock:
            self.server.api._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.api._stats_lock:
            self.server.api._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self, method: str) -> None:
        api = self.server.api
        body = self._read_body()
        split = urlsplit(self.path)
        path = split.path
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        api._record(method, path, query, self.headers.items(), body)
        fault = api.fault
        if fault is not None:
            outcome = fault(method, path, query)
            if outcome == DROP:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            if isinstance(outcome, int | float) and not isinstance(outcome, bool):
                time.sleep(outcome)
            elif isinstance(outcome, tuple):
                code, payload = outcome
                if payload is None:
                    payload = status_body(code, _REASONS.get(code, "Unknown"), f"injected fault {code}")
                self._send(code, orjson.dumps(payload))
                return
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            result = api.handle(method, path, query, body, content_type)
            if isinstance(result, _Watch):
                self._stream_watch(result)
                return
            self._send(result.code, result.body)
        except ApiError as e:
            self._send(e.code, orjson.dumps(e.status()))
        except Exception as e:  # a bug in the fake: answer like the apiserver would, keep serving
            self._send(500, orjson.dumps(status_body(500, "InternalError", f"fake API error: {e!r}")))

    def _send(self, code: int, body: bytes | list[bytes], content_type: str = "application/json") -> None:
        length = len(body) if isinstance(body, bytes) else sum(map(len, body))
        head = (
            f"HTTP/1.1 {code} {_phrase(code)}\r\nContent-Type: {content_type}\r\n"
            f"Cache-Control: no-cache, private\r\nContent-Length: {length}\r\n\r\n"
        ).encode()
        try:
            if isinstance(body, bytes):
                self.wfile.write(head + body)
            else:
                _send_all(self.connection, [head, *body])
        except OSError:
            self.close_connection = True

    def _stream_watch(self, w: _Watch) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-cache, private\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )

        def write(data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        try:
            self.wfile.write(head)
            try:
                self.server.api.serve_watch(w, write)
            except ApiError as e:
                write(b'{"type":"ERROR","object":%s}\n' % orjson.dumps(e.status()))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True


def _send_all(sock: socket.socket, parts: list[bytes | memoryview]) -> None:
    """sendall() for a list of buffers via sendmsg, at most 512 per call (IOV_MAX is 1024).
    Consumes `parts`; only a partially sent buffer gets a memoryview."""
    i, n = 0, len(parts)
    while i < n:
        batch = parts[i : i + 512]
        sent = sock.sendmsg(batch)
        for part in batch:
            size = len(part)
            if sent < size:
                parts[i] = memoryview(part)[sent:]
                break
            sent -= size
            i += 1


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Unknown"


# ------------------------------------------------------------------------- separate process


@contextlib.contextmanager
def serve_in_subprocess(
    jsonl_path: str | Path | None = None, *, startup_timeout: float = 300.0, options: Sequence[str] = ()
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run the fake in its own process (so a benchmark's client has a core and GIL to itself),
    loaded from a JSONL file; yields (url, process) once it serves, and stops it on exit.
    `options`: more of main()'s flags (e.g. --bookmark-interval)."""
    root = Path(__file__).resolve().parents[2]
    tmp = Path(tempfile.mkdtemp(prefix="fake-kube-api-"))
    port_file = tmp / "url"
    log = (tmp / "stderr").open("wb")
    cmd = [sys.executable, "-m", "reconciler.demo.kube_api", "--port-file", str(port_file)]
    if jsonl_path is not None:
        cmd += ["--objects", str(jsonl_path)]
    cmd += list(options)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    )
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + startup_timeout
        while not port_file.exists():
            if proc.poll() is not None:
                log.flush()
                raise RuntimeError(
                    f"fake kube API exited ({proc.returncode}): "
                    f"{(tmp / 'stderr').read_text(errors='replace')[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError("fake kube API did not start in time")
            time.sleep(0.02)
        yield port_file.read_text().strip(), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reconciler.demo.kube_api", description="Serve the fake Kubernetes API."
    )
    parser.add_argument("--objects", action="append", default=[], help="JSONL file, one object per line")
    parser.add_argument("--port-file", help="write the URL here once serving")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record-requests", action="store_true", help="keep a log of every request")
    parser.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between BOOKMARKs")
    args = parser.parse_args(argv)
    api = FakeKubeAPI(args.host, args.port)
    api.record_requests = args.record_requests
    api.bookmark_interval = args.bookmark_interval
    for path in args.objects:
        api.load_jsonl(path)
    with api._lock:  # sort once now rather than on the first list
        for store in api._stores.values():
            store.keys()
    api.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.port_file:
        tmp = f"{args.port_file}.tmp"
        Path(tmp).write_text(api.url + "\n")
        os.replace(tmp, args.port_file)
    else:
        print(api.url, flush=True)
    while not stop.wait(1.0):
        pass
    api.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
