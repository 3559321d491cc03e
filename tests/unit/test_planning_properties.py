"""Properties of whole plans on random worlds (hypothesis)."""

from __future__ import annotations

from datetime import timedelta

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.config.documents import load_schema
from reconciler.config.settings import LimitsConfig
from tests.support.plan_world import World, make_config, template

SCHEMA = load_schema("plan")


@st.composite
def worlds(draw: st.DrawFn) -> tuple[World, int]:
    world = World()
    for g in range(draw(st.integers(1, 3))):
        cpu = draw(st.sampled_from([2000, 4000, 8000]))
        max_size = draw(st.integers(1, 6))
        nodes = draw(st.integers(0, max_size))
        min_size = draw(st.integers(0, nodes))
        name = f"g{g}"
        world.group(
            name, min_size=min_size, max_size=max_size, tmpl=template(f"t{cpu}", cpu=cpu, mem_gi=cpu / 250)
        )
        for n in range(nodes):
            node = f"{name}-n{n}"
            world.node(name, node, cpu=cpu, mem_gi=cpu / 250)
            for p in range(draw(st.integers(0, 3))):
                world.running(node, f"{node}-p{p}", cpu=draw(st.integers(50, cpu // 3)), mem_gi=0.25)
    for p in range(draw(st.integers(0, 8))):
        world.pending(f"pending-{p}", cpu=draw(st.integers(100, 9000)), owner=("ReplicaSet", f"rs{p % 3}"))
    return world, draw(st.integers(0, 12))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_plans_stay_within_bounds_and_limits_and_are_deterministic(case: tuple[World, int]) -> None:
    world, max_total = case
    config = make_config(
        limits=LimitsConfig(max_nodes_total=max_total), scale_down={"unneeded_time": timedelta(0)}
    )
    plan = world.plan(config=config)
    assert plan == world.plan(config=config)
    jsonschema.validate(plan.to_dict(), SCHEMA)
    nodes = len(world.nodes)
    added = sum(g.new_nodes for g in plan.groups)
    if max_total:
        assert added <= max(0, max_total - nodes)
    for group in plan.groups:
        assert group.desired <= group.max_size
        if group.current >= group.min_size:
            assert group.desired >= group.min_size
        assert group.desired == group.current + group.new_nodes + len(group.cancelled_removals) - len(
            group.removals
        )
        assert len(set(group.remove_instances)) == len(group.remove_instances)
    helped = {o.pod for o in plan.pending if o.node_group is not None}
    not_helped = {o.pod for o in plan.pending if o.node_group is None}
    assert not helped & not_helped
    assert all(o.reason for o in plan.pending if o.node_group is None)
