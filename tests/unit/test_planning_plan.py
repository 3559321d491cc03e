"""The planner end to end on hand-built worlds: baselines, upcoming capacity, scale-up, cancellations."""

from __future__ import annotations

from datetime import timedelta

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from reconciler.config.settings import ExpanderOptions, LimitsConfig
from reconciler.domain.model import (
    POD_SCALE_UP_DELAY,
    HostPort,
    LabelSelector,
    NodeSelectorTerm,
    PodAffinityTerm,
    Scheduling,
    SelectorRequirement,
    Taint,
    Toleration,
)
from reconciler.planning.types import Backoff, CommittedGroup, PlannerMemory
from tests.support.plan_world import NOW, World, make_config, template

GPU_TAINT = Taint("nvidia.com/gpu", "true", "NoSchedule")


def busy_world(max_size: int = 10) -> World:
    world = World().group("general", min_size=1, max_size=max_size)
    world.node("general", "n1").running("n1", "web-1", cpu=3900, mem_gi=4)
    return world


def test_pending_pods_scale_up_by_first_fit_decreasing() -> None:
    world = busy_world()
    for i in range(3):
        world.pending(f"job-{i}", cpu=1500, mem_gi=1)
    plan = world.plan()
    group = plan.group("general")
    assert (group.current, group.desired, group.action, group.new_nodes) == (1, 3, "scale-up", 2)
    assert group.reasons[0] == "3 pending pod(s) need 2 × m5.xlarge"
    assert {o.pod: o.node_group for o in plan.pending} == {f"default/job-{i}": "general" for i in range(3)}


def test_pod_that_fits_existing_capacity_needs_nothing() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n1").pending("small", cpu=500)
    plan = world.plan()
    assert plan.group("general").action == "none"
    assert plan.pending[0].node_group == "general"
    assert plan.pending[0].reason == "fits existing capacity"


def test_max_size_caps_the_increase_and_says_why() -> None:
    world = busy_world(max_size=2)
    for i in range(4):
        world.pending(f"job-{i}", cpu=3000)
    plan = world.plan()
    assert plan.group("general").desired == 2
    not_helped = [o for o in plan.pending if o.node_group is None]
    assert len(not_helped) == 3
    assert "general" in not_helped[0].reason


def test_max_step_caps_one_plan() -> None:
    world = busy_world(max_size=100)
    for i in range(10):
        world.pending(f"job-{i}", cpu=3000)
    plan = world.plan(scale_up={"max_step": 4})
    assert plan.group("general").new_nodes == 4


def test_taints_and_selectors_choose_between_groups() -> None:
    world = World()
    world.group("general", tmpl=template(labels={"workload": "general"}))
    world.group(
        "gpu",
        tmpl=template(
            "g4dn.xlarge", labels={"workload": "gpu"}, taints=(GPU_TAINT,), **{"nvidia.com/gpu": 1}
        ),
    )
    world.pending("web", cpu=1000)
    tolerate = Scheduling(
        node_selector=(("workload", "gpu"),),
        tolerations=(Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),),
    )
    world.pending("train", cpu=1000, scheduling=tolerate, extra={"nvidia.com/gpu": 1}, owner=("Job", "train"))
    plan = world.plan()
    outcomes = {o.pod: o.node_group for o in plan.pending}
    assert outcomes == {"default/web": "general", "default/train": "gpu"}
    assert plan.group("gpu").desired == 1 and plan.group("general").desired == 1


def test_untolerated_taint_is_the_reason() -> None:
    world = World().group("gpu", tmpl=template(taints=(GPU_TAINT,)))
    world.pending("web", cpu=1000)
    plan = world.plan()
    assert plan.pending[0].node_group is None
    assert "nvidia.com/gpu=true:NoSchedule" in plan.pending[0].reason


def test_pod_larger_than_every_template() -> None:
    world = busy_world().pending("giant", cpu=64000)
    plan = world.plan()
    outcome = plan.pending[0]
    assert outcome.node_group is None
    assert "insufficient cpu: needs 64" in outcome.reason
    assert plan.group("general").action == "none"


