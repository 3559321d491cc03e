"""The apply Lease: one apply at a time per cluster (DESIGN §3.6).

Two applies draining and terminating at once could each be right alone and wrong together (both
remove the last spare node), so every non-dry-run apply holds `asg-reconciler-apply-<cluster>`.
Every write carries the resourceVersion it was decided on: of two racing acquirers the API server
lets exactly one through and the other re-reads and decides again.

Expiry is judged as client-go's leaderelection judges it, never by comparing the holder's renewTime
with our wall clock (a clock 61 s ahead would take a fresh 60 s Lease): an applier that finds the
Lease held by someone else watches the record (holder, times, transitions, resourceVersion) and takes
it over only once it has seen no change for leaseDurationSeconds of its own monotonic time. Only the
safe direction trusts the wall clock: a record that looks fresh by it is refused at once, without
waiting (refusing never makes two holders). A Lease released (no holder) is taken at once.

The holder renews every third of the duration and, before every change it makes to the cluster, AWS
or Git, `check()` reads the Lease from the API server: it must still name us with a renewTime we
wrote, and our last successful renewal must have started less than the renew deadline (duration less
one renewal period) ago, so no observer can take it before the change is made. `guard_writes` gives
the client every cluster write of apply goes through, which checks first by itself. Losing the
Lease raises LeaseLost, which is not an Exception: like an interrupt, no handler that tidies up after
a failed step (giving a node back, the final sweep, the record) runs, since those are writes too.

The Lease also keeps the digest of the last record apply wrote (the annotation
`asg-reconciler.dev/last-record`, the records' anchor: docs/gitops.md "Apply records"), since the
plan bot's Git credentials cannot write here. It is read when the Lease is acquired (`anchor`) and
moved only by the holder (`set_anchor`). A transient API failure while acquiring, checking or
moving the anchor (what kube/retry.py's one predicate calls transient, as for every other Kubernetes
call: 500, 502, 503, 504, 429, a dropped connection) is retried a few times with a short backoff.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from types import TracebackType
from typing import Any, NoReturn, TypeVar

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.domain.backoff import Backoff
from reconciler.domain.errors import OperationError, RefusedError
from reconciler.domain.lease_names import apply_lease_name
from reconciler.domain.model import APPLY_LEASE_NAMESPACE, RECORD_ANCHOR_ANNOTATION
from reconciler.kube.errors import KubernetesError
from reconciler.kube.live import api_error, unreachable
from reconciler.kube.retry import transient

_log = logging.getLogger(__name__)

_ATTEMPTS = 5
_TRANSIENT_TRIES = 4  # a transient failure is retried after retry_wait, 2x, 4x
_MERGE_PATCH = "application/merge-patch+json"
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
_WRITTEN_KEPT = 8  # renewTimes we wrote that the Lease may still show (a write whose answer was lost)
_T = TypeVar("_T")

# What an observer compares to tell whether the holder is alive: any change is a sign of life.
_Observed = tuple[str, int, str, str, int, str]  # holder, duration, acquire, renew, transitions, version


class LeaseLost(BaseException):
    """The Lease is someone else's (or gone): this apply stops on the spot and writes nothing more.

    Not an Exception on purpose, as KeyboardInterrupt is not: every handler that tidies up after a
    failed step (a node given back, the final sweep, the result record) would write, and must not
    run. `runtime/apply_stage.py` turns it into an OperationError (exit 1, one line) at the edge."""

    exit_code = 1


class _Transient(KubernetesError):
    """A failure worth another try, as kube/retry.py's `transient` says: no answer at all, or an
    HTTP 500, 502, 503, 504 or 429."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class _MicroTime(datetime):
    """A datetime that the client's models serialize as MicroTime (`micro_time`): their isoformat()
    leaves out a zero fraction and says +00:00, and the API server wants six digits exactly."""

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return micro_time(self)


def new_lease(name: str, namespace: str, holder: str, duration_seconds: int, now: datetime) -> k8s.V1Lease:
    """A Lease held by `holder` from `now`, to create; its times written as MicroTime."""
    utc = (now if now.tzinfo else now.replace(tzinfo=UTC)).astimezone(UTC)
    stamp = _MicroTime(
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond, tzinfo=UTC
    )
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
    """MicroTime as the API server parses it (RFC3339Micro): exactly six fractional digits, in UTC,
    `2026-12-04T03:00:00.000000Z`; the server refuses a time with fewer or more digits."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _aware(when: datetime) -> datetime:
    """As micro_time writes it: a naive time is UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


