"""How apply counts the cluster against its own bounds (reconciler/apply/caps.py, DESIGN §3 rule 11):
every machine AWS runs or was asked for counts, a group's own max is the lower of the ASG's and
`nodeGroups.explicit`'s, a group whose nodes cannot be counted is not raised under a cores or memory
max, and the run's raises share what `limits` leaves."""

from __future__ import annotations

from dataclasses import replace

from reconciler.apply.caps import Caps, beyond_bounds, cluster_totals
from reconciler.config.settings import Config, LimitsConfig, NodeGroupsConfig
from reconciler.domain.inventory import Inventory, build_inventory
from reconciler.domain.model import ClusterState, Instance, Node, NodeGroup, Resources
from reconciler.planning.types import CommittedGroup
from tests.support.planning_factories import GI, node, template

UNLIMITED = LimitsConfig(cores_max=0, memory_max_gb=0)


def instance(instance_id: str, state: str = "InService") -> Instance:
    return Instance(instance_id, state, "us-east-1a", "m5.xlarge", None)


def node_of(name: str, instance_id: str) -> Node:
    return replace(node(name), provider_id=f"aws:///us-east-1a/{instance_id}")


def group(
    name: str,
    desired: int,
    *instances: Instance,
    max_size: int = 10,
    asg_max: int = 10,
    explicit: bool = False,
) -> NodeGroup:
    return NodeGroup(
        name,
        0,
        max_size,
        desired,
        instances,
        ("us-east-1a",),
        {},
        asg_max_size=asg_max,
        explicit=explicit,
    )


def caps_for(
    limits: LimitsConfig, *groups: NodeGroup, nodes: tuple[Node, ...] = (), explicit: tuple[str, ...] = ()
) -> tuple[Caps, Config, Inventory]:
    config = Config("prod", node_groups=NodeGroupsConfig(explicit=explicit), limits=limits)
    inventory = build_inventory(ClusterState(nodes, ()), groups)
    inventory = replace(inventory, groups=tuple(replace(g, template=template()) for g in inventory.groups))
    return Caps.of(config, inventory), config, inventory


def test_every_machine_aws_runs_or_was_asked_for_counts() -> None:
    general = group(
        "general",
        4,
        instance("i-1"),  # a node
        instance("i-2", "Pending"),  # no node yet
        instance("i-3", "Terminating"),  # going away: not counted
        instance("i-4", "Standby"),  # outside desired, but its node still runs
    )
    nodes = (node_of("n1", "i-1"), node_of("n4", "i-4"), node_of("n9", "i-9"))  # n9: in no group
    _, _, inventory = caps_for(UNLIMITED, general, nodes=nodes)
    count, cpu, memory = cluster_totals(inventory)
    # 3 nodes, i-2 with no node, and 2 more that desired 4 asks AWS for (only i-1 and i-2 are in it)
    assert count == 6
    assert cpu == 6 * 4000 and memory == 6 * 16 * GI


def test_the_lower_of_the_asg_max_and_the_explicit_max_binds_and_is_named() -> None:
    explicit = group("general", 2, instance("i-1"), instance("i-2"), max_size=3, asg_max=30, explicit=True)
    caps, _, inventory = caps_for(UNLIMITED, explicit, explicit=("1:3:general",))
    bound = caps.bound(inventory.groups[0])
    assert bound.highest == 3 and "nodeGroups.explicit '1:3:general'" in bound.what
    asg = group("general", 2, instance("i-1"), instance("i-2"), max_size=8, asg_max=5, explicit=True)
    caps, _, inventory = caps_for(UNLIMITED, asg, explicit=("1:8:general",))
    bound = caps.bound(inventory.groups[0])
    assert bound.highest == 5 and "the ASG's MaxSize 5" in bound.what


def test_a_group_whose_nodes_cannot_be_counted_is_not_raised_under_a_cores_max() -> None:
    blind = replace(group("general", 2, instance("i-1"), instance("i-2")), template_error="no such type")
    config = Config("prod", limits=LimitsConfig(cores_max=1000))
    inventory = build_inventory(ClusterState((), ()), (blind,))
    assert inventory.groups[0].template is None
    bound = Caps.of(config, inventory).bound(inventory.groups[0])
    assert bound.highest == 2 and "limits.cores" in bound.what and "no such type" in bound.what
    # without a cores or memory max, only the node count matters
    config = Config("prod", limits=LimitsConfig(max_nodes_total=5, cores_max=0, memory_max_gb=0))
    bound = Caps.of(config, inventory).bound(inventory.groups[0])
    assert bound.highest == 5 and "limits.maxNodesTotal 5" in bound.what  # 2 machines counted, 3 more


def test_raises_in_one_run_share_what_limits_leave() -> None:
    a = group("a", 1, instance("i-a"))
    b = group("b", 1, instance("i-b"))
    caps, _, inventory = caps_for(LimitsConfig(max_nodes_total=4, cores_max=0, memory_max_gb=0), a, b)
    first, second = inventory.groups
    assert caps.bound(first).highest == 3
    caps.book(first, 2)
    assert caps.bound(second).highest == 1 and "limits.maxNodesTotal" in caps.bound(second).what