def test_required_node_affinity_operators() -> None:
    world = World()
    world.group("arm", tmpl=template("m6g.xlarge", labels={"kubernetes.io/arch": "arm64", "size": "4"}))
    world.group("x86", tmpl=template(labels={"kubernetes.io/arch": "amd64", "size": "8"}))
    affinity = Scheduling(
        required_node_affinity=(
            NodeSelectorTerm((SelectorRequirement("kubernetes.io/arch", "NotIn", ("amd64",)),)),
            NodeSelectorTerm((SelectorRequirement("size", "Gt", ("6",)),)),
        )
    )
    world.pending("either", cpu=100, scheduling=affinity)
    world.pending(
        "x86-only",
        cpu=100,
        owner=("ReplicaSet", "x"),
        scheduling=Scheduling(
            required_node_affinity=(NodeSelectorTerm((SelectorRequirement("size", "Gt", ("6",)),)),)
        ),
    )
    plan = world.plan(expander=("least-nodes",))
    outcomes = {o.pod: o.node_group for o in plan.pending}
    assert outcomes["default/x86-only"] == "x86"
    assert outcomes["default/either"] in ("arm", "x86")


def test_host_ports_spread_pods_over_nodes() -> None:
    world = World().group("general")
    ports = Scheduling(host_ports=(HostPort(8080),))
    for i in range(3):
        world.pending(f"agent-{i}", cpu=100, scheduling=ports)
    assert world.plan().group("general").new_nodes == 3


def test_unmodelled_constraint_is_reported_not_helped() -> None:
    world = busy_world()
    # namespace labels were not read (the world has no Namespace objects): a namespace selector
    # cannot be judged
    term = PodAffinityTerm(
        LabelSelector(), "topology.kubernetes.io/zone", namespace_selector=LabelSelector((("team", "x"),))
    )
    world.pending("cache", cpu=100, scheduling=Scheduling(pod_affinity=(term,)))
    plan = world.plan()
    assert plan.pending[0].node_group is None
    assert "not modelled" in plan.pending[0].reason
    assert plan.group("general").action == "none"


def test_expendable_and_young_pods_do_not_count() -> None:
    world = busy_world()
    world.pending("low", cpu=3000, priority=-100)
    world.pending("new", cpu=3000, owner=("ReplicaSet", "new"), created=NOW - timedelta(seconds=5))
    plan = world.plan(scale_up={"new_pod_delay": timedelta(seconds=30)})
    reasons = {o.pod: o.reason for o in plan.pending}
    assert "expendable" in reasons["default/low"]
    assert "newPodDelay" in reasons["default/new"]
    assert plan.group("general").action == "none"


def test_pod_scale_up_delay_annotation_lengthens_never_shortens() -> None:
    """As CA's filterOutYoungPods: the annotation replaces newPodDelay only when longer; garbage is
    ignored, and the plan says so."""
    world = busy_world()
    minute_old = NOW - timedelta(minutes=1)
    for name, value in (("patient", "5m"), ("eager", "10s"), ("garbled", "soon")):
        world.pending(
            name,
            cpu=3000,
            owner=("ReplicaSet", name),
            created=minute_old,
            annotations={POD_SCALE_UP_DELAY: value},
        )
    plan = world.plan(scale_up={"new_pod_delay": timedelta(seconds=30)})
    outcomes = {o.pod: o for o in plan.pending}
    assert outcomes["default/patient"].node_group is None
    assert outcomes["default/patient"].reason == f"younger than its {POD_SCALE_UP_DELAY} annotation (5m)"
    assert outcomes["default/eager"].node_group == "general"  # a minute old, past the 30 s default
    assert outcomes["default/garbled"].node_group == "general"
    assert any("'soon' is not a duration" in w for w in plan.warnings)
    assert plan.group("general").action == "scale-up"


def test_pending_pods_being_deleted_get_no_node() -> None:
    world = busy_world()
    world.pending("leaving", cpu=3000, deleting_since=NOW - timedelta(seconds=5))
    plan = world.plan()
    assert plan.pending[0].node_group is None and "being deleted" in plan.pending[0].reason
    assert plan.group("general").action == "none"


