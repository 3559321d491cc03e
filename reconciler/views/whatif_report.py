"""What `what-if` answers, as data: per node group the nodes a workload change makes it add and
their on-demand price, every pod's place (or why it has none), and how each workload was counted.
Built by runtime/whatif_stage.py, rendered by whatif_render.py and as JSON (schemas/what-if.schema.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.kube.workloads import Skipped

MARKER = "<!-- asg-reconciler what-if -->"  # not check's: both comments can live on one pull request
HOURS_PER_MONTH = 730  # AWS's own monthly figure (365 days x 24 h / 12)
NEW_NODE = "needs a new node"


@dataclass(frozen=True)
class GroupNeed:
    """One node group's answer: the nodes the change makes it add, and their on-demand price."""

    name: str
    add: int
    instance_type: str | None
    hourly_price: float | None
    current: int
    desired: int
    pods: int  # the change's pods that land on this group's new nodes
    on_existing: int  # the change's pods that fit this group's nodes (existing or on the way)
    pending_today: int  # pods pending before the change that the same new nodes host
    kept_removals: tuple[str, ...] = ()  # approved removals the plan cancels to host them
    reasons: tuple[str, ...] = ()

    @property
    def monthly_cost(self) -> float | None:
        if self.hourly_price is None:
            return None
        return round(self.add * self.hourly_price * HOURS_PER_MONTH, 2)


@dataclass(frozen=True)
class PodAnswer:
    pod: str
    node_group: str | None
    reason: str
    node: str | None = None  # the node of no node group it fits (then node_group is None)


@dataclass(frozen=True)
class WorkloadLine:
    source: str
    kind: str
    namespace: str
    name: str
    wanted: int | None  # pods at once; None: a DaemonSet (one per node)
    running: int
    added: int
    note: str = ""


@dataclass(frozen=True)
class WhatIfReport:
    cluster: str
    files: tuple[str, ...]
    workloads: tuple[WorkloadLine, ...]
    skipped: tuple[Skipped, ...]
    groups: tuple[GroupNeed, ...]
    pods: tuple[PodAnswer, ...]
    prices: str  # where the prices came from
    warnings: tuple[str, ...] = ()

    @property
    def add(self) -> int:
        return sum(g.add for g in self.groups)

    @property
    def monthly_cost(self) -> float | None:
        """The total; None when a group that adds nodes has no price."""
        costs = [g.monthly_cost for g in self.groups if g.add]
        if any(c is None for c in costs):
            return None
        return round(sum(c for c in costs if c is not None), 2)

    @property
    def unhosted(self) -> tuple[PodAnswer, ...]:
        return tuple(p for p in self.pods if p.node_group is None and p.node is None)

    @property
    def on_other_nodes(self) -> int:
        """The change's pods that fit existing nodes of no node group (hosted, by no group of ours)."""
        return sum(1 for p in self.pods if p.node is not None)

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (DESIGN §5.1, schemas/what-if.schema.json)."""
        return {
            "cluster": self.cluster,
            "files": list(self.files),
            "add": self.add,
            "monthlyCost": self.monthly_cost,
            "currency": "USD",
            "hoursPerMonth": HOURS_PER_MONTH,
            "prices": self.prices,
            "nodeGroups": [
                {
                    "name": g.name,
                    "add": g.add,
                    "instanceType": g.instance_type,
                    "monthlyCost": g.monthly_cost,
                    "hourlyPrice": g.hourly_price,
                    "current": g.current,
                    "desired": g.desired,
                    "pods": g.pods,
                    "podsOnExistingNodes": g.on_existing,
                    "pendingToday": g.pending_today,
                    "keptRemovals": list(g.kept_removals),
                    "reasons": list(g.reasons),
                }
                for g in self.groups
            ],
            "podsOnNodesOfNoGroup": self.on_other_nodes,
            "pods": [
                {
                    "pod": p.pod,
                    "nodeGroup": p.node_group,
                    **({"node": p.node} if p.node is not None else {}),
                    "reason": p.reason,
                }
                for p in self.pods
            ],
            "workloads": [
                {
                    "source": w.source,
                    "kind": w.kind,
                    "namespace": w.namespace,
                    "name": w.name,
                    "wanted": w.wanted,
                    "running": w.running,
                    "added": w.added,
                    "note": w.note,
                }
                for w in self.workloads
            ],
            "skipped": [{"source": str(s.source), "kind": s.kind, "name": s.name} for s in self.skipped],
            "warnings": list(self.warnings),
        }
