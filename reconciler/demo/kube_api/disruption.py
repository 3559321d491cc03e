"""The fake API's disruption controller: PodDisruptionBudget status recomputed as pods come and go,
as kube-controller-manager's does it (pkg/controller/disruption/disruption.go).

Off unless a test turns it on (`FakeKubeAPI.run_controllers`): most tests write a budget's status
by hand to describe a state ("this budget allows no disruption"), which a controller would at once
overwrite. When on, it runs synchronously after every write that can change a budget (a pod, a
budget, a workload's scale) instead of from a work queue: the status is never stale unless the test
pauses the controller, which is how a stale status (observedGeneration < generation) is shown.

What it computes, per budget, from the pods its selector picks in its namespace:
- expectedPods and desiredHealthy: `minAvailable` as an integer: that many, out of every picked pod;
  `maxUnavailable` or a percentage: out of the sum of the picked pods' controllers' scale (a
  Deployment's, a ReplicaSet's, a StatefulSet's `spec.replicas`); pods without a controller are
  left out of that sum (the real controller warns "UnmanagedPods"), and a controller it cannot find
  fails the sync, which leaves disruptionsAllowed at 0 (its failSafe).
- currentHealthy: picked pods that are Ready, not being deleted, and not in `disruptedPods` (an
  eviction the controller has not yet seen carried out, for at most DELETION_TIMEOUT).
- disruptionsAllowed: currentHealthy - desiredHealthy, never below 0, and 0 while expectedPods is 0.
- observedGeneration: the budget's generation (which the fake bumps when the spec changes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from reconciler.demo.kube_api.store_view import (
    Store,
    controller_of,
    now,
    parse_time,
    pod_ready,
    terminating,
    timestamp,
)
from reconciler.demo.kube_api.types import Obj

DELETION_TIMEOUT = timedelta(minutes=2)
"""How long an eviction's entry in status.disruptedPods keeps its pod out of currentHealthy."""

_PERCENT = re.compile(r"^(\d+)%$")


class SyncFailed(Exception):
    """The budget's status cannot be computed (a pod's controller is missing, a bad percentage)."""


class DisruptionController:
    """Recomputes budgets' status through a `Store`. `paused`: writes go on but no status is
    recomputed (as while kube-controller-manager is down or lagging); `resume` catches up."""

    def __init__(self) -> None:
        self.paused = False

    def changed(self, store: Store, kind: str, namespace: str, name: str) -> None:
        """React to a write: a pod or a workload recomputes every budget of its namespace (a pod's
        labels may have left a selector, so old and new both count), a budget itself."""
        if self.paused:
            return
        if kind == "PodDisruptionBudget":
            pdb = store.get(kind, namespace, name)
            if pdb is not None:
                self.sync(store, pdb)
        elif kind in ("Pod", "ReplicaSet", "Deployment", "StatefulSet"):
            for pdb in store.list("PodDisruptionBudget", namespace):
                self.sync(store, pdb)

    def resume(self, store: Store, namespaces: list[str]) -> None:
        self.paused = False
        for namespace in namespaces:
            for pdb in store.list("PodDisruptionBudget", namespace):
                self.sync(store, pdb)

    def sync(self, store: Store, pdb: Obj) -> None:
        """trySync, or failSafe when it fails; writes only a status that changed."""
        namespace = pdb["metadata"].get("namespace", "")
        selector = (pdb.get("spec") or {}).get("selector")
        pods = [p for p in store.list("Pod", namespace) if store.selects(selector, _labels(p))]
        old = dict(pdb.get("status") or {})
        try:
            status = compute_status(store, pdb, pods, now())
        except SyncFailed as exc:
            status = dict(old)
            status["disruptionsAllowed"] = 0
            status["conditions"] = _set_condition(
                old.get("conditions") or [],
                "False",
                "SyncFailed",
                str(exc),
                int(old.get("observedGeneration") or 0),
            )
        if status != old:
            pdb["status"] = status
            store.write("PodDisruptionBudget", pdb)