def test_unapplied_increase_is_upcoming_and_never_stacked() -> None:
    world = busy_world()
    world.pending("job", cpu=3000)
    plan = world.plan(committed={"general": CommittedGroup(desired=2)})
    group = plan.group("general")
    assert (group.current, group.desired, group.action, group.upcoming) == (1, 2, "none", 1)
    assert plan.pending[0].reason == "fits upcoming capacity"
    # More pods than the committed node holds: the group is not raised again until apply catches up.
    world.pending("job-2", cpu=3000, owner=("ReplicaSet", "two"))
    plan = world.plan(committed={"general": CommittedGroup(desired=2)})
    assert plan.group("general").desired == 2
    assert "unapplied increase" in next(o.reason for o in plan.pending if o.node_group is None)


def test_person_raising_desired_is_honoured_as_upcoming() -> None:
    world = busy_world()
    plan = world.plan(committed={"general": CommittedGroup(desired=4)})
    assert plan.group("general").desired == 4
    assert plan.group("general").upcoming == 3


def test_young_unregistered_instances_are_upcoming() -> None:
    world = busy_world()
    world.unregistered("general", age=timedelta(minutes=2))
    world.pending("job", cpu=3000)
    plan = world.plan()
    assert plan.pending[0].reason == "fits upcoming capacity"
    assert plan.group("general").action == "none"


def test_instances_that_never_register_back_the_group_off() -> None:
    world = busy_world()
    world.group("spare", tmpl=template("m5.2xlarge", cpu=8000, mem_gi=32))
    world.unregistered("general", age=timedelta(minutes=30))
    world.pending("job", cpu=3000)
    plan = world.plan()
    general = plan.group("general")
    assert general.backoff_until == NOW + timedelta(minutes=5)
    assert plan.memory.backoffs["general"] == Backoff(NOW + timedelta(minutes=5), 1)
    assert plan.pending[0].node_group == "spare"  # the expander fell through to the other group
    # Still failing after the first backoff: it doubles.
    later = NOW + timedelta(minutes=6)
    plan = world.plan(memory=PlannerMemory(backoffs=plan.memory.backoffs), now=later)
    assert plan.memory.backoffs["general"] == Backoff(later + timedelta(minutes=10), 2)


def test_backed_off_group_is_named_in_the_reason() -> None:
    world = busy_world()
    world.unregistered("general", age=timedelta(minutes=30))
    world.pending("job", cpu=3000)
    plan = world.plan()
    assert "general backed off until 12:05" in plan.pending[0].reason


def test_limits_cap_the_cluster() -> None:
    world = busy_world()
    for i in range(6):
        world.pending(f"job-{i}", cpu=3000)
    plan = world.plan(limits=LimitsConfig(max_nodes_total=3))
    assert plan.group("general").new_nodes == 2
    assert "limits.maxNodesTotal reached" in next(o.reason for o in plan.pending if o.node_group is None)
    plan = world.plan(limits=LimitsConfig(cores_max=10))  # 4 cores used, each node adds 4
    assert plan.group("general").new_nodes == 1


def test_held_group_is_left_alone() -> None:
    world = busy_world().pending("job", cpu=3000)
    plan = world.plan(committed={"general": CommittedGroup(desired=1, hold=True)})
    group = plan.group("general")
    assert group.held and group.action == "none" and group.desired == 1
    assert "held" in plan.pending[0].reason


def test_approved_removal_is_cancelled_before_adding_nodes() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web-1", cpu=3900)
    world.node("general", "n2")  # empty, approved for removal
    world.pending("job", cpu=3000)
    committed = {"general": CommittedGroup(desired=1, remove_instances=("i-n2",))}
    plan = world.plan(committed=committed)
    group = plan.group("general")
    assert group.cancelled_removals == ("i-n2",)
    assert group.new_nodes == 0
    assert group.desired == 2
    assert group.remove_instances == ()


def test_approved_removal_stays_when_capacity_is_not_needed() -> None:
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web-1", cpu=500)
    world.node("general", "n2").running("n2", "web-2", cpu=500)
    committed = {"general": CommittedGroup(desired=1, remove_instances=("i-n2",))}
    group = world.plan(committed=committed).group("general")
    assert group.remove_instances == ("i-n2",)
    assert group.cancelled_removals == ()
    assert group.desired == 1