def test_cores_count_by_capacity_and_name_the_limit() -> None:
    general = group("general", 1, instance("i-1"))
    caps, _, inventory = caps_for(LimitsConfig(cores_max=10), general, nodes=(node_of("n1", "i-1"),))
    bound = caps.bound(inventory.groups[0])
    assert bound.highest == 2  # 4 cores used, room for one more 4-core node under 10
    assert "limits.cores '0:10'" in bound.what and "4 cores each" in bound.what


def test_status_previews_what_apply_would_refuse() -> None:
    general = group("general", 2, instance("i-1"), instance("i-2"), max_size=3, asg_max=30, explicit=True)
    _, config, inventory = caps_for(UNLIMITED, general, explicit=("1:3:general",))
    found = beyond_bounds(config, inventory, {"general": CommittedGroup(20, ())})
    assert "raises it to 3 at most" in found["general"]
    assert beyond_bounds(config, inventory, {"general": CommittedGroup(3, ())}) == {}
    above = group(
        "general", 5, *(instance(f"i-{n}") for n in range(5)), max_size=3, asg_max=30, explicit=True
    )
    _, config, inventory = caps_for(UNLIMITED, above, explicit=("1:3:general",))
    found = beyond_bounds(config, inventory, {"general": CommittedGroup(20, ())})
    assert "refuses to raise it (and never lowers its 5)" in found["general"]


def test_a_mixed_group_counts_the_largest_override_and_an_undescribed_one_blinds_it() -> None:
    big = Resources.of(cpu=16000, memory=64 * GI)
    mixed = replace(
        group("mixed", 0),
        instance_types=("m5.xlarge", "m5.4xlarge"),
        type_capacity={"m5.xlarge": Resources.of(cpu=4000, memory=16 * GI), "m5.4xlarge": big},
    )
    caps, _, inventory = caps_for(LimitsConfig(cores_max=40), mixed)
    bound = caps.bound(inventory.groups[0])
    assert bound.highest == 2, bound  # 40 cores hold two m5.4xlarge, not ten m5.xlarge (the template)
    assert "of up to 16 cores each (the largest AWS may launch of m5.xlarge, m5.4xlarge)" in bound.what
    caps.book(inventory.groups[0], 1)
    assert caps.left.cpu_milli == 24000
    # an override EC2 did not describe may be any size: not raised under a cores max
    blind = replace(mixed, type_capacity={"m5.xlarge": Resources.of(cpu=4000, memory=16 * GI)})
    caps, _, inventory = caps_for(LimitsConfig(cores_max=40), blind)
    bound = caps.bound(inventory.groups[0])
    assert bound.highest == 0 and "m5.4xlarge, an instance type apply cannot describe" in bound.what


def test_weighted_desired_counts_units_filled_by_instances_and_the_worst_launch() -> None:
    # weights 2 and 4; 3 in-service t3.small-like instances of weight 2 fill 6 of desired 8 units
    weighted = replace(
        group("w", 8, *(Instance(f"i-{n}", "InService", "us-east-1a", "small", None) for n in range(3))),
        instance_types=("small", "big"),
        instance_weights={"small": 2, "big": 4},
        type_capacity={
            "small": Resources.of(cpu=2000, memory=8 * GI),
            "big": Resources.of(cpu=4000, memory=16 * GI),
        },
    )
    _, _, inventory = caps_for(UNLIMITED, weighted)
    count, cpu, _ = cluster_totals(inventory)
    # three instances with no node, and 2 units more: at most one machine of at most 4 cores
    assert count == 4
    assert cpu == 3 * 2000 + 4000


def test_machines_of_a_group_that_cannot_be_counted_blind_every_raise_under_that_limit() -> None:
    # `blind` has no template and 6 machines asked of AWS that no node stands for yet: their cores
    # are unknown, so `general` cannot be raised under a cores max either
    blind = replace(group("blind", 6), template_error="attribute-based instance requirements")
    general = group("general", 1, instance("i-1"))
    config = Config("prod", limits=LimitsConfig(cores_max=40))
    inventory = build_inventory(ClusterState((node_of("n1", "i-1"),), ()), (blind, general))
    inventory = replace(
        inventory,
        groups=tuple(g if g.name == "blind" else replace(g, template=template()) for g in inventory.groups),
    )
    bound = Caps.of(config, inventory).bound(inventory.group("general"))
    assert bound.highest == 1, bound
    assert "limits.cores" in bound.what and "blind" in bound.what, bound.what
    # under a node count alone, they count as machines
    config = Config("prod", limits=LimitsConfig(max_nodes_total=10, cores_max=0, memory_max_gb=0))
    bound = Caps.of(config, inventory).bound(inventory.group("general"))
    assert bound.highest == 4, bound  # 1 node + 6 machines: 3 more
