"""What a new node of a group may cost against `limits`: machines, CPU and memory, at worst.

A mixed-instances group's template is the least of its overrides (so a count of its nodes holds the
pods), but AWS may launch any override, and `limits` cap what the operator pays for: every machine
counts as the largest AWS may launch for the group. With WeightedCapacity, desired counts units: AWS
launches instances until k units are met, so all but the last fill at most k-1 units at the group's
highest cost per unit, and the last is at worst its largest type (`Machines`). The planner books its
scale-ups with these costs and apply holds raises to them (apply/caps.py), so a plan never commits a
raise that apply's own limits refuse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from reconciler.domain.inventory import GroupInventory
from reconciler.domain.model import CPU, MEMORY, Resources

NODES = "nodes"  # the machine count, beside the resources `limits` caps


@dataclass(frozen=True)
class Machines:
    """The most one of `limits`' quantities grows by when a group's desired rises by k units: the
    machines before the last fill at most k-1 units, so they are at most (k-1) x `per_unit` and at
    most (k-1) // `lightest` machines of at most `largest` each; the last is at worst `largest`."""

    per_unit: Fraction
    largest: int
    lightest: int = 1  # the least weight of a type AWS may launch

    def cost(self, units: int) -> int:
        if units <= 0:
            return 0
        before = min(math.floor((units - 1) * self.per_unit), (units - 1) // self.lightest * self.largest)
        return before + self.largest

    def within(self, room: int) -> int:
        """The most units whose cost fits in `room` (either bound on the machines before the last)."""
        if room < self.largest:
            return 0
        spare = room - self.largest
        by_units = math.ceil((spare + 1) / self.per_unit) if self.per_unit > 0 else 10**9
        by_machines = (spare // self.largest + 1) * self.lightest if self.largest > 0 else 10**9
        return max(1, by_units, by_machines)


def machine_costs(inventory: GroupInventory) -> dict[str, Machines | str]:
    """Per counted quantity (machines, CPU, memory), what a new unit of the group's desired may cost
    at most, over every type AWS may launch for it; a string says why a resource cannot be counted."""
    group, template = inventory.group, inventory.template
    types = tuple(dict.fromkeys(group.instance_types))
    weights = {t: max(1, group.instance_weights.get(t, 1)) for t in types} or {"": 1}
    lightest = min(weights.values())
    costs: dict[str, Machines | str] = {NODES: Machines(Fraction(1, lightest), 1, lightest)}
    offers: list[tuple[int, Resources]] = []
    missing = ""
    if len(types) > 1:
        for name in types:
            capacity = group.type_capacity.get(name)
            if capacity is None:
                missing = missing or f"it may launch {name}, an instance type apply cannot describe"
            else:
                offers.append((weights[name], capacity))
    elif template is not None:  # one type: the template is a node of it (or its description)
        offers.append((lightest, _capacity_of(template.capacity, template.allocatable)))
    for resource in (CPU, MEMORY):
        if missing:
            costs[resource] = missing
        elif not offers:
            costs[resource] = (
                f"it has no node template ({group.template_error or 'no Ready node and no instance type'})"
            )
        else:
            costs[resource] = Machines(
                max(Fraction(r.get(resource), w) for w, r in offers),
                max(r.get(resource) for _, r in offers),
                lightest,
            )
    return costs


def _capacity_of(capacity: Resources, allocatable: Resources) -> Resources:
    """As `counted`: capacity, allocatable where capacity is unknown."""
    return Resources({r: capacity.get(r) or allocatable.get(r) for r in (CPU, MEMORY)})


@dataclass(frozen=True)
class NodeCost:
    """What one node the planner adds may cost against `limits`, at worst: machines, CPU (milli),
    memory (bytes). Booked node by node, so a plan counts at least what apply counts for its raise."""

    machines: int
    cpu: int
    memory: int


def node_cost(inventory: GroupInventory, units_per_node: Fraction) -> NodeCost | None:
    """None without a template (the group cannot grow). A resource apply cannot count (an override
    EC2 does not describe) counts as the template's capacity: apply's refusal says the rest."""
    template = inventory.template
    if template is None:
        return None
    units = max(1, math.ceil(units_per_node))
    costs = machine_costs(inventory)

    def worst(name: str, fallback: int) -> int:
        cost = costs[name]
        return cost.cost(units) if isinstance(cost, Machines) else fallback

    return NodeCost(
        machines=worst(NODES, 1),
        cpu=worst(CPU, template.capacity.get(CPU) or template.allocatable.get(CPU)),
        memory=worst(MEMORY, template.capacity.get(MEMORY) or template.allocatable.get(MEMORY)),
    )
