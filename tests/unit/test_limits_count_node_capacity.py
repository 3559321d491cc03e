"""`limits.cores` and `limits.memory` sum node *capacity* (as cluster-autoscaler's resource manager
does, and as docs/planning.md says): what the plan adds must be counted the same way, or a template
whose allocatable is below its capacity (kube-reserved, eviction threshold: every real node) lets a
plan grow the cluster past its limits, for real pods and for headroom alike."""

from __future__ import annotations

from dataclasses import replace

from reconciler.config.settings import LimitsConfig
from reconciler.domain.model import INSTANCE_TYPE_LABEL, NodeTemplate, Resources
from reconciler.planning.types import CommittedGroup, Headroom
from tests.support.plan_world import GI, World, resources

# an m5.xlarge as it really is: 4 vCPU / 16 GiB of capacity, less allocatable
CAPACITY = resources(4000, 16)
ALLOCATABLE = resources(3920, 14.5)
M5 = NodeTemplate(
    instance_type="m5.xlarge",
    labels={INSTANCE_TYPE_LABEL: "m5.xlarge"},
    taints=(),
    capacity=CAPACITY,
    allocatable=ALLOCATABLE,
    source="asg (m5.xlarge)",
)


def total(world: World, added: int, what: str) -> int:
    """The cluster's capacity of `what` once the plan's new nodes are there."""
    have = sum(n.capacity.get(what) for n in world.nodes)
    return have + added * CAPACITY.get(what)


def busy(world: World) -> World:
    world.group("general", min_size=1, max_size=100, tmpl=M5)
    world.node("general", "n1").running("n1", "web", cpu=3900, mem_gi=14)
    # the live node the template is read from reports both, as a kubelet does
    world.nodes[-1] = replace(world.nodes[-1], capacity=CAPACITY, allocatable=ALLOCATABLE)
    return world


def test_real_pods_never_grow_the_cluster_past_limits_memory() -> None:
    world = busy(World())
    for i in range(20):
        world.pending(f"job-{i}", cpu=3000, mem_gi=12)
    limits = LimitsConfig(memory_max_gb=176)  # 16 GiB used: room for 10 more 16 GiB nodes
    added = world.plan(limits=limits, scale_up={"max_step": 100}).group("general").new_nodes
    assert total(world, added, "memory") <= 176 * GI
    assert added == 10


def test_real_pods_never_grow_the_cluster_past_limits_cores() -> None:
    world = busy(World())
    for i in range(60):
        world.pending(f"job-{i}", cpu=3000, mem_gi=1)
    limits = LimitsConfig(cores_max=204)  # 4 cores used: room for 50 more 4-core nodes
    added = world.plan(limits=limits, scale_up={"max_step": 100}).group("general").new_nodes
    assert total(world, added, "cpu") <= 204_000
    assert added == 50


def test_headroom_never_grows_the_cluster_past_limits_memory() -> None:
    world = busy(World())
    committed = {
        "general": CommittedGroup(desired=1, headroom=Headroom(20, Resources.of(cpu=3000, memory=12 * GI)))
    }
    limits = LimitsConfig(memory_max_gb=176)
    group = world.plan(committed=committed, limits=limits, scale_up={"max_step": 100}).group("general")
    assert total(world, group.new_nodes, "memory") <= 176 * GI
    assert group.new_nodes == 10
    assert group.headroom is not None and "limits.memory reached" in group.headroom.reason
