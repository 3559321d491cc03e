"""The status ConfigMap `asg-reconciler-status`, as cluster-autoscaler keeps `cluster-autoscaler-status`:
`data.status` holds the readable document (reconciler/telemetry/status.py) and the annotation
`asg-reconciler.dev/last-updated` when it last changed (CA: `cluster-autoscaler.kubernetes.io/
last-updated`).

Unlike CA, which rewrites its ConfigMap every loop, this writes only when the text differs from what
is there: a GET per publish, a write only on change (created when absent; otherwise a merge patch
carrying the resourceVersion read, so a concurrent writer is never overwritten blindly: on a
conflict, read and decide again, once). Only our key and annotation are touched; anything else a
person put there stays. Never raises: the status is a courtesy, the loop goes on without it.

The API server refuses a ConfigMap whose values exceed 1 MiB (422); cluster-autoscaler keeps its
status to 1,000,000 bytes. So does this, for all the values together (the split deployment's two
keys share the object): our key gets what the others leave of 1,000,000 bytes. A caller that can
shorten its text with sense passes a renderer given that budget (the run loop drops quiet node
groups); whatever is still over is cut after the last whole line that fits, and a last line says so.

The split deployment's plan stage also keeps `plan-pushed` here: the commit it last pushed to
git.branch, the apply stage's wake-up hint (`mark`). One commit id, 40 or 64 bytes: written beside
a status already at 1,000,000 bytes it stays far below the API server's 1 MiB, and every status
publish after it counts it among the others' bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.kube.retry import no_answer

_log = logging.getLogger(__name__)

STATUS_CONFIGMAP = "asg-reconciler-status"
STATUS_KEY = "status"
PUSHED_KEY = "plan-pushed"  # the split deployment's wake-up hint: the commit plan last pushed to main
LAST_UPDATED_ANNOTATION = "asg-reconciler.dev/last-updated"
_MERGE_PATCH = "application/merge-patch+json"
MAX_STATUS_BYTES = 1_000_000  # cluster-autoscaler's cap; the API server's is 1 MiB of values

Text = str | Callable[[int], str]
"""The status: its text, or a renderer given the bytes it may take."""


def fit(text: str, budget: int) -> str:
    """`text` if it takes at most `budget` bytes (UTF-8), else its whole lines that fit and a last
    line saying it was truncated. Pure."""
    data = text.encode()
    if len(data) <= budget:
        return text
    note = (
        f"# truncated: {len(data)} bytes, and a ConfigMap holds {MAX_STATUS_BYTES} at most "
        "(asg-reconciler status shows everything)\n"
    )
    room = budget - len(note.encode())
    if room <= 0:
        return note.encode()[: max(0, budget)].decode(errors="ignore")
    kept = data[:room]
    return kept[: kept.rfind(b"\n") + 1].decode() + note  # a newline is never inside a character


def _time(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Conflict(Exception):
    """Someone wrote between our read and our write."""


class StatusConfigMap:
    """Publishes the status text into one namespace's `asg-reconciler-status`."""

    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        name: str = STATUS_CONFIGMAP,
        *,
        request_timeout: float = 10.0,
        key: str = STATUS_KEY,
    ) -> None:
        """`key`: the data key this writer owns (the split deployment's plan and apply processes
        each write their own, so neither overwrites the other's view)."""
        self.core = k8s.CoreV1Api(api)
        self.namespace = namespace
        self.name = name
        self.key = key
        self.request_timeout = request_timeout
        self._failing = False  # log the first failure of a streak, not one per cycle
        self._cut = False  # log the first truncation of a streak, not one per cycle

    @property
    def where(self) -> str:
        return f"configmap {self.namespace}/{self.name}"

    def publish(self, text: Text, now: datetime) -> bool:
        """Write `text` (kept under the cap) unless it is already there; True when written. Never
        raises."""
        try:
            for _ in range(2):
                try:
                    written = self._publish(text, now)
                except _Conflict:
                    continue
                self._recovered()
                return written
            self._failed("it changed under both writes (409 Conflict); the next cycle tries again")
        except ApiException as exc:
            self._failed(f"HTTP {exc.status} {exc.reason or ''}".strip())
        except urllib3.exceptions.HTTPError as exc:
            self._failed(no_answer(exc)[1])
        except ValueError as exc:
            self._failed(f"unreadable answer: {exc}")
        return False

    def mark(self, key: str, value: str, now: datetime) -> bool:
        """Set one small data key (the wake-up hint) at once: a merge patch of that key alone, no read
        first (no other key is touched, so no resourceVersion is needed); the ConfigMap is created
        when absent. True when written. Never raises."""
        patch = {"data": {key: value}}  # not the document: its last-updated annotation stays
        try:
            for _ in range(2):
                try:
                    self.core.patch_namespaced_config_map(
                        self.name,
                        self.namespace,
                        patch,
                        _content_type=_MERGE_PATCH,
                        _preload_content=False,
                        _request_timeout=self.request_timeout,
                    )
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                    try:
                        self._create(key, value, now)
                    except _Conflict:
                        continue  # created meanwhile: patch it
                self._recovered()
                return True
            self._failed("it was created and deleted under both writes; the next push tries again")
        except ApiException as exc:
            self._failed(f"HTTP {exc.status} {exc.reason or ''}".strip())
        except urllib3.exceptions.HTTPError as exc:
            self._failed(no_answer(exc)[1])
        return False

    def _create(self, key: str, text: str, now: datetime) -> None:
        body: Any = {  # a plain dict: the client sends it as is
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "annotations": {LAST_UPDATED_ANNOTATION: _time(now)},
            },
            "data": {key: text},
        }
        try:
            self.core.create_namespaced_config_map(
                self.namespace, body, _preload_content=False, _request_timeout=self.request_timeout
            )
        except ApiException as exc:
            if exc.status == 409:  # created meanwhile (another replica): read it and compare
                raise _Conflict from None
            raise

    def _publish(self, render: Text, now: datetime) -> bool:
        current = self._read()
        others = (current or {}).get("data") or {}
        budget = MAX_STATUS_BYTES - sum(len(str(v).encode()) for k, v in others.items() if k != self.key)
        binary = (current or {}).get("binaryData") or {}
        budget -= sum(len(str(v)) * 3 // 4 for v in binary.values())  # base64
        text = self._fitted(render(max(0, budget)) if callable(render) else render, max(0, budget))
        if current is None:
            self._create(self.key, text, now)
            return True
        if (current.get("data") or {}).get(self.key) == text:
            return False
        meta = current.get("metadata") or {}
        patch = {
            "metadata": {
                "resourceVersion": str(meta.get("resourceVersion") or ""),
                "annotations": {LAST_UPDATED_ANNOTATION: _time(now)},
            },
            "data": {self.key: text},
        }
        try:
            self.core.patch_namespaced_config_map(
                self.name,
                self.namespace,
                patch,
                _content_type=_MERGE_PATCH,
                _preload_content=False,
                _request_timeout=self.request_timeout,
            )
        except ApiException as exc:
            if exc.status in (404, 409):  # deleted or changed since our read: decide again
                raise _Conflict from None
            raise
        return True

    def _fitted(self, text: str, budget: int) -> str:
        fitted = fit(text, budget)
        if fitted != text and not self._cut:
            _log.warning(
                "status: %s holds %d of the status's %d bytes (a ConfigMap stays under 1 MiB): the rest "
                "is cut, as the text says",
                self.where,
                len(fitted.encode()),
                len(text.encode()),
            )
        self._cut = fitted != text
        return fitted

    def _read(self) -> dict[str, Any] | None:
        try:
            response: Any = self.core.read_namespaced_config_map(
                self.name, self.namespace, _preload_content=False, _request_timeout=self.request_timeout
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        body = orjson.loads(response.data)
        if not isinstance(body, dict):
            raise ValueError("not an object")
        return body

    def _failed(self, why: str) -> None:
        log = _log.debug if self._failing else _log.warning
        log("status: cannot write %s: %s", self.where, why)
        self._failing = True

    def _recovered(self) -> None:
        if self._failing:
            _log.info("status: %s reachable again", self.where)
        self._failing = False
