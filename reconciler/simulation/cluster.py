"""The simulated world: ASGs whose instances join as Ready EKS-like nodes, pods that arrive, run,
leave or are evicted, and a scheduler that binds pending pods with the planner's own predicates.

Mutable on purpose (one World per simulated run, changed in place step by step so a step costs what
changed, not the cluster's size); `engine.py` owns it and hands the planner immutable snapshots of it
(`cluster_state`, `node_groups`), the same model types `plan` reads from a live cluster and AWS.

Nodes are built from the instance type's facts through the project's allocatable formula
(`aws.templates.build_template`, i.e. `aws.allocatable.node_resources` with `nodeTemplates:`), so a
simulated node offers what a real EKS node of that type offers, and carries the labels a real one
does (instance type, arch, os, region, zone and their legacy twins, hostname) plus its group's
labels and taints, with providerID `aws:///<zone>/<instance-id>`.

The scheduler is kube-scheduler's default scoring reduced to its resource part: among the nodes
that pass every predicate (`planning.predicates.fits_besides_resources`, domain-wide spread and
affinity included, kept in step by a `NodePool`'s `Topology`), the least allocated one after the
pod is placed (mean free share of CPU and memory), ties to the node that joined first. The real
scheduler picks randomly among equal scores; the first is taken so a seed decides everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.aws.instance_types import InstanceTypeInfo
from reconciler.aws.templates import TemplateTags, build_template
from reconciler.config.settings import Config
from reconciler.domain.errors import UserError
from reconciler.domain.model import (
    HOSTNAME_LABEL,
    LEGACY_ZONE_LABEL,
    ZONE_LABEL,
    ClusterState,
    Instance,
    Node,
    NodeGroup,
    NodeTemplate,
    Pod,
)
from reconciler.planning.placement import Demand, NodePool
from reconciler.planning.predicates import PredicateContext, fits_besides_resources
from reconciler.planning.simnode import SimNode
from reconciler.planning.topology import Topology
from reconciler.simulation.trace import TraceGroup

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every namespace
IN_SERVICE = "InService"
PENDING = "Pending"
# Initial nodes joined this long before the simulation starts: old enough that nothing in the
# planner treats them as new.
INITIAL_AGE = timedelta(hours=1)


# ------------------------------------------------------------------------------------------ facts


def instance_types_from_document(document: Any, label: str) -> dict[str, InstanceTypeInfo]:
    """Instance type facts from `{"instanceTypes": {"m5.large": {"vcpus": 2, "memoryMiB": 8192,
    "maxENIs": 3, "ipv4PerENI": 10}}}` (or the inner mapping alone); a mistake names the field."""
    types = document.get("instanceTypes", document) if isinstance(document, dict) else None
    if not isinstance(types, dict):
        raise UserError(f'{label}: expected {{"instanceTypes": {{"m5.large": {{"vcpus": 2, ...}}}}}}')
    found: dict[str, InstanceTypeInfo] = {}
    for name, raw in types.items():
        if name.startswith("_"):
            continue
        where = f"{label}: instanceTypes.{name}"
        if not isinstance(raw, dict):
            raise UserError(f'{where}: expected an object such as {{"vcpus": 2, "memoryMiB": 8192, ...}}')
        values: dict[str, int] = {}
        for key in ("vcpus", "memoryMiB", "maxENIs", "ipv4PerENI"):
            value = raw.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise UserError(f"{where}.{key}: must be a whole number above 0 (got {value!r})")
            values[key] = value
        architecture = raw.get("architecture", "amd64")
        if architecture not in ("amd64", "arm64"):
            raise UserError(f"{where}.architecture: {architecture!r} is not amd64 or arm64")
        found[name] = InstanceTypeInfo(
            name=name,
            vcpus=values["vcpus"],
            memory_mib=values["memoryMiB"],
            architecture=architecture,
            max_enis=values["maxENIs"],
            ipv4_per_eni=values["ipv4PerENI"],
        )
    return found


def group_template(
    group: TraceGroup, types: Mapping[str, InstanceTypeInfo], config: Config, label: str
) -> NodeTemplate:
    """A new node of the group as the ASG would describe it: the type's facts through the project's
    allocatable formula, the standard labels, the group's labels and taints."""
    result = build_template(
        group.name,
        (group.instance_type,),
        types,
        group.zones,
        config.region,
        TemplateTags(labels=dict(group.labels), taints=group.taints),
        config.node_templates,
    )
    if result.template is None:
        known = ", ".join(sorted(types)) or "none"
        raise UserError(
            f"{label}: groups.{group.name}.instanceType: {group.instance_type!r} has no instance type facts "
            f"(known: {known}); add it with --instance-types FILE"
        )
    return result.template


# ------------------------------------------------------------------------------------------ world


