"""AWS as it is when it cannot launch: moto's own backend, told that a group's launches fail.

moto fills every raise of desired at once and answers DescribeScalingActivities with nothing. Real
AWS accepts the raise, launches nothing, keeps desired where it was set, and records each attempt
as a Failed scaling activity whose StatusMessage says why (`Launching a new EC2 instance. Status
Reason: We currently do not have sufficient m5.large capacity ...`). This world makes the test
process's moto server (ThreadedMotoServer runs in-process, on moto's shared backends) do exactly
that for the groups told to fail, and serve the activities it recorded — for every group, launches
that worked included — through the real DescribeScalingActivities request, so the code under test
parses what AWS's wire format carries. `recover` is capacity coming back: AWS's next attempt
launches what desired still asks for, late, and records it as Successful.

A decrease below the instance count stays moto's own (it terminates instances it picks, as AWS
does), so a test can see that nothing ever asks for one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from moto.autoscaling.models import autoscaling_backends
from moto.autoscaling.responses import AutoScalingResponse
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult

from tests.support.aws import REGION

FAILED = " Launching EC2 instance failed."
INSUFFICIENT_CAPACITY = (
    "We currently do not have sufficient {type} capacity in the Availability Zone you requested ({zone}). "
    "Our system will be working on provisioning additional capacity. You can currently get {type} "
    "capacity by not specifying an Availability Zone in your request or choosing us-east-1b, us-east-1c."
    + FAILED
)
SPOT_CAPACITY = (
    "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available "
    "that matches your request." + FAILED
)
VCPU_LIMIT = (
    "Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU capacity than "
    "your current vCPU limit of 32 allows for the instance bucket that the specified instance type belongs "
    "to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."
    + FAILED
)


@dataclass
class FailingLaunches:
    """Groups whose launches fail, and every launch attempt recorded, newest last."""

    activities: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)  # DescribeScalingActivities calls, by group
    _ids: Iterator[int] = field(default_factory=itertools.count)

    def fail(self, group: str, message: str = "") -> None:
        """From now on AWS cannot launch for `group`: a raise of its desired launches nothing and
        records a Failed activity per missing instance, with `message` (default: no m5.large
        capacity in the group's first zone)."""
        asg = _group(group)
        self.messages[group] = message or INSUFFICIENT_CAPACITY.format(
            type=asg.instance_type or "m5.large", zone=asg.availability_zones[0]
        )

        def cannot_launch(count_needed: int, propagated_tags: dict[str, str]) -> None:
            for _ in range(count_needed):
                self.attempt(group)

        asg.replace_autoscaling_group_instances = cannot_launch  # this group's launches only

    def attempt(self, group: str) -> None:
        """AWS tries again on its own (it does while desired is above the instances): one more
        Failed activity."""
        asg = _group(group)
        before = len(asg.active_instances())
        reason = self.messages[group]
        self._record(
            group,
            "Failed",
            f"Launching a new EC2 instance.  Status Reason: {reason}",
            f"an instance was started in response to a difference between desired and actual capacity, "
            f"increasing the capacity from {before} to {before + 1}.",
            reason,
        )

    def recover(self, group: str) -> list[str]:
        """Capacity is back: AWS's next attempt launches what desired still asks for (late, the pods
        may be long gone elsewhere) and records it as Successful; returns the new instance ids."""
        asg = _group(group)
        del asg.replace_autoscaling_group_instances  # moto's own launching again
        self.messages.pop(group, None)
        known = {state.instance.id for state in asg.instance_states}
        asg.set_desired_capacity(asg.desired_capacity)
        new = [s.instance.id for s in asg.instance_states if s.instance.id not in known]
        for instance_id in new:
            self._record(
                group,
                "Successful",
                f"Launching a new EC2 instance: {instance_id}",
                "an instance was started in response to a difference between desired and actual capacity.",
                "",
            )
        return new

    def _record(self, group: str, status: str, description: str, cause: str, message: str) -> None:
        now = datetime.now(UTC)
        activity: dict[str, Any] = {
            "ActivityId": f"a{next(self._ids):04d}-launch-{group}",
            "AutoScalingGroupName": group,
            "Description": description,
            "Cause": f"At {now:%Y-%m-%dT%H:%M:%SZ} {cause}",
            "StartTime": now,
            "EndTime": now,
            "StatusCode": status,
            "Progress": 100,
            "Details": '{"Subnet ID":"subnet-0a1","Availability Zone":"us-east-1a"}',
        }
        if message:
            activity["StatusMessage"] = message
        self.activities.setdefault(group, []).append(activity)

    def serve(self, response: AutoScalingResponse) -> ActionResult:
        """moto's DescribeScalingActivities, answered as AWS would: newest first, MaxRecords honoured."""
        group = response._get_param("AutoScalingGroupName") or ""
        self.asked.append(group)
        limit = int(response._get_param("MaxRecords") or 100)
        found = sorted(self.activities.get(group, []), key=lambda a: a["StartTime"], reverse=True)
        return ActionResult({"Activities": found[:limit]})


def _group(name: str) -> Any:
    return autoscaling_backends[DEFAULT_ACCOUNT_ID][REGION].autoscaling_groups[name]


@pytest.fixture
def failing_launches(monkeypatch: pytest.MonkeyPatch) -> FailingLaunches:
    """Use with the `aws` fixture (moto reset, boto3 pointed at it); groups launch as usual until told
    to fail."""
    world = FailingLaunches()

    def describe_scaling_activities(response: AutoScalingResponse) -> ActionResult:
        return world.serve(response)

    monkeypatch.setattr(AutoScalingResponse, "describe_scaling_activities", describe_scaling_activities)
    return world
