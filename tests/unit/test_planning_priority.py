"""Pod priority in the plan, as cluster-autoscaler: running pods below scaleUp.expendablePriorityCutoff
are left out of the simulation (CA leaves them out of its cluster snapshot), so they take no room from
pending pods, count in no utilisation and neither move nor block a drain; a pending pod nominated to a
node (status.nominatedNodeName, waiting for a preemption there) is booked on that node and is no
reason to scale up."""

from __future__ import annotations

from datetime import timedelta

from reconciler.config.settings import ScaleDownConfig
from reconciler.domain.model import LabelSelector, PodDisruptionBudget
from reconciler.planning.drainability import BLOCKS, STAYS, DrainContext, drain_verdict
from reconciler.planning.types import PlannerMemory
from tests.support.plan_world import NOW, World

LOW = -100  # below the default cutoff of -10
LONG_AGO = NOW - timedelta(hours=2)


def idle_for_long(*nodes: str) -> PlannerMemory:
    return PlannerMemory(unneeded_since={n: LONG_AGO for n in nodes})


# ---------------------------------------------------------------------------------- expendable


def test_expendable_running_pods_take_no_room_from_pending_pods() -> None:
    world = World().group("general")
    world.node("general", "n1").running("n1", "filler", cpu=3500, priority=LOW)
    world.pending("web", cpu=2000)
    plan = world.plan()
    assert plan.pending[0].reason == "fits existing capacity"  # the filler is preempted, as in CA
    assert plan.group("general").new_nodes == 0
    # at the cutoff a pod is not expendable (CA: priority < cutoff)
    at_cutoff = World().group("general")
    at_cutoff.node("general", "n1").running("n1", "filler", cpu=3500, priority=-10)
    at_cutoff.pending("web", cpu=2000)
    assert at_cutoff.plan().group("general").new_nodes == 1


def test_expendable_pods_neither_count_in_utilisation_nor_block_nor_move() -> None:
    world = World().group("general")
    world.node("general", "a1").node("general", "a2", cpu=16000)
    world.running("a1", "web", cpu=400)
    # no controller, kube-system, covered by a PDB allowing nothing: each would keep a1, and 3000m
    # would put it over the threshold; expendable, none of it counts
    world.running("a1", "bare", cpu=3000, owner=None, priority=LOW, labels={"app": "bare"})
    world.running("a1", "sys", cpu=100, namespace="kube-system", priority=LOW)
    world.pdbs.append(PodDisruptionBudget("default", "bare", LabelSelector((("app", "bare"),)), 0))
    world.running("a2", "sink", cpu=12000)
    plan = world.plan(memory=idle_for_long("a1"))
    [removal] = plan.group("general").removals
    assert removal.node == "a1"
    assert removal.utilization == 0.1  # 400m of 4000m: the expendable pods are not load
    assert removal.reason == "utilisation 10% < 50% for 2h; pods fit elsewhere"
    # without the cutoff the same pods keep the node
    kept = world.plan(memory=idle_for_long("a1"), scale_up={"expendable_priority_cutoff": -1000})
    assert kept.group("general").removals == ()


def test_a_node_with_only_expendable_pods_is_empty() -> None:
    world = World().group("general")
    world.node("general", "a1").node("general", "a2")
    world.running("a1", "batch", cpu=3000, priority=LOW).running("a2", "busy", cpu=3000)
    plan = world.plan(memory=idle_for_long("a1"))
    assert [r.reason for r in plan.group("general").removals] == ["empty for 2h"]


def test_apply_drain_rules_let_expendable_pods_go() -> None:
    """Apply vets every pod it is about to evict with the same rules: an expendable pod without a
    controller must not stop a drain the plan proposed."""
    world = World().group("general")
    world.node("general", "a1").running("a1", "bare", owner=None, priority=LOW)
    bare = world.pods[-1]
    ctx = DrainContext(ScaleDownConfig(), NOW, lambda _p: False, -10)
    assert drain_verdict(bare, ctx).outcome == STAYS
    assert drain_verdict(bare, DrainContext(ScaleDownConfig(), NOW, lambda _p: False, LOW)).outcome == BLOCKS


# ---------------------------------------------------------------------------------- nominated


def full_node_world() -> World:
    """n1 is nearly full of lower-priority work; `urgent` was nominated to it by the scheduler."""
    world = World().group("general")
    world.node("general", "n1").running("n1", "victim", cpu=3500)
    world.pending("urgent", cpu=2000, priority=1000, nominated_node="n1")
    return world


def test_a_nominated_pod_waits_for_preemption_and_books_its_room() -> None:
    world = full_node_world()
    world.pending("small", cpu=300)  # would fit the 500m n1 has left, were urgent not booked there
    plan = world.plan()
    outcomes = {o.pod: (o.node_group, o.reason) for o in plan.pending}
    assert outcomes["default/urgent"] == ("general", "waiting for preemption on node n1")
    assert outcomes["default/small"] == ("general", "")  # on the one new node
    assert plan.group("general").new_nodes == 1


def test_a_pod_nominated_to_a_node_that_is_gone_is_left_alone() -> None:
    """As CA 1.36+: such a pod is in none of the lists CA acts on until the scheduler tries it again."""
    world = World().group("general")
    world.pending("urgent", cpu=2000, nominated_node="ip-10-0-0-9.ec2.internal")
    plan = world.plan()
    [outcome] = plan.pending
    assert outcome.node_group is None
    assert outcome.reason == (
        "waiting for preemption on node ip-10-0-0-9.ec2.internal, which no longer exists: no scale-up "
        "until the scheduler tries the pod again (as cluster-autoscaler)"
    )
    assert plan.group("general").new_nodes == 0


def test_an_expendable_nominated_pod_is_neither_booked_nor_helped() -> None:
    world = World().group("general")
    world.node("general", "n1").running("n1", "web", cpu=3500)
    world.pending("batch", cpu=2000, priority=LOW, nominated_node="n1")
    world.pending("small", cpu=300)
    plan = world.plan()
    outcomes = {o.pod: o.reason for o in plan.pending}
    assert outcomes["default/batch"].startswith("expendable")
    assert outcomes["default/small"] == "fits existing capacity"


def test_a_nominated_pod_is_booked_whatever_its_pod_scheduled_condition() -> None:
    """CA books every unbound pod with a nominated node (the scheduler also nominates a pod it is
    binding); only pods marked Unschedulable get an outcome."""
    world = World().group("general")
    world.node("general", "n1").running("n1", "victim", cpu=3500)
    world.pods.append(
        world._pod(
            "binding", 2000, 0.25, ("ReplicaSet", "rs"), "default", node_name="", phase="Pending"
        )._replace(nominated_node="n1")
    )
    world.pending("small", cpu=300)
    plan = world.plan()
    assert [(o.pod, o.reason) for o in plan.pending] == [("default/small", "")]
    assert plan.group("general").new_nodes == 1


def test_a_nominated_pod_counts_on_its_node_in_scale_down_and_must_move() -> None:
    world = World().group("general")
    world.node("general", "a1").node("general", "a2", cpu=16000)
    world.pending("urgent", cpu=1000, nominated_node="a1")
    world.running("a2", "sink", cpu=12000)
    plan = world.plan(memory=idle_for_long("a1"))
    [removal] = plan.group("general").removals
    assert (removal.node, removal.utilization) == ("a1", 0.25)
    assert removal.reason == "utilisation 25% < 50% for 2h; pods fit elsewhere"
