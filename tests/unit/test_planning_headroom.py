"""Headroom in the planner: virtual pods of one group, judged after every real pod, that the plan
scales up to host (within max size, maxStep, limits and backoff) and never strands in a scale-down."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import jsonschema

from reconciler.config.documents import load_schema
from reconciler.config.settings import LimitsConfig
from reconciler.domain.model import (
    INSTANCE_TYPE_LABEL,
    ZONE_LABEL,
    LabelSelector,
    PodAffinityTerm,
    Resources,
    Scheduling,
    Taint,
    Toleration,
)
from reconciler.planning.types import CommittedGroup, Headroom
from tests.support.plan_world import GI, World, template

GPU = "nvidia.com/gpu"
GPU_TAINT = Taint("nvidia.com/gpu", "true", "NoSchedule")
IDLE = {"unneeded_time": timedelta(0)}


def room(replicas: int, cpu: int, mem_gi: float = 0, **extra: int) -> Headroom:
    return Headroom(
        replicas, Resources({k: v for k, v in {"cpu": cpu, "memory": int(mem_gi * GI), **extra}.items() if v})
    )


def with_headroom(world: World, **headroom: Headroom) -> dict[str, CommittedGroup]:
    """Main's manifest as it stands (desired = the ASG's) with a headroom per named group."""
    return {
        name: CommittedGroup(desired=group.desired, headroom=headroom.get(name))
        for name, group in world.groups.items()
    }


def test_headroom_is_placed_after_every_real_pod_and_scales_up_for_itself() -> None:
    """Node n1 has one free CPU: the real pending pod takes it, the headroom gets a new node. Were
    the headroom placed first, the real pod would be the one waiting for a node."""
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web", cpu=3000, mem_gi=2)
    world.pending("api", cpu=1000, mem_gi=1)
    result = world.plan(committed=with_headroom(world, general=room(1, 1000, 1)))
    (outcome,) = result.pending
    assert (outcome.node_group, outcome.reason) == ("general", "fits existing capacity")
    group = result.group("general")
    assert (group.action, group.current, group.desired, group.new_nodes) == ("scale-up", 1, 2, 1)
    assert group.reasons == ("headroom 1 × (cpu 1, memory 1Gi) needs 1 × m5.xlarge",)
    assert group.headroom is not None
    assert (group.headroom.placed, group.headroom.added, group.headroom.kept, group.headroom.nodes) == (
        1,
        1,
        0,
        1,
    )
    # without the headroom nothing is added: the real pod fits
    assert world.plan().group("general").action == "none"


def test_free_room_on_current_nodes_counts_and_nothing_is_added() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web-1", cpu=2500, mem_gi=4)  # busy: no candidate
    world.node("general", "n2").running("n2", "web-2", cpu=2500, mem_gi=4)
    result = world.plan(committed=with_headroom(world, general=room(2, 1000, 2)))
    group = result.group("general")
    assert (group.action, group.desired, group.reasons) == ("none", 2, ())
    assert group.headroom is not None and (group.headroom.placed, group.headroom.nodes) == (2, 0)
    # one more replica than the two nodes hold: one node more
    more = world.plan(committed=with_headroom(world, general=room(4, 1000, 2)))
    assert more.group("general").new_nodes == 1


def test_headroom_selects_its_own_group_only() -> None:
    """Plenty of room in another group does not count; new nodes come from the headroom's group."""
    world = World().group("general", min_size=1).group("batch", tmpl=template("c5.xlarge"))
    world.node("general", "g1").running("g1", "web", cpu=3900)
    world.node("batch", "b1")
    result = world.plan(committed=with_headroom(world, general=room(1, 2000)))
    assert result.group("general").new_nodes == 1
    assert result.group("batch").new_nodes == 0


def test_max_size_max_step_limits_and_backoff_cap_it_and_say_so() -> None:
    world = World().group("general", min_size=1, max_size=3)
    world.node("general", "n1").running("n1", "web", cpu=3900)
    four = {"general": room(4, 3000)}  # one replica per node: four nodes
    capped = world.plan(committed=with_headroom(world, **four)).group("general")
    assert (capped.new_nodes, capped.desired) == (2, 3)
    assert capped.headroom is not None and capped.headroom.placed == 2
    assert "room for 2 of 4" in capped.headroom.reason and "max size" in capped.headroom.reason
    assert any("room for 2 of 4" in r for r in capped.reasons)
    stepped = world.plan(committed=with_headroom(world, **four), scale_up={"max_step": 1}).group("general")
    assert stepped.new_nodes == 1
    limited = world.plan(committed=with_headroom(world, **four), limits=LimitsConfig(max_nodes_total=2))
    group = limited.group("general")
    assert group.new_nodes == 1 and group.headroom is not None
    assert "limits.maxNodesTotal" in group.headroom.reason
    world.unregistered("general", age=timedelta(minutes=30))  # a launch that never registered
    backed = world.plan(committed=with_headroom(world, **four)).group("general")
    assert backed.new_nodes == 0 and backed.headroom is not None
    assert "backed off" in backed.headroom.reason