ElectionRecord = tuple[str, int, str, str, int]  # holder, duration, acquireTime, renewTime, transitions


def election_record(lease: dict[str, Any]) -> ElectionRecord:
    """What an observer compares to tell whether the holder is alive: the election fields of spec
    (client-go's observedRecord). The apply Lease and the stages' leader Leases judge alike."""
    spec = lease.get("spec") or {}
    return (
        str(spec.get("holderIdentity") or ""),
        _int(spec.get("leaseDurationSeconds")),
        str(spec.get("acquireTime") or ""),
        str(spec.get("renewTime") or ""),
        _int(spec.get("leaseTransitions")),
    )


def _observed(lease: dict[str, Any]) -> _Observed:
    """The election record and the resourceVersion: any write to the Lease counts as a change."""
    return (*election_record(lease), str((lease.get("metadata") or {}).get("resourceVersion") or ""))


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class ApplyLease:
    """The apply Lease of one cluster. As a context manager it acquires, renews on a daemon thread
    every third of the duration, and releases on exit; call `check()` (or write through
    `guard_writes`) before each step that changes the cluster, AWS or Git."""

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
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        retry_period: float = 2.0,
        on_wait: Callable[[], None] = lambda: None,
        retry_wait: float = 0.5,
    ) -> None:
        """`now` stamps what we write (renewTime, acquireTime) and is trusted for nothing else;
        `monotonic` measures every wait and deadline. While watching someone else's Lease for
        expiry, the record is read every `retry_period` seconds and `on_wait()` is called before
        each pause (a heartbeat; it may raise to give up)."""
        self.api = api
        self.coordination = k8s.CoordinationV1Api(api)
        self.name = apply_lease_name(cluster)
        self.namespace = namespace
        self.retry_wait = retry_wait
        self._backoff = Backoff(retry_wait, retry_wait * 4)  # retry_wait, then 2x and 4x it
        self.retry_period = retry_period
        self._annotations: dict[str, str] = {}
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.duration_seconds = duration_seconds
        self.renew_every = renew_every if renew_every is not None else duration_seconds / 3
        self._now = now
        self._monotonic = monotonic
        self._sleep = sleep
        self._on_wait = on_wait
        self._lock = threading.RLock()
        self._resource_version = ""
        # monotonic start of our last successful acquire/renew; None: not held
        self._held_since: float | None = None
        self._written: deque[datetime] = deque(maxlen=_WRITTEN_KEPT)  # renewTimes we sent
        self._lost: LeaseLost | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def held(self) -> bool:
        return self._held_since is not None and self._lost is None

    @property
    def renew_deadline(self) -> float:
        """How long after its start a renewal keeps us safe to act: an observer needs the full
        duration of no change to take over; one renewal period is kept as the margin for the
        change being guarded (client-go's renewDeadline)."""
        return self.duration_seconds - self.renew_every

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

    def guard_writes(self, api: k8s.ApiClient) -> k8s.ApiClient:
        """`api`, except that every call that changes something first runs `check()`: build every
        client apply writes the cluster with this way, and no write path can skip the Lease."""
        return LeaseGuardedClient(api, self.check)

    # ------------------------------------------------------------------ acquire / renew / release

    def acquire(self) -> None:
        """Create the Lease, or take it when released, or when its record did not change for
        leaseDurationSeconds of our own monotonic time while we watched it. Raises RefusedError
        while another holder keeps it alive (at once when it looks fresh by our clock). A transient
        API failure is retried; one that lasts is an OperationError."""
        with self._lock:
            self._acquire()

    def _acquire(self) -> None:
        watching: tuple[_Observed, float] | None = None  # the record, and when we first saw it
        conflicts = 0
        while conflicts < _ATTEMPTS:
            current = self._retrying(self._read)
            if current is None:
                if self._retrying(self._create):
                    return
                conflicts += 1  # someone created it first: look at who
                continue
            spec = current.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if holder and holder != self.identity:
                record, seen = _observed(current), self._monotonic()
                if watching is None:
                    self._refuse_if_fresh(spec, holder)
                    watching = (record, seen)
                elif record != watching[0]:
                    raise RefusedError(
                        f"another apply holds lease {self.where} (holder {holder}, renewed while this apply "
                        f"watched it for {int(seen - watching[1])}s); try again when it is done",
                        kind="lease",
                    )
                duration = _int(spec.get("leaseDurationSeconds")) or self.duration_seconds
                left = watching[1] + duration - seen
                if left > 0:
                    self._on_wait()
                    self._sleep(min(self.retry_period, left))
                    continue
                _log.info(
                    "lease %s: holder %s did not renew it for %ds of this apply's own time: taking it over",
                    self.where,
                    holder,
                    duration,
                )
            now = self._now()
            fields: dict[str, Any] = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.duration_seconds,
                "renewTime": micro_time(now),
            }
            if holder != self.identity:
                fields["acquireTime"] = micro_time(now)
                fields["leaseTransitions"] = _int(spec.get("leaseTransitions")) + 1
            started = self._monotonic()
            self._written.append(_aware(now))
            version = current["metadata"]["resourceVersion"]
            outcome = self._retrying(partial(self._patch, version, fields, "acquire"))
            if outcome == "ok":
                self._held_since, self._lost = started, None
                return
            conflicts += 1  # someone wrote first: read again (a change while watching refuses)
        raise KubernetesError(f"Kubernetes API: acquire lease {self.where}: it kept changing under us")

    def _refuse_if_fresh(self, spec: dict[str, Any], holder: str) -> None:
        """The first look at someone else's Lease: refuse at once when it looks fresh by our clock.
        Otherwise (it looks expired, or renewed in our future: our clock cannot tell) it is watched,
        never taken on our clock's word."""
        renewed = _parse_time(spec.get("renewTime")) or _parse_time(spec.get("acquireTime"))
        duration = _int(spec.get("leaseDurationSeconds")) or self.duration_seconds
        if renewed is None:
            return
        ago = (self._now() - renewed).total_seconds()
        if 0 <= ago < duration:
            raise RefusedError(
                f"another apply holds lease {self.where} (holder {holder}, renewed {int(ago)}s ago); "
                f"try again when it is done, or after {max(1, duration - int(ago))}s if it stopped "
                "without releasing it",
                kind="lease",
            )
        _log.info(
            "lease %s is held by %s, whose renewTime this host's clock cannot vouch for; watching it for "
            "%ds before taking it over",
            self.where,
            holder,
            duration,
        )

    def renew(self) -> None:
        """Move renewTime to now. Raises LeaseLost when someone else holds the lease now."""
        with self._lock:
            self._raise_if_lost()
            if self._held_since is None:
                raise KubernetesError(f"lease {self.where} is not held: acquire it first")
            self._renew()

    def _renew(self) -> None:
        started, now = self._monotonic(), self._now()
        self._written.append(_aware(now))
        self._patch_ours("renew", {"renewTime": micro_time(now)})
        self._held_since = started

    def release(self) -> None:
        """Clear holderIdentity so the next apply need not wait for expiry; only if still ours (a
        Lease we lost is never written again)."""
        with self._lock:
            if self._held_since is None:
                return
            try:
                if self._lost is not None:
                    return
                for _ in range(_ATTEMPTS):
                    current = self._read()
                    spec = (current or {}).get("spec") or {}
                    if current is None or spec.get("holderIdentity") != self.identity:
                        return
                    fields = {"holderIdentity": None, "renewTime": micro_time(self._now())}
                    if self._patch(current["metadata"]["resourceVersion"], fields, "release") != "conflict":
                        return
                raise KubernetesError(
                    f"Kubernetes API: release lease {self.where}: it kept changing under us"
                )
            finally:
                self._held_since = None

    def set_anchor(self, digest: str) -> None:
        """Keep `digest` (the last record apply wrote) on the Lease, only while we hold it: a merge
        patch of the annotation guarded by resourceVersion. On a conflict the Lease is read again:
        still ours, the patch is retried; someone else's (or deleted), LeaseLost."""
        with self._lock:
            self._raise_if_lost()
            if self._held_since is None:
                raise KubernetesError(f"lease {self.where} is not held: acquire it first")
            self._patch_ours("anchor on", {}, {RECORD_ANCHOR_ANNOTATION: digest}, retry=True)

    def check(self) -> None:
        """Before a change: read the Lease from the API server and raise LeaseLost unless it still
        names us with a renewTime we wrote; then make sure our last renewal started less than the
        renew deadline ago, so no observer can take the Lease before the change is made. If the
        renewals lapsed (an API outage, a paused process) while nobody took it, renew it now on the
        version just read: a takeover racing that write makes one of the two conflict. A Lease that
        cannot be read is an OperationError: the change is not made."""
        with self._lock:
            self._raise_if_lost()
            if self._held_since is None:
                raise KubernetesError(f"lease {self.where} is not held")
            try:
                current = self._retrying(self._read)
            except OperationError as exc:
                raise KubernetesError(
                    f"cannot confirm lease {self.where} before this change: {exc}"
                ) from None
            self._confirm_ours(current)
            age = self._monotonic() - self._held_since
            if age < self.renew_deadline:
                return
            try:
                self._renew()
            except OperationError as exc:
                raise KubernetesError(
                    f"lease {self.where} was not renewed for {int(age)}s (duration {self.duration_seconds}s) "
                    f"and cannot be renewed now ({exc}): another apply may take it before this change is made"
                ) from None

    def _confirm_ours(self, current: dict[str, Any] | None) -> None:
        """LeaseLost unless `current` (just read) is our record; remembers its version."""
        if current is None:
            self._lose(f"lease {self.where} was deleted")
        spec = current.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if holder != self.identity:
            self._lose(f"lease {self.where} is now held by {holder or 'nobody'}")
        renewed = _parse_time(spec.get("renewTime"))
        if renewed not in self._written:
            self._lose(
                f"lease {self.where} shows renewTime {spec.get('renewTime') or 'none'}, which this apply "
                "did not write (someone else writes it)"
            )
        metadata = current.get("metadata") or {}
        self._resource_version = str(metadata.get("resourceVersion") or "")
        self._annotations = {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()}

    def _raise_if_lost(self) -> None:
        if self._lost is not None:
            raise LeaseLost(str(self._lost))

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
                continue  # a blip: the next tick retries; check() renews or fails once renewals lapse

    # ------------------------------------------------------------------ API calls (lock held)

    def _retrying(self, call: Callable[[], _T]) -> _T:
        """`call()`, again after a transient failure (retry_wait, then twice and four times that)."""
        for attempt in range(_TRANSIENT_TRIES):
            try:
                return call()
            except _Transient:
                if attempt == _TRANSIENT_TRIES - 1:
                    raise
                time.sleep(self._backoff.delay(attempt))
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
        raise KubernetesError(f"Kubernetes API: {action} lease {self.where}: it kept changing under us")

    def _lose(self, why: str) -> NoReturn:
        self._lost = LeaseLost(
            f"{why}: this apply stopped at once and wrote nothing more to the cluster, AWS or Git"
        )
        raise LeaseLost(str(self._lost))

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

    def _create(self) -> bool:
        """False when the Lease already exists (409)."""
        started, now = self._monotonic(), self._now()
        self._written.append(_aware(now))
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
        self._held_since, self._lost = started, None
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


