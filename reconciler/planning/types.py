"""What the planner takes and what it returns. Pure data: the edges fill the inputs (cluster, ASGs,
the manifest on main, the state branch) and turn the plan into Git commits or JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.config.settings import Config
from reconciler.domain.inventory import Inventory
from reconciler.domain.model import CPU, EPHEMERAL_STORAGE, MEMORY, LaunchActivity, Resources
from reconciler.domain.quantity import format_bytes, format_cpu

SCALE_UP = "scale-up"
SCALE_DOWN = "scale-down"
NONE = "none"


@dataclass(frozen=True)
class Headroom:
    """Room a group keeps free, reviewed in the manifest: `replicas` virtual pods requesting
    `requests` each, placed after every real pod (docs/headroom.md)."""

    replicas: int
    requests: Resources

    def describe(self) -> str:
        """`2 × (cpu 1, memory 2Gi)`: how plans, tables and commit trailers name it."""
        return f"{self.replicas} × ({describe_requests(self.requests)})"


def describe_requests(requests: Resources) -> str:
    """`cpu 500m, memory 1.5Gi, nvidia.com/gpu 1`: CPU and memory first, the rest by name."""
    values = requests.values
    order = [n for n in (CPU, MEMORY) if n in values] + sorted(n for n in values if n not in (CPU, MEMORY))
    parts = []
    for name in order:
        amount = values[name]
        if name == CPU:
            text = format_cpu(amount)
        elif name in (MEMORY, EPHEMERAL_STORAGE) or name.startswith("hugepages-"):
            text = format_bytes(amount)
        else:
            text = str(amount)
        parts.append(f"{name} {text}")
    return ", ".join(parts) or "nothing"


@dataclass(frozen=True)
class CommittedGroup:
    """A group's entry in the manifest on main: the capacity already decided."""

    desired: int
    remove_instances: tuple[str, ...] = ()  # approved, not yet applied
    hold: bool = False
    headroom: Headroom | None = None


@dataclass(frozen=True)
class Backoff:
    """A group whose new instances did not register in time: skipped until `until`."""

    until: datetime
    count: int  # consecutive failures; the next backoff doubles up to scaleUp.maxBackoff


@dataclass(frozen=True)
class LaunchFailure:
    """A group AWS could not launch instances for: its unfilled desired is not on its way, and the
    group is backed off until `until` (derived from the failed activities' times alone, so every
    plan, one-shot or not, finds the same: docs/planning.md "Launches that fail")."""

    last: LaunchActivity  # the newest failed launch: its reason, code and class
    since: datetime  # the first failure of this run of failures
    failures: int  # failed attempts since the last successful launch (AWS's retries included)
    until: datetime  # backed off until then
    unfilled: int  # desired AWS has no instance for, not counted as upcoming

    def describe(self) -> str:
        """`InsufficientInstanceCapacity (OutOfResources)`: the code (or "launch failed") and class."""
        return f"{self.last.code or 'launch failed'} ({self.last.error_class})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.last.code,
            "errorClass": self.last.error_class,
            "status": self.last.status,
            "message": self.last.message,
            "lastFailure": self.last.start.isoformat(),
            "since": self.since.isoformat(),
            "failures": self.failures,
            "unfilled": self.unfilled,
            "backoffUntil": self.until.isoformat(),
        }


@dataclass(frozen=True)
class PlannerMemory:
    """What one-shot runs must remember between plans (kept on the state branch, DESIGN §3.9)."""

    unneeded_since: Mapping[str, datetime] = field(default_factory=dict)  # node name -> since
    backoffs: Mapping[str, Backoff] = field(default_factory=dict)  # group -> backoff
    last_scale_up: Mapping[str, datetime] = field(default_factory=dict)  # group -> last applied (records)


@dataclass(frozen=True)
class PlanInputs:
    inventory: Inventory
    config: Config
    now: datetime
    committed: Mapping[str, CommittedGroup] = field(default_factory=dict)
    memory: PlannerMemory = PlannerMemory()
    proposed: frozenset[str] = frozenset()  # instances an open scale-down proposal names
    searched: str = ""  # where discovery looked, when it found no group (said in the plan's warning)
    # on-demand USD per hour by instance type (the shipped table; the runtime fills it): the price
    # expander's and the plan's cost (planning/pricing.py); expanderOptions.prices go over it
    prices: Mapping[str, float] = field(default_factory=dict)
    prices_region: str = ""  # the region `prices` are list prices of (the shipped table's: us-east-1)


@dataclass(frozen=True)
class Removal:
    """One instance to drain and terminate, and why it is safe."""

    instance_id: str
    node: str | None  # None for an instance that never registered
    utilization: float | None
    reason: str
    since: datetime | None  # unneeded / not ready / unregistered since