def test_real_pods_come_first_in_max_size_too() -> None:
    """With room for one more node, a real pending pod gets it, not the headroom."""
    world = World().group("general", min_size=1, max_size=2)
    world.node("general", "n1").running("n1", "web", cpu=3900)
    world.pending("api", cpu=3000)
    result = world.plan(committed=with_headroom(world, general=room(1, 3000)))
    assert result.pending[0].node_group == "general" and "fits" not in result.pending[0].reason
    group = result.group("general")
    assert group.new_nodes == 1 and group.reasons[0] == "1 pending pod(s) need 1 × m5.xlarge"
    assert group.headroom is not None and group.headroom.placed == 0 and group.headroom.added == 0


def gpu_node(world: World, name: str) -> None:
    """A g4dn.xlarge node of group gpu: tainted for GPU pods, one GPU allocatable."""
    world.node("gpu", name, taints=(GPU_TAINT,), labels={INSTANCE_TYPE_LABEL: "g4dn.xlarge"})
    node = world.nodes[-1]
    alloc = node.allocatable + Resources({GPU: 1})
    world.nodes[-1] = replace(node, allocatable=alloc, capacity=alloc)


def test_a_taint_on_the_group_is_tolerated_and_an_extended_resource_counts() -> None:
    world = World().group("gpu", tmpl=template("g4dn.xlarge", taints=(GPU_TAINT,), **{GPU: 1}))
    gpu_node(world, "g1")
    gpu_node(world, "g2")
    tolerant = Scheduling(tolerations=(Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),))
    world.running("g1", "train", cpu=500, extra={GPU: 1}, scheduling=tolerant)
    world.running("g2", "serve", cpu=2000, scheduling=tolerant)  # busy enough to stay
    result = world.plan(committed=with_headroom(world, gpu=room(2, 1000, 4, **{GPU: 1})))
    group = result.group("gpu")
    # g1's one GPU is taken, g2 (tainted like every node of the group) holds one replica: one new node
    assert (group.new_nodes, group.desired) == (1, 3)
    assert group.headroom is not None and group.headroom.placed == 2
    assert group.reasons == ("headroom 2 × (cpu 1, memory 4Gi, nvidia.com/gpu 1) needs 1 × g4dn.xlarge",)


def test_a_headroom_no_new_node_can_hold_says_why() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n1")
    group = world.plan(committed=with_headroom(world, general=room(1, 1000, **{GPU: 1}))).group("general")
    assert group.new_nodes == 0 and group.headroom is not None and group.headroom.placed == 0
    assert "insufficient nvidia.com/gpu" in group.headroom.reason


def test_cordoned_notready_and_person_tainted_nodes_are_no_room() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n0").running("n0", "web", cpu=3900)  # the template's node: no taint
    world.node("general", "n1", unschedulable=True)
    world.node("general", "n2", ready=False)
    world.node("general", "n3", taints=(Taint("maintenance", "", "NoSchedule"),))
    group = world.plan(committed=with_headroom(world, general=room(1, 1000))).group("general")
    assert group.new_nodes == 1


def test_scale_down_keeps_the_nodes_headroom_needs() -> None:
    """Two idle nodes: without headroom one goes; a headroom of two 3-CPU pods needs both."""
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web-1", cpu=200)
    world.node("general", "n2").running("n2", "web-2", cpu=200)
    bare = world.plan(scale_down=IDLE)
    assert bare.group("general").action == "scale-down" and len(bare.group("general").removals) == 1
    kept = world.plan(committed=with_headroom(world, general=room(2, 3000)), scale_down=IDLE)
    group = kept.group("general")
    assert (group.action, group.removals, group.new_nodes) == ("none", (), 0)
    # each node is kept for the headroom, but without it only one would go: one node is for it
    assert group.headroom is not None and (group.headroom.kept, group.headroom.nodes) == (1, 1)
    reasons = {u.node: u.reason for u in kept.unremovable}
    assert reasons["n1"] == (
        "headroom of general needs this node: without it only 1 of 2 × (cpu 3) would have room"
    )
    assert "headroom of general" in reasons["n2"]
    assert not kept.memory.unneeded_since  # needed, so not unneeded: no timer runs
    # a smaller headroom fits on one node: the other may go
    small = world.plan(committed=with_headroom(world, general=room(1, 3000)), scale_down=IDLE)
    assert len(small.group("general").removals) == 1


