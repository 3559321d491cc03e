"""Launches that fail: an ASG's scaling activities, read where its desired is above its instances, and
the reason AWS gives for a launch it could not make, classified as cluster-autoscaler classifies it.

AWS does not refuse a raise of DesiredCapacity it cannot fill: it accepts it, tries to launch, and
records each attempt as a scaling activity (`Launching a new EC2 instance. Status Reason: ...`,
StatusCode `Failed` or `Cancelled`), then tries again later, while desired stays raised. The only
place the reason is written is that activity's StatusMessage, in one of two shapes:

- `Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available
  that matches your request. Launching EC2 instance failed.` (groups launching through EC2 Fleet:
  mixed instances, spot), the EC2 error code named;
- `We currently do not have sufficient m5.large capacity in the Availability Zone you requested
  (us-east-1a). ... Launching EC2 instance failed.` (RunInstances' own message, no code), recognised
  by its wording.

Error classes follow cluster-autoscaler: `OutOfResources` where the cloud has no room for the
instance (capacity, spot price or count, vCPU and instance quotas), `Other` for the rest (a missing
AMI, launch template, key pair or security group, an unsupported configuration, no free address in
the subnet: CA's GCE provider counts IP_SPACE_EXHAUSTED as Other too). CA's AWS provider has one code
for all of them (`placeholder-cannot-be-fulfilled`); the class only changes what is reported, since
every failed launch backs its group off.

Calls: one DescribeScalingActivities per such group, one page of the newest 100 (older failures
can only lengthen a backoff that is already at scaleUp.maxBackoff). Nothing is asked for a group
whose instances fill its desired: that is every group, in steady state (docs/aws-calls.md). A role
without autoscaling:DescribeScalingActivities (one not updated yet) is not a failed plan: each such
group carries a warning naming the fix, and its unfilled desired counts as on its way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from reconciler.aws.clients import error_code
from reconciler.domain.model import OTHER_ERROR, OUT_OF_RESOURCES, LaunchActivity

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient

ACTIVITIES_PER_CALL = 100  # DescribeScalingActivities' MaxRecords ceiling
DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
LAUNCH_PREFIX = "Launching a new EC2 instance"

# EC2 error codes AWS names in a failed launch, by class. Codes are EC2's (RunInstances, CreateFleet).
OUT_OF_RESOURCES_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "SpotMaxPriceTooLow",
        "MaxSpotInstanceCountExceeded",
        "MaxSpotFleetRequestCountExceeded",
        "VcpuLimitExceeded",
        "InstanceLimitExceeded",
        "ReservationCapacityExceeded",
    }
)

# RunInstances' own messages, which name no code: (pattern, code, class). First match wins.
_WORDED: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), code, error_class)
    for pattern, code, error_class in (
        (r"do not have sufficient .*capacity", "InsufficientInstanceCapacity", OUT_OF_RESOURCES),
        (r"no spot capacity available", "InsufficientInstanceCapacity", OUT_OF_RESOURCES),
        (r"insufficient capacity", "InsufficientInstanceCapacity", OUT_OF_RESOURCES),
        (r"spot request price of .* is lower than", "SpotMaxPriceTooLow", OUT_OF_RESOURCES),
        (r"max spot instance count exceeded", "MaxSpotInstanceCountExceeded", OUT_OF_RESOURCES),
        (r"more vcpu capacity than your current vcpu limit", "VcpuLimitExceeded", OUT_OF_RESOURCES),
        (
            r"more instances \(\d+\) than your current instance limit",
            "InstanceLimitExceeded",
            OUT_OF_RESOURCES,
        ),
        (
            r"image id .* does not exist|ami .* (?:does not exist|is not valid)",
            "InvalidAMIID.NotFound",
            OTHER_ERROR,
        ),
        (r"launch template.* (?:does not exist|not found)", "InvalidLaunchTemplateId.NotFound", OTHER_ERROR),
        (r"not authorized to use launch template", "UnauthorizedOperation", OTHER_ERROR),
        (r"key pair .* does not exist", "InvalidKeyPair.NotFound", OTHER_ERROR),
        (r"security group .* does not exist", "InvalidGroup.NotFound", OTHER_ERROR),
        (r"not enough free addresses in subnet", "InsufficientFreeAddressesInSubnet", OTHER_ERROR),
        (r"not supported in your requested availability zone", "Unsupported", OTHER_ERROR),
        (r"requested configuration is currently not supported", "Unsupported", OTHER_ERROR),
        (r"client\.internalerror", "Client.InternalError", OTHER_ERROR),
        (r"lifecycle action .* abandon", "LifecycleActionAbandoned", OTHER_ERROR),
    )
)
_NAMED = re.compile(r"Could not launch (?:Spot|On-Demand) Instances\.\s+([A-Za-z][A-Za-z0-9.]*)\s+-\s+")


def classify(message: str) -> tuple[str, str]:
    """(code, error class) of a failed launch's status message; ("", Other) when it is not recognised."""
    named = _NAMED.search(message)
    if named is not None:
        code = named.group(1)
        return code, OUT_OF_RESOURCES if code in OUT_OF_RESOURCES_CODES else OTHER_ERROR
    for pattern, code, error_class in _WORDED:
        if pattern.search(message):
            return code, error_class
    return "", OTHER_ERROR


def launch_activity(activity: Mapping[str, Any], read_at: datetime | None = None) -> LaunchActivity | None:
    """A launch attempt from one DescribeScalingActivities entry; None for other activities
    (terminations, capacity rebalancing, warm pools). An entry without StartTime (AWS always sends
    one; an emulator may not) takes its EndTime, else `read_at`: it is not dropped."""
    description = str(activity.get("Description", ""))
    if not description.startswith(LAUNCH_PREFIX):
        return None
    status = str(activity.get("StatusCode", ""))
    start = activity.get("StartTime") or activity.get("EndTime") or read_at
    if not isinstance(start, datetime):
        return None
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    message = " ".join(str(activity.get("StatusMessage") or "").split())
    if not message and "Status Reason:" in description:
        message = " ".join(description.split("Status Reason:", 1)[1].split())
    found = LaunchActivity(str(activity.get("ActivityId", "")), start, status, message)
    if not found.failed:
        return found
    code, error_class = classify(message)
    return LaunchActivity(found.activity_id, start, status, message, code, error_class)


def launch_activities(
    activities: Iterable[Mapping[str, Any]], read_at: datetime | None = None
) -> tuple[LaunchActivity, ...]:
    """The launch attempts among `activities`, newest first."""
    found = [a for a in (launch_activity(item, read_at) for item in activities) if a is not None]
    return tuple(sorted(found, key=lambda a: a.start, reverse=True))


class Denied(Exception):
    """The role may not call DescribeScalingActivities."""


def fetch_launches(autoscaling: AutoScalingClient, group: str) -> tuple[LaunchActivity, ...]:
    """The newest page of one group's scaling activities, as launch attempts (one request); Denied
    when the role lacks the permission (other failures are the caller's to report)."""
    try:
        reply = autoscaling.describe_scaling_activities(
            AutoScalingGroupName=group, MaxRecords=ACTIVITIES_PER_CALL
        )
    except ClientError as exc:
        if error_code(exc) in DENIED:
            raise Denied(group) from None
        raise
    return launch_activities(reply.get("Activities", []), datetime.now(UTC))


def denied_warning(group: str) -> str:
    return (
        f"asg {group}: desired is above its instances and its scaling activities could not be read "
        "(autoscaling:DescribeScalingActivities denied): a launch AWS could not make is not recognised, "
        "and the missing instances count as on their way; grant it to the role (examples/iam/)"
    )
