"""A small world builder for planner tests: groups, nodes, running and pending pods, then a plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.config.settings import Config, ScaleDownConfig, ScaleUpConfig
from reconciler.domain.inventory import Inventory, build_inventory
from reconciler.domain.model import (
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    ZONE_LABEL,
    ClusterState,
    DaemonSet,
    Instance,
    Node,
    NodeGroup,
    NodeTemplate,
    OwnerRef,
    Pod,
    PodDisruptionBudget,
    Resources,
    Scheduling,
    Taint,
)
from reconciler.planning.plan import make_plan
from reconciler.planning.types import CommittedGroup, Plan, PlanInputs, PlannerMemory

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
GI = 2**30


def resources(cpu: int, mem_gi: float, pods: int = 110, **extra: int) -> Resources:
    return Resources({"cpu": cpu, "memory": int(mem_gi * GI), "pods": pods, **extra})


def template(
    instance_type: str = "m5.xlarge",
    cpu: int = 4000,
    mem_gi: float = 16,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    **extra: int,
) -> NodeTemplate:
    alloc = resources(cpu, mem_gi, **extra)
    return NodeTemplate(
        instance_type=instance_type,
        labels={INSTANCE_TYPE_LABEL: instance_type, **(labels or {})},
        taints=taints,
        capacity=alloc,
        allocatable=alloc,
        source=f"asg ({instance_type})",
    )


@dataclass
class World:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    groups: dict[str, NodeGroup] = field(default_factory=dict)
    daemonsets: list[DaemonSet] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    counter: int = 0

    def group(
        self,
        name: str,
        min_size: int = 0,
        max_size: int = 10,
        tmpl: NodeTemplate | None = None,
        zones: tuple[str, ...] = ("us-east-1a",),
        **kw: Any,
    ) -> World:
        self.groups[name] = NodeGroup(
            name=name,
            min_size=min_size,
            max_size=max_size,
            desired=0,
            instances=(),
            zones=zones,
            tags={},
            template=tmpl if tmpl is not None else template(),
            **kw,
        )
        return self

    def _add_instance(self, group: str, instance: Instance) -> None:
        g = self.groups[group]
        self.groups[group] = replace(g, instances=(*g.instances, instance), desired=g.desired + 1)

    def node(
        self,
        group: str,
        name: str,
        cpu: int = 4000,
        mem_gi: float = 16,
        ready: bool = True,
        ready_since: datetime | None = None,
        labels: Mapping[str, str] | None = None,
        taints: tuple[Taint, ...] = (),
        annotations: Mapping[str, str] | None = None,
        unschedulable: bool = False,
    ) -> World:
        instance_id = f"i-{name.replace('-', '')}"
        zone = self.groups[group].zones[0]
        self._add_instance(
            group, Instance(instance_id, "InService", zone, "m5.xlarge", NOW - timedelta(days=1))
        )
        alloc = resources(cpu, mem_gi)
        self.nodes.append(
            Node(
                name=name,
                labels={
                    HOSTNAME_LABEL: name,
                    ZONE_LABEL: zone,
                    INSTANCE_TYPE_LABEL: "m5.xlarge",
                    **(labels or {}),
                },
                taints=taints,
                allocatable=alloc,
                capacity=alloc,
                ready=ready,
                ready_since=ready_since or NOW - timedelta(days=1),
                unschedulable=unschedulable,
                provider_id=f"aws:///{zone}/{instance_id}",
                created=NOW - timedelta(days=1),
                annotations=dict(annotations or {}),
            )
        )
        return self

    def unregistered(self, group: str, age: timedelta, state: str = "Pending") -> str:
        self.counter += 1
        instance_id = f"i-unreg{self.counter}"
        zone = self.groups[group].zones[0]
        self._add_instance(group, Instance(instance_id, state, zone, "m5.xlarge", NOW - age))
        return instance_id

    def running(
        self,
        node: str,
        name: str,
        cpu: int = 100,
        mem_gi: float = 0.25,
        owner: tuple[str, str] | None = ("ReplicaSet", "rs"),
        namespace: str = "default",
        **kw: Any,
    ) -> World:
        self.pods.append(
            self._pod(name, cpu, mem_gi, owner, namespace, node_name=node, phase="Running", **kw)
        )
        return self

    def pending(
        self,
        name: str,
        cpu: int = 100,
        mem_gi: float = 0.25,
        owner: tuple[str, str] | None = ("ReplicaSet", "pending-rs"),
        namespace: str = "default",
        **kw: Any,
    ) -> World:
        self.pods.append(
            self._pod(
                name,
                cpu,
                mem_gi,
                owner,
                namespace,
                node_name="",
                phase="Pending",
                scheduled_status="False",
                scheduled_reason="Unschedulable",
                **kw,
            )
        )
        return self

    def _pod(
        self,
        name: str,
        cpu: int,
        mem_gi: float,
        owner: tuple[str, str] | None,
        namespace: str,
        scheduling: Scheduling | None = None,
        extra: Mapping[str, int] | None = None,
        **kw: Any,
    ) -> Pod:
        requests = {"cpu": cpu, "memory": int(mem_gi * GI), **(extra or {})}
        return Pod(
            namespace=namespace,
            name=name,
            uid=f"uid-{namespace}-{name}",
            requests=Resources({k: v for k, v in requests.items() if v}),
            created=kw.pop("created", NOW - timedelta(hours=1)),
            owner=OwnerRef(*owner) if owner else None,
            scheduling=scheduling or Scheduling(),
            **kw,
        )

    def state(self) -> ClusterState:
        return ClusterState(
            nodes=tuple(sorted(self.nodes, key=lambda n: n.name)),
            pods=tuple(self.pods),
            pdbs=tuple(self.pdbs),
            daemonsets=tuple(self.daemonsets),
            read_at=NOW,
        )

    def inventory(self) -> Inventory:
        return build_inventory(self.state(), tuple(self.groups.values()))

    def plan(
        self,
        config: Config | None = None,
        committed: Mapping[str, CommittedGroup] | None = None,
        memory: PlannerMemory | None = None,
        now: datetime = NOW,
        **config_kw: Any,
    ) -> Plan:
        return make_plan(
            PlanInputs(
                inventory=self.inventory(),
                config=config or make_config(**config_kw),
                now=now,
                committed=committed or {},
                memory=memory or PlannerMemory(),
            )
        )


def make_config(
    scale_up: Mapping[str, Any] | None = None, scale_down: Mapping[str, Any] | None = None, **kw: Any
) -> Config:
    return Config(
        cluster="test",
        scale_up=replace(ScaleUpConfig(), **(scale_up or {})),
        scale_down=replace(ScaleDownConfig(), **(scale_down or {})),
        **kw,
    )
