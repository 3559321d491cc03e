"""The resource table: every kind the fake serves, its route, scope and fields."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

# ------------------------------------------------------------------------------- resource table


def _field_path(label: str) -> tuple[str, ...]:
    # events: `source` means source.component
    return ("source", "component") if label == "source" else tuple(label.split("."))


@dataclass(frozen=True)
class Resource:
    """One served resource type: routing, discovery and which fields selectors may use."""

    kind: str
    plural: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    indexed_fields: tuple[str, ...] = ()  # field-selector labels kept per object (low cardinality)
    lazy_fields: tuple[str, ...] = ()  # field-selector labels computed from the stored bytes on use
    has_status: bool = True  # a status subresource: the main PUT/PATCH keeps status, /status keeps the rest
    field_defaults: Mapping[str, str] = field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @functools.cached_property
    def field_specs(self) -> tuple[tuple[tuple[str, ...], str], ...]:
        """(path, default) per indexed field, precomputed for bulk loads."""
        return tuple((_field_path(f), self.field_defaults.get(f, "")) for f in self.indexed_fields)

    @functools.cached_property
    def prefix(self) -> bytes:
        """Start of a single object's JSON: the stored bytes omit kind/apiVersion."""
        return b'{"kind":"%s","apiVersion":"%s",' % (self.kind.encode(), self.api_version.encode())


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

RESOURCES: tuple[Resource, ...] = (
    Resource(
        "Node",
        "nodes",
        "",
        "v1",
        False,
        ("no",),
        ("spec.unschedulable",),
        field_defaults={"spec.unschedulable": "false"},
    ),
    Resource(
        "Pod",
        "pods",
        "",
        "v1",
        True,
        ("po",),
        _POD_FIELDS,
        ("status.podIP",),
        field_defaults={"spec.hostNetwork": "false"},
    ),
    Resource("ConfigMap", "configmaps", "", "v1", True, ("cm",), has_status=False),
    Resource("Event", "events", "", "v1", True, ("ev",), _EVENT_FIELDS, has_status=False),
    Resource("Namespace", "namespaces", "", "v1", False, ("ns",), ("status.phase",)),
    Resource("PersistentVolume", "persistentvolumes", "", "v1", False, ("pv",)),
    Resource("PersistentVolumeClaim", "persistentvolumeclaims", "", "v1", True, ("pvc",)),
    Resource("DaemonSet", "daemonsets", "apps", "v1", True, ("ds",)),
    Resource("ReplicaSet", "replicasets", "apps", "v1", True, ("rs",), ("status.replicas",)),
    Resource("Deployment", "deployments", "apps", "v1", True, ("deploy",)),
    Resource("StatefulSet", "statefulsets", "apps", "v1", True, ("sts",)),
    Resource("PodDisruptionBudget", "poddisruptionbudgets", "policy", "v1", True, ("pdb",)),
    Resource("Lease", "leases", "coordination.k8s.io", "v1", True, (), has_status=False),
)

_BY_ROUTE = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_NAME: dict[str, Resource] = {}
for _r in RESOURCES:
    for _alias in (_r.kind, _r.kind.lower(), _r.plural, *_r.short_names):
        _BY_NAME[_alias] = _r
_GROUPS: dict[str, list[str]] = {}
for _r in RESOURCES:
    if _r.group and _r.version not in _GROUPS.setdefault(_r.group, []):
        _GROUPS[_r.group].append(_r.version)

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def resource_for(kind: str) -> Resource:
    """Find a resource by kind (`Pod`), plural (`pods`) or short name (`po`)."""
    res = _BY_NAME.get(kind) or _BY_NAME.get(kind.lower())
    if res is None:
        raise KeyError(f"the fake API does not serve {kind!r}")
    return res


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
