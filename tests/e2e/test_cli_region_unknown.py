"""A region typo is named as one, at once (issue 28): `us-eest-1` used to end, after every retry of a
DNS lookup, in "cannot reach the AWS endpoint". Regions are checked against botocore's own endpoint
data (offline); an endpoint of one's own (moto here, a VPC endpoint, a region newer than botocore)
lets any name through with a warning."""

from __future__ import annotations

import pytest

from tests.support.apply_world import World
from tests.support.git import needs_ssh_keygen

pytestmark = needs_ssh_keygen


def in_region(world: World, region: str) -> None:
    world.config.write_text(world.config.read_text().replace("region: us-east-1", f"region: {region}"))


def test_a_region_typo_on_aws_endpoints_is_refused_before_any_call(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert world.cli(capsys, "plan").code == 0  # a manifest on main, so apply gets as far as AWS
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # AWS's own endpoints: nothing here can reach them
    in_region(world, "us-eest-1")
    for command in ("status", "plan", "apply"):
        result = world.cli(capsys, command)
        assert result.code == 2, result.out + result.err
        line = result.err.strip()
        assert len(line.splitlines()) == 1, result.err
        assert f"{world.config}: region: 'us-eest-1' is not an AWS region botocore" in line
        assert "did you mean" in line and "us-east-1?" in line and "cannot reach" not in line
        assert "AWS_ENDPOINT_URL_AUTOSCALING" in line  # the way through for a region newer than botocore
    assert world.desired() == 2


def test_a_region_from_the_environment_is_named_as_such(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    world.config.write_text(world.config.read_text().replace("region: us-east-1\n", ""))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-wset-1")
    result = world.cli(capsys, "status")
    assert result.code == 2, result.out + result.err
    assert "region (from AWS_REGION / AWS_DEFAULT_REGION / the profile): 'eu-wset-1'" in result.err
    assert "did you mean" in result.err and "eu-west-1" in result.err


def test_an_unknown_region_on_an_endpoint_of_ones_own_goes_on_with_a_warning(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """A private endpoint may serve any region name: it is not ours to refuse (moto itself fails
    on this one later, with its own answer, which is what the endpoint says)."""
    in_region(world, "xx-local-1")
    result = world.cli(capsys, "status")
    assert "'xx-local-1' is not an AWS region botocore" in result.err
    assert "going on, as the AWS endpoints are set to others" in result.err
    assert "correct it" not in result.err  # not refused by us
