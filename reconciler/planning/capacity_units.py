"""Nodes into capacity units, for a mixed-instances group whose overrides carry WeightedCapacity.

With weights, AWS counts DesiredCapacity in units: an m5.xlarge of weight 4 fills 4 of them, and AWS
launches whichever overrides its allocation strategy picks until the units are met. The planner
counts nodes of the group's template, so it asks for as many units as make the count hold whatever
AWS launches: for each override t, one unit of t gives r_t / w_t template nodes, where r_t is how
many template nodes one t node is worth (its allocatable over the template's, in the resource it has
least of: CPU, memory, pods) and w_t its weight; the worst override decides,

    units per node = max over t of (w_t / r_t),

and a raise of n nodes asks for ceil(n x units per node) units. Weights proportional to size (the
usual vCPU weighting) give exactly w of the template's own type per node. An override whose size
is unknown counts as no bigger than the template (r_t = 1): more units, never fewer. Groups without
weights, or with every weight 1, count one unit a node (as cluster-autoscaler always does).
"""

from __future__ import annotations

import math
from fractions import Fraction

from reconciler.domain.model import CPU, MEMORY, PODS, NodeGroup, NodeTemplate, Resources

_SIZED_BY = (CPU, MEMORY, PODS)


def units_per_node(group: NodeGroup, template: NodeTemplate | None) -> Fraction:
    if template is None or all(w == 1 for w in group.instance_weights.values()):
        return Fraction(1)
    worst = Fraction(0)
    for name in group.instance_types or tuple(group.instance_weights):
        weight = group.instance_weights.get(name, 1)
        worth = _worth(group.type_allocatable.get(name), template)
        worst = max(worst, Fraction(weight) / worth)
    return worst if worst > 0 else Fraction(1)


def _worth(allocatable: Resources | None, template: NodeTemplate) -> Fraction:
    """Template nodes one node of an override is worth: its least ratio over the template's."""
    if allocatable is None:
        return Fraction(1)
    ratios = [
        Fraction(allocatable.get(r), template.allocatable.get(r))
        for r in _SIZED_BY
        if template.allocatable.get(r)
    ]
    least = min(ratios, default=Fraction(1))
    return least if least > 0 else Fraction(1, 10**6)


def units(nodes: int, per_node: Fraction) -> int:
    """Capacity units a raise of `nodes` asks AWS for."""
    return math.ceil(nodes * per_node)


def nodes_within(units_left: int, per_node: Fraction) -> int:
    """Whole nodes that fit in `units_left` (room under the group's max size)."""
    return max(0, math.floor(units_left / per_node))
