"""Apply's own `limits` hold a mixed-instances group whatever override AWS launches (DESIGN §3
rule 11, issue 28 with issue 29 item 3).

The node template of a mixed-instances group is the least of its overrides (it plans so the count
holds pods whichever type launches), but AWS may launch the largest: apply counting a raise by the
least would let the plan credentials buy far more cores or memory than `limits` allows. Apply counts
each new machine as the largest override it could be, and a WeightedCapacity group's desired in
units, never as if each unit were a machine of the template.
"""

from __future__ import annotations

import re

import pytest

from tests.support.apply_world import MAIN_PATH, TAGS, World, manifest_on_main
from tests.support.git import git


def mixed_desired(world: World) -> int:
    groups = world.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["mixed"])
    return int(groups["AutoScalingGroups"][0]["DesiredCapacity"])


def bot_raises_mixed(world: World, desired: int) -> None:
    """The plan bot's credentials, straight to main: the mixed group's desired (and max mirror)."""
    text = manifest_on_main(world)
    text, count = re.subn(r"(  mixed:\n(?:    .*\n)*?    desired: )\d+", rf"\g<1>{desired}", text)
    assert count == 1, text
    clone = world.tmp / f"bot-mixed-{desired}"
    git("clone", "--quiet", str(world.remote), str(clone))
    (clone / MAIN_PATH).write_text(text)
    git("add", MAIN_PATH, cwd=clone)
    git("-c", "commit.gpgsign=false", "commit", "--quiet", "-m", f"scale up mixed -> {desired}", cwd=clone)
    git("push", "--quiet", "origin", "main", cwd=clone)


def with_mixed(
    world: World, capsys: pytest.CaptureFixture[str], overrides: list[tuple[str, str | None]], limits: str
) -> None:
    world.aws.launch_template("lt-mixed", "t3.small")
    world.aws.asg("mixed", max_size=40, tags=TAGS, launch_template="lt-mixed", overrides=overrides)
    world.config.write_text(world.config.read_text() + f"limits: {limits}\n")
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.out + planned.err
    assert "  mixed:\n" in manifest_on_main(world)


def test_cores_limit_counts_the_largest_override_aws_may_launch(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # two t3.small nodes (1.93 cores each) leave 4.14 of 8 cores: two t3.small would fit, but AWS
    # may launch the m5.4xlarge override (16 vCPUs) for either of them
    with_mixed(world, capsys, [("t3.small", None), ("m5.4xlarge", None)], "{cores: '0:8'}")
    bot_raises_mixed(world, 2)
    result = world.cli(capsys, "apply")
    out = result.out + result.err
    assert result.code == 3, out
    assert mixed_desired(world) == 0, out
    assert "limits.cores" in out and "m5.4xlarge" in out, out


def test_memory_limit_counts_the_largest_override_aws_may_launch(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2.8 GiB of nodes; a t3.small (2 GiB) fits under 8 GiB, an m5.4xlarge (64 GiB) does not
    with_mixed(world, capsys, [("t3.small", None), ("m5.4xlarge", None)], "{memory: '0:8'}")
    bot_raises_mixed(world, 1)
    result = world.cli(capsys, "apply")
    out = result.out + result.err
    assert result.code == 3, out
    assert mixed_desired(world) == 0, out
    assert "limits.memory" in out, out


def test_weighted_units_are_not_counted_as_machines_of_the_template(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # weights by vCPU: 4 units are at most two t3.small (2 units each) or one m5.xlarge (4 units),
    # so they fit beside the two nodes under maxNodesTotal 4; counted as 4 machines they would not
    with_mixed(world, capsys, [("t3.small", "2"), ("m5.xlarge", "4")], "{maxNodesTotal: 4, cores: '0:20'}")
    bot_raises_mixed(world, 4)
    result = world.cli(capsys, "apply")
    out = result.out + result.err
    assert result.code == 0, out
    assert mixed_desired(world) == 4, out
    # 40 units would be up to 20 machines: the cluster is full, nothing more is raised
    bot_raises_mixed(world, 40)
    result = world.cli(capsys, "apply")
    out = result.out + result.err
    assert result.code == 3, out
    assert mixed_desired(world) == 4, out
    assert "limits.maxNodesTotal 4" in out and "capacity unit(s)" in out, out