@dataclass
class SimInstance:
    instance_id: str
    group: str
    zone: str
    launched_at: float  # seconds since the start (negative for the initial ones)
    node: str = ""  # the node's name once it joined
    joined_at: float | None = None
    _model: Instance | None = field(default=None, repr=False, compare=False)

    def model(self, start: datetime, instance_type: str) -> Instance:
        """As DescribeAutoScalingGroups lists it: Pending until its node joins, then InService
        (built once per state: every step lists every instance)."""
        state = IN_SERVICE if self.node else PENDING
        if self._model is None or self._model.lifecycle_state != state:
            self._model = Instance(
                self.instance_id, state, self.zone, instance_type, start + timedelta(seconds=self.launched_at)
            )
        return self._model


@dataclass
class SimGroup:
    spec: TraceGroup
    template: NodeTemplate
    desired: int
    instances: dict[str, SimInstance] = field(default_factory=dict)
    launches: int = 0  # instances launched so far, the initial ones included


@dataclass
class BoundPod:
    pod: Pod  # as bound: node_name set, phase Running
    node: str
    since: float  # when it started running


@dataclass
class PendingPod:
    pod: Pod  # as the scheduler reports it: Pending, PodScheduled False/Unschedulable
    since: float  # arrival, or eviction
    arrival: bool  # first time pending (time to schedule is measured for these)


