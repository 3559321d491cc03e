"""Launches that fail (DESIGN §3.12): AWS's reason classified as cluster-autoscaler classifies it, the
unfilled desired not counted as upcoming, the group backed off on the failures' own times, the pods
sent to the next group, and desired never lowered."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import jsonschema
import pytest

from reconciler.aws.activities import classify, launch_activities
from reconciler.config.documents import load_schema
from reconciler.config.settings import ScaleUpConfig
from reconciler.domain.model import OTHER_ERROR, OUT_OF_RESOURCES, LaunchActivity
from reconciler.planning.launch_failures import launch_failure
from tests.support.plan_world import NOW, World, template

ICE = (
    "We currently do not have sufficient m5.large capacity in the Availability Zone you requested "
    "(us-east-1a). Our system will be working on provisioning additional capacity. You can currently get "
    "m5.large capacity by not specifying an Availability Zone in your request or choosing us-east-1b, "
    "us-east-1c. Launching EC2 instance failed."
)


@pytest.mark.parametrize(
    ("message", "code", "error_class"),
    [
        (ICE, "InsufficientInstanceCapacity", OUT_OF_RESOURCES),
        (
            "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity "
            "available that matches your request. Launching EC2 instance failed.",
            "InsufficientInstanceCapacity",
            OUT_OF_RESOURCES,
        ),
        (
            "Could not launch Spot Instances. SpotMaxPriceTooLow - Your Spot request price of 0.015 is "
            "lower than the minimum required Spot request fulfillment price of 0.0735. Launching EC2 "
            "instance failed.",
            "SpotMaxPriceTooLow",
            OUT_OF_RESOURCES,
        ),
        (
            "Your Spot request price of 0.015 is lower than the minimum required Spot request fulfillment "
            "price of 0.0735. Launching EC2 instance failed.",
            "SpotMaxPriceTooLow",
            OUT_OF_RESOURCES,
        ),
        (
            "Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU capacity "
            "than your current vCPU limit of 32 allows for the instance bucket that the specified instance "
            "type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an "
            "adjustment to this limit. Launching EC2 instance failed.",
            "VcpuLimitExceeded",
            OUT_OF_RESOURCES,
        ),
        (
            "You have requested more instances (1) than your current instance limit of 0 allows for the "
            "specified instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to request "
            "an adjustment to this limit. Launching EC2 instance failed.",
            "InstanceLimitExceeded",
            OUT_OF_RESOURCES,
        ),
        (
            "Max spot instance count exceeded. Launching EC2 instance failed.",
            "MaxSpotInstanceCountExceeded",
            OUT_OF_RESOURCES,
        ),
        (
            "The image id '[ami-4edb0327]' does not exist. Launching EC2 instance failed.",
            "InvalidAMIID.NotFound",
            OTHER_ERROR,
        ),
        (
            "Could not launch On-Demand Instances. InvalidLaunchTemplateId.NotFound - The specified launch "
            "template, with template ID lt-0123, does not exist. Launching EC2 instance failed.",
            "InvalidLaunchTemplateId.NotFound",
            OTHER_ERROR,
        ),
        (
            "The specified launch template, with template ID lt-0123, does not exist. Launching EC2 "
            "instance failed.",
            "InvalidLaunchTemplateId.NotFound",
            OTHER_ERROR,
        ),
        (
            "There are not enough free addresses in subnet 'subnet-0fulla' to satisfy the requested number "
            "of instances. Launching EC2 instance failed.",
            "InsufficientFreeAddressesInSubnet",
            OTHER_ERROR,
        ),
        (
            "Your requested instance type (m6i.metal) is not supported in your requested Availability Zone "
            "(us-east-1e). Please retry your request by not specifying an Availability Zone or choosing "
            "us-east-1a, us-east-1b. Launching EC2 instance failed.",
            "Unsupported",
            OTHER_ERROR,
        ),
        ("Something new AWS says. Launching EC2 instance failed.", "", OTHER_ERROR),
    ],
)
def test_aws_reasons_are_classified_as_cluster_autoscaler_classes_them(
    message: str, code: str, error_class: str
) -> None:
    assert classify(message) == (code, error_class)


def test_only_launch_activities_are_read_newest_first() -> None:
    base = datetime(2026, 6, 1, 11, 0, tzinfo=UTC)
    read = launch_activities(
        [
            {
                "ActivityId": "a1",
                "Description": "Launching a new EC2 instance: i-0abc",
                "StatusCode": "Successful",
                "StartTime": base,
            },
            {
                "ActivityId": "a3",
                "Description": "Terminating EC2 instance: i-0def",
                "StatusCode": "Successful",
                "StartTime": base + timedelta(minutes=9),
            },
            {
                "ActivityId": "a2",
                "Description": f"Launching a new EC2 instance.  Status Reason: {ICE}",
                "StatusCode": "Failed",
                "StatusMessage": ICE,
                "StartTime": base + timedelta(minutes=5),
            },
        ]
    )
    assert [(a.activity_id, a.status, a.code) for a in read] == [
        ("a2", "Failed", "InsufficientInstanceCapacity"),
        ("a1", "Successful", ""),
    ]


def failed(
    minutes_ago: float, code: str = "InsufficientInstanceCapacity", status: str = "Failed"
) -> LaunchActivity:
    return LaunchActivity(
        f"f-{minutes_ago}", NOW - timedelta(minutes=minutes_ago), status, ICE, code, OUT_OF_RESOURCES
    )


def succeeded(minutes_ago: float) -> LaunchActivity:
    return LaunchActivity(f"s-{minutes_ago}", NOW - timedelta(minutes=minutes_ago), "Successful")


def two_groups(*launches: LaunchActivity, desired: int = 3) -> World:
    """`spot` (m5.xlarge) has one node and desired `desired`, AWS having recorded `launches`;
    `ondemand` (m5.2xlarge, wasteful for the pods: least-waste picks spot first) is empty."""
    world = (
        World().group("spot", max_size=10).group("ondemand", tmpl=template("m5.2xlarge", cpu=8000, mem_gi=32))
    )
    world.node("spot", "s1").running("s1", "web", cpu=3900, mem_gi=4)
    world.groups["spot"] = replace(world.groups["spot"], desired=desired, launches=launches)
    for i in range(2):
        world.pending(f"job-{i}", cpu=3000, mem_gi=2)
    return world


def test_without_a_failure_desired_aws_is_still_launching_counts_as_upcoming() -> None:
    """CA's placeholders: desired without an instance yet is on its way, so the group is not raised
    again for the same pods (before this, the next plan stacked a second raise on the first)."""
    plan = two_groups().plan()
    assert {o.pod: o.reason for o in plan.pending} == {
        "default/job-0": "fits upcoming capacity",
        "default/job-1": "fits upcoming capacity",
    }
    assert plan.group("spot").upcoming == 2
    assert plan.group("spot").action == plan.group("ondemand").action == "none"


def test_a_failed_launch_backs_the_group_off_and_sends_the_pods_to_the_next_group() -> None:
    plan = two_groups(failed(1), succeeded(60)).plan()
    spot, ondemand = plan.group("spot"), plan.group("ondemand")
    # desired stays as AWS has it: never lowered (a decrease would let AWS choose whom to terminate)
    assert (spot.current, spot.desired, spot.action, spot.upcoming) == (3, 3, "none", 0)
    assert spot.backoff_until == NOW + timedelta(minutes=4)
    assert spot.launch_failure is not None and spot.launch_failure.unfilled == 2
    assert any(
        "AWS could not launch 2 of desired 3: InsufficientInstanceCapacity (OutOfResources)" in r
        for r in spot.reasons
    )
    assert (ondemand.action, ondemand.desired) == ("scale-up", 1)
    assert ondemand.reasons[0] == (
        "2 pending pod(s) need 1 × m5.2xlarge (backed off, AWS could not launch: spot "
        "InsufficientInstanceCapacity (OutOfResources))"
    )
    assert {o.node_group for o in plan.pending} == {"ondemand"}
    document = plan.to_dict()
    jsonschema.validate(document, load_schema("plan"))
    spot_json = next(g for g in document["nodeGroups"] if g["name"] == "spot")
    assert spot_json["launchFailure"]["code"] == "InsufficientInstanceCapacity"
    assert spot_json["launchFailure"]["errorClass"] == "OutOfResources"
    assert spot_json["launchFailure"]["unfilled"] == 2
    assert spot_json["backoffUntil"] == (NOW + timedelta(minutes=4)).isoformat()


def test_a_backed_off_group_is_never_raised_even_when_it_alone_fits() -> None:
    world = two_groups(failed(2))
    world.pending("big", cpu=3900, mem_gi=50)  # fits neither template: nothing else can take it
    world.groups["ondemand"] = replace(world.groups["ondemand"], max_size=0)
    plan = world.plan()
    assert plan.group("spot").desired == 3 and plan.group("spot").action == "none"
    reasons = {o.pod: o.reason for o in plan.pending}
    assert "spot backed off until 12:03: AWS could not launch 2 instance(s)" in reasons["default/job-0"]


def test_once_the_backoff_ends_the_unfilled_desired_counts_again() -> None:
    plan = two_groups(failed(6)).plan()
    spot = plan.group("spot")
    assert spot.upcoming == 2 and spot.backoff_until is None
    assert spot.launch_failure is not None  # still reported: AWS's last word is a failure
    assert any("backoff ended at 11:59" in r for r in spot.reasons)
    assert plan.group("ondemand").action == "none"


def test_a_late_launch_ends_the_failure() -> None:
    assert launch_failure(two_groups(succeeded(1), failed(3)).groups["spot"], ScaleUpConfig(), NOW) is None


def test_a_filled_group_has_no_failure_whatever_its_history() -> None:
    world = two_groups(failed(1), desired=1)
    assert launch_failure(world.groups["spot"], ScaleUpConfig(), NOW) is None


def test_the_backoff_follows_cluster_autoscalers_schedule_from_the_failures_alone() -> None:
    """5m, doubling for a failure after the backoff ended, kept for AWS's retries during it, capped at
    30m, and starting over after 3h without a failure."""
    settings = ScaleUpConfig()

    def until(*minutes_ago: float) -> timedelta:
        group = two_groups(*(failed(m) for m in sorted(minutes_ago))).groups["spot"]
        found = launch_failure(group, settings, NOW)
        assert found is not None
        return found.until - NOW

    assert until(0) == timedelta(minutes=5)
    assert until(3, 0) == timedelta(minutes=5)  # a retry while backed off: same duration, from it
    assert until(10, 0) == timedelta(minutes=10)  # after the first backoff ended: doubled
    assert until(60, 50, 35, 10, 0) == timedelta(minutes=30)  # 5, 10, 20, 40 -> capped at 30
    assert until(300, 0) == timedelta(minutes=5)  # more than 3h apart: starts over
    found = launch_failure(two_groups(failed(1), failed(2), failed(300)).groups["spot"], settings, NOW)
    assert found is not None and (found.failures, found.since) == (2, NOW - timedelta(minutes=2))


def test_min_size_is_judged_on_instances_that_exist_not_on_desired_aws_could_not_launch() -> None:
    world = World().group("spot", min_size=2, max_size=10)
    world.node("spot", "s1").node("spot", "s2")  # two empty nodes: scale-down candidates
    world.groups["spot"] = replace(world.groups["spot"], desired=3, launches=(failed(1),))
    plan = world.plan(scale_down={"unneeded_time": timedelta(0)})
    spot = plan.group("spot")
    assert spot.removals == () and spot.desired == 3


def test_a_failure_older_than_the_reset_timeout_is_history() -> None:
    """A raise AWS has not tried yet, in a group that failed hours ago: on its way, nothing reported."""
    plan = two_groups(failed(200)).plan()
    spot = plan.group("spot")
    assert spot.launch_failure is None and spot.upcoming == 2


def test_a_weighted_group_counts_its_instances_as_aws_counts_desired() -> None:
    """Mixed instances with WeightedCapacity: desired is in capacity units, and so is what is unfilled."""
    world = two_groups(failed(1), desired=4)
    world.groups["spot"] = replace(world.groups["spot"], instance_weights={"m5.xlarge": 4})
    assert world.groups["spot"].unfilled == 0
    assert launch_failure(world.groups["spot"], ScaleUpConfig(), NOW) is None


def test_with_launch_suspended_the_desired_aws_lacks_is_not_on_its_way() -> None:
    world = two_groups()
    world.groups["spot"] = replace(world.groups["spot"], suspended_processes=("Launch",))
    plan = world.plan()
    assert plan.group("spot").upcoming == 0 and plan.group("spot").action == "none"
    assert plan.group("ondemand").action == "scale-up"
