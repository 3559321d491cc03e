"""Reading launches that fail from a moto account whose launches of one group fail as AWS's do: the
activities asked only for groups whose desired is above their instances, parsed off the wire, and
reused in `run` only while the group looks the same."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from reconciler.aws.discovery import ClusterView
from reconciler.aws.reader import AwsReader
from reconciler.domain.model import OUT_OF_RESOURCES
from tests.support.aws import MotoAws, _Body, on_every_session, query_error
from tests.support.failing_launches import SPOT_CAPACITY, FailingLaunches

TAGS = {"k8s.io/cluster-autoscaler/enabled": "true"}
SPEC = "asg:tag=k8s.io/cluster-autoscaler/enabled"
ASKED = "AutoScaling.DescribeScalingActivities"


def test_a_raise_aws_cannot_launch_reads_as_a_failed_launch_with_its_reason(
    aws: MotoAws, failing_launches: FailingLaunches
) -> None:
    aws.asg("spot", desired=1, tags=TAGS)
    aws.asg("ondemand", desired=1, tags=TAGS)
    failing_launches.fail("spot", SPOT_CAPACITY)
    aws.autoscaling.set_desired_capacity(AutoScalingGroupName="spot", DesiredCapacity=3)
    config = aws.config([SPEC])
    reader = AwsReader(config)
    groups = {g.name: g for g in reader.node_groups(config, ClusterView())}
    spot, ondemand = groups["spot"], groups["ondemand"]
    assert (spot.desired, len(spot.instances), spot.unfilled) == (3, 1, 2)
    assert [(a.status, a.code, a.error_class) for a in spot.launches] == [
        ("Failed", "InsufficientInstanceCapacity", OUT_OF_RESOURCES)
    ] * 2
    assert spot.launches[0].message == SPOT_CAPACITY
    assert ondemand.unfilled == 0 and ondemand.launches == ()
    assert failing_launches.asked == ["spot"]  # only the group with desired above its instances
    assert reader.counter.snapshot()[ASKED] == 1


def test_run_reuses_the_answer_only_while_the_group_looks_the_same(
    aws: MotoAws, failing_launches: FailingLaunches
) -> None:
    aws.asg("spot", desired=0, tags=TAGS)
    failing_launches.fail("spot")
    aws.autoscaling.set_desired_capacity(AutoScalingGroupName="spot", DesiredCapacity=1)
    config = aws.config([SPEC])
    reader = AwsReader(config, reuse=True, clock=lambda: 100.0)
    reader.node_groups(config, ClusterView())
    reader.invalidate()  # the descriptions are read again; the activities too (dropped with them)
    reader.node_groups(config, ClusterView())
    assert failing_launches.asked == ["spot", "spot"]
    reader.node_groups(config, ClusterView())  # within aws.refreshInterval, nothing changed
    assert failing_launches.asked == ["spot", "spot"]
    (late,) = failing_launches.recover("spot")
    reader.invalidate()
    (spot,) = reader.node_groups(config, ClusterView())
    assert spot.unfilled == 0 and spot.launches == ()  # filled: nothing asked
    assert [i.instance_id for i in spot.instances] == [late]
    assert failing_launches.asked == ["spot", "spot"]


def test_a_role_without_the_permission_is_a_warning_not_a_failed_plan(
    aws: MotoAws, failing_launches: FailingLaunches, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan role not updated yet: AWS answers 403 AccessDenied. Each group with desired above its
    instances says so and how to fix it; the read is asked once, not once per group."""
    denied: list[str] = []

    def refuse(request: Any, **_: Any) -> Any:
        denied.append("DescribeScalingActivities")
        body = query_error(
            "AccessDenied",
            "User: arn:aws:sts::123456789012:assumed-role/plan/x is not authorized to perform: "
            "autoscaling:DescribeScalingActivities because no identity-based policy allows the "
            "autoscaling:DescribeScalingActivities action",
        )
        return AWSResponse(request.url, 403, {"Content-Type": "text/xml"}, _Body(body))

    on_every_session(monkeypatch, "before-send.auto-scaling.DescribeScalingActivities", refuse)
    for name in ("a", "b"):
        aws.asg(name, desired=0, tags=TAGS)
        failing_launches.fail(name)
        aws.autoscaling.set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=1)
    config = aws.config([SPEC])
    groups = AwsReader(config).node_groups(config, ClusterView())
    assert denied == ["DescribeScalingActivities"]
    for group in groups:
        assert group.launches == ()
        assert any("autoscaling:DescribeScalingActivities denied" in w for w in group.warnings), (
            group.warnings
        )