class World:
    """Everything that exists at the simulated moment. Mutate through its methods only: the
    scheduler's pool and the planner's snapshots are kept in step here."""

    def __init__(
        self, start: datetime, groups: Iterable[tuple[TraceGroup, NodeTemplate]], namespaces: Iterable[str]
    ) -> None:
        self.start = start
        self.groups: dict[str, SimGroup] = {
            spec.name: SimGroup(spec, template, spec.desired) for spec, template in groups
        }
        self.nodes: dict[str, Node] = {}
        self.node_group: dict[str, str] = {}
        self.node_instance: dict[str, str] = {}
        self.bound: dict[str, BoundPod] = {}
        self.pending: dict[str, PendingPod] = {}
        self.namespaces: dict[str, Mapping[str, str]] = {ns: {NAMESPACE_NAME_LABEL: ns} for ns in namespaces}
        self._serial = 0
        self._pool = NodePool((), PredicateContext({}, Topology(self.namespaces)))
        # the pool's nodes not removed, in join order, with 1/allocatable of CPU and memory (scores)
        self._live: list[tuple[SimNode, float, float]] = []
        self._state_pods: tuple[Pod, ...] | None = None  # cache of the planner's pod list

    # ---------------------------------------------------------------------------- instances

    def launch(self, group_name: str, at: float) -> SimInstance:
        """A new instance in the zone with the fewest of the group's (AWS balances AZs)."""
        group = self.groups[group_name]
        zones = group.spec.zones
        counts = {zone: 0 for zone in zones}
        for instance in group.instances.values():
            counts[instance.zone] = counts.get(instance.zone, 0) + 1
        zone = min(zones, key=lambda z: (counts[z], zones.index(z)))
        self._serial += 1
        instance = SimInstance(f"i-{self._serial:017x}", group_name, zone, at)
        group.instances[instance.instance_id] = instance
        group.launches += 1
        return instance

    def join(self, instance: SimInstance, at: float) -> None:
        """The instance's node registers Ready: the scheduler may use it from now on."""
        group = self.groups[instance.group]
        number = int(instance.instance_id[2:], 16)
        name = f"ip-10-{(number >> 16) & 255}-{(number >> 8) & 255}-{number & 255}.ec2.internal"
        labels = dict(group.template.labels)
        labels[HOSTNAME_LABEL] = name
        labels[ZONE_LABEL] = instance.zone
        if LEGACY_ZONE_LABEL in labels:
            labels[LEGACY_ZONE_LABEL] = instance.zone
        when = self.start + timedelta(seconds=at)
        node = Node(
            name=name,
            labels=labels,
            taints=group.template.taints,
            allocatable=group.template.allocatable,
            capacity=group.template.capacity,
            ready=True,
            ready_since=when,
            unschedulable=False,
            provider_id=f"aws:///{instance.zone}/{instance.instance_id}",
            created=when,
        )
        instance.node, instance.joined_at = name, at
        self.nodes[name] = node
        self.node_group[name] = instance.group
        self.node_instance[name] = instance.instance_id
        sim = SimNode.from_node(node, (), instance.group)
        self._pool.add_node(sim)
        cpu, memory = node.allocatable.cpu, node.allocatable.memory
        self._live.append((sim, 1 / cpu if cpu else 0.0, 1 / memory if memory else 0.0))

    def terminate(self, instance_id: str, group_name: str, at: float) -> list[PendingPod]:
        """Drain then terminate: the node's pods go back to pending (their controllers recreate
        them), the node leaves the scheduler, the instance is gone. Returns the evicted pods."""
        group = self.groups[group_name]
        instance = group.instances.pop(instance_id)
        group.desired -= 1
        evicted: list[PendingPod] = []
        name = instance.node
        if name:
            sim = self._pool.get(name)
            assert sim is not None
            for pod in list(sim.pods):
                self._pool.remove_pod(pod, name)
                del self.bound[pod.key]
                evicted.append(self.add_pending(pod, at, arrival=False))
            self._pool.retire(name)
            self._live = [entry for entry in self._live if entry[0] is not sim]
            del self.nodes[name], self.node_group[name], self.node_instance[name]
        self._state_pods = None
        return evicted

    # ---------------------------------------------------------------------------- pods

    def add_pending(self, pod: Pod, at: float, *, arrival: bool) -> PendingPod:
        """A pod the scheduler could not place (yet): created at `at` (an evicted pod is a new pod
        of its controller), reported Unschedulable, as the planner reads pending pods."""
        when = self.start + timedelta(seconds=at)
        pending = PendingPod(
            pod._replace(
                node_name="",
                phase="Pending",
                created=when,
                scheduled_status="False",
                scheduled_reason="Unschedulable",
                scheduled_since=when,
            ),
            at,
            arrival,
        )
        self.pending[pod.key] = pending
        self._state_pods = None
        return pending

    def remove_pod(self, key: str) -> BoundPod | PendingPod | None:
        """The pod leaves (deleted, or its job finished): whatever it held is free again."""
        bound = self.bound.pop(key, None)
        if bound is not None:
            self._pool.remove_pod(bound.pod, bound.node)
            self._state_pods = None
            return bound
        pending = self.pending.pop(key, None)
        if pending is not None:
            self._state_pods = None
        return pending

    def schedule(self, keys: Iterable[str] | None, at: float) -> list[tuple[PendingPod, BoundPod]]:
        """Bind what fits of the pending pods (all, or those named), highest priority and longest
        waiting first; returns (was pending, now bound) pairs."""
        candidates = [self.pending[k] for k in keys if k in self.pending] if keys is not None else None
        waiting = sorted(
            candidates if candidates is not None else self.pending.values(),
            key=lambda p: (-p.pod.priority, p.since, p.pod.key),
        )
        if not waiting:
            return []
        pool, ctx = self._pool, self._pool.ctx
        classifier = pool.classifier
        refused: set[object] = set()  # classes no node took in this pass (their verdict cannot change)
        done: list[tuple[PendingPod, BoundPod]] = []
        for entry in waiting:
            pod = entry.pod
            key = classifier.key(pod)
            if key in refused:
                continue
            node = self._best_node(pod, ctx)
            if node is None:
                if pool.sticky(pod):
                    refused.add(key)
                continue
            bound = pod._replace(
                node_name=node.name, phase="Running", scheduled_status="True", scheduled_reason=""
            )
            pool.add_pod(bound, node.name)
            del self.pending[pod.key]
            placed = BoundPod(bound, node.name, at)
            self.bound[pod.key] = placed
            done.append((entry, placed))
        if done:
            self._state_pods = None
        return done

    def _best_node(self, pod: Pod, ctx: PredicateContext) -> SimNode | None:
        """The least allocated node that takes `pod` (the resource test inlined: it runs for every
        node and pending pod)."""
        demand = Demand(pod)
        cpu_need, mem_need, extra = demand.cpu, demand.mem, demand.extra
        best: SimNode | None = None
        best_score = -1.0
        for node, cpu_share, mem_share in self._live:
            if node.pods_free < 1:
                continue
            cpu_free, mem_free = node.cpu_free - cpu_need, node.mem_free - mem_need
            if (cpu_need > 0 and cpu_free < 0) or (mem_need > 0 and mem_free < 0):
                continue
            score = cpu_free * cpu_share + mem_free * mem_share
            if score <= best_score or (extra and not demand.fits_extra(node)):
                continue
            if fits_besides_resources(pod, node, ctx):
                best, best_score = node, score
        return best

    # ---------------------------------------------------------------------------- the planner's view

    def cluster_state(self, at: float) -> ClusterState:
        """What a live read would return now: every Ready node and every pod, bound or pending."""
        if self._state_pods is None:
            self._state_pods = tuple(b.pod for b in self.bound.values()) + tuple(
                p.pod for p in self.pending.values()
            )
        return ClusterState(
            nodes=tuple(self.nodes.values()),
            pods=self._state_pods,
            namespaces=self.namespaces,
            read_at=self.start + timedelta(seconds=at),
        )

    def node_groups(self) -> tuple[NodeGroup, ...]:
        """The ASGs as discovery would describe them now."""
        found = []
        for group in self.groups.values():
            spec = group.spec
            found.append(
                NodeGroup(
                    name=spec.name,
                    min_size=spec.min_size,
                    max_size=spec.max_size,
                    desired=group.desired,
                    instances=tuple(
                        i.model(self.start, spec.instance_type) for i in group.instances.values()
                    ),
                    zones=spec.zones,
                    tags={},
                    has_instance_refresh=False,
                    instance_types=(spec.instance_type,),
                    asg_min_size=spec.min_size,
                    asg_max_size=spec.max_size,
                    template=group.template,
                    declared_labels=dict(spec.labels),
                    declared_taints=spec.taints,
                )
            )
        return tuple(found)

    def utilisation(self) -> float:
        """CPU requested over allocatable, cluster-wide (for reports)."""
        requested = allocatable = 0
        for node, _, _ in self._live:
            allocatable += node.allocatable.cpu
            requested += node.allocatable.cpu - node.cpu_free
        return requested / allocatable if allocatable else 0.0
