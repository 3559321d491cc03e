"""Marking and draining the nodes an approved scale-down removes (DESIGN §3.6).

The mark is a NoSchedule taint of our own whose value is the commit being applied: never
`spec.unschedulable`, which is a person's `kubectl cordon`, so a crashed apply can find and resume
exactly its own drains and leave everyone else's cordons alone. Pods leave through the policy/v1
eviction subresource, as cluster-autoscaler and `kubectl drain` do, so PodDisruptionBudgets are
honoured by the API server itself; when a budget says "not now" we wait and retry until the drain
timeout rather than forcing a delete.

Apply runs unattended, so a flaky API server is not a failed drain: every call is retried a few times
on a 5xx, a 429 that is not an eviction's budget refusal, or a dropped connection (`ATTEMPTS`,
capped exponential backoff) before it becomes an OperationError. An eviction goes further, as
cluster-autoscaler's does: whatever the server answers but 201 and 404 (a 409 from its own PDB
status write, a 403, a 500 for overlapping budgets, no answer at all) the pod is tried again, with
capped and jittered backoff (`retry_delay`), until the drain's timeout, and its reason is the
server's. Each eviction names the uid it was decided for (`preconditions.uid`), so a pod created
again under the same name (a StatefulSet's) is never evicted in its predecessor's place. Node names
are reused by new instances, so `mark` and `drain` can be told which instance was approved and then
act only while the node still is that instance.
"""

from __future__ import annotations

import functools
import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconciler.domain.backoff import EQUAL_JITTER, Backoff
from reconciler.domain.durations import format_duration
from reconciler.domain.errors import RefusedError
from reconciler.domain.model import DAEMONSET_POD, MIRROR_POD, OWN_DRAIN_TAINT, instance_id_from_provider_id
from reconciler.kube.errors import KubernetesError
from reconciler.kube.live import ContinueExpired, continue_expired, restarting, unreachable
from reconciler.kube.live import api_error as live_api_error
from reconciler.kube.retry import ATTEMPTS, transient, with_retries

T = TypeVar("T")

_COMMIT = re.compile(r"[0-9a-f]{40}")
_CONFLICT_RETRIES = 5
_PAGE = 500
_MERGE_PATCH = "application/merge-patch+json"
_FINISHED = ("Succeeded", "Failed")
# The API server names the budget in its 429's DisruptionBudget cause: "The disruption budget web
# needs 2 healthy pods and has 2 currently", or, while the disruption controller has not yet seen the
# budget's latest spec, "The disruption budget web is still being processed by the server."
_NAME = r"([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)"
_BUDGET = re.compile(rf"disruption budget {_NAME} needs (\d+) healthy pods? and has (\d+)")
_STALE = re.compile(rf"disruption budget {_NAME} is still being processed")
_SHOWN = 5  # pods named in an incomplete drain's reason; the rest are counted
_DEFAULT_GRACE = 30  # a pod's terminationGracePeriodSeconds when its spec has none
RETRY_FIRST = 1.0  # seconds before a failed eviction is tried again; doubled each time...
RETRY_MAX = 30.0  # ...up to this
_RETRIES = Backoff(RETRY_FIRST, RETRY_MAX, spread=EQUAL_JITTER)

_log = logging.getLogger(__name__)


def retry_delay(tries: int, jitter: float) -> float:
    """Seconds before the next try of an eviction that failed `tries` times: RETRY_FIRST doubled
    each time, at most RETRY_MAX, scaled into its upper half by `jitter` (0..1) so that the pods of
    parallel drains do not come back in step."""
    return _RETRIES.delay(max(tries, 1) - 1, lambda: min(max(jitter, 0.0), 1.0))


@dataclass(slots=True)
class _Retry:
    """One pod's refused or failed evictions in a drain: when to try again, and the last answer."""

    failures: int = 0
    due: float = 0.0
    why: str = ""


@dataclass(frozen=True, slots=True)
class DrainResult:
    """What one drain did. `evicted` lists "ns/name" of the pods whose eviction the API accepted;
    `reason` is one line saying why the drain is incomplete (empty when complete)."""

    node: str
    evicted: tuple[str, ...]
    complete: bool
    reason: str


