"""A watch on one key of the status ConfigMap: the split deployment's wake-up hint (issue 20).

The plan-stage process writes the commit it pushed to git.branch under `plan-pushed` in
`asg-reconciler-status` (kube/status_configmap.py, `mark`); the apply-stage process watches that one
ConfigMap (a watch with `fieldSelector=metadata.name=...`, which RBAC authorises by resourceNames)
and is told each new value within the API server's latency, instead of finding the push at its next
`git ls-remote` poll. The value is a hint, never an input: the caller only asks the remote earlier
(docs/operations.md "The wake-up hint"), so a forged value costs one early `ls-remote`.

A watch without a resourceVersion starts with the object as it is (a synthetic ADDED), so a new
watch after the server ends one (every `watch_timeout`) or after a failure never misses a value and
needs no list; the value is reported only when it differs from the last one reported. Failures
restart after a capped, jittered exponential backoff, logged once per kind of trouble.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
from kubernetes import client as k8s

from reconciler.domain.backoff import EQUAL_JITTER, Backoff
from reconciler.kube.watch_stream import describe, lines

_log = logging.getLogger(__name__)

_QUICK_END = 1.0  # a watch that ends this soon after it began counts towards the backoff


class _Failed(Exception):
    """The watch failed in a way worth a backoff (an ERROR event, an unreadable event)."""


class KeyWatch:
    """Calls `on_value(text)` from its daemon thread each time `data[key]` of the ConfigMap
    `namespace/name` takes a new non-empty value (the first one seen included)."""

    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        name: str,
        key: str,
        on_value: Callable[[str], None],
        *,
        request_timeout: float = 30.0,
        watch_timeout: int = 300,
        max_backoff: float = 30.0,
        initial_backoff: float = 1.0,
    ) -> None:
        self.core = k8s.CoreV1Api(api)
        self.host = api.configuration.host
        self.namespace, self.name, self.key = namespace, name, key
        self.on_value = on_value
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        self.initial_backoff = initial_backoff
        self._backoff = Backoff(initial_backoff, max(initial_backoff, max_backoff), spread=EQUAL_JITTER)
        self.restarts = 0  # failures that restarted the watch (a metric's worth)
        self._last = ""
        self._failures = 0
        self._trouble: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        return f"configmap {self.namespace}/{self.name} key {self.key}"

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="hint-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the watch: the open stream is shut at once."""
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # already closed, or a response without a socket
                _log.debug("hint watch: shutting the stream down failed", exc_info=True)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        quick = 0
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self._watch()
            except Exception as exc:  # every failure, a bug included: back off and go on
                if self._stop.is_set():
                    return
                self._failed(exc)
                continue
            if time.monotonic() - began < _QUICK_END:  # a server ending watches at once: no hot loop
                quick += 1
                self._stop.wait(self._backoff.delay(quick - 1))
            else:
                quick = 0

    def _watch(self) -> None:
        response: Any = self.core.list_namespaced_config_map(
            self.namespace,
            watch=True,
            field_selector=f"metadata.name={self.name}",
            timeout_seconds=self.watch_timeout,
            _preload_content=False,
            _request_timeout=(self.request_timeout, self.watch_timeout + max(5.0, self.watch_timeout / 10)),
        )
        with self._lock:
            self._response = response
        try:
            if self._stop.is_set():
                return
            for line in lines(response):
                self._event(line)
                self._working()
                if self._stop.is_set():
                    return
        finally:
            with self._lock:
                self._response = None
            response.close()
            response.release_conn()

    def _event(self, line: bytes) -> None:
        try:
            event = orjson.loads(line)
            kind, found = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise _Failed(f"the watch answered HTTP {found.get('code')} {found.get('reason') or ''}")
            if kind not in ("ADDED", "MODIFIED"):
                return  # DELETED: the hint is gone, nothing to ask; BOOKMARK: nothing
            value = (found.get("data") or {}).get(self.key)
        except (orjson.JSONDecodeError, AttributeError) as exc:
            raise _Failed(f"unreadable event: {exc}") from None
        if isinstance(value, str) and value and value != self._last:
            self._last = value
            try:
                self.on_value(value)
            except Exception:  # the caller's bug must not end the watch
                _log.exception("hint watch: on_value failed")

    def _failed(self, exc: Exception) -> None:
        self.restarts += 1
        self._failures += 1
        delay = self._backoff.delay(self._failures - 1)
        kind, why = describe(exc, self.host, (_Failed,))
        if kind != self._trouble:
            self._trouble = kind
            _log.warning(
                "hint watch (%s): %s; restarting with backoff (at most %gs); apply polls meanwhile",
                self.where,
                why,
                self.max_backoff,
            )
        self._stop.wait(delay)

    def _working(self) -> None:
        self._failures = 0
        if self._trouble is not None:
            self._trouble = None
            _log.info("hint watch (%s): watching again", self.where)