@dataclass(frozen=True)
class HeadroomPlan:
    """How much of a group's `desired` is there for its headroom: the replicas with room, the nodes
    this plan adds for them, the nodes scale-down keeps only for them, and why some have none."""

    headroom: Headroom
    placed: int  # replicas with room on nodes that exist, are coming, or this plan adds
    added: int = 0  # nodes this plan adds for the headroom (part of new_nodes)
    kept: int = 0  # the group's nodes that stay only because the headroom needs them
    reason: str = ""  # why `placed` < replicas ("" when all have room)

    @property
    def nodes(self) -> int:
        """Nodes of `desired` that are there for the headroom."""
        return self.added + self.kept

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.headroom.replicas,
            "requests": {name: exact_quantity(name, v) for name, v in sorted(self.headroom.requests)},
            "placed": self.placed,
            "nodes": self.nodes,
            "added": self.added,
            "kept": self.kept,
            "reason": self.reason,
        }


def exact_quantity(name: str, amount: int) -> str:
    """A request as an exact Kubernetes quantity: `500m`, `2Gi`, `1536Mi`, or plain units."""
    if name == CPU:
        return format_cpu(amount)
    if name in (MEMORY, EPHEMERAL_STORAGE) or name.startswith("hugepages-"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount and amount % size == 0:
                return f"{amount // size}{unit}"
    return str(amount)


@dataclass(frozen=True)
class GroupPlan:
    name: str
    min_size: int
    max_size: int
    current: int  # the ASG's DesiredCapacity
    desired: int
    action: str  # scale-up | scale-down | none
    reasons: tuple[str, ...] = ()
    removals: tuple[Removal, ...] = ()
    cancelled_removals: tuple[str, ...] = ()  # approved removals the plan gives back (capacity needed)
    held: bool = False
    upcoming: int = 0  # instances launching plus committed-but-unapplied increase
    new_nodes: int = 0  # nodes this plan adds on top of the baseline
    backoff_until: datetime | None = None
    warnings: tuple[str, ...] = ()
    headroom: HeadroomPlan | None = None  # None: the manifest keeps no headroom for this group
    launch_failure: LaunchFailure | None = None  # AWS could not launch its unfilled desired
    launch_backoff: bool = False  # ... and the group is backed off for it in this plan
    monthly_cost: float | None = None  # USD a month the nodes this plan adds cost (None: not priced)
    cost_basis: str = ""  # what the cost rests on: "m5.large at $0.0960/h on-demand"

    @property
    def remove_instances(self) -> tuple[str, ...]:
        return tuple(r.instance_id for r in self.removals)


@dataclass(frozen=True)
class PodOutcome:
    pod: str  # namespace/name
    node_group: str | None
    reason: str = ""
    # the node it fits (existing or on its way), when that node belongs to no node group: such a pod
    # has a place although no group holds it (a self-managed node, another tool's group)
    node: str | None = None

    @property
    def placed(self) -> bool:
        """It has a place: a group of ours, or a node of no group."""
        return self.node_group is not None or self.node is not None


@dataclass(frozen=True)
class UnremovableNode:
    node: str
    node_group: str | None
    reason: str


@dataclass(frozen=True)
class Plan:
    cluster: str
    groups: tuple[GroupPlan, ...]
    pending: tuple[PodOutcome, ...]
    unremovable: tuple[UnremovableNode, ...]
    warnings: tuple[str, ...] = ()
    memory: PlannerMemory = PlannerMemory()  # updated memory to persist

    def group(self, name: str) -> GroupPlan:
        return next(g for g in self.groups if g.name == name)

    @property
    def changed(self) -> bool:
        return any(g.action != NONE or g.cancelled_removals for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (DESIGN §5.4, schemas/plan.schema.json)."""
        return {
            "cluster": self.cluster,
            "nodeGroups": [
                {
                    "name": g.name,
                    "minSize": g.min_size,
                    "maxSize": g.max_size,
                    "current": g.current,
                    "desired": g.desired,
                    "action": g.action,
                    "reasons": list(g.reasons),
                    "removeInstances": list(g.remove_instances),
                    "removals": [
                        {
                            "instance": r.instance_id,
                            "node": r.node,
                            "utilization": None if r.utilization is None else round(r.utilization, 4),
                            "reason": r.reason,
                            "since": r.since.isoformat() if r.since else None,
                        }
                        for r in g.removals
                    ],
                    "held": g.held,
                    "upcoming": g.upcoming,
                    "backoffUntil": g.backoff_until.isoformat() if g.backoff_until else None,
                    "warnings": list(g.warnings),
                    "headroom": g.headroom.to_dict() if g.headroom else None,
                    "launchFailure": g.launch_failure.to_dict() if g.launch_failure else None,
                    "monthlyCost": (
                        None
                        if g.monthly_cost is None
                        else {"usd": g.monthly_cost, "nodes": g.new_nodes, "basis": g.cost_basis}
                    ),
                }
                for g in self.groups
            ],
            "pendingPods": [
                {
                    "pod": o.pod,
                    "nodeGroup": o.node_group,
                    **({"node": o.node} if o.node is not None else {}),
                    **({"reason": o.reason} if o.reason else {}),
                }
                for o in self.pending
            ],
            "unremovableNodes": [
                {"node": u.node, "nodeGroup": u.node_group, "reason": u.reason} for u in self.unremovable
            ],
            "warnings": list(self.warnings),
        }