def test_pods_moving_in_from_another_group_may_not_eat_the_headroom() -> None:
    """b2's pod would fit on a1 (group a), but only by taking a's headroom: b2 stays."""
    world = World().group("a", min_size=1).group("b", min_size=1)
    world.node("a", "a1")
    world.node("b", "b1").running("b1", "busy", cpu=3000)
    world.node("b", "b2").running("b2", "small", cpu=1500)
    bare = world.plan(scale_down=IDLE)
    assert [r.node for r in bare.group("b").removals] == ["b2"]
    kept = world.plan(committed=with_headroom(world, a=room(1, 3000)), scale_down=IDLE)
    assert kept.group("b").removals == ()
    reasons = {u.node: u.reason for u in kept.unremovable}
    assert "headroom of a" in reasons["b2"]


def test_headroom_in_the_plan_json() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web", cpu=3900)
    result = world.plan(committed=with_headroom(world, general=room(2, 1000, 2)))
    document = result.to_dict()
    jsonschema.validate(document, load_schema("plan"))
    (group,) = document["nodeGroups"]
    assert group["headroom"] == {
        "replicas": 2,
        "requests": {"cpu": "1", "memory": "2Gi"},
        "placed": 2,
        "nodes": 1,
        "added": 1,
        "kept": 0,
        "reason": "",
    }
    assert group["desired"] == 2
    assert world.plan().to_dict()["nodeGroups"][0]["headroom"] is None


def test_zero_replicas_is_no_headroom() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web", cpu=3900)
    group = world.plan(committed=with_headroom(world, general=room(0, 1000))).group("general")
    assert group.headroom is None and group.action == "none"


def test_once_applied_the_headroom_node_stays_and_nothing_more_is_added() -> None:
    """The plan after apply: the node added for headroom is idle, which would make it a removal
    without headroom; with it, the plan is steady (no second node, no removal)."""
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web", cpu=3900)
    headroom = {"general": room(2, 1000, 2)}
    assert world.plan(committed=with_headroom(world, **headroom)).group("general").new_nodes == 1
    world.node("general", "n2")  # apply raised the ASG; the node registered
    bare = world.plan(scale_down=IDLE).group("general")
    assert [r.node for r in bare.removals] == ["n2"]
    steady = world.plan(committed=with_headroom(world, **headroom), scale_down=IDLE).group("general")
    assert (steady.action, steady.desired, steady.removals) == ("none", 2, ())
    assert steady.headroom is not None and (steady.headroom.placed, steady.headroom.nodes) == (2, 1)


def test_a_headroom_refused_everywhere_by_a_domain_rule_adds_nothing() -> None:
    """A pod whose zone-wide anti-affinity refuses every pod in every namespace makes new nodes of
    that zone no room either: nothing is added (plan after plan), and the reason says why."""
    world = World().group("general", min_size=1)
    world.node("general", "n1")
    hermit = Scheduling(
        pod_anti_affinity=(PodAffinityTerm(LabelSelector(), ZONE_LABEL, namespace_selector=LabelSelector()),)
    )
    world.running("n1", "hermit", cpu=100, scheduling=hermit)
    group = world.plan(committed=with_headroom(world, general=room(1, 1000))).group("general")
    assert group.new_nodes == 0 and group.headroom is not None and group.headroom.placed == 0
    assert "anti-affinity" in group.headroom.reason


def test_upcoming_room_counts_and_increases_never_stack_nor_touch_a_held_group() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web", cpu=3900)
    upcoming = {"general": CommittedGroup(desired=2, headroom=room(1, 3000))}  # +1 committed, not applied
    group = world.plan(committed=upcoming).group("general")
    assert (group.new_nodes, group.desired, group.upcoming) == (0, 2, 1)
    assert group.headroom is not None and group.headroom.placed == 1
    more = {"general": CommittedGroup(desired=2, headroom=room(2, 3000))}
    group = world.plan(committed=more).group("general")
    assert group.new_nodes == 0 and group.headroom is not None and group.headroom.placed == 1
    assert "unapplied increase" in group.headroom.reason
    held = {"general": CommittedGroup(desired=1, hold=True, headroom=room(1, 3000))}
    group = world.plan(committed=held).group("general")
    assert (group.action, group.new_nodes) == ("none", 0)
    assert group.headroom is not None and "held" in group.headroom.reason