class LeaseGuardedClient(k8s.ApiClient):
    """An ApiClient that is `inner` in every way (its connections, credentials, timeouts) except that
    a call that changes something — any method but GET, HEAD or OPTIONS: an eviction, a taint, a
    cordon, a patch, a delete — first runs `confirm` (the Lease's check, raising LeaseLost). Guarding
    the client guards every write made through it, including ones a future change adds."""

    def __init__(self, inner: k8s.ApiClient, confirm: Callable[[], None]) -> None:
        # No super().__init__(): nothing of its own but these two; the rest is read from `inner`.
        self.__dict__["_inner"] = inner
        self.__dict__["_confirm"] = confirm

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("_inner")
        if inner is None:  # looked up before __init__ ran (copy, pickle): nothing to delegate to
            raise AttributeError(name)
        return getattr(inner, name)

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if str(method).upper() not in _READS:
            self.__dict__["_confirm"]()
        return self.__dict__["_inner"].call_api(method, url, *args, **kwargs)


def _failure(action: str, exc: ApiException) -> KubernetesError:
    """The one-line error for an API error; worth a retry when kube/retry.py's one predicate says
    so (500, 502, 503, 504, 429). A 501 or 505 is the server's answer, not a blip: asking again
    gets it again (it was retried here before, unlike every other Kubernetes call)."""
    error = api_error(action, exc)
    return _Transient(str(error)) if transient(exc) else error


def _call_once(call: Callable[[], _T]) -> _T:
    return call()
