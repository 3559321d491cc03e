"""The only AWS calls that change anything, and only the two shapes DESIGN §3.2 allows.

An increase is SetDesiredCapacity to a larger number. A decrease is never a number: it is
TerminateInstanceInAutoScalingGroup of one named instance with ShouldDecrementDesiredCapacity, so
AWS never picks which node dies. Each call re-reads the group first, so a decision made a minute
ago cannot act on a group that moved since. Throttling retries are botocore's (aws/clients.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.aws.clients import aws_errors
from reconciler.aws.errors import AwsError, AwsUncertainError
from reconciler.domain.errors import OperationError, RefusedError

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_ec2 import EC2Client

IN_SERVICE = "InService"


@dataclass(frozen=True)
class GroupNow:
    """A group as AWS reports it at this moment."""

    name: str
    desired: int
    min_size: int
    max_size: int
    instances: dict[str, str]  # instance id -> lifecycle state


class Actuator:
    def __init__(self, autoscaling: AutoScalingClient, ec2: EC2Client | None = None) -> None:
        self.autoscaling = autoscaling
        self.ec2 = ec2

    def going_away(self, instance_id: str) -> bool:
        """Whether the instance is terminating, shut down or gone, asked of AWS now (its node must
        keep our taint). When AWS cannot tell, it is taken as going away: a node kept tainted one run
        too long costs capacity, one given back to a dying machine costs its pods."""
        try:
            with aws_errors(f"looking at {instance_id}"):
                found = self.autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])
                rows = found.get("AutoScalingInstances", [])
                if rows and str(rows[0].get("LifecycleState", "")).startswith("Terminat"):
                    return True
                if self.ec2 is None:
                    return not rows
                reservations = self.ec2.describe_instances(InstanceIds=[instance_id]).get("Reservations", [])
        except OperationError:
            return True
        states = [i.get("State", {}).get("Name", "") for r in reservations for i in r.get("Instances", [])]
        return not states or states[0] not in ("pending", "running")

    def describe(self, name: str) -> GroupNow:
        with aws_errors(f"describing {name}"):
            found = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])
        groups = found.get("AutoScalingGroups", [])
        if not groups:
            raise AwsError(f"asg {name}: no longer exists")
        asg = groups[0]
        return GroupNow(
            name=name,
            desired=asg["DesiredCapacity"],
            min_size=asg["MinSize"],
            max_size=asg["MaxSize"],
            instances={i["InstanceId"]: str(i.get("LifecycleState", "")) for i in asg.get("Instances", [])},
        )

    def raise_desired(self, name: str, expected: int, desired: int) -> GroupNow:
        """Set desired to `desired`, which must be above what AWS has; `expected` is the value the
        decision was made from, so a group changed in between is refused rather than overwritten."""
        now = self.describe(name)
        if now.desired != expected:
            raise RefusedError(
                f"asg {name}: desired changed from {expected} to {now.desired} while applying; "
                "not raising it (the next apply decides again)",
                kind="another-writer",
            )
        if desired <= now.desired:
            raise RefusedError(
                f"asg {name}: {now.desired} -> {desired} is not an increase; apply never lowers",
                kind="limits",
            )
        if desired > now.max_size:
            raise RefusedError(
                f"asg {name}: {desired} is above the ASG's max size {now.max_size}", kind="limits"
            )
        with aws_errors(f"raising {name} to {desired}"):
            self.autoscaling.set_desired_capacity(
                AutoScalingGroupName=name, DesiredCapacity=desired, HonorCooldown=False
            )
        return self.describe(name)

    def terminate(self, name: str, instance_id: str) -> GroupNow | None:
        """Terminate exactly `instance_id`, decrementing desired by one; refused when the instance is
        not an in-service member of the group (already gone, Standby, another group's)."""
        now = self.describe(name)
        state = now.instances.get(instance_id)
        if state != IN_SERVICE:
            where = f"is {state}" if state else "is not in the group"
            raise RefusedError(
                f"asg {name}: instance {instance_id} {where}; not terminating it", kind="instance-changed"
            )
        if now.desired - 1 < now.min_size:
            raise RefusedError(
                f"asg {name}: terminating {instance_id} would take desired below min size {now.min_size}",
                kind="limits",
            )
        try:
            with aws_errors(f"terminating {instance_id} in {name}"):
                self.autoscaling.terminate_instance_in_auto_scaling_group(
                    InstanceId=instance_id, ShouldDecrementDesiredCapacity=True
                )
        except OperationError as exc:
            # The answer can be lost while the call went through: look before calling it a failure.
            try:
                after = self.describe(name)
            except OperationError:
                raise AwsUncertainError(
                    f"{exc}; whether {instance_id} is terminating cannot be told now (the next apply looks)"
                ) from None
            if after.instances.get(instance_id, "") == IN_SERVICE:
                raise
            return after
        try:
            return self.describe(name)
        except OperationError:
            return None  # AWS accepted the termination; a failed look afterwards changes nothing
