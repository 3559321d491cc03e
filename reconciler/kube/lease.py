"""The apply Lease: one apply at a time per cluster (DESIGN §3.6).

Two applies draining and terminating at once could each be right alone and wrong together (both
remove the last spare node), so every non-dry-run apply holds `asg-reconciler-apply-<cluster>`.
Every write carries the resourceVersion it was decided on: of two racing acquirers the API server
lets exactly one through and the other re-reads and decides again. Expiry is judged on the holder's
renewTime against our clock, so keep node clocks in sync (skew shortens or lengthens the wait).

The Lease also keeps the digest of the last record apply wrote (the annotation
`asg-reconciler.dev/last-record`, the records' anchor: docs/gitops.md "Apply records"), since the
plan bot's Git credentials cannot write here. It is read when the Lease is acquired (`anchor`) and
moved only by the holder (`set_anchor`). A transient API failure (5xx, 429, a dropped connection)
while acquiring or moving the anchor is retried a few times with a short backoff.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from types import TracebackType
from typing import Any, NoReturn, TypeVar

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.errors import OperationError, RefusedError
from reconciler.kube.live import api_error, unreachable
from reconciler.model import APPLY_LEASE_NAMESPACE, APPLY_LEASE_PREFIX, RECORD_ANCHOR_ANNOTATION

_ATTEMPTS = 5
_TRANSIENT_TRIES = 4  # a transient failure is retried after retry_wait, 2x, 4x
_MERGE_PATCH = "application/merge-patch+json"
_T = TypeVar("_T")


class LeaseLost(OperationError):
    """Someone else holds the lease we thought was ours: stop changing the cluster."""


class _Transient(OperationError):
    """A failure worth another try: HTTP 5xx or 429, or no answer at all."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


def new_lease(name: str, namespace: str, holder: str, duration_seconds: int, now: datetime) -> k8s.V1Lease:
    """A Lease held by `holder` from `now`, to create."""
    # The client's model serializes datetimes with isoformat(), which leaves out a zero fraction
    # that the API server's MicroTime parser requires; a microsecond more keeps it there.
    stamp = now if now.microsecond else now + timedelta(microseconds=1)
    return k8s.V1Lease(
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        spec=k8s.V1LeaseSpec(
            holder_identity=holder,
            lease_duration_seconds=duration_seconds,
            acquire_time=stamp,
            renew_time=stamp,
            lease_transitions=0,
        ),
    )