def test_priority_expander_chain() -> None:
    world = World().group("on-demand").group("spot")
    world.pending("job", cpu=1000)
    options = ExpanderOptions(priorities=((50, ("spot",)), (10, (".*",))))
    plan = world.plan(expander=("priority", "least-waste"), expander_options=options)
    assert plan.pending[0].node_group == "spot"


def test_same_input_same_plan_and_valid_json() -> None:
    world = busy_world()
    for i in range(5):
        world.pending(f"job-{i}", cpu=700 * (i + 1))
    world.pending("giant", cpu=99000, owner=("Job", "g"))
    first, second = world.plan(), world.plan()
    assert first == second
    jsonschema.validate(first.to_dict(), load_schema("plan"))


@pytest.mark.parametrize("expander", ["least-waste", "most-pods", "least-nodes", "random"])
def test_every_expander_places_every_helpable_pod(expander: str) -> None:
    world = World().group("small", tmpl=template("m5.large", cpu=2000, mem_gi=8))
    world.group("large", tmpl=template("m5.2xlarge", cpu=8000, mem_gi=32))
    for i in range(7):
        world.pending(f"job-{i}", cpu=900)
    plan = world.plan(config=make_config(expander=(expander,)))
    assert all(o.node_group is not None for o in plan.pending)


def test_balance_similar_node_groups_splits_across_zones() -> None:
    world = World()
    for zone in ("a", "b", "c"):
        world.group(f"general-{zone}", zones=(f"us-east-1{zone}",))
    world.node("general-a", "n1").running("n1", "web", cpu=3900)
    for i in range(6):
        world.pending(f"job-{i}", cpu=3000)
    plan = world.plan(scale_up={"balance_similar_node_groups": True})
    # 6 new nodes on top of 1 existing, always to the smallest group: 3 + 2 + 2
    assert {g.name: g.desired for g in plan.groups} == {"general-a": 3, "general-b": 2, "general-c": 2}
    assert all(o.node_group is not None for o in plan.pending)
    unbalanced = world.plan()
    assert sorted(g.new_nodes for g in unbalanced.groups) == [0, 0, 6]


def test_balancing_never_moves_a_pod_pinned_to_a_zone() -> None:
    world = World()
    for zone in ("a", "b"):
        world.group(f"general-{zone}", zones=(f"us-east-1{zone}",))
    pinned = Scheduling(node_selector=(("topology.kubernetes.io/zone", "us-east-1a"),))
    for i in range(4):
        world.pending(f"zonal-{i}", cpu=3000, scheduling=pinned)
    plan = world.plan(scale_up={"balance_similar_node_groups": True})
    assert plan.group("general-a").new_nodes == 4
    assert plan.group("general-b").new_nodes == 0


# ------------------------------------------------------------------ safety rules (DESIGN §3)


def test_desired_lowered_by_hand_becomes_one_named_removal() -> None:
    """Rule 2: AWS says 3, main says 2 with no names: the plan names one instance, never a number.
    Every node is above the threshold, so only the forced count can remove one."""
    world = World().group("general", min_size=1)
    for n in ("n1", "n2", "n3"):
        world.node("general", n).running(n, f"{n}-a", cpu=1100).running(n, f"{n}-b", cpu=1100)
    assert world.plan().group("general").removals == ()  # 55% each: nothing to remove on its own
    group = world.plan(committed={"general": CommittedGroup(desired=2)}).group("general")
    assert (group.current, group.desired, group.action) == (3, 2, "scale-down")
    (removal,) = group.removals
    assert removal.instance_id.startswith("i-n") and removal.node is not None
    assert removal.reason.startswith("desired lowered by hand ("), removal.reason


def test_approved_removal_whose_pods_fit_nowhere_is_cancelled() -> None:
    """Plan step 4 without pending pods: an approved node whose own pods no longer fit elsewhere is
    given back, and desired goes back up."""
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web-1", cpu=3000)
    world.node("general", "n2").running("n2", "web-2", cpu=3000)  # approved, but needed after all
    committed = {"general": CommittedGroup(desired=1, remove_instances=("i-n2",))}
    plan = world.plan(committed=committed)
    group = plan.group("general")
    assert plan.pending == ()
    assert group.cancelled_removals == ("i-n2",)
    assert group.remove_instances == ()
    assert (group.desired, group.action) == (2, "scale-up")


