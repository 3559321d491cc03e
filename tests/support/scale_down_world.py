"""The scale-down planner's small worlds: nodes and pods by the numbers, a group of them, the pool
and the planner run on it with every timer already waited (tests/unit/test_planning_scale_down.py
and the topology tests plan on them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace as dataclass_replace
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.config.settings import Config, ScaleDownConfig
from reconciler.domain.inventory import Inventory, build_inventory
from reconciler.domain.model import (
    AutoscalingOptions,
    ClusterState,
    Instance,
    Node,
    NodeGroup,
    OwnerRef,
    Pod,
    PodDisruptionBudget,
    Taint,
)
from reconciler.planning.placement import NodePool
from reconciler.planning.predicates import PredicateContext
from reconciler.planning.scale_down import ScaleDownResult, plan_scale_down
from reconciler.planning.simnode import SimNode
from reconciler.planning.topology import Topology
from reconciler.planning.types import PlanInputs, PlannerMemory
from tests.support.planning_factories import node, pod

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(hours=2)


def replace(obj: Any, **changes: Any) -> Any:
    """dataclasses.replace for the model's dataclasses, `_replace` for Pod (a NamedTuple)."""
    return obj._replace(**changes) if hasattr(obj, "_replace") else dataclass_replace(obj, **changes)


# ---------------------------------------------------------------------------------- builders


def n(
    name: str,
    cpu: int = 4000,
    mem_gi: float = 16,
    *,
    ready: bool = True,
    ready_since: datetime | None = LONG_AGO,
    annotations: Mapping[str, str] | None = None,
    unschedulable: bool = False,
    taints: tuple[Taint, ...] = (),
    labels: Mapping[str, str] | None = None,
    extra: Mapping[str, int] | None = None,
) -> Node:
    """A node whose instance id is `i-<name>` (stable across processes, unlike the factory's)."""
    base = node(name, cpu, mem_gi, labels=labels, taints=taints, unschedulable=unschedulable, extra=extra)
    return replace(
        base,
        provider_id=f"aws:///us-east-1a/i-{name}",
        ready=ready,
        ready_since=ready_since,
        annotations=dict(annotations or {}),
    )


def on(
    node_name: str,
    name: str,
    cpu: int = 100,
    mem_gi: float = 0.125,
    *,
    annotations: Mapping[str, str] | None = None,
    **kw: object,
) -> Pod:
    """A running pod on `node_name` (ReplicaSet-owned unless `owner=` says otherwise)."""
    made = pod(name, cpu, mem_gi, node_name=node_name, **kw)  # type: ignore[arg-type]
    return replace(made, annotations=dict(annotations)) if annotations else made


def ds_pod(node_name: str, cpu: int = 100, mem_gi: float = 0.125) -> Pod:
    return replace(on(node_name, f"ds-{node_name}", cpu, mem_gi), owner=OwnerRef("DaemonSet", "agent"))


def instance(instance_id: str, state: str = "InService", launched: datetime | None = LONG_AGO) -> Instance:
    return Instance(instance_id, state, "us-east-1a", "m5.xlarge", launched)


def grp(
    name: str,
    nodes: Sequence[Node],
    *,
    min_size: int = 0,
    extra_instances: Sequence[Instance] = (),
    options: AutoscalingOptions | None = None,
) -> tuple[NodeGroup, Sequence[Node]]:
    instances = tuple(instance(x.instance_id) for x in nodes) + tuple(extra_instances)
    group = NodeGroup(
        name=name,
        min_size=min_size,
        max_size=100,
        desired=len(instances),
        instances=instances,
        zones=("us-east-1a",),
        tags={},
        options=options or AutoscalingOptions(),
    )
    return group, nodes


def sd(**kw: object) -> Config:
    return Config(cluster="c", scale_down=ScaleDownConfig(**kw))  # type: ignore[arg-type]


def mature(inventory: Inventory) -> PlannerMemory:
    """Every node unneeded for two hours: the timers are out of the way."""
    return PlannerMemory(unneeded_since={x.name: LONG_AGO for x in inventory.state.nodes})


def make_pool(inventory: Inventory, upcoming: Iterable[SimNode] = ()) -> NodePool:
    """What the lead's plan passes: every Ready node with its pods, in name order, then upcoming ones."""
    nodes = sorted((x for x in inventory.state.nodes if x.ready), key=lambda x: x.name)
    sims = [
        SimNode.from_node(
            x, inventory.pods_by_node.get(x.name, ()), group=inventory.group_of_node.get(x.name, "")
        )
        for x in nodes
    ]
    pool = NodePool(sims, PredicateContext(topology=Topology(inventory.state.namespaces)))
    for sim in upcoming:
        pool.add_node(sim)
    return pool


def world(
    groups: Sequence[tuple[NodeGroup, Sequence[Node]]],
    pods: Sequence[Pod] = (),
    pdbs: Sequence[PodDisruptionBudget] = (),
) -> Inventory:
    nodes = tuple(x for _, ns in groups for x in ns)
    state = ClusterState(nodes=nodes, pods=tuple(pods), pdbs=tuple(pdbs), read_at=NOW)
    return build_inventory(state, tuple(g for g, _ in groups))


def run(
    inventory: Inventory,
    *,
    config: Config | None = None,
    memory: PlannerMemory | None = None,
    pool: NodePool | None = None,
    **kw: object,
) -> tuple[ScaleDownResult, NodePool]:
    pool = pool if pool is not None else make_pool(inventory)
    inputs = PlanInputs(
        inventory=inventory,
        config=config or sd(),
        now=NOW,
        memory=memory if memory is not None else mature(inventory),
    )
    return plan_scale_down(inputs, pool, **kw), pool  # type: ignore[arg-type]


def removed(result: ScaleDownResult) -> list[str]:
    return [r.node or r.instance_id for rs in result.removals.values() for r in rs]


def why(result: ScaleDownResult, name: str) -> str:
    return next(u.reason for u in result.unremovable if u.node == name)


def busy(node_name: str, cpu: int = 3000) -> Pod:
    return on(node_name, f"busy-{node_name}", cpu, owner=f"busy-{node_name}")


# ---------------------------------------------------------------------------------- basics