def micro_time(when: datetime) -> str:
    """MicroTime as the API server parses it: RFC 3339 with exactly six fractional digits."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


class ApplyLease:
    """The apply Lease of one cluster. As a context manager it acquires, renews on a daemon thread
    every third of the duration, and releases on exit; call `check()` before each step that changes
    the cluster or AWS, since a renewal may fail between steps."""

    def __init__(
        self,
        api: k8s.ApiClient,
        cluster: str,
        *,
        namespace: str = APPLY_LEASE_NAMESPACE,
        identity: str | None = None,
        duration_seconds: int = 60,
        renew_every: float | None = None,
        now: Callable[[], datetime] = _utcnow,
        retry_wait: float = 0.5,
    ) -> None:
        self.api = api
        self.coordination = k8s.CoordinationV1Api(api)
        self.name = f"{APPLY_LEASE_PREFIX}{cluster}"
        self.namespace = namespace
        self.retry_wait = retry_wait
        self._annotations: dict[str, str] = {}
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.duration_seconds = duration_seconds
        self.renew_every = renew_every if renew_every is not None else duration_seconds / 3
        self._now = now
        self._lock = threading.Lock()
        self._resource_version = ""
        self._renewed: datetime | None = None  # when we last wrote the lease as ours; None: not held
        self._lost: OperationError | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def held(self) -> bool:
        return self._renewed is not None and self._lost is None

    @property
    def annotations(self) -> dict[str, str]:
        """The Lease's annotations as of our last write (acquire, renew, set_anchor); {} before."""
        return dict(self._annotations)

    @property
    def anchor(self) -> str | None:
        """The digest of the last record apply wrote, as the Lease said when we acquired it (or as
        we set it since); None when it has none (a new Lease, or no signed record yet)."""
        return self._annotations.get(RECORD_ANCHOR_ANNOTATION) or None

    def read_anchor(self) -> str | None:
        """The anchor as the Lease has it now, without acquiring it (a dry run: what a real run
        would check the records against); None when there is no Lease or no anchor."""
        with self._lock:
            current = self._retrying(self._read)
        annotations = ((current or {}).get("metadata") or {}).get("annotations") or {}
        return str(annotations.get(RECORD_ANCHOR_ANNOTATION) or "") or None

    # ------------------------------------------------------------------ acquire / renew / release

    def acquire(self) -> None:
        """Create the Lease, or take it over when released or expired (renewTime +
        leaseDurationSeconds in the past). Raises RefusedError while another holder keeps it fresh.
        A transient API failure is retried (each try reads the Lease again), then is an
        OperationError."""
        with self._lock:
            self._retrying(self._acquire_once)

    def _acquire_once(self) -> None:
        """One try at acquire (the lock held)."""
        for _ in range(_ATTEMPTS):
            current = self._read()
            now = self._now()
            if current is None:
                if self._create(now):
                    return
                continue  # someone created it first: look at who
            spec = current.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if holder and holder != self.identity:
                renewed = _parse_time(spec.get("renewTime")) or _parse_time(spec.get("acquireTime"))
                duration = int(spec.get("leaseDurationSeconds") or self.duration_seconds)
                if renewed is not None and renewed + timedelta(seconds=duration) > now:
                    ago = max(0, int((now - renewed).total_seconds()))
                    raise RefusedError(
                        f"another apply holds lease {self.where} (holder {holder}, renewed {ago}s ago); "
                        f"try again when it is done, or after {max(1, duration - ago)}s if it stopped "
                        "without releasing it"
                    )
            fields: dict[str, Any] = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.duration_seconds,
                "renewTime": micro_time(now),
            }
            if holder != self.identity:
                fields["acquireTime"] = micro_time(now)
                fields["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            outcome = self._patch(current["metadata"]["resourceVersion"], fields, "acquire")
            if outcome == "ok":
                self._renewed, self._lost = now, None
                return
        raise OperationError(f"Kubernetes API: acquire lease {self.where}: it kept changing under us")

    def renew(self) -> None:
        """Move renewTime to now. Raises LeaseLost when someone else holds the lease now."""
        with self._lock:
            if self._lost is not None:
                raise self._lost
            if self._renewed is None:
                raise OperationError(f"lease {self.where} is not held: acquire it first")
            now = self._now()
            self._patch_ours("renew", {"renewTime": micro_time(now)})
            self._renewed = now

    def release(self) -> None:
        """Clear holderIdentity so the next apply need not wait for expiry; only if still ours."""
        with self._lock:
            if self._renewed is None:
                return
            try:
                for _ in range(_ATTEMPTS):
                    current = self._read()
                    spec = (current or {}).get("spec") or {}
                    if current is None or spec.get("holderIdentity") != self.identity:
                        return
                    fields = {"holderIdentity": None, "renewTime": micro_time(self._now())}
                    if self._patch(current["metadata"]["resourceVersion"], fields, "release") != "conflict":
                        return
                raise OperationError(f"Kubernetes API: release lease {self.where}: it kept changing under us")
            finally:
                self._renewed = None

    def set_anchor(self, digest: str) -> None:
        """Keep `digest` (the last record apply wrote) on the Lease, only while we hold it: a merge
        patch of the annotation guarded by resourceVersion. On a conflict the Lease is read again:
        still ours, the patch is retried; someone else's (or deleted), LeaseLost."""
        with self._lock:
            if self._lost is not None:
                raise self._lost
            if self._renewed is None:
                raise OperationError(f"lease {self.where} is not held: acquire it first")
            self._patch_ours("anchor on", {}, {RECORD_ANCHOR_ANNOTATION: digest}, retry=True)

    def check(self) -> None:
        """Raise unless the lease is ours and was renewed recently enough: within its duration less
        one renewal period, client-go's renewDeadline margin, so the change this check guards is
        made while no one else could take the Lease yet (a synced clock assumed)."""
        if self._lost is not None:
            raise self._lost
        renewed = self._renewed
        if renewed is None:
            raise OperationError(f"lease {self.where} is not held")
        age = (self._now() - renewed).total_seconds()
        if age >= self.duration_seconds - self.renew_every:
            raise OperationError(
                f"lease {self.where} was not renewed for {int(age)}s (duration {self.duration_seconds}s): "
                "another apply may take it before this change is made"
            )

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> ApplyLease:
        self.acquire()
        self._stop.clear()
        self._thread = threading.Thread(target=self._keep_renewing, name=f"lease-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        try:
            self.release()
        except OperationError:
            if exc is None:
                raise  # the lease expires by itself; an error already on its way matters more

    def _keep_renewing(self) -> None:
        while not self._stop.wait(self.renew_every):
            try:
                self.renew()
            except LeaseLost:
                return
            except OperationError:
                continue  # a blip: the next tick retries, and check() fails once the lease lapses

    # ------------------------------------------------------------------ API calls (lock held)

    def _retrying(self, call: Callable[[], _T]) -> _T:
        """`call()`, again after a transient failure (retry_wait, then twice and four times that)."""
        for attempt in range(_TRANSIENT_TRIES):
            try:
                return call()
            except _Transient:
                if attempt == _TRANSIENT_TRIES - 1:
                    raise
                time.sleep(self.retry_wait * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _patch_ours(
        self,
        action: str,
        fields: dict[str, Any],
        annotations: dict[str, str] | None = None,
        *,
        retry: bool = False,
    ) -> None:
        """A merge patch of the Lease while it is ours (lock held), guarded by the resourceVersion we
        last saw. On a conflict it is read again: still ours, patched again; someone else's (or
        deleted), LeaseLost. `retry`: ride out transient failures too."""
        call: Callable[[Callable[[], _T]], _T] = self._retrying if retry else _call_once
        version = self._resource_version
        for _ in range(_ATTEMPTS):
            outcome = call(partial(self._patch, version, fields, action, annotations))
            if outcome == "ok":
                return
            current = call(self._read) if outcome == "conflict" else None
            if current is None:
                self._lose(f"lease {self.where} was deleted")
            holder = str((current.get("spec") or {}).get("holderIdentity") or "")
            if holder != self.identity:
                self._lose(f"lease {self.where} is now held by {holder or 'nobody'}")
            version = current["metadata"]["resourceVersion"]
        raise OperationError(f"Kubernetes API: {action} lease {self.where}: it kept changing under us")

    def _lose(self, why: str) -> NoReturn:
        self._lost = LeaseLost(f"{why}: this apply must stop changing the cluster")
        raise self._lost

    def _read(self) -> dict[str, Any] | None:
        try:
            response: Any = self.coordination.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _failure(f"read lease {self.where}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise _Transient(str(unreachable(self.api, exc))) from None
        document: dict[str, Any] = orjson.loads(response.data)
        return document

    def _create(self, now: datetime) -> bool:
        """False when the Lease already exists (409)."""
        body = new_lease(self.name, self.namespace, self.identity, self.duration_seconds, now)
        try:
            response: Any = self.coordination.create_namespaced_lease(
                self.namespace, body, _preload_content=False
            )
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise _failure(f"create lease {self.where}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise _Transient(str(unreachable(self.api, exc))) from None
        self._remember(response.data)
        self._renewed, self._lost = now, None
        return True

    def _patch(
        self, version: str, fields: dict[str, Any], action: str, annotations: dict[str, str] | None = None
    ) -> str:
        """Merge `fields` into spec (and `annotations` into metadata), guarded by `version`: "ok",
        "conflict" (409) or "gone" (404)."""
        metadata: dict[str, Any] = {"resourceVersion": version}
        if annotations:
            metadata["annotations"] = annotations
        patch: dict[str, Any] = {"metadata": metadata}
        if fields:
            patch["spec"] = fields
        try:
            response: Any = self.coordination.patch_namespaced_lease(
                self.name, self.namespace, patch, _content_type=_MERGE_PATCH, _preload_content=False
            )
        except ApiException as exc:
            if exc.status == 409:
                return "conflict"
            if exc.status == 404:
                return "gone"
            raise _failure(f"{action} lease {self.where}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise _Transient(str(unreachable(self.api, exc))) from None
        self._remember(response.data)
        return "ok"

    def _remember(self, data: bytes) -> None:
        metadata = orjson.loads(data)["metadata"]
        self._resource_version = str(metadata["resourceVersion"])
        self._annotations = {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()}


def _failure(action: str, exc: ApiException) -> OperationError:
    """The one-line error for an API error; transient (worth a retry) for 5xx and 429."""
    error = api_error(action, exc)
    status = exc.status or 0
    return _Transient(str(error)) if status >= 500 or status == 429 else error


def _call_once(call: Callable[[], _T]) -> _T:
    return call()
