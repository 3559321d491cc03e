"""Found by the attack on issues 28-29: apply counts a new machine of a mixed-instances group as the
largest override AWS may launch (apply/caps.py), the planner counted the template (the least). Under
`limits.cores` a plan then committed raises apply refuses every cycle. The planner now books the
same worst-case costs (planning/limit_costs.py)."""

from __future__ import annotations

from reconciler.config.settings import LimitsConfig
from reconciler.domain.model import Resources
from tests.support.plan_world import World, template

GI = 2**30
SMALL = Resources.of(cpu=2000, memory=2 * GI, pods=11)
BIG = Resources.of(cpu=16000, memory=64 * GI, pods=234)


def mixed_world() -> World:
    world = World().group(
        "mixed",
        tmpl=template(cpu=1930, mem_gi=1.4, pods=11, capacity=SMALL),
        instance_types=("t3.small", "m5.4xlarge"),
        type_capacity={"t3.small": SMALL, "m5.4xlarge": BIG},
    )
    for i in range(3):
        world.pending(f"api-{i}", cpu=1000)
    return world


def test_cores_are_booked_as_the_largest_override_may_cost() -> None:
    # 40 cores: two m5.4xlarge fit (32), a third does not, whatever the t3.small template says
    plan = mixed_world().plan(limits=LimitsConfig(cores_max=40))
    assert plan.group("mixed").new_nodes == 2, plan.group("mixed")


def test_below_one_largest_machine_nothing_is_planned() -> None:
    plan = mixed_world().plan(limits=LimitsConfig(cores_max=8))
    assert plan.group("mixed").new_nodes == 0
    assert any("limits.cores" in o.reason for o in plan.pending), plan.pending


def test_without_limits_the_template_still_sizes_the_count() -> None:
    assert mixed_world().plan().group("mixed").new_nodes == 3
