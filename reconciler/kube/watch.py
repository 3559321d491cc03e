"""A watch on pods that wakes the plan stage the moment a pod becomes unschedulable.

Polling every `run.interval` would leave a pending pod waiting up to that long; a watch reports it
within the API server's latency. It follows client-go's reflector: list (paged) to learn a
resourceVersion, watch from it with bookmarks, keep the newest resourceVersion of every event, and
on a normal end watch again from there; a 410 Gone (the version is older than the server keeps)
lists again; any other failure restarts after a capped, jittered exponential backoff, counted in
`restarts`. Only unassigned, non-terminal pods are asked for (`spec.nodeName=`), read as raw JSON
through a pruned schema, so a 150k-pod cluster costs what its pending pods cost.

Each pod is reported once per transition into PodScheduled=False/Unschedulable and forgotten when
it is scheduled (the selector then reports it DELETED) or deleted; a re-list reports only pods it
did not already know, so a 410 never floods the caller with the pods it was told about already.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import msgspec
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.errors import OperationError
from reconciler.kube.live import NOT_TERMINAL, ContinueExpired, continue_expired, restarting
from reconciler.kube.retry import no_answer
from reconciler.kube.schema import ListMetaDoc

_log = logging.getLogger(__name__)

UNASSIGNED = f"spec.nodeName=,{NOT_TERMINAL}"
_QUICK_END = 1.0  # a watch that ends normally this soon with no event is a failure (no hot loop)


class _Condition(TypedDict, total=False):
    type: str
    status: str
    reason: str


class _PodStatus(TypedDict, total=False):
    conditions: list[_Condition]


class _Meta(TypedDict, total=False):
    name: str
    namespace: str
    resourceVersion: str


class _Pod(TypedDict, total=False):
    metadata: _Meta
    status: _PodStatus


class _PodList(TypedDict, total=False):
    metadata: ListMetaDoc
    items: list[_Pod]


class _Event(TypedDict, total=False):
    type: str
    object: msgspec.Raw  # a Pod, a BOOKMARK's bare metadata, or an ERROR's Status


class _Status(TypedDict, total=False):
    code: int
    reason: str
    message: str


_list_decoder = msgspec.json.Decoder(_PodList)
_event_decoder = msgspec.json.Decoder(_Event)
_pod_decoder = msgspec.json.Decoder(_Pod)
_status_decoder = msgspec.json.Decoder(_Status)


class _Gone(Exception):
    """410: the resourceVersion is older than the server keeps; only a new list helps."""


class _Failed(Exception):
    """The watch failed in a way worth a backoff (an ERROR event, an immediate end)."""


class UnschedulableWatch:
    """Calls `on_unschedulable("<namespace>/<name>")` from its daemon thread as pods become
    unschedulable. The caller batches them (runtime/pod_batches.py): a burst of pending pods is a
    burst of calls."""

    def __init__(
        self,
        api: k8s.ApiClient,
        on_unschedulable: Callable[[str], None],
        *,
        request_timeout: float = 30.0,
        watch_timeout: int = 300,
        max_backoff: float = 30.0,
        initial_backoff: float = 1.0,
        page_size: int = 500,
    ) -> None:
        self.core = k8s.CoreV1Api(api)
        self.host = api.configuration.host
        self.on_unschedulable = on_unschedulable
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        self.initial_backoff = initial_backoff
        self.page_size = page_size
        self._known: set[str] = set()  # pods reported unschedulable and not since scheduled or gone
        self._version = ""  # the newest resourceVersion seen; "" means list first
        self._restarts = 0
        self._lists = 0
        self._failures = 0  # failures in a row, for the backoff
        self._trouble: str | None = None  # the failure last logged, until the watch works again
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None  # the open watch stream, closed by stop()
        self._thread: threading.Thread | None = None

    @property
    def restarts(self) -> int:
        """How many times the watch was restarted after an error (a metric)."""
        return self._restarts

    @property
    def lists(self) -> int:
        """How many lists completed: the first, then one per 410 Gone."""
        return self._lists

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the watch: the open stream is shut at once; a list in flight ends within
        request_timeout, and is not waited for beyond `timeout`."""
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            _shut(response)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        quick = 0  # watches in a row that ended soon after they began (410s, streams cut short)
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                if not self._version:
                    self._list()
                self._watch()
            except _Gone:
                _log.info("pod watch: resourceVersion %s is too old: listing again", self._version)
                self._version = ""
            except Exception as exc:  # every other failure, a bug included: back off and go on
                if self._stop.is_set():
                    return
                self._failed(exc)
                continue
            # client-go's backoff manager, in short: a server that keeps ending watches at once
            # (410 after 410, a stream cut after one event) is never asked again in a tight loop
            if time.monotonic() - began < _QUICK_END:
                quick += 1
                delay = min(self.max_backoff, self.initial_backoff * 2 ** min(quick - 1, 30))
                self._stop.wait(delay * (0.5 + random.random() / 2))
            else:
                quick = 0

    def _failed(self, exc: Exception) -> None:
        self._restarts += 1
        self._failures += 1
        delay = min(self.max_backoff, self.initial_backoff * 2 ** min(self._failures - 1, 30))
        delay *= 0.5 + random.random() / 2
        kind, why = _describe(exc, self.host)
        if kind != self._trouble:
            self._trouble = kind
            _log.warning(
                "pod watch: %s; restarting with backoff (at most %gs)",
                why,
                self.max_backoff,
                exc_info=kind == "bug",
            )
        else:
            _log.debug("pod watch: %s; restarting in %.1fs", why, delay)
        self._stop.wait(delay)

    def _working(self) -> None:
        self._failures = 0
        if self._trouble is not None:
            self._trouble = None
            _log.info("pod watch: watching again (%d restarts so far)", self._restarts)

    # ------------------------------------------------------------------ list

    def _list(self) -> None:
        """Every unassigned, unschedulable pod now; report those not already known. A continue
        token that expires starts the list again (kube.live.restarting)."""
        found, version = restarting("list unassigned pods", self._list_pages)
        if self._stop.is_set():
            return
        new = found - self._known
        self._known = found
        self._version = version
        self._lists += 1
        self._working()
        for key in sorted(new):
            self._report(key)

    def _list_pages(self) -> tuple[set[str], str]:
        """(the unschedulable pods, the list's resourceVersion), every page read."""
        found: set[str] = set()
        version, token = "", ""
        while True:
            try:
                response: Any = self.core.list_pod_for_all_namespaces(
                    field_selector=UNASSIGNED,
                    limit=self.page_size,
                    _continue=token or None,
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
            except ApiException as exc:
                if continue_expired(exc, token):
                    raise ContinueExpired("pods") from None
                raise
            page = _list_decoder.decode(response.data)
            meta = page.get("metadata") or {}
            # the first page's version: every page is served at it
            version = version or str(meta.get("resourceVersion") or "")
            found.update(_key(pod) for pod in page.get("items") or [] if _unschedulable(pod))
            token = str(meta.get("continue") or "")
            if not token or self._stop.is_set():
                return found, version

    # ------------------------------------------------------------------ watch

    def _watch(self) -> None:
        """One watch from the kept resourceVersion, until the server ends it (or stop())."""
        started = time.monotonic()
        try:
            response: Any = self.core.list_pod_for_all_namespaces(
                watch=True,
                field_selector=UNASSIGNED,
                resource_version=self._version or None,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_timeout,
                _preload_content=False,
                _request_timeout=(
                    self.request_timeout,
                    self.watch_timeout + max(5.0, self.watch_timeout / 10),
                ),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise _Gone() from None
            raise
        with self._lock:
            self._response = response
        events = 0
        try:
            if self._stop.is_set():
                return
            for line in _lines(response):
                if not events:
                    self._working()  # the stream delivers: whatever failed before works again
                events += 1
                self._event(line)
                if self._stop.is_set():
                    return
        finally:
            with self._lock:
                self._response = None
            response.close()
            response.release_conn()
        if events:
            return
        if not self._stop.is_set() and time.monotonic() - started < _QUICK_END:
            raise _Failed("the server ended the watch at once")
        self._working()

    def _event(self, line: bytes) -> None:
        event = _event_decoder.decode(line)
        kind = event.get("type") or ""
        raw = event.get("object")
        if raw is None:
            return
        if kind == "ERROR":
            status = _status_decoder.decode(raw)
            if status.get("code") == 410:
                raise _Gone()
            raise _Failed(
                f"the watch answered HTTP {status.get('code')} {status.get('reason') or ''}: "
                f"{status.get('message') or ''}"
            )
        pod = _pod_decoder.decode(raw)
        version = (pod.get("metadata") or {}).get("resourceVersion")
        if version:
            self._version = version
        if kind == "BOOKMARK":
            return
        key = _key(pod)
        if kind in ("ADDED", "MODIFIED") and _unschedulable(pod):
            if key not in self._known:
                self._known.add(key)
                self._report(key)
        else:  # scheduled (with our selector a bound pod comes as DELETED), deleted, or no longer pending
            self._known.discard(key)

    def _report(self, key: str) -> None:
        try:
            self.on_unschedulable(key)
        except Exception:  # the caller's bug must not end the watch
            _log.exception("pod watch: on_unschedulable(%s) failed", key)


def _lines(response: Any) -> Iterator[bytes]:
    """The stream's newline-delimited JSON, a line at a time (kubernetes.watch's protocol)."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _key(pod: _Pod) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _unschedulable(pod: _Pod) -> bool:
    """PodScheduled=False with reason Unschedulable: the scheduler found no node for it."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
    return False


def _shut(response: Any) -> None:
    """Stop a read in progress on another thread: shut the socket down under it."""
    try:
        response.shutdown()
    except Exception:  # already closed, or a response without a socket
        _log.debug("pod watch: shutting the stream down failed", exc_info=True)


def _describe(exc: Exception, host: str) -> tuple[str, str]:
    """(kind, message) of a failure; the kind decides when a new warning is worth logging."""
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}", f"HTTP {exc.status} {exc.reason or 'error'}"
    if isinstance(exc, urllib3.exceptions.HTTPError):
        kind, why = no_answer(exc)
        return kind, f"{'cannot reach' if kind == 'refused' else 'no answer from'} {host}: {why}"
    if isinstance(exc, _Failed | OperationError):  # OperationError: a list that kept expiring
        return "failed", str(exc)
    if isinstance(exc, msgspec.DecodeError):
        return "unreadable", f"unreadable reply: {exc}"
    return "bug", f"unexpected error: {exc!r}"