def test_newly_unneeded_node_is_remembered_from_now() -> None:
    """Rule 9: the first time a node is unneeded its time goes into the memory the state branch
    keeps; a remembered time is carried, not reset."""
    world = World().group("general", min_size=1)
    world.node("general", "n1").running("n1", "web-1", cpu=3000)
    world.node("general", "n2").running("n2", "web-2", cpu=200)
    plan = world.plan()
    assert plan.memory.unneeded_since == {"n2": NOW}
    assert plan.group("general").removals == ()  # unneeded for 0s of 10m
    earlier = NOW - timedelta(minutes=4)
    later = world.plan(memory=PlannerMemory(unneeded_since={"n2": earlier}), now=NOW + timedelta(minutes=1))
    assert later.memory.unneeded_since == {"n2": earlier}


def test_running_backoff_is_kept_after_the_stale_instances_are_gone() -> None:
    """Rule 9 / step 2: a backoff in memory holds until it ends, even with no stale instance left,
    and keeps the group blocked."""
    world = busy_world()
    world.pending("job", cpu=3000)
    running = Backoff(NOW + timedelta(minutes=3), 2)
    plan = world.plan(memory=PlannerMemory(backoffs={"general": running}))
    assert plan.memory.backoffs == {"general": running}
    general = plan.group("general")
    assert general.backoff_until == running.until
    assert (general.desired, general.new_nodes) == (1, 0)
    assert plan.pending[0].node_group is None
    assert "general backed off until 12:03" in plan.pending[0].reason
    # Once it has ended, it is dropped and the group grows again.
    over = world.plan(memory=PlannerMemory(backoffs={"general": running}), now=NOW + timedelta(minutes=4))
    assert over.memory.backoffs == {} and over.group("general").new_nodes == 1


def test_limits_are_spent_on_higher_priorities_first() -> None:
    """Fifty priority-0 pods that fit `general` must not use up maxNodesTotal before the
    priority-100000 pod that needs the GPU group is considered (issue 28): the scheduler serves
    pods by priority, and so does the spending of a cluster-wide limit."""
    gpu = template("g5.xlarge", labels={"gpu": "yes"}, taints=(GPU_TAINT,), **{"nvidia.com/gpu": 1})
    world = busy_world().group("gpu", tmpl=gpu)
    for i in range(50):
        world.pending(f"batch-{i}", cpu=1000, created=NOW - timedelta(hours=2))
    world.pending(
        "inference",
        cpu=1000,
        priority=100000,
        extra={"nvidia.com/gpu": 1},
        scheduling=Scheduling(
            node_selector=(("gpu", "yes"),),
            tolerations=(Toleration("nvidia.com/gpu", "Equal", "true", "NoSchedule"),),
        ),
    )
    plan = world.plan(limits=LimitsConfig(max_nodes_total=3))  # one node runs: two more at most
    assert plan.group("gpu").new_nodes == 1
    assert plan.group("general").new_nodes == 1
    outcome = {o.pod: o.node_group for o in plan.pending}
    assert outcome["default/inference"] == "gpu"
    assert sum(1 for pod, group in outcome.items() if group == "general") == 4
    left = next(o for o in plan.pending if o.node_group is None)
    assert "limits.maxNodesTotal reached" in left.reason


def test_lower_priorities_fill_the_room_higher_ones_left() -> None:
    """Spending by priority costs no packing: a low-priority pod takes the spare room of the node
    added for a higher one before any further node is counted."""
    world = busy_world()
    world.pending("urgent", cpu=2000, priority=1000)
    world.pending("filler", cpu=1500)
    plan = world.plan(limits=LimitsConfig(max_nodes_total=2))
    assert plan.group("general").new_nodes == 1
    assert {o.pod: o.node_group for o in plan.pending} == {
        "default/urgent": "general",
        "default/filler": "general",
    }
