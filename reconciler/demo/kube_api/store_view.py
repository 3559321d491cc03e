"""What the fake API's eviction subresource and its controllers share (eviction.py, disruption.py,
replicaset.py): the narrow view of the fake's store they act through, the error they answer with,
and the few facts about pods they all read. (The store itself is storage.py and core.py; core.py's
`_View` is what these modules get.)

Kept apart from the store so that those modules never import it (core.py imports them) and each
stays small enough to read beside the Kubernetes source it mirrors.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from reconciler.demo.kube_api.types import Obj


class Store(Protocol):
    """The fake's store as its controllers see it; every call is made with the store's lock held."""

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A fresh copy of one object, or None."""

    def list(self, kind: str, namespace: str) -> list[Obj]:
        """Fresh copies of every object of `kind` in `namespace`, in name order."""

    def selects(self, selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
        """A metav1.LabelSelector: None matches nothing, `{}` everything."""

    def write(self, kind: str, obj: Obj) -> Obj:
        """Store `obj` as it is (a controller's write), at a new resourceVersion; the stored copy."""

    def create(self, kind: str, obj: Obj) -> Obj:
        """A new object: its name from metadata.generateName, a uid and a creationTimestamp."""

    def delete(self, kind: str, obj: Obj, grace: int | None) -> None:
        """Delete `obj` (the stored version): a pod on a node terminates as the fake's kubelet
        does, `grace` being the request's gracePeriodSeconds (None: the pod's own)."""


class Refusal(Exception):
    """An answer given as a `Status` with this HTTP code, reason and message (writes.py sends it)."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """metav1.Time: RFC 3339 in whole seconds."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """podutil.IsPodReady: the Ready condition is True (the PDB's idea of healthy)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def controller_of(obj: Mapping[str, Any]) -> Obj | None:
    """metav1.GetControllerOf: the ownerReference with `controller: true`, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def terminating(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))
