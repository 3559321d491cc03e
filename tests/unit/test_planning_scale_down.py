"""Scale-down on small hand-built clusters: utilisation, eligibility, CA's drainability rules and their
switches, the shared PDB budget, rescheduling onto the nodes that stay, order and limits, timers,
NotReady and unregistered instances, forced counts; plus property tests (a removed node's pods all land
on remaining nodes, no group below min, same input same output)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.config.settings import Config, ScaleDownConfig
from reconciler.domain.inventory import Inventory
from reconciler.domain.model import (
    DAEMONSET_POD,
    GPU,
    HOSTNAME_LABEL,
    MIRROR_POD,
    SAFE_TO_EVICT,
    SAFE_TO_EVICT_LOCAL_VOLUMES,
    SCALE_DOWN_DISABLED,
    AutoscalingOptions,
    OwnerRef,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    Scheduling,
    Taint,
    Volumes,
)
from reconciler.planning.drainability import BLOCKS, DrainContext, PdbBudget, drain_verdict, stays_on_node
from reconciler.planning.predicates import check
from reconciler.planning.scale_down import ScaleDownResult
from reconciler.planning.scale_down_eligibility import utilization
from reconciler.planning.simnode import SimNode
from reconciler.planning.types import PlannerMemory
from tests.support.planning_factories import pod, selector, template
from tests.support.scale_down_world import (
    LONG_AGO,
    NOW,
    busy,
    ds_pod,
    grp,
    instance,
    make_pool,
    mature,
    n,
    on,
    removed,
    replace,
    run,
    sd,
    why,
    world,
)


def test_underutilised_node_goes_and_its_pods_move() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [on("a1", "web-1", 500), busy("a2")])
    result, pool = run(inv)
    assert removed(result) == ["a1"]
    removal = result.removals["asg-a"][0]
    assert removal.instance_id == "i-a1"
    assert removal.reason == "utilisation 12% < 50% for 2h; pods fit elsewhere"
    assert removal.since == LONG_AGO
    assert removal.utilization == 0.125
    assert [(p.name, dest) for p, dest in result.moves["a1"]] == [("web-1", "a2")]
    # the pool now has a1 retired and its pod booked on a2
    assert pool.is_retired("a1")
    a2 = pool.get("a2")
    assert a2 is not None and any(p.name == "web-1" for p in a2.pods)
    assert "a2" not in {u.node for u in result.unremovable}  # above threshold: not listed


def test_busy_nodes_are_not_listed() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [busy("a1"), busy("a2")])
    result, _ = run(inv)
    assert result.removals == {} and result.unremovable == () and result.unneeded_since == {}


def test_disabled_scale_down_does_nothing() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [busy("a2")])
    result, _ = run(inv, config=sd(enabled=False))
    assert result == ScaleDownResult(removals={}, unremovable=(), unneeded_since={})


def test_empty_first_then_least_utilised_and_max_per_plan() -> None:
    nodes = [n("a-empty"), n("b-low"), n("c-mid"), n("d-big", cpu=32000, mem_gi=128)]
    pods = [ds_pod("a-empty"), on("b-low", "x", 400), on("c-mid", "y", 1200), busy("d-big", 20000)]
    inv = world([grp("asg-a", nodes)], pods)
    result, _ = run(inv, config=sd(max_nodes_per_plan=2))
    assert removed(result) == ["a-empty", "b-low"]
    assert result.removals["asg-a"][0].reason == "empty for 2h"
    assert why(result, "c-mid") == "max 2 removals per plan reached"
    assert set(result.unneeded_since) == {"a-empty", "b-low", "c-mid"}


def test_max_per_plan_counts_across_groups_in_one_order() -> None:
    a = grp("asg-a", [n("a1"), n("a-sink", cpu=32000, mem_gi=128)])
    b = grp("asg-b", [n("b1")])
    pods = [on("a1", "p", 1000), on("b1", "q", 200), busy("a-sink", 20000)]
    result, _ = run(world([a, b], pods), config=sd(max_nodes_per_plan=1))
    assert removed(result) == ["b1"]  # 5% before 25%, whatever the group
    assert why(result, "a1") == "max 1 removals per plan reached"


def test_ties_break_by_node_name() -> None:
    nodes = [n("c"), n("a"), n("b"), n("sink", cpu=32000, mem_gi=128)]
    pods = [on(x, f"p-{x}", 400, owner=f"o-{x}") for x in "abc"] + [busy("sink", 20000)]
    result, _ = run(world([grp("asg-a", nodes)], pods), config=sd(max_nodes_per_plan=2))
    assert removed(result) == ["a", "b"]


# ---------------------------------------------------------------------------------- min size


def test_min_size_counts_against_baseline_and_chosen_removals() -> None:
    nodes = [n("a1"), n("a2"), n("a3"), n("sink", cpu=32000, mem_gi=128)]
    pods = [on(x, f"p-{x}", 200, owner=f"o-{x}") for x in ("a1", "a2", "a3")] + [busy("sink", 20000)]
    g = grp("asg-a", nodes, min_size=2)
    result, _ = run(world([g], pods), baseline={"asg-a": 4})
    assert removed(result) == ["a1", "a2"]
    assert why(result, "a3") == "group asg-a at min size 2"
    result, _ = run(world([g], pods), baseline={"asg-a": 2})
    assert removed(result) == []
    assert why(result, "a1") == "group asg-a at min size 2"
    assert "a1" in result.unneeded_since  # still unneeded: the timer keeps running


def test_baseline_defaults_to_desired() -> None:
    g = grp("asg-a", [n("a1"), n("a2")], min_size=1)
    result, _ = run(world([g], [busy("a2")]))
    assert removed(result) == ["a1"]


# ---------------------------------------------------------------------------------- timers


def test_without_memory_a_node_becomes_unneeded_now() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [busy("a2")])
    result, pool = run(inv, memory=PlannerMemory())
    assert removed(result) == []
    assert result.unneeded_since == {"a1": NOW}
    assert why(result, "a1") == "not unneeded long enough (0s of 10m)"
    assert not pool.is_retired("a1")


def test_unneeded_time_from_memory_and_group_option() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [on("a1", "p", 200), busy("a2")])
    memory = PlannerMemory(unneeded_since={"a1": NOW - timedelta(minutes=4), "gone": LONG_AGO})
    result, pool = run(inv, memory=memory)
    assert why(result, "a1") == "not unneeded long enough (4m of 10m)"
    assert result.unneeded_since == {"a1": NOW - timedelta(minutes=4)}  # gone nodes drop out
    a2 = pool.get("a2")
    assert a2 is not None and [p.name for p in a2.pods] == ["busy-a2"]  # the trial was taken back
    memory = PlannerMemory(unneeded_since={"a1": NOW - timedelta(minutes=14)})
    result, _ = run(inv, memory=memory)
    assert result.removals["asg-a"][0].reason == "utilisation 5% < 50% for 14m; pods fit elsewhere"
    quick = grp("asg-a", [n("a1"), n("a2")], options=AutoscalingOptions(scale_down_unneeded_time_seconds=60))
    result, _ = run(
        world([quick], [busy("a2")]), memory=PlannerMemory(unneeded_since={"a1": NOW - timedelta(minutes=2)})
    )
    assert removed(result) == ["a1"]


def test_delay_after_scale_up() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [busy("a2")])
    memory = replace(mature(inv), last_scale_up={"asg-a": NOW - timedelta(minutes=3)})
    result, _ = run(inv, memory=memory)
    assert why(result, "a1") == "a scale-up of asg-a was applied 3m ago"
    assert "a1" in result.unneeded_since
    memory = replace(mature(inv), last_scale_up={"asg-a": NOW - timedelta(minutes=11)})
    assert removed(run(inv, memory=memory)[0]) == ["a1"]


# ---------------------------------------------------------------------------------- eligibility


def test_scale_down_disabled_annotation() -> None:
    inv = world([grp("asg-a", [n("a1", annotations={SCALE_DOWN_DISABLED: "true"}), n("a2")])], [busy("a2")])
    result, _ = run(inv)
    assert removed(result) == []
    assert why(result, "a1") == "scale-down disabled by annotation"
    assert result.unneeded_since == {}


def test_cordoned_by_someone_else_or_being_drained() -> None:
    drain = Taint("asg-reconciler.dev/draining", "abc123", "NoSchedule")
    nodes = [n("a1", unschedulable=True), n("a2", unschedulable=True, taints=(drain,)), n("a3")]
    result, _ = run(world([grp("asg-a", nodes)], [busy("a3")]))
    assert removed(result) == []
    assert why(result, "a1") == "cordoned by someone else"
    assert why(result, "a2") == "being drained by asg-reconciler"


def test_instance_must_be_in_service_and_unprotected() -> None:
    g, nodes = grp("asg-a", [n("a1"), n("a2"), n("a3")])
    g = replace(
        g,
        instances=(
            instance("i-a1", "Standby"),
            replace(instance("i-a2"), protected_from_scale_in=True),
            instance("i-a3"),
        ),
    )
    result, _ = run(world([(g, nodes)], [busy("a3")]))
    assert why(result, "a1") == "instance i-a1 is Standby"
    assert why(result, "a2") == "instance i-a2 is protected from scale-in"


def test_approved_instances_are_not_candidates_again() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2"), n("a3")])], [busy("a3")])
    pool = make_pool(inv)
    pool.retire("a1")
    result, _ = run(inv, pool=pool, approved=frozenset({"i-a1", "i-a2"}))
    assert removed(result) == []
    assert {u.node for u in result.unremovable} == set()


def test_excluded_group_keeps_nodes_but_tracks_unneeded_time() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [busy("a2")])
    result, pool = run(inv, excluded_groups=frozenset({"asg-a"}))
    assert removed(result) == []
    assert why(result, "a1") == "group asg-a does not scale down in this plan"
    assert result.unneeded_since == {"a1": LONG_AGO}
    assert not pool.is_retired("a1")
    result, _ = run(
        inv, excluded_groups=frozenset({"asg-a"}), exclusion_reasons={"asg-a": "group asg-a is scaling up"}
    )
    assert why(result, "a1") == "group asg-a is scaling up"


# ---------------------------------------------------------------------------------- utilisation


def test_utilisation_is_max_of_cpu_and_memory() -> None:
    inv = world(
        [grp("asg-a", [n("a1"), n("a2")])], [on("a1", "m", 100, 10), busy("a2")]
    )  # 2.5% cpu, 62.5% mem
    result, _ = run(inv)
    assert removed(result) == []
    assert result.unremovable == ()  # above threshold


def test_gpu_nodes_are_measured_by_gpu_with_their_own_threshold() -> None:
    gpu = {GPU: 4}
    nodes = [n("g1", extra=gpu), n("g2", extra=gpu), n("sink", cpu=32000, mem_gi=128, extra=gpu)]
    pods = [
        on("g1", "train", 3500, extra={GPU: 1}),  # 87% cpu but 25% gpu
        on("g2", "infer", 100, extra={GPU: 3}),  # 2% cpu but 75% gpu
        busy("sink", 20000),
    ]
    inv = world([grp("asg-g", nodes)], pods)
    result, _ = run(inv)
    assert removed(result) == ["g1"]
    assert result.removals["asg-g"][0].utilization == 0.25
    result, _ = run(inv, config=sd(gpu_utilization_threshold=0.2))
    assert removed(result) == []
    sim = make_pool(inv).get("g2")
    assert sim is not None and utilization(sim, NOW).gpu and utilization(sim, NOW).value == 0.75


def test_gpu_label_without_reported_gpus_counts_as_idle() -> None:
    sim = SimNode.from_node(
        n("g", labels={"k8s.amazonaws.com/accelerator": "nvidia-t4"}), [on("g", "p", 3900)]
    )
    assert utilization(sim, NOW).gpu and utilization(sim, NOW).value == 0.0


def test_ignore_daemonsets_utilisation_by_config_and_group_option() -> None:
    pods = [ds_pod("a1", 1500), on("a1", "app", 700), busy("a2")]
    inv = world([grp("asg-a", [n("a1"), n("a2")])], pods)
    assert removed(run(inv)[0]) == []  # (1500 + 700) / 4000 = 55%
    result, _ = run(inv, config=sd(ignore_daemonsets_utilization=True))
    assert removed(result) == ["a1"]
    assert result.removals["asg-a"][0].utilization == 700 / 2500
    opt = grp("asg-a", [n("a1"), n("a2")], options=AutoscalingOptions(ignore_daemonsets_utilization=True))
    assert removed(run(world([opt], pods))[0]) == ["a1"]


def test_group_threshold_option_overrides_config() -> None:
    g = grp("asg-a", [n("a1"), n("a2")], options=AutoscalingOptions(scale_down_utilization_threshold=0.1))
    result, _ = run(world([g], [on("a1", "p", 800), busy("a2")]))  # 20% is not below 10%
    assert removed(result) == []


def test_utilisation_exactly_at_the_threshold_is_a_candidate() -> None:
    # CA 1.35+ (eligibility.go isNodeAtOrBelowUtilizationThreshold: `Utilization > threshold` keeps)
    inv = world([grp("asg-a", [n("a1"), n("a2", cpu=16000)])], [on("a1", "half", 2000), busy("a2", 12000)])
    result, _ = run(inv)
    assert removed(result) == ["a1"]
    assert result.removals["asg-a"][0].utilization == 0.5
    assert result.removals["asg-a"][0].reason == "utilisation 50% = 50% for 2h; pods fit elsewhere"
    nodes = [n("g1", extra={GPU: 4}), n("sink", extra={GPU: 8})]
    pods = [on("g1", "train", 100, extra={GPU: 2}), on("sink", "other", 100, extra={GPU: 5})]
    result, _ = run(world([grp("asg-g", nodes)], pods))  # the GPU threshold is compared the same way
    assert removed(result) == ["g1"]


# ---------------------------------------------------------------------------------- drainability


def one_pod_node(
    p: Pod, config: Config | None = None, pdbs: Sequence[PodDisruptionBudget] = ()
) -> ScaleDownResult:
    """a1 holds `p` (placed on it), a2 has room: does a1 go?"""
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [p._replace(node_name="a1"), busy("a2", 2000)], pdbs)
    return run(inv, config=config)[0]


def test_local_storage_blocks_unless_flag_off_or_every_volume_listed() -> None:
    p = on("a1", "db", volumes=Volumes(local_storage=("data", "tmp")))
    assert why(one_pod_node(p), "a1") == "pod default/db has local storage (data, tmp)"
    assert removed(one_pod_node(p, sd(skip_nodes_with_local_storage=False))) == ["a1"]
    listed = p._replace(annotations={SAFE_TO_EVICT_LOCAL_VOLUMES: "data, tmp"})
    assert removed(one_pod_node(listed)) == ["a1"]
    partly = p._replace(annotations={SAFE_TO_EVICT_LOCAL_VOLUMES: "tmp"})
    assert why(one_pod_node(partly), "a1") == "pod default/db has local storage (data)"


def test_safe_to_evict_both_ways() -> None:
    bare = on("a1", "lone", owner=None, volumes=Volumes(local_storage=("x",)))
    assert why(one_pod_node(bare), "a1") == "pod default/lone is not replicated (no controller)"
    assert removed(one_pod_node(replace(bare, annotations={SAFE_TO_EVICT: "true"}))) == ["a1"]
    pinned = on("a1", "web", annotations={SAFE_TO_EVICT: "false"})
    assert why(one_pod_node(pinned), "a1") == "pod default/web is annotated safe-to-evict: false"


def test_pods_without_a_controller_block() -> None:
    assert "not replicated" in why(one_pod_node(on("a1", "x", owner=None)), "a1")
    not_controller = replace(on("a1", "y"), owner=OwnerRef("ReplicaSet", "rs", controller=False))
    assert "not replicated" in why(one_pod_node(not_controller), "a1")


def test_custom_controllers_block_only_with_the_flag() -> None:
    p = replace(on("a1", "x"), owner=OwnerRef("Rollout", "canary"))
    assert why(one_pod_node(p), "a1") == "pod default/x is owned by custom controller Rollout/canary"
    assert removed(one_pod_node(p, sd(skip_nodes_with_custom_controller_pods=False))) == ["a1"]
    for kind in ("ReplicaSet", "StatefulSet", "Job", "ReplicationController"):
        assert removed(one_pod_node(p._replace(owner=OwnerRef(kind, "w")))) == ["a1"]


def test_system_pods_without_pdb_block_while_young() -> None:
    young = replace(on("a1", "coredns", namespace="kube-system"), created=NOW - timedelta(minutes=5))
    assert why(one_pod_node(young), "a1") == "kube-system pod kube-system/coredns has no PDB"
    assert removed(one_pod_node(young, sd(skip_nodes_with_system_pods=False))) == ["a1"]
    old = replace(young, created=NOW - timedelta(hours=2))
    assert removed(one_pod_node(old)) == ["a1"]
    assert "no PDB" in why(one_pod_node(old, sd(blocking_system_pod_disruption_timeout=timedelta(0))), "a1")
    assert "no PDB" in why(one_pod_node(replace(young, created=None)), "a1")
    pdb = PodDisruptionBudget("kube-system", "coredns", selector(app="rs"), disruptions_allowed=1)
    assert removed(one_pod_node(young, pdbs=[pdb])) == ["a1"]


def test_mirror_daemonset_and_finished_pods_stay_and_do_not_block() -> None:
    mirror = replace(on("a1", "kube-proxy", owner=None), annotations={MIRROR_POD: "x"})
    finished = replace(on("a1", "job-1", owner=None), phase="Succeeded")
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [mirror, ds_pod("a1"), finished, busy("a2")])
    result, _ = run(inv)
    assert removed(result) == ["a1"]
    assert result.removals["asg-a"][0].reason == "empty for 2h"
    assert result.moves["a1"] == ()


def test_a_pod_annotated_daemonset_pod_is_a_daemonset_pod_whatever_its_owner() -> None:
    """CA's IsDaemonSetPod: `cluster-autoscaler.kubernetes.io/daemonset-pod: "true"` (a node agent
    run by a custom controller, or a bare pod) stays with its node and does not block it."""
    agent = on("a1", "node-agent", owner=None, annotations={DAEMONSET_POD: "true"})
    assert agent.is_daemonset and not replace(agent, annotations={DAEMONSET_POD: "false"}).is_daemonset
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [agent, busy("a2")])
    result, _ = run(inv)
    assert removed(result) == ["a1"] and result.moves["a1"] == ()
    bare = world([grp("asg-a", [n("a1"), n("a2")])], [on("a1", "node-agent", owner=None), busy("a2")])
    assert removed(run(bare)[0]) == []  # without the annotation a bare pod keeps its node, as in CA


def test_long_terminating_pods_neither_block_nor_count_as_load() -> None:
    """CA's LongTerminating rule: deleted longer ago than grace period + 30 s, a pod stays put (even
    one that would block), and leaves the requested side of utilisation; one still within its grace
    period is an ordinary pod."""
    stuck_since = NOW - timedelta(seconds=61)  # 30 s grace + 30 s margin, and one more
    stuck = replace(
        on("a1", "stuck", 3500, owner=None, annotations={SAFE_TO_EVICT: "false"}),
        deleting_since=stuck_since,
    )
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [stuck, busy("a2")])
    result, _ = run(inv)
    assert removed(result) == ["a1"]  # 87% requested, but by a pod that is gone
    assert result.moves["a1"] == ()
    sim = make_pool(inv).get("a1")
    assert sim is not None and utilization(sim, NOW).value == 0.0
    assert stays_on_node(stuck, NOW)

    within_grace = replace(stuck, deleting_since=NOW - timedelta(seconds=59))
    result, _ = run(world([grp("asg-a", [n("a1"), n("a2")])], [within_grace, busy("a2")]))
    assert removed(result) == []  # busy, and not replicated anyway

    long_grace = replace(stuck, grace_period_seconds=600)  # its own grace period has not run out
    assert not long_grace.is_long_terminating(NOW)
    ctx = DrainContext(ScaleDownConfig(), NOW, lambda _p: False, -10)
    assert drain_verdict(long_grace, ctx).outcome == BLOCKS
    assert drain_verdict(replace(stuck, grace_period_seconds=0), ctx).outcome == "stays"


def test_unmodelled_constraints_pin_the_node() -> None:
    """Namespaces were not read (no Namespace objects): a namespace selector cannot be judged."""
    term = PodAffinityTerm(
        selector(app="db"), "topology.kubernetes.io/zone", namespace_selector=selector(team="data")
    )
    p = on("a1", "web", scheduling=Scheduling(pod_affinity=(term,)))
    assert "not modelled" in why(one_pod_node(p), "a1")


def test_zone_affinity_with_no_matching_pod_left_keeps_the_node() -> None:
    zone_affinity = Scheduling(
        pod_affinity=(PodAffinityTerm(selector(app="db"), "topology.kubernetes.io/zone"),)
    )
    p = on("a1", "web", scheduling=zone_affinity)
    assert why(one_pod_node(p), "a1").startswith("pod default/web fits on no other node")


def test_a_placed_pods_zone_anti_affinity_keeps_the_pods_it_selects_out_of_its_zone() -> None:
    term = PodAffinityTerm(selector(app="web"), "topology.kubernetes.io/zone")
    guard = on("a2", "guard", owner="guard", scheduling=Scheduling(pod_anti_affinity=(term,)))
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [on("a1", "w", labels={"app": "web"}), guard, busy("a2")])
    reason = why(run(inv)[0], "a1")
    assert reason.startswith("pod default/w fits on no other node: anti-affinity of a pod in")


def test_pdb_with_no_disruption_allowed_blocks() -> None:
    pdb = PodDisruptionBudget("default", "web", selector(app="web"), disruptions_allowed=0)
    p = on("a1", "web-1", labels={"app": "web"})
    assert (
        why(one_pod_node(p, pdbs=[pdb]), "a1") == "pdb default/web allows no disruption (pod default/web-1)"
    )
    other_ns = replace(pdb, namespace="other")
    assert removed(one_pod_node(p, pdbs=[other_ns])) == ["a1"]


def test_pdb_budget_is_shared_across_the_nodes_removed() -> None:
    pdb = PodDisruptionBudget("default", "web", selector(app="web"), disruptions_allowed=1)
    nodes = [n("a1"), n("a2"), n("sink", cpu=32000, mem_gi=128)]
    pods = [
        on("a1", "web-1", 200, labels={"app": "web"}, owner="web"),
        on("a2", "web-2", 300, labels={"app": "web"}, owner="web"),
        busy("sink", 20000),
    ]
    result, _ = run(world([grp("asg-a", nodes)], pods, [pdb]))
    assert removed(result) == ["a1"]
    assert (
        why(result, "a2") == "pdb default/web has no disruption left after other removals (pod default/web-2)"
    )
    assert "a2" not in result.unneeded_since


def test_pdb_budget_is_not_spent_by_nodes_that_stay() -> None:
    pdb = PodDisruptionBudget("default", "web", selector(app="web"), disruptions_allowed=1)
    nodes = [n("a1"), n("a2"), n("sink", cpu=32000, mem_gi=128)]
    pods = [
        on("a1", "web-1", 200, labels={"app": "web"}, owner="web"),
        on("a2", "web-2", 300, labels={"app": "web"}, owner="web"),
        busy("sink", 20000),
    ]
    memory = PlannerMemory(unneeded_since={"a1": NOW, "a2": LONG_AGO})  # a1 is tried first but is too new
    result, _ = run(world([grp("asg-a", nodes)], pods, [pdb]), memory=memory)
    assert removed(result) == ["a2"]


def test_pdb_budget_unit() -> None:
    pdb = PodDisruptionBudget("default", "web", selector(app="web"), disruptions_allowed=1)
    budget = PdbBudget([pdb])
    pods = [on("x", "w1", labels={"app": "web"}), on("x", "w2", labels={"app": "web"})]
    assert budget.blocking(pods) is None  # two on one node with one left: allowed, drained in turn
    budget.take(pods)
    assert budget.remaining["default/web"] == -1
    assert budget.blocking(pods[:1]) is not None
    assert budget.matching(on("x", "api", labels={"app": "api"})) == ()


def test_drain_verdict_order_matches_ca() -> None:
    ctx = DrainContext(ScaleDownConfig(), NOW, lambda _p: False, -10)
    ds = replace(on("x", "agent", annotations={SAFE_TO_EVICT: "false"}), owner=OwnerRef("DaemonSet", "agent"))
    assert drain_verdict(ds, ctx).outcome == "stays" and stays_on_node(ds, NOW)
    lone_pinned = on("x", "lone", owner=None, annotations={SAFE_TO_EVICT: "false"})
    assert drain_verdict(lone_pinned, ctx).outcome == BLOCKS
    assert "not replicated" in drain_verdict(lone_pinned, ctx).reason
    assert drain_verdict(on("x", "plain"), ctx).outcome == "moves"


# ---------------------------------------------------------------------------------- rescheduling


def test_pods_never_move_onto_another_node_being_removed() -> None:
    # a1 and a2 are both at 37%; once a1's pod went to a2, a2's two pods have nowhere to go.
    inv = world(
        [grp("asg-a", [n("a1"), n("a2")])],
        [on("a1", "p1", 1500, owner="o1"), on("a2", "p2", 1500, owner="o2")],
    )
    result, pool = run(inv)
    assert removed(result) == ["a1"]
    assert [dest for _, dest in result.moves["a1"]] == ["a2"]
    assert why(result, "a2").startswith("pod default/")
    assert "fits on no other node" in why(result, "a2")
    assert "a2" not in result.unneeded_since
    a2 = pool.get("a2")
    assert a2 is not None and sorted(p.name for p in a2.pods) == ["p1", "p2"]


def test_a_node_alone_cannot_move_its_pods_onto_itself() -> None:
    result, _ = run(world([grp("asg-a", [n("a1")])], [on("a1", "p", 500)]))
    assert why(result, "a1") == "pod default/p fits on no other node: no other node"


def test_fit_failure_is_explained() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [on("a1", "big", 1800), busy("a2", 3000)])
    result, _ = run(inv)
    assert why(result, "a1") == "pod default/big fits on no other node: insufficient cpu on 1 node"


def test_a_refused_class_may_still_land_on_the_node_that_was_excluded() -> None:
    # x from a1 fits nowhere (b1 is tainted, the sink is full); x from b1 still fits on a1.
    taint = Taint("maintenance", "", "NoSchedule")
    nodes = [n("a1"), n("b1", taints=(taint,)), n("sink")]
    pods = [
        on("a1", "x-1", 1500, owner="x", labels={"app": "x"}),
        on("b1", "x-2", 1500, owner="x", labels={"app": "x"}),
        on("b1", "y", 300, owner="y"),
        busy("sink", 3900),
    ]
    result, _ = run(world([grp("asg-a", nodes)], pods))
    assert why(result, "a1") == (
        "pod default/x-1 fits on no other node: insufficient cpu on 1 node, "
        "taint maintenance:NoSchedule not tolerated on 1 node"
    )
    assert removed(result) == ["b1"]
    assert sorted((p.name, d) for p, d in result.moves["b1"]) == [("x-2", "a1"), ("y", "a1")]


def test_nothing_moves_when_every_candidate_holds_a_spread_pod() -> None:
    solo = Scheduling(pod_anti_affinity=(PodAffinityTerm(selector(app="solo"), HOSTNAME_LABEL),))
    nodes = [n(f"a{i}") for i in range(5)]
    pods = [
        on(f"a{i}", f"s{i}", 500, owner="solo", labels={"app": "solo"}, scheduling=solo) for i in range(5)
    ]
    result, pool = run(world([grp("asg-a", nodes)], pods))
    assert removed(result) == []
    for i in range(5):
        assert why(result, f"a{i}") == (
            f"pod default/s{i} fits on no other node: pod anti-affinity on kubernetes.io/hostname on 4 nodes"
        )
    assert all(len(x.pods) == 1 for x in pool.nodes)


def test_pods_do_not_move_onto_upcoming_nodes_unless_asked() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [on("a1", "p", 1500), busy("a2", 3500)])
    upcoming = SimNode.from_template(template(), (), name="new-asg-a-1", zones=("us-east-1a",), group="asg-a")
    result, _ = run(inv, pool=make_pool(inv, [upcoming]))
    assert "fits on no other node" in why(result, "a1")
    result, _ = run(inv, pool=make_pool(inv, [upcoming.copy()]), onto_upcoming=True)
    assert [dest for _, dest in result.moves["a1"]] == ["new-asg-a-1"]


def test_pending_pods_placed_on_a_candidate_move_with_it() -> None:
    inv = world([grp("asg-a", [n("a1"), n("a2")])], [busy("a2", 2000)])
    pool = make_pool(inv)
    pending = pod("pending", 1000)
    pool.add_pod(pending, "a1")
    result, _ = run(inv, pool=pool)
    assert removed(result) == ["a1"]
    assert result.removals["asg-a"][0].reason.startswith("utilisation 25% < 50%")
    assert [(p.name, d) for p, d in result.moves["a1"]] == [("pending", "a2")]


def test_pods_respect_predicates_when_moving() -> None:
    taint = Taint("dedicated", "gpu", "NoSchedule")
    inv = world([grp("asg-a", [n("a1"), n("a2", taints=(taint,))])], [on("a1", "p", 500), busy("a2", 2000)])
    result, _ = run(inv)
    assert "taint dedicated=gpu:NoSchedule not tolerated on 1 node" in why(result, "a1")


# ---------------------------------------------------------------------------------- NotReady, unregistered


def test_long_notready_nodes_go_whatever_their_utilisation() -> None:
    nodes = [
        n("a1", ready=False, ready_since=NOW - timedelta(minutes=35)),
        n("a2", ready=False, ready_since=NOW - timedelta(minutes=5)),
        n("a3", ready=False, ready_since=None),
        n("a4"),
    ]
    pods = [busy("a1"), busy("a2"), on("a4", "x", 100)]
    inv = world([grp("asg-a", nodes)], pods)
    result, _ = run(inv, memory=PlannerMemory())
    assert removed(result) == ["a1"]  # its pods still need a home: a4 (NotReady nodes are not in the pool)
    removal = result.removals["asg-a"][0]
    assert removal.reason == "NotReady for 35m" and removal.since == NOW - timedelta(minutes=35)
    assert [(p.name, d) for p, d in result.moves["a1"]] == [("busy-a1", "a4")]
    assert why(result, "a2") == "NotReady for 5m (proposed after 20m)"
    assert why(result, "a3") == "NotReady since an unknown time"
    # a4 was below threshold, but with a1's pod on it nothing can leave it any more
    assert why(result, "a4") == "pod default/busy-a1 fits on no other node: no other node"
    assert result.unneeded_since == {}


def test_notready_nodes_respect_min_size() -> None:
    g = grp("asg-a", [n("a1", ready=False, ready_since=LONG_AGO), n("a2")], min_size=2)
    assert why(run(world([g], [busy("a2")]))[0], "a1") == "group asg-a at min size 2"


def test_unregistered_instances_past_provision_time_go() -> None:
    extra = [
        instance("i-late", "Pending", NOW - timedelta(minutes=22)),
        instance("i-young", "Pending", NOW - timedelta(minutes=5)),
        instance("i-leaving", "Terminating", LONG_AGO),
    ]
    g = grp("asg-a", [n("a1")], extra_instances=extra)
    result, _ = run(world([g], [busy("a1")]))
    assert removed(result) == ["i-late"]
    removal = result.removals["asg-a"][0]
    assert removal.node is None and removal.utilization is None
    assert removal.reason == "unregistered for 22m" and removal.since == NOW - timedelta(minutes=22)


def test_unregistered_instances_respect_min_size_and_exclusion() -> None:
    g = grp("asg-a", [n("a1")], min_size=2, extra_instances=[instance("i-late", "Pending", LONG_AGO)])
    result, _ = run(world([g], [busy("a1")]))
    assert why(result, "i-late") == "group asg-a at min size 2"
    g = grp("asg-a", [n("a1")], extra_instances=[instance("i-late", "Pending", LONG_AGO)])
    result, _ = run(world([g], [busy("a1")]), excluded_groups=frozenset({"asg-a"}))
    assert removed(result) == []


# ---------------------------------------------------------------------------------- forced


def test_forced_count_names_the_best_instances_whatever_the_threshold() -> None:
    a = grp("asg-a", [n("a1"), n("a2"), n("a3"), n("a4")])
    b = grp("asg-b", [n("b-big", cpu=32000, mem_gi=128)])
    pods = [busy("a1", 3000), busy("a2", 2500), busy("a3", 3500), busy("a4", 1000), busy("b-big", 20000)]
    result, _ = run(world([a, b], pods), memory=PlannerMemory(), forced={"asg-a": 3})
    assert removed(result) == ["a4", "a2", "a1"]  # least utilised first, above threshold or not
    reasons = [r.reason for r in result.removals["asg-a"]]
    assert reasons == [
        "desired lowered by hand (utilisation 25% < 50% for 0s; pods fit elsewhere)",
        "desired lowered by hand (utilisation 62%; pods fit elsewhere)",
        "desired lowered by hand (utilisation 75%; pods fit elsewhere)",
    ]
    assert result.unneeded_since == {"a4": NOW}
    assert "a3" not in {u.node for u in result.unremovable}  # not reached: not listed


def test_forced_count_still_needs_drainability_and_min_size() -> None:
    nodes = [n("a1"), n("a2"), n("a3")]
    pods = [
        on("a1", "db", 2500, volumes=Volumes(local_storage=("data",))),
        busy("a2", 2600),
        busy("a3", 500),
    ]
    inv = world([grp("asg-a", nodes, min_size=2)], pods)
    result, _ = run(inv, forced={"asg-a": 2})
    assert removed(result) == ["a3"]  # a1 is pinned; then the group is at min
    assert why(result, "a1") == "pod default/db has local storage (data)"
    assert why(result, "a2") == "group asg-a at min size 2"


def test_forced_count_prefers_unregistered_and_notready() -> None:
    nodes = [n("a1", ready=False, ready_since=NOW - timedelta(minutes=1)), n("a2")]
    g = grp("asg-a", nodes, extra_instances=[instance("i-late", "Pending", LONG_AGO)])
    result, _ = run(world([g], [busy("a2")]), forced={"asg-a": 2})
    assert removed(result) == ["i-late", "a1"]
    assert result.removals["asg-a"][1].reason == "desired lowered by hand (NotReady for 1m)"


def test_forced_removals_count_towards_the_plan_limit_and_go_first() -> None:
    a = grp("asg-a", [n("a1"), n("a-sink", cpu=32000, mem_gi=128)])
    b = grp("asg-b", [n("b1"), n("b2")])
    pods = [busy("a1", 200), busy("a-sink", 1000), busy("b1", 3000), busy("b2", 100)]
    result, _ = run(world([a, b], pods), config=sd(max_nodes_per_plan=1), forced={"asg-b": 1})
    assert removed(result) == ["b2"]
    assert why(result, "a1") == "max 1 removals per plan reached"


# ---------------------------------------------------------------------------------- determinism


def test_same_input_same_output() -> None:
    nodes = [n(f"a{i}") for i in range(6)] + [n("sink", cpu=32000, mem_gi=128)]
    pods = [
        on(f"a{i}", f"p{i}-{j}", 300 + 100 * ((i * 7 + j) % 5), owner=f"o{j}")
        for i in range(6)
        for j in range(3)
    ]
    inv = world([grp("asg-a", nodes, min_size=2)], [*pods, busy("sink", 20000)])
    first, _ = run(inv)
    second, _ = run(inv)
    assert first == second
    assert removed(first)


# ---------------------------------------------------------------------------------- properties


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Inventory, dict[str, int], Config]:
    groups = []
    pods: list[Pod] = []
    for g in range(draw(st.integers(1, 2))):
        count = draw(st.integers(1, 5))
        nodes = [n(f"g{g}n{i}", cpu=draw(st.sampled_from([2000, 4000]))) for i in range(count)]
        for x in nodes:
            for j in range(draw(st.integers(0, 4))):
                local = draw(st.booleans()) and draw(st.booleans())
                pods.append(
                    on(
                        x.name,
                        f"{x.name}-p{j}",
                        draw(st.integers(50, 1500)),
                        draw(st.sampled_from([0.25, 1.0, 4.0])),
                        owner=draw(st.sampled_from(["web", "api", "batch"])),
                        labels={"app": draw(st.sampled_from(["web", "api"]))},
                        volumes=Volumes(local_storage=("scratch",)) if local else Volumes(),
                    )
                )
            if draw(st.booleans()):
                pods.append(ds_pod(x.name))
        groups.append(grp(f"asg-{g}", nodes, min_size=draw(st.integers(0, count))))
    pdbs = [PodDisruptionBudget("default", "web", selector(app="web"), draw(st.integers(0, 3)))]
    forced = {f"asg-{g}": draw(st.integers(0, 2)) for g in range(len(groups))}
    config = sd(max_nodes_per_plan=draw(st.integers(1, 4)))
    return world(groups, pods, pdbs), forced, config


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_removed_nodes_pods_land_on_remaining_nodes_and_min_holds(
    case: tuple[Inventory, dict[str, int], Config],
) -> None:
    inv, forced, config = case
    result, _ = run(inv, config=config, forced=forced)

    # Replay every move, in removal order, on fresh copies of the cluster: each pod passes every
    # predicate on its destination, which is neither the node itself nor one removed before it.
    sims = {x.name: SimNode.from_node(x, inv.pods_by_node.get(x.name, ())) for x in inv.state.nodes}
    gone: set[str] = set()
    for name, moves in result.moves.items():
        expected = sorted(id(p) for p in sims[name].pods if not stays_on_node(p, NOW))
        assert sorted(id(p) for p, _ in moves) == expected  # every pod that must move, moves
        for p, dest in moves:
            assert dest != name and dest not in gone
            assert check(p, sims[dest]) is None
            sims[dest].add(p)
        gone.add(name)

    total = 0
    for inv_group in inv.groups:
        chosen = result.removals.get(inv_group.name, ())
        total += len(chosen)
        assert inv_group.group.desired - len(chosen) >= inv_group.group.min_size
        for r in chosen:
            assert r.node is None or r.node in result.moves
    assert total <= config.scale_down.max_nodes_per_plan
    # every removed node was drainable
    ctx = DrainContext(config.scale_down, NOW, PdbBudget(inv.state.pdbs).has_pdb, -10)
    for name in result.moves:
        assert all(drain_verdict(p, ctx).outcome != BLOCKS for p in inv.pods_by_node.get(name, ()))
    # the PDB budget holds: at most `allowed` nodes lost a matching pod when it started at zero
    web = [p for name in result.moves for p in inv.pods_by_node.get(name, ()) if p.labels.get("app") == "web"]
    if inv.state.pdbs[0].disruptions_allowed == 0:
        assert web == []

    again, _ = run(inv, config=config, forced=forced)
    assert again == result


def test_hostname_label_is_what_anti_affinity_sees_when_moving() -> None:
    term = PodAffinityTerm(selector(app="solo"), HOSTNAME_LABEL)
    solo = Scheduling(pod_anti_affinity=(term,))
    pods = [
        on("a1", "s1", labels={"app": "solo"}, owner="solo", scheduling=solo),
        on("a2", "s2", labels={"app": "solo"}, owner="solo", scheduling=solo),
        busy("a2", 1000),
    ]
    result, _ = run(world([grp("asg-a", [n("a1"), n("a2")])], pods))
    assert "anti-affinity" in why(result, "a1")


def test_a_drain_leaves_an_annotated_daemonset_pod_where_it_is() -> None:
    from reconciler.kube.drain import _stays

    annotated = {"metadata": {"name": "agent", "annotations": {DAEMONSET_POD: "true"}}, "status": {}}
    plain = {"metadata": {"name": "agent", "annotations": {DAEMONSET_POD: "no"}}, "status": {}}
    assert _stays(annotated) and not _stays(plain)
