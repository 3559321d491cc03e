"""Leader election for one stage of `run` on a coordination.k8s.io/v1 Lease, as client-go does it.

Several replicas may run each stage; only the holder of the stage's Lease acts. The rules are
client-go's (k8s.io/client-go/tools/leaderelection), because they are what keep two leaders from
overlapping without trusting anyone's wall clock:

- A follower judges expiry by when *it* last saw the record change (its own monotonic clock), never
  by the holder's renewTime: it takes over only after leaseDurationSeconds of no change.
- The leader stops acting (`is_leader()` False, `on_change(False)`) once no acquire/renew that
  *started* less than renew_deadline ago has succeeded. A follower saw that write no earlier than it
  started, and waits lease_duration > renew_deadline after that, so the two never overlap.
- Every write carries the resourceVersion it was decided on: of two racing acquirers the API server
  lets one through and the other (409) reads again on its next try.
- Stopping with `release` clears holderIdentity (leaseDurationSeconds 1, as ReleaseOnCancel does) so
  another replica takes over at its next try instead of after expiry.

The elector talks on a connection of its own (a copy of the given client's configuration with
urllib3's retries off) and bounds every call by the time left before the renew deadline, so a hung
API server costs one timeout, never several, and cannot keep the leader acting past its deadline.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.domain.backoff import Backoff
from reconciler.kube.lease import ElectionRecord, election_record, micro_time, new_lease
from reconciler.kube.retry import no_answer

_log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2  # client-go's JitterFactor: a follower waits retry_period x (1 .. 2.2) between tries
_MERGE_PATCH = "application/merge-patch+json"
_RELEASE_TRIES = 3


class LeaderElector:
    """Campaigns for one Lease on a daemon thread; `is_leader()` says whether to act right now."""

    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[bool], None] | None = None,
        jitter: float = JITTER_FACTOR,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                "leader election needs lease_duration > renew_deadline > retry_period > 0 "
                f"(got {lease_duration}, {renew_deadline}, {retry_period})"
            )
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.jitter = jitter
        # client-go's wait.Jitter: no doubling, the same period stretched by up to `jitter` of it
        self._follow = Backoff(retry_period, retry_period, spread=(1.0, 1.0 + jitter))
        self._on_change = on_change
        self._configuration = _without_retries(api.configuration)
        self._cond = threading.Condition()
        self._held_since: float | None = None  # monotonic start of the last successful acquire/renew
        self._reported = False  # what on_change was last told
        self._stopping = False
        self._release = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lease: dict[str, Any] | None = None  # the Lease as last read or written
        self._observed: ElectionRecord | None = None
        self._observed_at = 0.0  # monotonic time `_observed` was first seen
        self._trouble: str | None = None  # the failure last logged, until a try succeeds again

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    # ------------------------------------------------------------------ the interface

    def start(self) -> None:
        """Campaign on a daemon thread: try every retry_period (with jitter), renew while leading."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"leader-{self.name}", daemon=True)
        self._thread.start()

    @property
    def observed(self) -> bool:
        """Whether the Lease has been read (or written) at least once: the elector knows who leads."""
        return self._observed is not None or self._held_since is not None

    def is_leader(self) -> bool:
        """True only while the last successful acquire/renew started less than renew_deadline ago."""
        held = self._held_since
        return not self._stopping and held is not None and time.monotonic() - held < self.renew_deadline

    def wait(self, timeout: float) -> bool:
        """Block until leading or `timeout` seconds passed; whether leading."""
        with self._cond:
            self._cond.wait_for(self.is_leader, timeout)
        return self.is_leader()

    def stop(self, release: bool = True) -> None:
        """Stop campaigning. `release`: give the Lease up if ours, so another replica need not wait
        for it to expire; False leaves it to expire, as a killed process would."""
        with self._cond:
            self._stopping = True  # is_leader() is False from now on, whatever the thread is doing
            self._release = release
            self._cond.notify_all()
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._thread = None

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        api = k8s.ApiClient(self._configuration)
        coordination = k8s.CoordinationV1Api(api)
        try:
            while not self._stop.is_set():
                self._report()
                started = time.monotonic()
                try:
                    self._try(coordination, started)
                except Exception as exc:  # a bug must not end the campaign: the next try comes
                    self._failed("bug", f"unexpected error: {exc!r}", exc_info=True)
                self._report()
                self._stop.wait(self._pause())
            if self._release:
                try:
                    self._give_up(coordination)
                except Exception:  # the Lease then expires by itself
                    _log.exception("leader election %s: release failed", self.where)
        finally:
            with self._cond:
                self._held_since = None
                self._cond.notify_all()
            self._report()
            api.close()

    def _pause(self) -> float:
        """client-go's rhythm: the leader renews every retry_period (and wakes at its deadline to
        step down on time); a follower waits retry_period plus up to `jitter` times it."""
        held = self._held_since
        if held is not None:
            left = held + self.renew_deadline - time.monotonic()
            if left > 0:
                return min(self.retry_period, left)
        return self._follow.delay(0)

    def _report(self) -> None:
        """Tell on_change when leadership changed since it was last told."""
        leading = self.is_leader()
        if leading == self._reported:
            return
        self._reported = leading
        if leading:
            _log.info("leading: Lease %s is held by %s", self.where, self.identity)
        else:
            _log.info("not leading: Lease %s is no longer held by %s", self.where, self.identity)
        if self._on_change is not None:
            try:
                self._on_change(leading)
            except Exception:
                _log.exception("leader election %s: on_change(%s) failed", self.where, leading)

    def _timeout(self) -> float:
        """A call's bound: what is left before the renew deadline while leading, else renew_deadline."""
        held = self._held_since
        if held is not None:
            left = held + self.renew_deadline - time.monotonic()
            if left > 0:
                return min(left, self.renew_deadline)
        return self.renew_deadline

    # ---------------------------------------------------------- one try (client-go's tryAcquireOrRenew)

    def _try(self, coordination: k8s.CoordinationV1Api, started: float) -> None:
        lease = self._call("read", partial(self._read, coordination, self._timeout), missing_ok=True)
        if lease is _FAILED:
            return
        now = datetime.now(UTC)
        if lease is None:
            body = new_lease(self.name, self.namespace, self.identity, self._duration_seconds, now)
            created = self._call(
                "create",
                lambda: coordination.create_namespaced_lease(
                    self.namespace, body, _preload_content=False, _request_timeout=self._timeout()
                ),
                conflict_ok=True,
            )
            if isinstance(created, dict):
                self._won(created, started)
            return
        assert isinstance(lease, dict)
        self._lease = lease
        record = election_record(lease)
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        holder, duration, _, _, transitions = record
        if holder and holder != self.identity:
            valid_for = duration if duration > 0 else self.lease_duration
            if self._observed_at + valid_for > time.monotonic():
                self._succeeded()  # the API answered; someone else leads and is alive
                if self._held_since is not None:
                    self._lost()
                return
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self._duration_seconds,
            "renewTime": micro_time(now),
        }
        if holder != self.identity:
            spec["acquireTime"] = micro_time(now)
            spec["leaseTransitions"] = transitions + 1
        patch = {"metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": spec}
        action = "acquire" if holder != self.identity else "renew"
        written = self._call(
            action, partial(self._patch, coordination, patch, self._timeout), conflict_ok=True
        )
        if isinstance(written, dict):
            self._won(written, started)

    @property
    def _duration_seconds(self) -> int:
        """leaseDurationSeconds is whole seconds: round up, never promise less than we hold it."""
        return math.ceil(self.lease_duration)

    def _won(self, lease: dict[str, Any], started: float) -> None:
        """Our write went through: we hold the Lease as of `started`."""
        self._lease = lease
        self._observed, self._observed_at = election_record(lease), time.monotonic()
        self._succeeded()
        with self._cond:
            self._held_since = started
            self._cond.notify_all()

    def _lost(self) -> None:
        with self._cond:
            self._held_since = None
            self._cond.notify_all()

    def _read(self, coordination: k8s.CoordinationV1Api, timeout: Callable[[], float]) -> Any:
        return coordination.read_namespaced_lease(
            self.name, self.namespace, _preload_content=False, _request_timeout=timeout()
        )

    def _patch(
        self, coordination: k8s.CoordinationV1Api, patch: dict[str, Any], timeout: Callable[[], float]
    ) -> Any:
        """A merge patch; its metadata.resourceVersion makes it a guarded update (409 if stale)."""
        return coordination.patch_namespaced_lease(
            self.name,
            self.namespace,
            patch,
            _content_type=_MERGE_PATCH,
            _preload_content=False,
            _request_timeout=timeout(),
        )

    def _call(
        self, action: str, call: Callable[[], Any], *, missing_ok: bool = False, conflict_ok: bool = False
    ) -> Any:
        """The Lease a call returned; None for 404 (`missing_ok`) or 409 (`conflict_ok`: someone wrote
        first, the next try reads again); _FAILED after an error, logged once per kind of trouble."""
        try:
            response = call()
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            if conflict_ok and exc.status == 409:
                _log.debug("%s Lease %s: conflict, someone wrote first; reading again", action, self.where)
                return None
            self._failed(f"HTTP {exc.status}", f"{action}: HTTP {exc.status} {exc.reason or 'error'}")
            return _FAILED
        except urllib3.exceptions.HTTPError as exc:
            kind, reason = no_answer(exc)
            self._failed(kind, f"{action}: no answer from {self._configuration.host}: {reason}")
            return _FAILED
        document: dict[str, Any] = orjson.loads(response.data)
        return document

    def _failed(self, kind: str, why: str, *, exc_info: bool = False) -> None:
        """Log a failure once per kind of trouble (HTTP 500, timed out, ...), not once per try."""
        if self._trouble != kind:
            self._trouble = kind
            _log.warning(
                "leader election %s: %s (trying again every %gs)",
                self.where,
                why,
                self.retry_period,
                exc_info=exc_info,
            )

    def _succeeded(self) -> None:
        if self._trouble is not None:
            self._trouble = None
            _log.info("leader election %s: the API server answers again", self.where)

    # ------------------------------------------------------------------ release (ReleaseOnCancel)

    def _give_up(self, coordination: k8s.CoordinationV1Api) -> None:
        """Clear holderIdentity if the Lease is still ours, guarded by the resourceVersion we last
        saw; on a conflict read it again and retry only while it still names us."""
        lease = self._lease
        deadline = time.monotonic() + self.renew_deadline
        for _ in range(_RELEASE_TRIES):
            if lease is None or election_record(lease)[0] != self.identity:
                return
            if deadline - time.monotonic() <= 0:
                break
            now = micro_time(datetime.now(UTC))
            patch = {
                "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                "spec": {
                    "holderIdentity": None,
                    "leaseDurationSeconds": 1,
                    "acquireTime": now,
                    "renewTime": now,
                },
            }
            until = partial(_left, deadline)
            released = self._call(
                "release", partial(self._patch, coordination, patch, until), conflict_ok=True
            )
            if isinstance(released, dict):
                _log.info("released Lease %s", self.where)
                return
            if released is _FAILED:
                break
            lease = self._call("read", partial(self._read, coordination, until), missing_ok=True)
            if lease is _FAILED:
                break
        _log.info("could not release Lease %s: it expires by itself", self.where)


_FAILED = object()


def _left(deadline: float) -> float:
    return max(0.001, deadline - time.monotonic())


def _without_retries(configuration: k8s.Configuration) -> k8s.Configuration:
    """A copy of `configuration` whose calls urllib3 does not retry: one timeout per call."""
    own: k8s.Configuration = copy.deepcopy(configuration)
    own.retries = 0
    return own
