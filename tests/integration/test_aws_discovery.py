"""Discovery against a moto server over HTTP: tag AND semantics, paging, explicit specs."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.aws.clients import aws_clients
from reconciler.aws.discovery import discover_node_groups
from reconciler.domain.errors import UserError
from tests.support.aws import MotoAws

ENABLED = "k8s.io/cluster-autoscaler/enabled"
OWNED = "k8s.io/cluster-autoscaler/prod"


def record_calls(client: Any, operation: str) -> list[dict[str, Any]]:
    """The parameters of every `operation` call the client makes (pages included)."""
    calls: list[dict[str, Any]] = []

    def remember(params: dict[str, Any], **_: Any) -> None:
        calls.append(dict(params))

    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(f"provide-client-params.{service}.{operation}", remember)
    return calls


def names(groups: Any) -> list[str]:
    return [g.name for g in groups]


def test_every_tag_must_match(aws: MotoAws) -> None:
    aws.asg("both", tags={ENABLED: "true", OWNED: "owned", "team": "ml"})
    aws.asg("enabled-only", tags={ENABLED: "true"})
    aws.asg("owned-only", tags={OWNED: "owned"})
    aws.asg("other-team", tags={ENABLED: "true", OWNED: "owned", "team": "web"})
    autoscaling, ec2 = aws_clients(aws.config())
    config = aws.config([f"asg:tag={ENABLED},{OWNED},team=ml"])
    assert names(discover_node_groups(config, autoscaling, ec2)) == ["both"]
    keys_only = aws.config([f"asg:tag={ENABLED},{OWNED}"])
    assert names(discover_node_groups(keys_only, autoscaling, ec2)) == ["both", "other-team"]


def test_a_group_matched_by_several_specs_appears_once(aws: MotoAws) -> None:
    aws.asg("a", tags={ENABLED: "true", "team": "ml"})
    aws.asg("b", tags={ENABLED: "true"})
    autoscaling, ec2 = aws_clients(aws.config())
    config = aws.config([f"asg:tag={ENABLED}", "asg:tag=team=ml"], explicit=["0:3:a"])
    groups = discover_node_groups(config, autoscaling, ec2)
    assert names(groups) == ["a", "b"]
    assert [g.explicit for g in groups] == [True, False]
    assert (groups[0].min_size, groups[0].max_size) == (0, 3)


def test_auto_discovery_pages_through_250_groups(aws: MotoAws) -> None:
    for i in range(250):
        aws.asg(f"ng-{i:03d}", tags={ENABLED: "true"})
    aws.asg("unrelated", tags={"team": "web"})
    autoscaling, ec2 = aws_clients(aws.config())
    calls = record_calls(autoscaling, "DescribeAutoScalingGroups")
    groups = discover_node_groups(aws.config([f"asg:tag={ENABLED}"]), autoscaling, ec2)
    assert names(groups) == [f"ng-{i:03d}" for i in range(250)]
    assert len(calls) == 3  # one spec, three pages of at most 100
    assert all(call["MaxRecords"] == 100 for call in calls)
    assert all(call["Filters"] == [{"Name": "tag-key", "Values": [ENABLED]}] for call in calls)
    assert "NextToken" not in calls[0]
    assert calls[1]["NextToken"] and calls[2]["NextToken"] and calls[1]["NextToken"] != calls[2]["NextToken"]


def test_explicit_names_are_described_in_batches_of_100(aws: MotoAws) -> None:
    for i in range(150):
        aws.asg(f"ng-{i:03d}")
    autoscaling, ec2 = aws_clients(aws.config())
    calls = record_calls(autoscaling, "DescribeAutoScalingGroups")
    config = aws.config(explicit=[f"0:5:ng-{i:03d}" for i in range(150)])
    groups = discover_node_groups(config, autoscaling, ec2)
    assert len(groups) == 150 and all(g.explicit for g in groups)
    assert [len(call["AutoScalingGroupNames"]) for call in calls] == [100, 50]
    assert all(call["MaxRecords"] == 100 for call in calls)


def test_an_unknown_explicit_group_is_a_user_error(aws: MotoAws) -> None:
    aws.asg("real")
    autoscaling, ec2 = aws_clients(aws.config())
    config = aws.config(explicit=["0:3:real", "0:3:typo-asg"])
    with pytest.raises(UserError) as caught:
        discover_node_groups(config, autoscaling, ec2)
    message = str(caught.value)
    assert "nodeGroups.explicit" in message and "'typo-asg'" in message and "'real'" not in message
    assert caught.value.exit_code == 2


def test_explicit_bounds_outside_the_asg_are_kept_with_a_warning(aws: MotoAws) -> None:
    aws.asg("g", min_size=1, max_size=4, desired=1)
    autoscaling, ec2 = aws_clients(aws.config())
    (group,) = discover_node_groups(aws.config(explicit=["0:10:g"]), autoscaling, ec2)
    assert (group.min_size, group.max_size, group.asg_min_size, group.asg_max_size) == (0, 10, 1, 4)
    assert any("max 10 is above the ASG's MaxSize 4" in w for w in group.warnings)
    assert any("min 0 is below the ASG's MinSize 1" in w for w in group.warnings)


def test_discovered_groups_take_their_bounds_from_the_asg(aws: MotoAws) -> None:
    aws.asg("g", min_size=2, max_size=7, desired=2, tags={ENABLED: "true"})
    autoscaling, ec2 = aws_clients(aws.config())
    (group,) = discover_node_groups(aws.config([f"asg:tag={ENABLED}"]), autoscaling, ec2)
    assert (group.min_size, group.max_size, group.desired) == (2, 7, 2)
    assert group.warnings == ()


def test_nothing_configured_describes_nothing(aws: MotoAws) -> None:
    aws.asg("g", tags={ENABLED: "true"})
    autoscaling, ec2 = aws_clients(aws.config())
    calls = record_calls(autoscaling, "DescribeAutoScalingGroups")
    assert discover_node_groups(aws.config(), autoscaling, ec2) == ()
    assert calls == []


def test_instances_policies_and_suspended_processes(aws: MotoAws) -> None:
    aws.asg("g", min_size=0, max_size=5, desired=2, tags={ENABLED: "true"}, zones=["us-east-1a"])
    aws.asg("quiet", tags={ENABLED: "true"})
    aws.autoscaling.put_scaling_policy(
        AutoScalingGroupName="g",
        PolicyName="cpu",
        PolicyType="SimpleScaling",
        ScalingAdjustment=1,
        AdjustmentType="ChangeInCapacity",
    )
    aws.autoscaling.suspend_processes(AutoScalingGroupName="g", ScalingProcesses=["AZRebalance"])
    autoscaling, ec2 = aws_clients(aws.config())
    group, quiet = discover_node_groups(aws.config([f"asg:tag={ENABLED}"]), autoscaling, ec2)
    assert group.has_scaling_policies and not quiet.has_scaling_policies
    assert group.suspended_processes == ("AZRebalance",)
    assert group.has_instance_refresh is False  # moto does not implement DescribeInstanceRefreshes
    assert len(group.instances) == 2
    for instance in group.instances:
        assert instance.instance_id.startswith("i-")
        assert instance.zone == "us-east-1a"
        assert instance.instance_type == "t3.small"
        assert instance.lifecycle_state == "InService"
        assert instance.launch_time is not None


def test_a_group_whose_name_the_manifest_cannot_carry_is_left_out_with_a_warning(
    aws: MotoAws, caplog: pytest.LogCaptureFixture
) -> None:
    """AWS allows spaces in an ASG name; the manifest does not. The odd one is left out and said,
    every other group is planned as usual."""
    aws.asg("general", tags={ENABLED: "true"})
    aws.asg("my batch pool", tags={ENABLED: "true"})
    autoscaling, ec2 = aws_clients(aws.config())
    config = aws.config([f"asg:tag={ENABLED}"])
    with caplog.at_level("WARNING"):
        assert names(discover_node_groups(config, autoscaling, ec2)) == ["general"]
    assert any("'my batch pool' left out" in r.getMessage() for r in caplog.records)


def test_an_explicit_group_whose_name_the_manifest_cannot_carry_is_a_user_error(aws: MotoAws) -> None:
    aws.asg("my batch pool")
    autoscaling, ec2 = aws_clients(aws.config())
    config = aws.config(explicit=["0:3:my batch pool"])
    with pytest.raises(UserError, match="nodeGroups.explicit: the Auto Scaling group 'my batch pool'"):
        discover_node_groups(config, autoscaling, ec2)
