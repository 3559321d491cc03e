"""The policy/v1 eviction subresource of the fake API, carried out as kube-apiserver does it
(pkg/registry/core/pod/storage/eviction.go), answers included:

- 201 Success: the pod was evicted (given the DisruptionTarget condition, then deleted, gracefully
  if the fake's kubelet takes time).
- 404: no such pod.
- 429 TooManyRequests with a `DisruptionBudget` cause: the pod's budget allows no disruption ("The
  disruption budget web needs 2 healthy pods and has 2 currently"), or its status is stale
  (observedGeneration < generation: "... is still being processed by the server.", retry after 10s).
- 409 Conflict: a `preconditions.uid` (or resourceVersion) in the request that the pod no longer
  matches ("the UID in the precondition (...) does not match the UID in record (...)"), or the
  budget's status write kept conflicting (the real server retries it 20 times first).
- 403 Forbidden: the budget's disruptionsAllowed is negative, or its disruptedPods map is too big.
- 500 with a Status: more than one budget picks the pod.

Pods that are Pending, finished or already being deleted are evicted without asking any budget. A
pod that is not Ready is evicted without taking a disruption when its budget says
`unhealthyPodEvictionPolicy: AlwaysAllow`, or (IfHealthyBudget, the default) while the budget has
all the healthy pods it needs.

`fault(namespace, pod)`, asked once per eviction at its first write, forces the answer the real
server gives when that write fails: 409 (the status write conflicted after the server's own
retries), 500 (an etcd error), or any other code.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.demo.kube_api.disruption import allowed_condition
from reconciler.demo.kube_api.store_view import Refusal, Store, now, pod_ready, terminating, timestamp
from reconciler.demo.kube_api.types import Obj

EvictionFault = Callable[[str, str], int | None]

MAX_DISRUPTED_POD_SIZE = 2000
TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
SUCCESS: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


class _FirstWrite:
    """Asks the fault hook once, at the eviction's first write."""

    def __init__(self, fault: EvictionFault | None, namespace: str, pod: str) -> None:
        self.fault, self.namespace, self.pod = fault, namespace, pod
        self.asked = False

    def check(self, resource: str, name: str) -> None:
        if self.fault is None or self.asked:
            return
        self.asked = True
        code = self.fault(self.namespace, self.pod)
        if code is None:
            return
        if code == 409:
            raise _conflict(
                resource,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        if code == 500:
            raise Refusal(
                500,
                "InternalError",
                "Internal error occurred: etcdserver: request timed out",
                {"causes": [{"message": "etcdserver: request timed out"}]},
            )
        raise Refusal(code, "", f"eviction fault {code}")


def evict(
    store: Store, namespace: str, name: str, body: Any, *, dry_run: bool, fault: EvictionFault | None = None
) -> tuple[int, Obj]:
    """Carry out one eviction; (HTTP code, Status) for what the real server answers with a Status
    result (201, the several-budgets 500), Refusal for what it answers as an error."""
    if not isinstance(body, dict):
        raise Refusal(400, "BadRequest", "the body of the request was in an unknown format")
    if (body.get("metadata") or {}).get("name", name) != name:
        raise Refusal(400, "BadRequest", "name in URL does not match name in Eviction object")
    options = copy.deepcopy(body.get("deleteOptions") or {})
    if not isinstance(options, dict):
        raise Refusal(400, "BadRequest", "deleteOptions must be an object")
    pod = store.get("Pod", namespace, name)
    if pod is None:
        raise Refusal(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
    writes = _FirstWrite(None if dry_run else fault, namespace, name)

    if _can_ignore_pdb(pod):
        opts = options
        if _should_enforce_resource_version(pod) and _rv_unset(options):
            opts = _with_resource_version(options, pod["metadata"].get("resourceVersion"))
        _condition_and_delete(store, pod, opts, dry_run, writes)
        return 201, SUCCESS

    selected = [
        pdb
        for pdb in store.list("PodDisruptionBudget", namespace)
        if store.selects((pdb.get("spec") or {}).get("selector"), (pod["metadata"].get("labels") or {}))
    ]
    if len(selected) > 1:
        return 500, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": MORE_THAN_ONE,
            "code": 500,
        }
    pdb_name = ""
    unhealthy_allowed = False
    if selected:
        pdb = selected[0]
        pdb_name = pdb["metadata"]["name"]
        status = pdb.get("status") or {}
        if not pod_ready(pod):
            if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
                unhealthy_allowed = True
            elif int(status.get("currentHealthy") or 0) >= int(status.get("desiredHealthy") or 0) > 0:
                unhealthy_allowed = True  # IfHealthyBudget: the application is not disrupted now
        if not unhealthy_allowed:
            _check_and_decrement(store, name, pdb, dry_run, writes)

    opts = options
    if unhealthy_allowed:  # the pod must not have become Ready since it was judged
        opts = _with_resource_version(options, pod["metadata"].get("resourceVersion"))
    try:
        _condition_and_delete(store, pod, opts, dry_run, writes)
    except Refusal as refusal:
        if refusal.code == 409 and unhealthy_allowed and _rv_unset(options):
            raise _still_processing(pdb_name) from None
        raise
    return 201, SUCCESS


def _check_and_decrement(store: Store, pod_name: str, pdb: Obj, dry_run: bool, writes: _FirstWrite) -> None:
    meta = pdb["metadata"]
    name = meta["name"]
    status = dict(pdb.get("status") or {})
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _still_processing(name)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise _pdb_forbidden(name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        raise _pdb_forbidden(
            name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if allowed == 0:
        why = (
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} healthy pods "
            f"and has {int(status.get('currentHealthy') or 0)} currently"
        )
        raise Refusal(
            429, "TooManyRequests", TOO_MANY, {"causes": [{"reason": "DisruptionBudget", "message": why}]}
        )
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        status["conditions"] = allowed_condition(
            status.get("conditions") or [], 0, int(status.get("observedGeneration") or 0)
        )
    if dry_run:
        return
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: timestamp(now())}
    writes.check("poddisruptionbudgets.policy", name)
    pdb["status"] = status
    store.write("PodDisruptionBudget", pdb)


def _condition_and_delete(
    store: Store, pod: Obj, options: Mapping[str, Any], dry_run: bool, writes: _FirstWrite
) -> None:
    """addConditionAndDeletePod: the preconditions judged on the latest pod, the DisruptionTarget
    condition written, then the delete."""
    meta = pod["metadata"]
    pre = options.get("preconditions") or {}
    uid, rv = pre.get("uid"), pre.get("resourceVersion")
    if uid and uid != meta.get("uid"):
        raise _conflict(
            "Pod",
            meta["name"],
            f"the UID in the precondition ({uid}) does not match the UID in record ({meta.get('uid')}). "
            "The object might have been deleted and then recreated",
        )
    if rv and rv != meta.get("resourceVersion"):
        raise _conflict(
            "Pod",
            meta["name"],
            f"the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record "
            f"({meta.get('resourceVersion')}). The object might have been modified",
        )
    if dry_run:
        return
    writes.check("pods", meta["name"])
    conditions = list((pod.get("status") or {}).get("conditions") or [])
    previous = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
    wanted = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }
    if previous is None or any(previous.get(k) != v for k, v in wanted.items()):
        kept = previous is not None and previous.get("status") == "True"
        since = previous.get("lastTransitionTime") if previous is not None and kept else timestamp(now())
        condition = {
            **wanted,
            "lastProbeTime": None,
            "lastTransitionTime": since,
        }
        others = [c for c in conditions if c.get("type") != "DisruptionTarget"]
        pod.setdefault("status", {})["conditions"] = [*others, condition]
        pod = store.write("Pod", pod)
    grace = options.get("gracePeriodSeconds")
    store.delete("Pod", pod, None if grace is None else int(grace))