def compute_status(store: Store, pdb: Mapping[str, Any], pods: list[Obj], at: datetime) -> Obj:
    """The status the real controller writes for `pdb` over `pods` (those its selector picks)."""
    expected, desired = expected_pod_count(store, pdb, pods)
    old = pdb.get("status") or {}
    disrupted = _still_disrupted(old.get("disruptedPods") or {}, pods, at)
    current = sum(
        1 for p in pods if not terminating(p) and p["metadata"]["name"] not in disrupted and pod_ready(p)
    )
    allowed = current - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    generation = int((pdb.get("metadata") or {}).get("generation") or 0)
    status: Obj = {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": current,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    status["conditions"] = allowed_condition(old.get("conditions") or [], allowed, generation)
    return status


def expected_pod_count(store: Store, pdb: Mapping[str, Any], pods: list[Obj]) -> tuple[int, int]:
    """(expectedPods, desiredHealthy), as getExpectedPodCount."""
    spec = pdb.get("spec") or {}
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None:
        expected = expected_scale(store, pods)
        return expected, max(0, expected - _scaled(max_unavailable, expected))
    if min_available is not None:
        if isinstance(min_available, int):
            return len(pods), min_available
        expected = expected_scale(store, pods)
        return expected, _scaled(min_available, expected)
    return 0, 0


def expected_scale(store: Store, pods: list[Obj]) -> int:
    """The sum of the scale of the picked pods' controllers, each counted once; pods without a
    controller are left out. SyncFailed when a controller cannot be found."""
    scale: dict[str, int] = {}
    for pod in pods:
        ref = controller_of(pod)
        if ref is None:
            continue  # an unmanaged pod: the real controller warns and leaves it out
        if ref.get("uid") in scale:
            continue
        found = _controller_scale(store, pod["metadata"].get("namespace", ""), ref)
        if found is None:
            raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        uid, replicas = found
        scale[uid] = replicas
    return sum(scale.values())


def _controller_scale(store: Store, namespace: str, ref: Mapping[str, Any]) -> tuple[str, int] | None:
    """(uid, spec.replicas) of the controller that counts: a Deployment for a ReplicaSet it owns,
    else the ReplicaSet or StatefulSet itself; None when it is not there (or is another object)."""
    kind = ref.get("kind")
    if kind not in ("ReplicaSet", "StatefulSet"):
        return None  # the fake serves no scale subresource for other kinds
    owner = store.get(str(kind), namespace, str(ref.get("name") or ""))
    if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
        return None
    if kind == "ReplicaSet":
        above = controller_of(owner)
        if above is not None and above.get("kind") == "Deployment":
            deployment = store.get("Deployment", namespace, str(above.get("name") or ""))
            if deployment is not None and deployment["metadata"].get("uid") == above.get("uid"):
                return str(deployment["metadata"]["uid"]), _replicas(deployment)
    return str(owner["metadata"]["uid"]), _replicas(owner)


def allowed_condition(conditions: list[Obj], allowed: int, generation: int) -> list[Obj]:
    """pdbhelper.UpdateDisruptionAllowedCondition: DisruptionAllowed True/SufficientPods while any
    disruption is allowed, else False/InsufficientPods."""
    if allowed > 0:
        return _set_condition(conditions, "True", "SufficientPods", "", generation)
    return _set_condition(conditions, "False", "InsufficientPods", "", generation)


def _set_condition(
    conditions: list[Obj], status: str, reason: str, message: str, generation: int
) -> list[Obj]:
    """apimeta.SetStatusCondition: lastTransitionTime moves only when the status does."""
    result = [dict(c) for c in conditions if c.get("type") != "DisruptionAllowed"]
    previous = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    kept = previous is not None and previous.get("status") == status
    since = previous.get("lastTransitionTime") if previous is not None and kept else timestamp(now())
    result.append(
        {
            "type": "DisruptionAllowed",
            "status": status,
            "observedGeneration": generation,
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }
    )
    return result


def _still_disrupted(disrupted: Mapping[str, str], pods: list[Obj], at: datetime) -> dict[str, str]:
    """buildDisruptedPodMap: entries for pods still there, not being deleted, and evicted less
    than DELETION_TIMEOUT ago."""
    kept: dict[str, str] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        if terminating(pod) or name not in disrupted:
            continue
        when = parse_time(disrupted[name])
        if when is not None and when + DELETION_TIMEOUT >= at:
            kept[name] = disrupted[name]
    return kept


def _scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    if isinstance(value, int):
        return value
    match = _PERCENT.match(value)
    if match is None:
        raise SyncFailed(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}"
        )
    return math.ceil(int(match[1]) * total / 100)


def _replicas(workload: Mapping[str, Any]) -> int:
    replicas = (workload.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})
