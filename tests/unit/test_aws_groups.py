"""Folding an ASG description into a NodeGroup, and mapping AWS failures to our errors."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from botocore.parsers import ResponseParserError

from reconciler.aws.clients import CREDENTIALS_FIX, aws_errors, is_aws_endpoint
from reconciler.aws.discovery import ExplicitSpec
from reconciler.aws.groups import Ec2Facts, RefreshChecker, bounds_warnings, build_node_group
from reconciler.aws.instance_types import InstanceTypeInfo
from reconciler.aws.launch import LaunchTypes
from reconciler.config.settings import NodeTemplatesConfig
from reconciler.domain.errors import OperationError, UserError
from reconciler.domain.model import Instance

T3_SMALL = InstanceTypeInfo("t3.small", 2, 2048, "amd64", 3, 4)
LAUNCHED = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def described(**fields: Any) -> Any:
    return {
        "AutoScalingGroupName": "g",
        "MinSize": 1,
        "MaxSize": 5,
        "DesiredCapacity": 2,
        "AvailabilityZones": ["us-east-1b", "us-east-1a"],
        "Instances": [
            {
                "InstanceId": "i-2",
                "AvailabilityZone": "us-east-1b",
                "LifecycleState": "InService",
                "HealthStatus": "Unhealthy",
                "ProtectedFromScaleIn": True,
                "InstanceType": "t3.small",
            },
            {
                "InstanceId": "i-1",
                "AvailabilityZone": "us-east-1a",
                "LifecycleState": "Pending",
                "HealthStatus": "Healthy",
                "ProtectedFromScaleIn": False,
            },
        ],
        "SuspendedProcesses": [{"ProcessName": "Terminate"}, {"ProcessName": "AZRebalance"}],
        "Tags": [{"Key": "team", "Value": "ml"}],
        **fields,
    }


def build(asg: Any, spec: ExplicitSpec | None = None, launch: LaunchTypes | None = None) -> Any:
    return build_node_group(
        asg,
        spec,
        launch=launch or LaunchTypes(("t3.small",)),
        ec2_facts={"i-1": Ec2Facts(LAUNCHED, "t3.small")},
        has_policies=True,
        has_refresh=False,
        known_types={"t3.small": T3_SMALL},
        region="us-east-1",
        settings=NodeTemplatesConfig(),
    )


def test_node_group_from_a_description() -> None:
    group = build(described())
    assert (group.name, group.min_size, group.max_size, group.desired) == ("g", 1, 5, 2)
    assert (group.asg_min_size, group.asg_max_size, group.explicit) == (1, 5, False)
    assert group.zones == ("us-east-1a", "us-east-1b")
    assert group.suspended_processes == ("AZRebalance", "Terminate")
    assert group.tags == {"team": "ml"}
    assert group.has_scaling_policies is True
    assert group.instances == (
        Instance("i-1", "Pending", "us-east-1a", "t3.small", LAUNCHED, "Healthy", False),
        Instance("i-2", "InService", "us-east-1b", "t3.small", None, "Unhealthy", True),
    )
    assert group.template is not None and group.template_error == ""
    assert group.warnings == ()


def test_explicit_bounds_win_and_are_checked_against_the_asg() -> None:
    spec = ExplicitSpec(0, 8, "g", "0:8:g")
    group = build(described(), spec)
    assert (group.min_size, group.max_size, group.explicit) == (0, 8, True)
    assert (group.asg_min_size, group.asg_max_size) == (1, 5)
    assert len(group.warnings) == 2
    assert "min 0 is below the ASG's MinSize 1" in group.warnings[0]
    assert "max 8 is above the ASG's MaxSize 5" in group.warnings[1]


def test_bounds_inside_the_asg_are_quiet() -> None:
    assert bounds_warnings(ExplicitSpec(2, 4, "g", "2:4:g"), 1, 5) == ()


def test_no_instance_type_leaves_the_template_empty_with_a_reason() -> None:
    group = build(described(), launch=LaunchTypes((), error="asg g: launch configuration 'x' not found"))
    assert group.template is None
    assert group.template_error == "asg g: launch configuration 'x' not found"


def test_a_group_being_deleted_says_so() -> None:
    assert build(described(Status="Delete in progress")).warnings[0] == "asg g: is being deleted"


def test_client_errors_become_one_line_operation_errors() -> None:
    error = ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "User is not\nauthorized"}}, "DescribeAutoScalingGroups"
    )
    with pytest.raises(OperationError) as caught, aws_errors("describing node groups"):
        raise error
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "AWS DescribeAutoScalingGroups failed while describing node groups: AccessDenied"
    )
    assert "grant DescribeAutoScalingGroups" in message


def test_missing_credentials_are_a_user_error_with_the_fix() -> None:
    with pytest.raises(UserError) as caught, aws_errors():
        raise NoCredentialsError()
    assert CREDENTIALS_FIX in str(caught.value)
    assert caught.value.exit_code == 2


def test_unreachable_endpoint_hides_embedded_credentials() -> None:
    with pytest.raises(OperationError) as caught, aws_errors():
        raise EndpointConnectionError(endpoint_url="https://user:s3cret@proxy.example:8443/")
    assert "s3cret" not in str(caught.value)
    assert "cannot reach the AWS endpoint" in str(caught.value)


def test_aws_endpoints_are_recognised() -> None:
    def client(url: str) -> Any:
        return SimpleNamespace(meta=SimpleNamespace(endpoint_url=url))

    assert is_aws_endpoint(client("https://autoscaling.us-east-1.amazonaws.com"))
    assert is_aws_endpoint(client("https://ec2.cn-north-1.amazonaws.com.cn"))
    assert not is_aws_endpoint(client("http://127.0.0.1:5000"))


def test_an_unparseable_refresh_reply_from_aws_itself_still_surfaces() -> None:
    def fail(**_: Any) -> Any:
        raise ResponseParserError("invalid XML")

    client: Any = SimpleNamespace(
        meta=SimpleNamespace(endpoint_url="https://autoscaling.us-east-1.amazonaws.com"),
        describe_instance_refreshes=fail,
    )
    with pytest.raises(ResponseParserError):
        RefreshChecker(client).active("g")
    client.meta.endpoint_url = "http://127.0.0.1:5000"
    checker = RefreshChecker(client)
    assert checker.active("g") is False
    assert checker.supported is False
