"""The two changes apply may make in AWS, against moto: raise desired, terminate one named instance."""

from __future__ import annotations

import pytest

from reconciler.aws.actuation import Actuator
from reconciler.aws.clients import aws_clients
from reconciler.domain.errors import OperationError, RefusedError
from tests.support.aws import MotoAws, throttle


def actuator(aws: MotoAws) -> Actuator:
    autoscaling, _ = aws_clients(aws.config())
    return Actuator(autoscaling)


def test_raise_desired_launches_instances(aws: MotoAws) -> None:
    aws.asg("g", min_size=1, max_size=5, desired=2)
    after = actuator(aws).raise_desired("g", expected=2, desired=4)
    assert after.desired == 4 and len(after.instances) == 4


def test_raise_refuses_a_group_that_moved_a_decrease_and_the_max(aws: MotoAws) -> None:
    aws.asg("g", min_size=0, max_size=3, desired=2)
    act = actuator(aws)
    with pytest.raises(RefusedError, match="desired changed from 1 to 2") as moved:
        act.raise_desired("g", expected=1, desired=3)
    with pytest.raises(RefusedError, match="apply never lowers") as lower:
        act.raise_desired("g", expected=2, desired=1)
    with pytest.raises(RefusedError, match="above the ASG's max size 3") as above:
        act.raise_desired("g", expected=2, desired=4)
    assert [moved.value.kind, lower.value.kind, above.value.kind] == ["another-writer", "limits", "limits"]
    assert act.describe("g").desired == 2  # nothing changed


def test_terminate_takes_exactly_the_named_instance_and_decrements(aws: MotoAws) -> None:
    aws.asg("g", min_size=0, max_size=5, desired=3)
    act = actuator(aws)
    before = act.describe("g")
    doomed = sorted(before.instances)[1]
    after = act.terminate("g", doomed)
    assert after.desired == 2
    survivors = {i for i, state in after.instances.items() if state == "InService"}
    assert survivors == set(before.instances) - {doomed}


def test_terminate_refuses_strangers_and_the_min_size(aws: MotoAws) -> None:
    aws.asg("g", min_size=2, max_size=5, desired=2)
    aws.asg("other", desired=1)
    act = actuator(aws)
    stranger = next(iter(act.describe("other").instances))
    with pytest.raises(RefusedError, match="is not in the group") as strange:
        act.terminate("g", stranger)
    with pytest.raises(RefusedError, match="below min size 2") as below:
        act.terminate("g", next(iter(act.describe("g").instances)))
    assert [strange.value.kind, below.value.kind] == ["instance-changed", "limits"]
    assert act.describe("g").desired == 2 and act.describe("other").desired == 1


def test_a_missing_group_is_an_operation_error(aws: MotoAws) -> None:
    with pytest.raises(OperationError, match="asg gone: no longer exists"):
        actuator(aws).describe("gone")


@pytest.mark.usefixtures("no_retry_delay")
def test_throttled_changes_are_retried(aws: MotoAws) -> None:
    aws.asg("g", max_size=5, desired=1)
    act = actuator(aws)
    throttled = throttle(act.autoscaling, "SetDesiredCapacity", times=2)
    assert act.raise_desired("g", expected=1, desired=2).desired == 2
    assert (throttled.answered, len(throttled.seen)) == (2, 3)


def test_terminate_refuses_an_instance_that_is_not_in_service(aws: MotoAws) -> None:
    aws.asg("g", min_size=0, max_size=5, desired=3)
    act = actuator(aws)
    resting = sorted(act.describe("g").instances)[0]
    act.autoscaling.enter_standby(
        AutoScalingGroupName="g", InstanceIds=[resting], ShouldDecrementDesiredCapacity=False
    )
    with pytest.raises(RefusedError, match=f"instance {resting} is Standby") as standby:
        act.terminate("g", resting)
    assert standby.value.kind == "instance-changed"
    after = act.describe("g")
    assert after.desired == 3 and after.instances[resting] == "Standby"