def _can_ignore_pdb(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or terminating(pod)


def _should_enforce_resource_version(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not terminating(pod)


def _rv_unset(options: Mapping[str, Any]) -> bool:
    return not (options.get("preconditions") or {}).get("resourceVersion")


def _with_resource_version(options: Mapping[str, Any], rv: str | None) -> Obj:
    opts = copy.deepcopy(dict(options))
    opts["preconditions"] = {**(opts.get("preconditions") or {}), "resourceVersion": rv}
    return opts


def _still_processing(pdb: str) -> Refusal:
    why = f"The disruption budget {pdb} is still being processed by the server."
    return Refusal(
        429,
        "TooManyRequests",
        TOO_MANY,
        {"causes": [{"reason": "DisruptionBudget", "message": why}], "retryAfterSeconds": 10},
    )


def _pdb_forbidden(name: str, why: str) -> Refusal:
    return Refusal(
        403,
        "Forbidden",
        f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
        {"name": name, "group": "policy", "kind": "poddisruptionbudget"},
    )


def _conflict(resource: str, name: str, why: str) -> Refusal:
    group = resource.partition(".")[2]
    details: Obj = {"name": name, "kind": resource.partition(".")[0]}
    if group:
        details["group"] = group
    return Refusal(409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": {why}', details)
