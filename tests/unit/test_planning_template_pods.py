"""What a new node runs before any of our pods, as cluster-autoscaler's podsExpectedOnFreshNode: a
template copied from a live node carries that node's mirror (static) and DaemonSet pods; DaemonSets it
does not run are added from their pod templates; a template from the ASG gets only the latter."""

from __future__ import annotations

from datetime import timedelta

from reconciler.domain.model import (
    DAEMONSET_POD,
    MIRROR_POD,
    DaemonSet,
    HostPort,
    OwnerRef,
    Resources,
    Scheduling,
)
from reconciler.planning.simnode import SimNode
from reconciler.planning.types import CommittedGroup
from tests.support.plan_world import NOW, World

STATIC = {MIRROR_POD: "0f1e2d"}


def sampled_world() -> World:
    """general's only node runs a 1500m static pod, a DaemonSet pod and some ordinary work."""
    world = World().group("general")
    world.node("general", "n1").running("n1", "etcd-n1", cpu=1500, owner=("Node", "n1"), annotations=STATIC)
    world.running("n1", "agent-x1", cpu=200, owner=("DaemonSet", "agent"))
    world.running("n1", "web", cpu=2000)
    return world


def test_a_template_from_a_node_carries_its_mirror_and_daemonset_pods() -> None:
    world = sampled_world()
    world.running("n1", "custom-agent", cpu=50, owner=("Agent", "a"), annotations={DAEMONSET_POD: "true"})
    world.running("n1", "old-agent", cpu=50, owner=("DaemonSet", "old"), deleting_since=NOW)
    world.running("n1", "done", cpu=50, owner=("DaemonSet", "gone"))
    world.pods[-1] = world.pods[-1]._replace(phase="Succeeded")
    template = world.inventory().group("general").template
    assert template is not None and template.source == "node n1"
    assert [p.name for p in template.pods] == ["etcd-n1", "agent-x1", "custom-agent"]


def test_every_new_node_of_the_group_runs_the_static_pods() -> None:
    """4 pods of 1500m: two per 4000m node without the static pod, one with it."""
    world = sampled_world()
    world.running("n1", "filler", cpu=300)
    for i in range(4):
        world.pending(f"batch-{i}", cpu=1500, owner=("ReplicaSet", "batch"))
    plan = world.plan()
    assert plan.group("general").new_nodes == 4


def test_upcoming_nodes_run_the_static_pods_too() -> None:
    world = sampled_world()
    world.running("n1", "filler", cpu=300)
    world.pending("big", cpu=2500)
    # one instance committed on main, not yet applied: it is upcoming capacity built from the template
    plan = world.plan(committed={"general": CommittedGroup(desired=2)})
    [outcome] = plan.pending
    assert outcome.reason != "fits upcoming capacity"  # 4000 - 1500 static - 200 agent < 2500


def test_a_daemonset_the_sample_node_runs_is_not_added_twice() -> None:
    world = sampled_world()
    world.daemonsets += [
        DaemonSet("default", "agent", Resources.of(cpu=100)),  # runs on n1 (200m there): n1's pod wins
        DaemonSet("default", "logs", Resources.of(cpu=300)),  # not on n1 yet: added from its template
    ]
    inventory = world.inventory()
    template = inventory.group("general").template
    assert template is not None
    base = SimNode.from_template(template, inventory.state.daemonsets, name="general-template")
    assert sorted((p.name, p.requests.cpu) for p in base.pods) == [
        ("agent-x1-general-template", 200),
        ("etcd-n1-general-template", 1500),
        ("logs-general-template", 300),
    ]
    assert base.cpu_free == 4000 - 2000
    copy = base.copy("general-upcoming-1")
    assert {p.node_name for p in copy.pods} == {"general-template"}  # shared by every copy, as DS pods


def test_a_template_from_the_asg_has_only_the_daemonsets() -> None:
    world = World().group("empty")  # no node: scale from zero
    world.daemonsets.append(DaemonSet("default", "agent", Resources.of(cpu=100)))
    world.pending("web", cpu=3500)
    inventory = world.inventory()
    template = inventory.group("empty").template
    assert template is not None and template.pods == ()
    base = SimNode.from_template(template, inventory.state.daemonsets, name="empty-template")
    assert [(p.name, p.owner) for p in base.pods] == [
        ("agent-empty-template", OwnerRef("DaemonSet", "agent"))
    ]
    assert world.plan().group("empty").new_nodes == 1


def test_a_not_ready_or_cordoned_node_is_no_sample() -> None:
    world = World().group("general")
    world.node("general", "n1", ready=False, ready_since=NOW - timedelta(minutes=1))
    world.running("n1", "etcd-n1", cpu=1500, owner=("Node", "n1"), annotations=STATIC)
    template = world.inventory().group("general").template
    assert template is not None and template.pods == () and template.source.startswith("asg")


def test_static_pods_are_the_new_nodes_own_not_pods_helped() -> None:
    """Scale-up counts the pending pods its new nodes hold, and balancing moves only those: the
    static pod copies on every new node are neither."""
    world = sampled_world()
    world.running("n1", "filler", cpu=300)
    for i in range(4):
        world.pending(f"batch-{i}", cpu=1500, owner=("ReplicaSet", "batch"))
    assert world.plan().group("general").reasons == ("4 pending pod(s) need 4 × m5.xlarge",)

    proxy = Scheduling(host_ports=(HostPort(10249),))
    twins = World()
    for name in ("general-a", "general-b"):
        node = f"{name}-1"
        twins.group(name).node(name, node).running(node, "busy", cpu=3500)
        twins.running(node, f"kube-proxy-{node}", cpu=100, owner=None, annotations=STATIC, scheduling=proxy)
    for i in range(4):
        twins.pending(f"batch-{i}", cpu=3000, owner=("ReplicaSet", "batch"))
    plan = twins.plan(scale_up={"balance_similar_node_groups": True})
    assert [g.new_nodes for g in plan.groups] == [2, 2]
