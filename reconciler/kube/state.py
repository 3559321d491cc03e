"""Assemble a ClusterState from raw objects of any kind, whichever source they came from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from operator import attrgetter

from reconciler.domain.model import (
    ClusterState,
    DaemonSet,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
)
from reconciler.kube.autoscaler import (
    DEFAULT_LEASE,
    DEFAULT_NAMESPACES,
    DEFAULT_STATUS_CONFIGMAP,
    judge_autoscaler,
)
from reconciler.kube.parse import TERMINAL_PHASES, UNREADABLE, ObjectReader, Raw, left_out, readable

LEFT_OUT_SHOWN = 20  # objects left out that are named one by one; the rest are counted
_BY_NAME = attrgetter("name")
_BY_NAMESPACED_NAME = attrgetter("namespace", "name")

# Kinds the planner reads; anything else in a snapshot (Deployments, Events, ...) is skipped.
KINDS = (
    "Node",
    "Pod",
    "PodDisruptionBudget",
    "DaemonSet",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Namespace",
)


class StateBuilder:
    """Collects objects kind by kind; `build()` returns the immutable ClusterState."""

    def __init__(
        self,
        autoscaler_lease: str = DEFAULT_LEASE,
        autoscaler_status: str = DEFAULT_STATUS_CONFIGMAP,
        autoscaler_namespaces: tuple[str, ...] = DEFAULT_NAMESPACES,
    ) -> None:
        self.reader = ObjectReader()
        self.autoscaler_names = {"Lease": autoscaler_lease, "ConfigMap": autoscaler_status}
        self.autoscaler_namespaces = autoscaler_namespaces
        self.nodes: list[Node] = []
        self.pods: list[Pod] = []
        self.pdbs: list[PodDisruptionBudget] = []
        self.daemonsets: list[DaemonSet] = []
        self.pvs: list[PersistentVolume] = []
        self.pvcs: list[PersistentVolumeClaim] = []
        # cluster-autoscaler's status ConfigMaps and Leases, in whichever namespace it runs
        self.autoscaler_configmaps: list[Raw] = []
        self.autoscaler_leases: list[Raw] = []
        self.autoscaler_unchecked: list[str] = []  # why a kind of its evidence was looked for narrowly
        # None until namespaces are read (a listing, even an empty one, or a Namespace in a snapshot)
        self.namespaces: dict[str, Mapping[str, str]] | None = None
        self.warnings: list[str] = []
        self.left_out: list[str] = []  # objects that could not be read, each a warning

    def add(self, kind: str, raw: Raw) -> None:
        """One object of `kind`; one that cannot be read is left out with a warning naming it."""
        try:
            self._add(kind, readable(raw))
        except UNREADABLE as exc:
            self.left_out.append(left_out(kind, raw, exc))

    def _add(self, kind: str, raw: Raw) -> None:
        reader = self.reader
        if kind == "Pod":
            if (raw.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                self.pods.append(reader.pod(raw))
        elif kind == "Node":
            self.nodes.append(reader.node(raw))
        elif kind == "PodDisruptionBudget":
            self.pdbs.append(reader.pdb(raw))
        elif kind == "DaemonSet":
            self.daemonsets.append(reader.daemonset(raw))
        elif kind == "PersistentVolume":
            self.pvs.append(reader.pv(raw))
        elif kind == "PersistentVolumeClaim":
            self.pvcs.append(reader.pvc(raw))
        elif kind == "Namespace":
            name, labels = reader.namespace(raw)
            if self.namespaces is None:
                self.namespaces = {}
            self.namespaces[name] = labels
        elif (
            kind in ("ConfigMap", "Lease")
            and (raw.get("metadata") or {}).get("name") == (self.autoscaler_names[kind])
        ):
            found = self.autoscaler_configmaps if kind == "ConfigMap" else self.autoscaler_leases
            found.append(raw)

    def add_all(self, kind: str, items: Iterable[Raw]) -> None:
        """A page of a listing of `kind`: a listing of namespaces says they were read, even if empty."""
        if kind == "Namespace" and self.namespaces is None:
            self.namespaces = {}
        if kind != "Pod":
            for raw in items:
                self.add(kind, raw)
            return
        # the hot loop of a listing: 150k pods, so no per-item dispatch (a `try` costs nothing)
        convert, append = self.reader.pod, self.pods.append
        for raw in items:
            if (raw.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                try:
                    append(convert(readable(raw)))
                except UNREADABLE as exc:
                    self.left_out.append(left_out(kind, raw, exc))

    def forget(self, kind: str) -> None:
        """Drop what arrived of `kind`: its listing starts again (its continue token expired)."""
        self.left_out = [w for w in self.left_out if not w.startswith(f"{kind.lower()} ")]
        if kind == "Pod":
            self.pods = []
        elif kind == "Node":
            self.nodes = []
        elif kind == "PodDisruptionBudget":
            self.pdbs = []
        elif kind == "DaemonSet":
            self.daemonsets = []
        elif kind == "PersistentVolume":
            self.pvs = []
        elif kind == "PersistentVolumeClaim":
            self.pvcs = []
        elif kind == "Namespace":
            self.namespaces = None
        elif kind == "Lease":
            self.autoscaler_leases = []
        elif kind == "ConfigMap":
            self.autoscaler_configmaps = []

    def not_read(self, kind: str, warning: str) -> None:
        """`kind` could not be read (a list we may not read): whatever of it arrived is dropped, so
        the state says "not read" rather than half of it, and `warning` says why."""
        if kind == "Namespace":
            self.namespaces = None
        self.warnings.append(warning)

    def build(self, now: datetime) -> ClusterState:
        # One canonical order whatever the source's, so equal clusters give equal states and plans.
        autoscaler, doubts = judge_autoscaler(
            self.autoscaler_configmaps, self.autoscaler_leases, now, self.autoscaler_namespaces
        )
        return ClusterState(
            nodes=tuple(sorted(self.nodes, key=_BY_NAME)),
            pods=tuple(sorted(self.pods, key=_BY_NAMESPACED_NAME)),  # lists arrive sorted: O(n)
            pdbs=tuple(sorted(self.pdbs, key=_BY_NAMESPACED_NAME)),
            daemonsets=tuple(sorted(self.daemonsets, key=_BY_NAMESPACED_NAME)),
            pvs=tuple(sorted(self.pvs, key=_BY_NAME)),
            pvcs=tuple(sorted(self.pvcs, key=_BY_NAMESPACED_NAME)),
            autoscaler=autoscaler,
            autoscaler_unchecked=tuple(self.autoscaler_unchecked),
            read_at=now,
            namespaces=None if self.namespaces is None else dict(sorted(self.namespaces.items())),
            warnings=(*self.warnings, *left_out_warnings(self.left_out), *doubts),
        )


def left_out_warnings(messages: Iterable[str]) -> list[str]:
    """The warnings for objects left out: the first LEFT_OUT_SHOWN named, the rest counted (a
    snapshot of 150k unreadable pods is one problem, not 150k lines)."""
    messages = list(messages)
    shown = messages[:LEFT_OUT_SHOWN]
    if len(messages) > LEFT_OUT_SHOWN:
        shown.append(
            f"{len(messages) - LEFT_OUT_SHOWN} more objects left out of the plan: they cannot be read"
        )
    return shown
