"""Issue 29 item 3: nodes and WeightedCapacity units (planning/capacity_units.py) in the planner."""

from __future__ import annotations

from fractions import Fraction

from reconciler.domain.model import Resources
from reconciler.planning.capacity_units import units, units_per_node
from reconciler.planning.types import CommittedGroup
from tests.support.plan_world import World, template

GI = 2**30
LARGE = Resources.of(cpu=1930, memory=7 * GI, pods=29)
XLARGE = Resources.of(cpu=3920, memory=14 * GI, pods=58)
WEIGHTED = {"instance_types": ("m5.large", "m5.xlarge"), "instance_weights": {"m5.large": 2, "m5.xlarge": 4}}


def weighted_world(**kw: object) -> World:
    tmpl = template(cpu=1930, mem_gi=7, pods=29)
    return World().group(
        "mixed", tmpl=tmpl, type_allocatable={"m5.large": LARGE, "m5.xlarge": XLARGE}, **WEIGHTED, **kw
    )


def test_units_per_node_follow_the_worst_override() -> None:
    world = weighted_world()
    group = world.groups["mixed"]
    assert units_per_node(group, group.template) == 2  # m5.large: 2/1; m5.xlarge: 4/2
    assert units(3, Fraction(2)) == 6 and units(3, Fraction(3, 2)) == 5


def test_an_override_of_unknown_size_counts_as_no_bigger_than_the_template() -> None:
    world = World().group(
        "mixed", instance_types=("m5.large", "x9.new"), instance_weights={"m5.large": 2, "x9.new": 8}
    )
    group = world.groups["mixed"]
    assert units_per_node(group, group.template) == 8


def test_an_unapplied_increase_in_units_is_that_many_nodes_fewer_upcoming() -> None:
    """6 units committed but not applied are 3 nodes on their way, not 6: of 5 pending pods that need
    a node each, 3 wait for them and 2 do not fit there (counted as 6 nodes, all 5 would have)."""
    world = weighted_world()
    for i in range(5):
        world.pending(f"api-{i}", cpu=1500)
    plan = world.plan(committed={"mixed": CommittedGroup(desired=6)})
    group = plan.group("mixed")
    assert group.upcoming == 3, group
    fits = sorted(o.pod for o in plan.pending if o.reason == "fits upcoming capacity")
    assert len(fits) == 3, plan.pending
