"""Clients, retries and error mapping against a moto server, with faults injected via before-send."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from reconciler.aws.clients import CREDENTIALS_FIX, aws_clients, make_clients
from reconciler.aws.discovery import discover_node_groups
from reconciler.domain.errors import OperationError, UserError
from tests.support.aws import REGION, MotoAws, inject, isolate_aws_env, query_error, throttle
from tests.support.aws_answers import REFRESH_IN_PROGRESS


def test_clients_use_the_config_region_and_the_standard_endpoint_setting(aws: MotoAws) -> None:
    clients = make_clients(aws.config())
    assert clients.region == REGION
    assert clients.autoscaling.meta.endpoint_url == aws.endpoint  # from AWS_ENDPOINT_URL, nothing of ours
    retries = clients.autoscaling.meta.config.retries
    assert retries["mode"] == "standard" and retries["total_max_attempts"] >= 5


def test_operators_can_tune_retries_with_the_standard_variables(
    aws: MotoAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "4")
    retries = make_clients(aws.config()).ec2.meta.config.retries
    assert retries["mode"] == "adaptive" and retries["total_max_attempts"] == 4


@pytest.mark.usefixtures("no_retry_delay")
def test_throttling_is_retried_by_botocore(aws: MotoAws) -> None:
    aws.asg("g", desired=1, tags={"enabled": "yes"})
    autoscaling, ec2 = aws_clients(aws.config())
    groups_throttled = throttle(autoscaling, "DescribeAutoScalingGroups", times=2)
    instances_throttled = throttle(ec2, "DescribeInstances", times=3)
    (group,) = discover_node_groups(aws.config(["asg:tag=enabled"]), autoscaling, ec2)
    assert group.name == "g" and group.instances[0].launch_time is not None
    assert (groups_throttled.answered, len(groups_throttled.seen)) == (2, 3)  # 2 throttled, then moto
    assert (instances_throttled.answered, len(instances_throttled.seen)) == (3, 4)


@pytest.mark.usefixtures("no_retry_delay")
def test_throttling_past_the_retry_budget_is_a_one_line_operation_error(
    aws: MotoAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
    aws.asg("g", tags={"enabled": "yes"})
    autoscaling, ec2 = aws_clients(aws.config())
    throttled = throttle(autoscaling, "DescribeAutoScalingGroups", times=None)
    with pytest.raises(OperationError) as caught:
        discover_node_groups(aws.config(["asg:tag=enabled"]), autoscaling, ec2)
    assert len(throttled.seen) == 3
    message = str(caught.value)
    assert message == (
        "AWS DescribeAutoScalingGroups failed while describing node groups: Throttling: Rate exceeded"
    )
    assert caught.value.exit_code == 1


def test_access_denied_names_the_call_to_grant(aws: MotoAws) -> None:
    aws.asg("g", tags={"enabled": "yes"})
    autoscaling, ec2 = aws_clients(aws.config())
    inject(ec2, "DescribeInstanceTypes", 403, query_error("UnauthorizedOperation", "not allowed"))
    with pytest.raises(OperationError, match="grant DescribeInstanceTypes"):
        discover_node_groups(aws.config(["asg:tag=enabled"]), autoscaling, ec2)


def test_an_instance_refresh_in_progress_is_reported(aws: MotoAws) -> None:
    aws.asg("g", tags={"enabled": "yes"})
    autoscaling, ec2 = aws_clients(aws.config())
    inject(autoscaling, "DescribeInstanceRefreshes", 200, REFRESH_IN_PROGRESS)
    (group,) = discover_node_groups(aws.config(["asg:tag=enabled"]), autoscaling, ec2)
    assert group.has_instance_refresh is True


def test_real_errors_from_describe_instance_refreshes_still_surface(aws: MotoAws) -> None:
    aws.asg("g", tags={"enabled": "yes"})
    autoscaling, ec2 = aws_clients(aws.config())
    inject(autoscaling, "DescribeInstanceRefreshes", 403, query_error("AccessDenied", "no"))
    with pytest.raises(OperationError, match="DescribeInstanceRefreshes failed"):
        discover_node_groups(aws.config(["asg:tag=enabled"]), autoscaling, ec2)


def test_missing_credentials(aws: MotoAws, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(UserError) as caught:
        make_clients(aws.config())
    assert str(caught.value) == f"no usable AWS credentials: {CREDENTIALS_FIX}"
    assert caught.value.exit_code == 2


def test_missing_region_names_the_config_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    isolate_aws_env(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    config = MotoAws("", None, None, region="").config()
    with pytest.raises(UserError) as caught:
        make_clients(config)
    assert str(caught.value).startswith("test.yaml: region: not set")
    assert "AWS_REGION" in str(caught.value)


def test_an_unreachable_endpoint_is_one_line_without_secrets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    isolate_aws_env(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-very-secret")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    config = MotoAws("", None, None).config(explicit=["0:3:g"])
    autoscaling, ec2 = aws_clients(config)
    with pytest.raises(OperationError) as caught:
        discover_node_groups(config, autoscaling, ec2)
    message = str(caught.value)
    assert message.startswith("cannot reach the AWS endpoint while describing node groups:")
    assert f"127.0.0.1:{port}" in message
    assert "\n" not in message and "very-secret" not in message and "Traceback" not in message


def test_an_unknown_profile_is_a_user_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    isolate_aws_env(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(UserError, match=r"no-such-profile.*fix AWS_PROFILE"):
        make_clients(MotoAws("", None, None).config())
