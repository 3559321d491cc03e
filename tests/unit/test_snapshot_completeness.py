"""A snapshot that lacks Node objects or Pods is refused before anything is decided from it; an empty
cluster that AWS agrees is empty is not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.domain.errors import UserError
from reconciler.domain.model import ClusterState, Instance, Node, NodeGroup
from reconciler.domain.snapshot_completeness import COMPLETE_DUMP, require_complete
from tests.support.planning_factories import node, pod

SOURCE = "dump/cluster.json"


def group(name: str, *states: str) -> NodeGroup:
    instances = tuple(
        Instance(f"i-{name}-{n}", state, "us-east-1a", "m5.large", None) for n, state in enumerate(states)
    )
    return NodeGroup(name, 0, 10, len(states), instances, ("us-east-1a",), {})


def refusal(state: ClusterState, groups: list[NodeGroup]) -> str:
    with pytest.raises(UserError) as info:
        require_complete(state, groups, SOURCE)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{SOURCE}: ")
    assert message.endswith(COMPLETE_DUMP)
    assert info.value.exit_code == 2
    return message


def node_of(name: str, instance_id: str) -> Node:
    return replace(node(name), provider_id=f"aws:///us-east-1a/{instance_id}")


PODS_ONLY = ClusterState(nodes=(), pods=(pod("web-0"), pod("web-1", node_name="n1")))
NODES_ONLY = ClusterState(nodes=(node_of("n1", "i-general-0"), node_of("n2", "i-general-1")), pods=())
EMPTY = ClusterState(nodes=(), pods=())
COMPLETE = ClusterState(nodes=(node_of("n1", "i-general-0"),), pods=(pod("web-0", node_name="n1"),))


def test_pods_only_dump_with_in_service_instances_is_refused() -> None:
    message = refusal(PODS_ONLY, [group("general", "InService", "InService", "Pending"), group("spot")])
    assert "no Node objects" in message
    assert "2 InService instance(s) (general: 2)" in message


def test_nodes_only_dump_is_refused() -> None:
    message = refusal(NODES_ONLY, [group("general", "InService", "InService")])
    assert "no Pods, but 2 Node object(s)" in message


def test_nodes_only_dump_is_refused_even_without_groups() -> None:
    """Nodes with nothing on them look idle to scale-down whatever the groups are."""
    assert "no Pods" in refusal(NODES_ONLY, [])


def test_empty_cluster_with_no_in_service_instances_is_fine() -> None:
    require_complete(EMPTY, [group("general"), group("spot", "Terminating")], SOURCE)
    require_complete(EMPTY, [], SOURCE)


def test_empty_cluster_while_aws_has_in_service_instances_is_refused() -> None:
    message = refusal(EMPTY, [group("general"), group("spot", "InService")])
    assert "no Node objects, but AWS has 1 InService instance(s) (spot: 1)" in message


def test_complete_dump_is_fine() -> None:
    require_complete(COMPLETE, [group("general", "InService", "InService")], SOURCE)


def test_instances_not_yet_in_service_need_no_nodes() -> None:
    """A scale-up just launched: its instances have no node yet and that is what they should look like."""
    launching = [group("general", "Pending", "Pending:Wait"), group("spot", "Terminating:Wait", "Standby")]
    require_complete(PODS_ONLY, launching, SOURCE)
    require_complete(EMPTY, launching, SOURCE)


def test_many_groups_stay_on_one_short_line() -> None:
    groups = [group(f"g{n:03}", "InService") for n in range(200)]
    message = refusal(PODS_ONLY, groups)
    assert "200 InService instance(s) (g000: 1, g001: 1, g002: 1 and 197 more group(s))" in message
    assert len(message) < 300


def test_nodes_of_other_machines_only_are_refused() -> None:
    """Fargate nodes, nodes without a providerID or another cluster's (the wrong kubectl context):
    none stands for the groups' instances, which would all look unregistered."""
    others = ClusterState(
        nodes=(node_of("fargate-ip-10-0-0-1", "fargate-1"), replace(node("bare"), provider_id="")),
        pods=(pod("web-0", node_name="bare"),),
    )
    message = refusal(others, [group("general", "InService", "InService")])
    assert "2 Node object(s), none of them for the groups' instances" in message