class NodeDrainer:
    """Marks, drains and unmarks nodes through one API server.

    Safe to share between threads: apply runs up to `apply.maxParallelDrains` drains at once over one
    ApiClient. Nothing mutable is kept between calls (each drain's bookkeeping is its own), and each
    drain holds at most one connection at a time; the ApiClient's urllib3 pool
    (`configuration.connection_pool_maxsize`, by default 5 per CPU) should have room for every drain
    plus the Lease renewal, or urllib3 opens extra connections and discards them with a "Connection
    pool is full" warning (slower, still correct).
    """

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        timeout: timedelta,
        max_grace_period: timedelta | None = None,
        poll_seconds: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        """`max_grace_period` caps the grace period each eviction gives its pod, as
        cluster-autoscaler's `--max-graceful-termination-sec`: min(the pod's
        terminationGracePeriodSeconds, default 30, the cap), in whole seconds and never below 1 (0
        would make the API server delete the pod object at once, without the kubelet). None: no
        cap, each pod its own. `sleep` also waits between retries of a failed call; `jitter` (0..1)
        spreads the retries of failed evictions."""
        self.api = api
        self.core = k8s.CoreV1Api(api)
        self.timeout = timeout
        self.max_grace_seconds = (
            None if max_grace_period is None else max(1, int(max_grace_period.total_seconds()))
        )
        self.poll_seconds = poll_seconds
        self._sleep = sleep
        self._monotonic = monotonic
        self._jitter = jitter

    # ------------------------------------------------------------------ the node

    def instance_of(self, node: str) -> str | None:
        """The EC2 instance id in `node`'s spec.providerID (`aws:///<az>/<id>`); None when the node
        is gone, "" when it names no AWS instance."""
        current = self._read_node(node)
        return None if current is None else _instance(current)

    # ------------------------------------------------------------------ the mark

    def mark(self, node: str, commit: str, *, instance: str | None = None) -> None:
        """Taint `node` NoSchedule with `commit` (40 hex digits), so nothing new lands on it while it
        drains. Idempotent; a mark from another commit is taken over (a newer apply adopts it).
        Raises OperationError when the node does not exist. With `instance`, raises RefusedError
        when the node's providerID names another instance (or none): judged on the very read whose
        resourceVersion guards the write, so the node cannot change hands in between."""
        if not _COMMIT.fullmatch(commit):
            raise ValueError(f"a drain mark carries a full 40-hex commit id, not {commit!r}")
        wanted = {"key": OWN_DRAIN_TAINT, "value": commit, "effect": "NoSchedule"}

        def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            ours = [t for t in taints if t.get("key") == OWN_DRAIN_TAINT]
            if len(ours) == 1 and ours[0] == wanted:
                return None
            at = next((i for i, t in enumerate(taints) if t.get("key") == OWN_DRAIN_TAINT), len(taints))
            others = [t for t in taints if t.get("key") != OWN_DRAIN_TAINT]
            return [*others[:at], wanted, *others[at:]]

        def guard(current: Mapping[str, Any]) -> None:
            if instance is not None:
                wrong = _not_the_instance(node, _instance(current), instance)
                if wrong is not None:
                    raise RefusedError(
                        f"not marking node {node} for draining: {wrong}", kind="instance-changed"
                    )

        if not self._update_taints(node, change, "mark", guard):
            raise KubernetesError(f"cannot mark node {node} for draining: it is not in the cluster")

    def unmark(self, node: str) -> None:
        """Remove our taint only; other taints and a person's cordon (`spec.unschedulable`) stay.
        A node without our taint, or gone, is left as it is."""

        def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            if not any(t.get("key") == OWN_DRAIN_TAINT for t in taints):
                return None
            return [t for t in taints if t.get("key") != OWN_DRAIN_TAINT]

        self._update_taints(node, change, "unmark")

    def marked(self) -> dict[str, str]:
        """Every node carrying our taint, with the commit it names: the drains a crashed apply left
        behind, for the next apply to resume."""
        found: dict[str, str] = {}
        for item in self._list("nodes", self.core.list_node, {}):
            for taint in (item.get("spec") or {}).get("taints") or []:
                if taint.get("key") == OWN_DRAIN_TAINT:
                    found[item["metadata"]["name"]] = str(taint.get("value") or "")
        return found

    def _update_taints(
        self,
        node: str,
        change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None],
        action: str,
        guard: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> bool:
        """Read-modify-write of spec.taints guarded by the node's resourceVersion, so a taint or
        cordon someone adds meanwhile is never lost (409 -> read again). False if the node is gone.
        `guard` sees every read the write is based on, and may raise to stop it."""
        for _ in range(_CONFLICT_RETRIES):
            current = self._read_node(node)
            if current is None:
                return False
            if guard is not None:
                guard(current)
            taints = list((current.get("spec") or {}).get("taints") or [])
            new = change(taints)
            if new is None:
                return True
            patch = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "spec": {"taints": new or None},  # null removes the field, as an empty list would
            }
            # A PATCH that was applied but whose answer got lost is retried with the same, now stale,
            # resourceVersion: 409, and the next read finds the change made.
            try:
                self._call(
                    functools.partial(
                        self.core.patch_node, node, patch, _content_type=_MERGE_PATCH, _preload_content=False
                    )
                )
                return True
            except ApiException as exc:
                if exc.status == 409:
                    continue
                if exc.status == 404:
                    return False
                raise _api_error(f"{action} node {node}", exc) from None
            except urllib3.exceptions.HTTPError as exc:
                raise self._unreachable(exc) from None
        raise KubernetesError(
            f"Kubernetes API: {action} node {node}: it kept changing under us ({_CONFLICT_RETRIES} conflicts)"
        )

    def _read_node(self, node: str) -> dict[str, Any] | None:
        try:
            response: Any = self._call(functools.partial(self.core.read_node, node, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _api_error(f"read node {node}", exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise self._unreachable(exc) from None
        document: dict[str, Any] = orjson.loads(response.data)
        return document

    # ------------------------------------------------------------------ the drain

    def drain(
        self,
        node: str,
        *,
        vet: Callable[[Sequence[Mapping[str, Any]]], str | None] | None = None,
        check: Callable[[], None] | None = None,
        instance: str | None = None,
    ) -> DrainResult:
        """Evict every pod that must leave `node` and wait until they are gone or the timeout passes.

        Mark the node first, or evicted pods may be scheduled straight back. DaemonSet pods, mirror
        pods and finished pods stay (the node's end takes them), as in cluster-autoscaler. A pod
        whose budget forbids eviction now (429) is tried again every poll, or after the server's
        retryAfterSeconds; any other answer but 201 and 404 is tried again after `retry_delay`;
        either until the timeout. Pods already being deleted count until they are gone. Never
        deletes a pod directly.

        `vet` sees, on every look, the pods about to be evicted; a reason from it stops the drain
        before they are (a pod that arrived after the caller decided, and forbids the drain).
        `check` runs before every look (the apply Lease: raising stops the drain).
        `instance`, when given, is the approved instance: every look first reads the node, and a
        node that is gone or names another instance (or none) ends the drain, incomplete, before
        anything more is evicted.
        """
        deadline = self._monotonic() + self.timeout.total_seconds()
        evicted: list[str] = []
        accepted: set[str] = set()  # uids whose eviction the API accepted
        retries: dict[str, _Retry] = {}  # uid -> its refused or failed evictions
        looked_again = False
        while True:
            if check is not None:
                check()
            if instance is not None:
                wrong = _not_the_instance(node, self.instance_of(node), instance)
                if wrong is not None:
                    return DrainResult(node, tuple(evicted), False, wrong)
            pods = [p for p in self._pods(node) if not _stays(p)]
            if not pods:
                return DrainResult(node, tuple(evicted), True, "")
            if vet is not None:
                fresh = [
                    p
                    for p in pods
                    if str(p["metadata"].get("uid", "")) not in accepted
                    and not p["metadata"].get("deletionTimestamp")
                ]
                refusal = vet(fresh) if fresh else None
                if refusal is not None:
                    return DrainResult(node, tuple(evicted), False, refusal)
            waiting: dict[str, str] = {}  # every pod still there, with why
            blocked = False  # anything that only time can change
            wake = self.poll_seconds  # until the next look
            for pod in pods:
                meta = pod["metadata"]
                name = f"{meta.get('namespace', '')}/{meta['name']}"
                uid = str(meta.get("uid", "")) or name
                if meta.get("deletionTimestamp"):
                    waiting[name], blocked = "still terminating", True
                    continue
                if uid in accepted:
                    waiting[name], blocked = "evicted, not terminating yet", True
                    continue
                retry = retries.get(uid)
                if retry is not None and self._monotonic() < retry.due:
                    waiting[name], blocked = retry.why, True
                    wake = min(wake, retry.due - self._monotonic())
                    continue
                outcome, why, after = self._evict(pod)
                if outcome == "accepted":
                    accepted.add(uid)
                    evicted.append(name)
                    waiting[name] = "evicted just now"
                elif outcome == "gone":
                    waiting[name] = "gone, still listed"
                elif outcome == "terminating":
                    waiting[name], blocked = "still terminating", True
                else:  # "refused" (429: not now) or "failed" (any other answer, or none)
                    retry = retries.setdefault(uid, _Retry())
                    delay = after
                    if outcome == "failed":
                        retry.failures += 1
                        delay = max(after, retry_delay(retry.failures, self._jitter()))
                    if why != retry.why:
                        level = logging.WARNING if outcome == "failed" else logging.INFO
                        _log.log(
                            level,
                            "drain %s: evict %s: %s; trying again until the drain timeout (%s)",
                            node,
                            name,
                            why,
                            format_duration(self.timeout),
                        )
                    retry.why, retry.due = why, self._monotonic() + delay
                    waiting[name], blocked = why, True
                    if delay > 0:
                        wake = min(wake, delay)
            now = self._monotonic()
            if not blocked and not looked_again and now < deadline:
                looked_again = True  # every pod seen was just evicted or gone: look again at once
                continue
            looked_again = False
            if now >= deadline:
                return DrainResult(node, tuple(evicted), False, self._timed_out(waiting))
            self._sleep(min(wake, deadline - now))

    def remaining(self, node: str) -> list[dict[str, Any]]:
        """The pods on `node` a drain does not leave there (not DaemonSet, mirror or finished pods),
        listed fresh from the API, those being deleted included (their shutdown still runs there):
        what landed after a drain ended, for a last look before the instance is terminated."""
        return [p for p in self._pods(node) if not _stays(p)]

    def _timed_out(self, waiting: Mapping[str, str]) -> str:
        shown = [f"{name} ({why})" for name, why in list(waiting.items())[:_SHOWN]]
        more = len(waiting) - len(shown)
        if more:
            shown.append(f"and {more} more")
        count = len(waiting)
        return (
            f"{count} pod{'s' if count != 1 else ''} still on the node after "
            f"{format_duration(self.timeout)}: {', '.join(shown)}"
        )

    def _evict(self, pod: Mapping[str, Any]) -> tuple[str, str, float]:
        """("accepted" | "gone" | "terminating" | "refused" | "failed", why, seconds the server asks
        to wait before the next try).

        A 429 is the budget (or the server) saying "not now": "refused", tried again next poll.
        A 5xx or a dropped connection is retried here at once (`ATTEMPTS`). A retry of an eviction
        the server had in fact carried out is harmless: the pod is then terminating, which the
        server evicts again without consulting its budget, or gone (404). Any other failure, and
        one that every quick retry met, is judged by one read of the pod: gone, or another pod of
        its name (a 409 for our `preconditions.uid`), is done; terminating is leaving all the same;
        otherwise "failed", to be tried again after a backoff."""
        meta = pod["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        uid = str(meta.get("uid", ""))
        body = k8s.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=self._delete_options(pod),
        )
        try:
            self._call(
                functools.partial(
                    self.core.create_namespaced_pod_eviction, name, namespace, body, _preload_content=False
                ),
                retry_429=False,
            )
            return "accepted", "", 0.0
        except ApiException as exc:
            if exc.status == 404:
                return "gone", "", 0.0
            if exc.status == 429:
                return "refused", _refused_reason(namespace, exc), _retry_after(exc)
            state = self._pod_state(namespace, name, uid)
            if state is not None:
                return state, "", 0.0
            return "failed", f"eviction answered {_one_line(exc)}", _retry_after(exc)
        except urllib3.exceptions.HTTPError as exc:
            state = self._pod_state(namespace, name, uid)
            if state is not None:
                return state, "", 0.0
            return "failed", f"eviction got no answer: {unreachable(self.api, exc)}", 0.0

    def _delete_options(self, pod: Mapping[str, Any]) -> k8s.V1DeleteOptions | None:
        """The uid the eviction was decided for, and the capped grace period (none without a cap:
        the server applies the pod's own)."""
        uid = (pod.get("metadata") or {}).get("uid")
        grace: int | None = None
        if self.max_grace_seconds is not None:
            own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            own = _DEFAULT_GRACE if own is None else int(own)
            grace = min(own, self.max_grace_seconds)
        if not uid and grace is None:
            return None
        return k8s.V1DeleteOptions(
            grace_period_seconds=grace, preconditions=k8s.V1Preconditions(uid=str(uid)) if uid else None
        )

    def _pod_state(self, namespace: str, name: str, uid: str) -> str | None:
        """After an eviction failed: "gone" when the pod left, or another pod took its name (our
        uid precondition's 409); "terminating" when it is leaving all the same; None when it is
        still there untouched or cannot be read."""
        try:
            response: Any = self._call(
                functools.partial(self.core.read_namespaced_pod, name, namespace, _preload_content=False)
            )
        except ApiException as exc:
            return "gone" if exc.status == 404 else None
        except urllib3.exceptions.HTTPError:
            return None
        meta = orjson.loads(response.data).get("metadata") or {}
        if uid and meta.get("uid") != uid:
            return "gone"  # another pod of the same name: ours has left
        return "terminating" if meta.get("deletionTimestamp") else None

    def _pods(self, node: str) -> list[dict[str, Any]]:
        selector = {"field_selector": f"spec.nodeName={node}"}
        return self._list("pods", self.core.list_pod_for_all_namespaces, selector)

    def _list(self, what: str, call: Callable[..., Any], params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item, listed again from the start when a continue token expires (kube.live)."""
        return restarting(f"list {what}", lambda: list(self._pages(what, call, params)))

    def _pages(self, what: str, call: Callable[..., Any], params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            try:
                response = self._call(
                    functools.partial(call, limit=_PAGE, _continue=token, _preload_content=False, **params)
                )
            except ApiException as exc:
                if continue_expired(exc, token):
                    raise ContinueExpired(what) from None
                raise _api_error(f"list {what}", exc) from None
            except urllib3.exceptions.HTTPError as exc:
                raise self._unreachable(exc) from None
            page = orjson.loads(response.data)
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                return

    # ------------------------------------------------------------------ transient failures

    def _call(self, call: Callable[[], T], *, retry_429: bool = True) -> T:
        """`call()`, tried again after a transient failure (reconciler/kube/retry.py)."""
        return with_retries(call, retry_429=retry_429, sleep=self._sleep)

    def _unreachable(self, exc: urllib3.exceptions.HTTPError) -> KubernetesError:
        return KubernetesError(f"{unreachable(self.api, exc)} (gave up after {ATTEMPTS} attempts)")


def _gave_up(exc: ApiException) -> str:
    return f" (gave up after {ATTEMPTS} attempts)" if transient(exc) else ""


def _instance(node: Mapping[str, Any]) -> str:
    return instance_id_from_provider_id(str((node.get("spec") or {}).get("providerID") or ""))


def _not_the_instance(node: str, found: str | None, approved: str) -> str | None:
    """Why `node` is not the approved instance any more; None when it is."""
    if found is None:
        return f"node {node} is no longer in the cluster (the approved instance was {approved})"
    if not found:
        return f"node {node} names no AWS instance in its providerID, so it cannot be shown to be {approved}"
    if found != approved:
        return f"node {node} is now instance {found}, not the approved {approved}"
    return None


def _stays(pod: Mapping[str, Any]) -> bool:
    """Pods a drain leaves: DaemonSet pods (their controller ignores our taint and would only
    recreate them), mirror pods (the kubelet owns them) and pods that have finished."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if MIRROR_POD in annotations or annotations.get(DAEMONSET_POD) == "true":
        return True
    if (pod.get("status") or {}).get("phase") in _FINISHED:
        return True
    owners = meta.get("ownerReferences") or []
    return any(o.get("controller") and o.get("kind") == "DaemonSet" for o in owners)


def _status(exc: ApiException) -> dict[str, Any]:
    try:
        body = orjson.loads(exc.body or b"")
    except orjson.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


def _refused_reason(namespace: str, exc: ApiException) -> str:
    """Why a 429: the budget that allows no disruption (with the server's numbers), a budget whose
    status the disruption controller has not yet caught up with, or the server itself."""
    status = _status(exc)
    texts = [str(c.get("message", "")) for c in (status.get("details") or {}).get("causes") or []]
    texts.append(str(status.get("message", "")))
    for text in texts:
        match = _BUDGET.search(text)
        if match:
            needs = f"needs {match[2]} healthy pods, has {match[3]}"
            return f"pdb {namespace}/{match[1]} allows no disruption: {needs}"
        match = _STALE.search(text)
        if match:
            return (
                f"pdb {namespace}/{match[1]} is still being processed by the server: its status is older "
                "than its spec"
            )
    return f"eviction refused for now: {_one_line(exc)}"


def _retry_after(exc: ApiException) -> float:
    """The seconds a Status asks the client to wait (details.retryAfterSeconds), else 0; at most
    RETRY_MAX, so the drain never sleeps past its timeout's last try on a server's word."""
    details = _status(exc).get("details") or {}
    try:
        return min(RETRY_MAX, max(0.0, float(details.get("retryAfterSeconds") or 0)))
    except (TypeError, ValueError):
        return 0.0


def _api_error(action: str, exc: ApiException) -> KubernetesError:
    if exc.status in (401, 403):
        return live_api_error(action, exc)
    return KubernetesError(f"Kubernetes API: {action}: {_one_line(exc)}{_gave_up(exc)}")


def _one_line(exc: ApiException) -> str:
    message = str(_status(exc).get("message") or exc.reason or "error").strip()
    message = message.splitlines()[0] if message else "error"
    if len(message) > 200:
        message = message[:197] + "..."
    return f"HTTP {exc.status} {message}"
