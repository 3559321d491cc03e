"""Record core/v1 Events on pods and nodes, where `kubectl describe` and `kubectl get events` show them.

Best-effort: an Event that cannot be written is counted and logged (once per `emit` at most), never
raised; its occurrences carry over to the next `emit`, so the count stays right once the API answers.

One Event per (object, type, reason, message), however often it recurs, across cycles, restarts and
replicas, as client-go's EventCorrelator does within one process:

- its name is deterministic, `<object-name>.<16 hex of sha256(kind, namespace, name, uid, type,
  reason, message)>`, so every process computes the same one. The first sighting creates it; a 409
  AlreadyExists means another process (or our previous life) did: read it and add our count;
- a repeat PATCHes `count` and `lastTimestamp` (merge patch carrying the resourceVersion last seen,
  so two replicas never lose each other's counts: on a conflict, read and patch once more; a 404
  means the Event expired, 1h by default, and it is created again);
- rate: one write per Event per `min_interval` (60 s) per process. Repeats inside the window are
  counted here and folded into the next write, which comes with the first `emit` after the window
  (whether or not the Event recurs then) or with `flush`. So the count on the server lags by what
  this process folded in the last minute at most, and is exact after `flush`; `lastTimestamp` is the
  time of the last occurrence counted, not of the write. (client-go's spam filter is coarser: a
  burst of 25 per object, then one per 5 minutes.)
- at most `max_writes` writes per `emit`, oldest occurrences first; the rest wait for the next;
- the first transient failure (5xx, 429, timeout, no connection) ends the `emit`'s writes: an API
  server in trouble gets no burst of doomed calls, and the loop is not held `request_timeout` times
  the number of events. No retries here for the same reason.

Node events go to namespace `default`, as the kubelet and cluster-autoscaler put events of
cluster-scoped objects. Pod events to the pod's namespace.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.domain.event import NODE, EventSpec
from reconciler.kube.retry import no_answer, transient

_log = logging.getLogger(__name__)

NODE_EVENT_NAMESPACE = "default"
EVENT_TTL = timedelta(hours=1)  # the API server's default --event-ttl: forget what it has dropped
_MERGE_PATCH = "application/merge-patch+json"
_MAX_NAME = 253
_HASH_CHARS = 16


@dataclass(frozen=True)
class EmitResult:
    """What one `emit` (or `flush`) did, in Events: created, updated (count patched), failed (not
    written: their occurrences carry over), folded (held back by the rate rule or the write budget)."""

    created: int = 0
    updated: int = 0
    failed: int = 0
    folded: int = 0


def event_key(spec: EventSpec) -> str:
    """The hash that names the Event of `spec`: the same in every process."""
    text = "\x1f".join((spec.kind, spec.namespace, spec.name, spec.uid, spec.type, spec.reason, spec.message))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH_CHARS]


def event_name(spec: EventSpec) -> str:
    """`<object-name>.<hash>`, a valid DNS subdomain of at most 253 characters."""
    stem = spec.name[: _MAX_NAME - _HASH_CHARS - 1].rstrip("-.") or "object"
    return f"{stem}.{event_key(spec)}"


def event_namespace(spec: EventSpec) -> str:
    return NODE_EVENT_NAMESPACE if spec.kind == NODE or not spec.namespace else spec.namespace


def _time(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


@dataclass(eq=False)
class _Entry:
    """What this process knows of one Event, and the occurrences it has not written yet."""

    spec: EventSpec
    name: str
    namespace: str
    exists: bool = False  # written (or found) by us: the next write is a PATCH
    count: int = 0  # the server's count as of our last write
    resource_version: str = ""
    last_seen: datetime | None = None  # the server's lastTimestamp as of our last write
    written_at: datetime | None = None
    pending: int = 0
    first_pending: datetime | None = None
    last_pending: datetime | None = None


class _Stop(Exception):
    """A transient failure: stop writing for this emit."""


class EventRecorder:
    """Writes EventSpecs as core/v1 Events, de-duplicated and rate-limited (see the module doc)."""

    def __init__(
        self,
        api: k8s.ApiClient,
        component: str = "asg-reconciler",
        host: str = "",
        *,
        request_timeout: float = 10.0,
        min_interval: float = 60.0,
        max_writes: int = 200,
    ) -> None:
        self.core = k8s.CoreV1Api(api)
        self.component = component
        self.host = host
        self.request_timeout = request_timeout
        self.min_interval = timedelta(seconds=min_interval)
        self.max_writes = max_writes
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def emit(self, events: Iterable[EventSpec], now: datetime) -> EmitResult:
        """Count each occurrence, then write every Event that is due. Never raises."""
        with self._lock:
            for spec in events:
                key = event_key(spec)
                entry = self._entries.get(key)
                if entry is None:
                    entry = self._entries[key] = _Entry(spec, event_name(spec), event_namespace(spec))
                entry.pending += 1
                entry.first_pending = entry.first_pending or now
                entry.last_pending = now
            waiting = [e for e in self._entries.values() if e.pending]
            due = [e for e in waiting if self._due(e, now)]
            result = self._write_all(due, now, folded=len(waiting) - len(due))
            self._forget(now)
            return result

    def flush(self, now: datetime) -> EmitResult:
        """Write every folded occurrence now, window or not (at shutdown). Never raises."""
        with self._lock:
            return self._write_all([e for e in self._entries.values() if e.pending], now)

    @property
    def pending(self) -> int:
        """Occurrences counted but not written yet."""
        with self._lock:
            return sum(e.pending for e in self._entries.values())

    def _due(self, entry: _Entry, now: datetime) -> bool:
        return entry.written_at is None or now - entry.written_at >= self.min_interval

    def _forget(self, now: datetime) -> None:
        """Drop what the server has dropped too (event TTL), so a long run does not grow: Events
        written over an hour ago, and occurrences that could not be written for an hour (a 403 that
        stays, a namespace gone) which would have expired by now anyway."""
        stale = [
            key
            for key, e in self._entries.items()
            if (not e.pending and e.written_at is not None and now - e.written_at > EVENT_TTL)
            or (e.pending and e.first_pending is not None and now - e.first_pending > EVENT_TTL)
        ]
        for key in stale:
            del self._entries[key]

    def _write_all(self, due: list[_Entry], now: datetime, folded: int = 0) -> EmitResult:
        due.sort(key=lambda e: (e.first_pending or now, e.name))
        created = updated = failed = 0
        first_error = ""
        stopped = False
        for entry in due[: self.max_writes]:
            if stopped:
                failed += 1
                continue
            try:
                if self._write(entry, now):
                    created += 1
                else:
                    updated += 1
            except _Stop as exc:
                failed, stopped = failed + 1, True
                first_error = first_error or str(exc)
            except Exception as exc:  # best-effort: an answer we did not expect is a failure, not a crash
                failed += 1
                first_error = first_error or _describe(exc)
        folded += max(0, len(due) - self.max_writes)
        if failed:
            _log.warning(
                "events: %d of %d not written (%s)%s; their counts carry over to the next cycle",
                failed,
                min(len(due), self.max_writes),
                first_error,
                ": the API server is in trouble, the rest wait" if stopped else "",
            )
        return EmitResult(created, updated, failed, folded)

    # ------------------------------------------------------------------ one Event

    def _write(self, entry: _Entry, now: datetime) -> bool:
        """Write `entry`'s pending occurrences; True when it created the Event."""
        try:
            if not entry.exists:
                if self._create(entry):
                    return True
                self._read(entry)  # AlreadyExists: another process, or ours before a restart
            for attempt in (1, 2):
                try:
                    self._patch(entry)
                    return False
                except ApiException as exc:
                    if exc.status == 404:  # expired (event TTL) or deleted meanwhile: start again
                        entry.exists = False
                        if self._create(entry):
                            return True
                        self._read(entry)
                    elif exc.status == 409 and attempt == 1:
                        self._read(entry)  # another replica counted meanwhile
                    else:
                        raise
            raise ValueError("the Event changed under every write")
        except urllib3.exceptions.HTTPError as exc:
            raise _Stop(_describe(exc)) from None
        except ApiException as exc:
            if transient(exc):
                raise _Stop(_describe(exc)) from None
            raise
        finally:
            entry.written_at = now  # tried: the rate rule holds for failures too

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        response = method(*args, _preload_content=False, _request_timeout=self.request_timeout, **kwargs)
        body = orjson.loads(response.data)
        if not isinstance(body, dict):
            raise ValueError("the API server answered with something that is not an object")
        return body

    def _create(self, entry: _Entry) -> bool:
        """Create the Event with the pending count; False when it already exists."""
        spec = entry.spec
        first = entry.first_pending or datetime.now(UTC)
        last = entry.last_pending or first
        involved: dict[str, Any] = {"apiVersion": "v1", "kind": spec.kind, "name": spec.name}
        if spec.namespace and spec.kind != NODE:
            involved["namespace"] = spec.namespace
        if spec.uid:
            involved["uid"] = spec.uid
        source: dict[str, Any] = {"component": self.component}
        if self.host:
            source["host"] = self.host
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": entry.name, "namespace": entry.namespace},
            "involvedObject": involved,
            "type": spec.type,
            "reason": spec.reason,
            "message": spec.message,
            "source": source,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": _time(first),
            "lastTimestamp": _time(last),
            "count": entry.pending,
        }
        try:
            created = self._call(self.core.create_namespaced_event, entry.namespace, body)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        self._settled(entry, created)
        return True

    def _read(self, entry: _Entry) -> None:
        current = self._call(self.core.read_namespaced_event, entry.name, entry.namespace)
        meta = current.get("metadata") or {}
        entry.exists = True
        entry.count = int(current.get("count") or 1)
        entry.resource_version = str(meta.get("resourceVersion") or "")
        entry.last_seen = _parse_time(current.get("lastTimestamp"))

    def _patch(self, entry: _Entry) -> None:
        last = entry.last_pending or datetime.now(UTC)
        if entry.last_seen is not None and entry.last_seen > last:
            last = entry.last_seen  # another replica saw it later: never move lastTimestamp back
        patch: dict[str, Any] = {"count": entry.count + entry.pending, "lastTimestamp": _time(last)}
        if entry.resource_version:
            patch["metadata"] = {"resourceVersion": entry.resource_version}
        patched = self._call(
            self.core.patch_namespaced_event, entry.name, entry.namespace, patch, _content_type=_MERGE_PATCH
        )
        self._settled(entry, patched)

    @staticmethod
    def _settled(entry: _Entry, written: dict[str, Any]) -> None:
        """The server has our pending occurrences: remember what it holds now."""
        meta = written.get("metadata") or {}
        entry.exists = True
        entry.count = int(written.get("count") or entry.count + entry.pending)
        entry.resource_version = str(meta.get("resourceVersion") or "")
        entry.last_seen = _parse_time(written.get("lastTimestamp"))
        entry.pending = 0
        entry.first_pending = entry.last_pending = None


def _describe(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason or ''}".strip()
    return no_answer(exc)[1]
