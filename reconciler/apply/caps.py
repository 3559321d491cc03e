"""Apply's own bounds on a raise (DESIGN §3 rule 11): the ASG's MaxSize, the max of
`nodeGroups.explicit` and the cluster-wide `limits`, taken from apply's deployment config and from
AWS, never from the manifest, so the plan credentials cannot buy capacity past them.

The cluster is counted as the planner counts it against `limits` (planning/scale_up.py: a node's
capacity), but every machine AWS runs or was asked to run counts: each node, each instance with no
node yet (stale ones too) and each one a desired already set asks AWS for. A machine not launched
yet counts as the largest AWS may launch for the group: a mixed-instances group's template is the
least of its overrides (so the plan's count holds pods), but AWS may pick any override, and the cap
is what the operator pays for. With WeightedCapacity, desired counts units: AWS launches instances
until k units are met, so all but the last fill at most k-1 units at the group's highest cost per
unit, and the last is at worst its largest type (`Machines`). Raises are booked as the run raises
groups in manifest order. Removals approved in the same run are not credited: they happen after the
raises, and may yet be refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.aws.discovery import parse_explicit
from reconciler.config.settings import Config
from reconciler.domain.inventory import GroupInventory, Inventory
from reconciler.domain.model import CPU, MEMORY, Instance, NodeGroup, Resources
from reconciler.planning.baseline import GONE, STANDBY, baseline
from reconciler.planning.limit_costs import NODES, Machines, machine_costs
from reconciler.planning.scale_up import Limits
from reconciler.planning.types import CommittedGroup


@dataclass(frozen=True)
class Bound:
    """The highest desired the group may have by apply's caps (it may be below AWS's desired, set by
    hand), and which cap that is, named by its config key, with how to lift it."""

    highest: int
    what: str
    fix: str


@dataclass
class Caps:
    """What this run may still raise: `left` is what remains under `limits` after the raises so far."""

    config: Config
    left: Limits
    # resource -> a group whose machines with no node yet cannot be sized, and why: the cluster's
    # total of that resource is unknown, so no raise is counted against its max
    uncounted: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def of(config: Config, inventory: Inventory) -> Caps:
        return Caps(config, Limits.headroom(config, *cluster_totals(inventory)), uncounted(inventory))

    def bound(self, inventory: GroupInventory) -> Bound:
        """The lowest of the group's max size and what `limits` leaves for the machines it may get."""
        group = inventory.group
        own = _group_max(self.config, group)
        costs = machine_costs(inventory)
        unknown: list[tuple[str, str]] = []
        for key, left, resource in (
            ("cores", self.left.cpu_milli, CPU),
            ("memory", self.left.memory, MEMORY),
        ):
            cost = costs[resource]
            if left is None:
                continue
            if isinstance(cost, str):
                unknown.append((key, f"for {group.name}: {cost}"))
            elif resource in self.uncounted:
                unknown.append((key, self.uncounted[resource]))
        if unknown:  # machines that cannot be counted: never guess in the unsafe direction
            shown = " and ".join(f"limits.{key}" for key, _ in unknown)
            blind = Bound(
                group.desired,
                f"{shown} (apply's config), which cannot be counted {unknown[0][1]}",
                "give the group instance types apply can describe, or set the limit's max to 0 (unlimited)",
            )
            return min(own, blind, key=lambda b: b.highest)
        rooms: list[tuple[int, str]] = []
        for key, left, resource in (
            ("limits.maxNodesTotal", self.left.nodes, NODES),
            ("limits.cores", self.left.cpu_milli, CPU),
            ("limits.memory", self.left.memory, MEMORY),
        ):
            cost = costs[resource]
            if left is not None and isinstance(cost, Machines):
                rooms.append((cost.within(left), key))
        if not rooms:
            return own
        room, key = min(rooms)
        limit = Bound(group.desired + room, _describe_limit(self.config, key, room, inventory), _LIFT[key])
        return min(own, limit, key=lambda b: b.highest)

    def book(self, inventory: GroupInventory, count: int) -> None:
        """`count` more of the group's desired (machines, or capacity units) asked of AWS."""
        costs = machine_costs(inventory)
        nodes, cpu, memory = (costs[NODES], costs[CPU], costs[MEMORY])
        if self.left.nodes is not None and isinstance(nodes, Machines):
            self.left.nodes -= nodes.cost(count)
        if self.left.cpu_milli is not None and isinstance(cpu, Machines):
            self.left.cpu_milli -= cpu.cost(count)
        if self.left.memory is not None and isinstance(memory, Machines):
            self.left.memory -= memory.cost(count)


def cluster_totals(inventory: Inventory) -> tuple[int, int, int]:
    """Machines, CPU (milli) and memory (bytes) the cluster has or asked AWS for."""
    count = cpu = memory = 0
    for node in inventory.state.nodes:
        count += 1
        cpu += node.capacity.get(CPU) or node.allocatable.get(CPU)
        memory += node.capacity.get(MEMORY) or node.allocatable.get(MEMORY)
    for g in inventory.groups:
        costs = machine_costs(g)
        unregistered, units = _without_node(g)
        nodes = costs[NODES]
        count += len(unregistered) + (nodes.cost(units) if isinstance(nodes, Machines) else units)
        for resource in (CPU, MEMORY):
            cost = costs[resource]
            if not isinstance(cost, Machines):
                continue
            amount = cost.cost(units) + sum(
                g.group.type_capacity.get(i.instance_type, Resources()).get(resource) or cost.largest
                for i in unregistered
            )
            if resource == CPU:
                cpu += amount
            else:
                memory += amount
    return count, cpu, memory


