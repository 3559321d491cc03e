"""The fake API's state and its Python face for tests: lifecycle, controllers, objects, the store's
internals (lock held) and list predicates."""

from __future__ import annotations

import contextlib
import gc
import re
import secrets
import socket
import sys
import threading
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from reconciler.demo.kube_api import validation
from reconciler.demo.kube_api.disruption import DisruptionController
from reconciler.demo.kube_api.errors import ApiError, _details
from reconciler.demo.kube_api.eviction import EvictionFault
from reconciler.demo.kube_api.replicaset import ReplicaSetController
from reconciler.demo.kube_api.resources import RESOURCES, Resource, _field_path, _now, resource_for
from reconciler.demo.kube_api.selectors import _split_top_level, match_label_selector, parse_label_selector
from reconciler.demo.kube_api.storage import (
    _NO_FIELDS,
    _Entry,
    _Event,
    _field_value,
    _key,
    _Store,
)
from reconciler.demo.kube_api.store_view import controller_of
from reconciler.demo.kube_api.types import Fault, Obj, Query
from reconciler.demo.kube_api.wire import _WATCHED_BY_CONTROLLERS, RecordedRequest, _dumps_exact, _Reply


class _View:
    """The store as the eviction subresource and the controllers see it (store_view.py's
    `Store`); used with the lock held."""

    def __init__(self, api: _Core) -> None:
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


class _Core(ABC):
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
        self._server: ThreadingHTTPServer | None = None  # http.py's _Server, started by FakeKubeAPI (api.py)
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._stats_lock = threading.Lock()
        self.fault: Fault | None = None
        self.calls: Counter[tuple[str, str]] = Counter()
        self.requests: list[RecordedRequest] = []
        self.record_requests = True
        self.validate_writes = True
        """Refuse (422 Invalid) a created, updated or patched object, or an Eviction, that a real
        server would refuse or that breaks the official OpenAPI schema (validation.py)."""
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
        (disruption.py), the ReplicaSet controller replaces a pod that leaves
        (replicaset.py). Off by default: most tests write a budget's status by hand."""
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

    @abstractmethod
    def _delete_entry(self, res: Resource, entry: _Entry, current: Obj, grace: int | None = -1) -> _Reply:
        """Delete as the real server does (writes.py): the controllers' view deletes through it."""
