"""Apply's own bounds on a raise (DESIGN §3 rule 11): the ASG's MaxSize, the max of
`nodeGroups.explicit` and the cluster-wide `limits`, taken from apply's deployment config and from
AWS, never from the manifest, so the plan credentials cannot buy capacity past them.

The cluster is counted as the planner counts it against `limits` (planning/scale_up.py: a node's
capacity, the group's node template for a machine with no node yet), but every machine AWS runs or
was asked to run counts: each node, each instance with no node yet (stale ones too) and each one a
desired already set asks AWS for. A raise of k asks for k machines of the group's template, booked
as the run raises groups in manifest order. Removals approved in the same run are not credited: they
happen after the raises, and may yet be refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.aws.discovery import parse_explicit
from reconciler.config.settings import Config
from reconciler.domain.inventory import GroupInventory, Inventory
from reconciler.domain.model import CPU, MEMORY, NodeGroup
from reconciler.planning.baseline import GONE, STANDBY, baseline
from reconciler.planning.scale_up import Limits, counted
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

    @staticmethod
    def of(config: Config, inventory: Inventory) -> Caps:
        return Caps(config, Limits.headroom(config, *cluster_totals(inventory)))

    def bound(self, inventory: GroupInventory) -> Bound:
        """The lowest of the group's max size and what `limits` leaves for nodes of its template."""
        group = inventory.group
        own = _group_max(self.config, group)
        template = inventory.template
        unknown = [
            k
            for k, left in (("cores", self.left.cpu_milli), ("memory", self.left.memory))
            if left is not None
        ]
        if template is None and unknown:  # its nodes cannot be counted: never guess in the unsafe direction
            shown = " and ".join(f"limits.{key}" for key in unknown)
            blind = Bound(
                group.desired,
                f"{shown} (apply's config), which cannot be counted for {group.name}: it has no node "
                f"template ({group.template_error or 'no Ready node and no instance type'})",
                "give the group an instance type apply can describe, or set the limit's max to 0 (unlimited)",
            )
            return min(own, blind, key=lambda b: b.highest)
        if template is None:
            room, key = (None, "") if self.left.nodes is None else (self.left.nodes, "limits.maxNodesTotal")
        else:
            room, key = self.left.cap(template)
        if room is None:
            return own
        room = max(room, 0)
        limit = Bound(group.desired + room, _describe_limit(self.config, key, room, inventory), _LIFT[key])
        return min(own, limit, key=lambda b: b.highest)

    def book(self, inventory: GroupInventory, count: int) -> None:
        """`count` more machines of the group's template asked of AWS."""
        if inventory.template is not None:
            self.left.book(inventory.template, count)
        elif self.left.nodes is not None:
            self.left.nodes -= count


def cluster_totals(inventory: Inventory) -> tuple[int, int, int]:
    """Machines, CPU (milli) and memory (bytes) the cluster has or asked AWS for."""
    count = cpu = memory = 0
    for node in inventory.state.nodes:
        count += 1
        cpu += node.capacity.get(CPU) or node.allocatable.get(CPU)
        memory += node.capacity.get(MEMORY) or node.allocatable.get(MEMORY)
    for g in inventory.groups:
        machines = without_node(g)
        count += machines
        if g.template is not None:
            cpu += counted(g.template, CPU) * machines
            memory += counted(g.template, MEMORY) * machines
    return count, cpu, memory


def without_node(inventory: GroupInventory) -> int:
    """The group's machines no node stands for: instances not registered yet (not going away),
    and those its desired asks AWS for that are not instances yet."""
    group = inventory.group
    unregistered = sum(1 for i in inventory.unregistered if i.lifecycle_state not in GONE)
    in_desired = sum(1 for i in group.instances if i.lifecycle_state not in GONE | STANDBY)
    return unregistered + max(0, group.desired - in_desired)


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
    limits, template = config.limits, inventory.template
    if key == "limits.maxNodesTotal":
        value = f"{limits.max_nodes_total}"
        each = ""
    elif key == "limits.cores":
        value = f"'{limits.cores_min}:{limits.cores_max}'"
        each = f" of {counted(template, CPU) / 1000:g} cores each" if template else ""
    else:
        value = f"'{limits.memory_min_gb}:{limits.memory_max_gb}'"
        each = f" of {counted(template, MEMORY) / 2**30:.2f} GiB each" if template else ""
    return f"{key} {value} (apply's config), which leaves room for {room} more node(s){each} in the cluster"


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