def uncounted(inventory: Inventory) -> dict[str, str]:
    """Per resource, the first group with machines no node stands for whose size is unknown."""
    found: dict[str, str] = {}
    for g in inventory.groups:
        unregistered, units = _without_node(g)
        if not unregistered and not units:
            continue
        costs = machine_costs(g)
        for resource in (CPU, MEMORY):
            cost = costs[resource]
            if isinstance(cost, str) and resource not in found:
                found[resource] = (
                    f"in the cluster: {g.name} has {len(unregistered) + units} machine(s) asked of AWS with "
                    f"no node yet, of unknown size ({cost})"
                )
    return found


def _without_node(inventory: GroupInventory) -> tuple[list[Instance], int]:
    """Instances not registered yet (not going away), and the units of desired no instance fills:
    with WeightedCapacity an instance fills its override's weight (AWS's count of desired)."""
    group = inventory.group
    unregistered = [i for i in inventory.unregistered if i.lifecycle_state not in GONE]
    filled = sum(
        max(1, group.instance_weights.get(i.instance_type, 1))
        for i in group.instances
        if i.lifecycle_state not in GONE | STANDBY
    )
    return unregistered, max(0, group.desired - filled)


def _group_max(config: Config, group: NodeGroup) -> Bound:
    asg_max = group.asg_max_size or group.max_size
    if group.explicit and group.max_size < asg_max:
        spec = _explicit_spec(config, group)
        return Bound(
            group.max_size,
            f"the max of nodeGroups.explicit {spec!r} (apply's config)",
            "raise that max in apply's config",
        )
    return Bound(asg_max, f"the ASG's MaxSize {asg_max}", "raise the ASG's MaxSize")


def _explicit_spec(config: Config, group: NodeGroup) -> str:
    """The spec as the operator wrote it in apply's config."""
    for text in config.node_groups.explicit:
        spec = parse_explicit(text)
        if spec.name == group.name and spec.max_size == group.max_size:
            return text
    return f"{group.min_size}:{group.max_size}:{group.name}"


_LIFT = {
    "limits.maxNodesTotal": "raise limits.maxNodesTotal in apply's config",
    "limits.cores": "raise the max of limits.cores in apply's config",
    "limits.memory": "raise the max of limits.memory in apply's config",
}


def _describe_limit(config: Config, key: str, room: int, inventory: GroupInventory) -> str:
    limits, group = config.limits, inventory.group
    costs = machine_costs(inventory)
    several = len(set(group.instance_types)) > 1
    weighted = any(w != 1 for w in group.instance_weights.values())
    what = "capacity unit(s) of desired" if weighted else "node(s)"
    if key == "limits.maxNodesTotal":
        value, resource, unit, scale = f"{limits.max_nodes_total}", "", "", 1.0
    elif key == "limits.cores":
        value, resource, unit, scale = f"'{limits.cores_min}:{limits.cores_max}'", CPU, "cores", 1000.0
    else:
        value, resource, unit, scale = (
            f"'{limits.memory_min_gb}:{limits.memory_max_gb}'",
            MEMORY,
            "GiB",
            2.0**30,
        )
    each = ""
    cost = costs.get(resource) if resource else None
    if isinstance(cost, Machines):
        amount = f"{cost.largest / scale:g}" if unit == "cores" else f"{cost.largest / scale:.2f}"
        each = f" of {amount} {unit} each"
        if several:
            types = ", ".join(dict.fromkeys(group.instance_types))
            each = f" of up to {amount} {unit} each (the largest AWS may launch of {types})"
    return f"{key} {value} (apply's config), which leaves room for {room} more {what}{each} in the cluster"


def beyond_bounds(
    config: Config, inventory: Inventory, committed: Mapping[str, CommittedGroup]
) -> dict[str, str]:
    """Per group, what an apply with this config would refuse of main's raises (for `status`): the
    same bounds and booking, in the manifest's order, over as many runs as `apply.maxStep` takes."""
    caps = Caps.of(config, inventory)
    by_name = {g.name: g for g in inventory.groups}
    found: dict[str, str] = {}
    for name, entry in committed.items():
        group = by_name.get(name)
        if group is None:
            continue
        base = baseline(group.group, entry)
        intended = base.aws_desired + base.unapplied_increase
        if intended <= group.group.desired:
            continue
        bound = caps.bound(group)
        reached = max(min(intended, bound.highest), group.group.desired)
        caps.book(group, reached - group.group.desired)
        if intended <= bound.highest:
            continue
        done = (
            f"raises it to {reached} at most and refuses the rest"
            if reached > group.group.desired
            else f"refuses to raise it (and never lowers its {group.group.desired})"
        )
        found[name] = (
            f"main asks for {intended}, above {bound.what}: apply with this config {done} ({bound.fix})"
        )
    return found
