"""Apply holds the caps its own config sets (DESIGN §3 rule 11), whatever the manifest says.

The attack (issue 28): with the plan bot's credentials, push `desired: 20` and the `maxSize` mirror
to main. Apply's deployment config says `nodeGroups.explicit: ["1:3:general"]`, or
`limits.maxNodesTotal: 3`, or `limits.cores: "0:8"` (`limits.memory` too); the ASG's own MaxSize is
30. Apply raises up to the cap (capacity the operator allowed: the bot could have asked for it
anyway), refuses the rest naming the bound and its config key (exit 3, recorded), and never lowers
a group a person raised past the cap by hand (rule 2).
"""

from __future__ import annotations

import re

import pytest

from tests.support.apply_world import MAIN_PATH, T3_SMALL, World, manifest_on_main
from tests.support.git import git


def bot_push(world: World, desired: int, max_size: int) -> None:
    """The plan bot's credentials (unsigned, straight to main): desired and the maxSize mirror."""
    text = manifest_on_main(world)
    text = re.sub(r"desired: \d+", f"desired: {desired}", text)
    text = re.sub(r"maxSize: \d+", f"maxSize: {max_size}", text)
    clone = world.tmp / f"bot-{desired}"
    git("clone", "--quiet", str(world.remote), str(clone))
    (clone / MAIN_PATH).write_text(text)
    git("add", MAIN_PATH, cwd=clone)
    git("-c", "commit.gpgsign=false", "commit", "--quiet", "-m", f"scale up general -> {desired}", cwd=clone)
    git("push", "--quiet", "origin", "main", cwd=clone)


def configured(
    world: World, capsys: pytest.CaptureFixture[str], *, explicit: str = "", extra: str = ""
) -> None:
    """Apply's own config gains the caps; the ASG allows 30; main gets its first manifest."""
    text = world.config.read_text()
    if explicit:
        text = text.replace("nodeGroups:\n", f"nodeGroups:\n  explicit: ['{explicit}']\n", 1)
    world.config.write_text(text + extra)
    world.aws.autoscaling.update_auto_scaling_group(AutoScalingGroupName="general", MaxSize=30)
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.out + planned.err
    first = world.cli(capsys, "apply")
    assert first.code == 0, first.out + first.err
    assert world.desired() == 2


def attacked(world: World, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    bot_push(world, 20, 30)
    result = world.cli(capsys, "apply", *args)
    return result.code, result.out + result.err


def last_group_record(world: World) -> dict[str, object]:
    (group,) = world.note()["records"][-1]["groups"]
    return group  # type: ignore[no-any-return]


def test_explicit_max_holds_a_raise_pushed_with_the_plan_credentials(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    configured(world, capsys, explicit="1:3:general")
    code, out = attacked(world, capsys)
    assert code == 3, out
    assert world.desired() == 3, out  # up to the operator's bound, not to the ASG's 30
    assert "nodeGroups.explicit" in out and "1:3:general" in out, out
    record = last_group_record(world)
    assert record["action"] == "refused" and record["desiredAfter"] == 3
    assert "nodeGroups.explicit" in str(record["detail"])
    again = world.cli(capsys, "apply")  # the next run refuses again, and changes nothing
    assert again.code == 3 and world.desired() == 3, again.out
    status = world.cli(capsys, "status")  # run with apply's config, status says why main is not reached
    assert status.code == 0, status.err
    assert "main asks for 20, above the max of nodeGroups.explicit '1:3:general'" in status.out, status.out


def test_max_nodes_total_holds_a_raise(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    configured(world, capsys, extra="limits: {maxNodesTotal: 3}\n")
    code, out = attacked(world, capsys)
    assert code == 3, out
    assert world.desired() == 3, out  # two nodes and one more
    assert "limits.maxNodesTotal" in out, out


def test_cores_limit_holds_a_raise(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    configured(world, capsys, extra="limits: {cores: '0:8'}\n")
    code, out = attacked(world, capsys)
    assert code == 3, out
    # two nodes of 1.93 cores each (their capacity), and t3.small has 2 vCPUs: 3.86 + 2 x 2 <= 8
    assert world.desired() == 4, out
    assert "limits.cores" in out, out


def test_memory_limit_holds_a_raise(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    configured(world, capsys, extra="limits: {memory: '0:5'}\n")
    code, out = attacked(world, capsys)
    assert code == 3, out
    # two nodes of 1471840Ki (1.40 GiB) each, and a new one counts as the group's template (a copy
    # of a Ready node): one more fits under 5 GiB, two do not
    assert T3_SMALL["memory"] == "1471840Ki"
    assert world.desired() == 3, out
    assert "limits.memory" in out, out


def test_a_group_a_person_raised_past_the_cap_is_neither_raised_nor_lowered(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    configured(world, capsys, explicit="1:3:general")
    world.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=5)
    code, out = attacked(world, capsys)
    assert code == 3, out
    assert world.desired() == 5, out  # rule 2: never SetDesiredCapacity down
    assert "nodeGroups.explicit" in out, out


def test_dry_run_says_the_same_and_changes_nothing(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    configured(world, capsys, extra="limits: {maxNodesTotal: 3}\n")
    code, out = attacked(world, capsys, "--dry-run")
    assert code == 3, out
    assert world.desired() == 2, out
    assert "would raise desired 2 -> 3" in out and "limits.maxNodesTotal" in out, out


def test_apply_max_step_goes_on_towards_the_bound_in_later_runs(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    text = world.config.read_text().replace("apply: {", "apply: {maxStep: 1, ", 1)
    world.config.write_text(text)
    configured(world, capsys, explicit="1:4:general")
    code, out = attacked(world, capsys)
    assert code == 3, out
    assert world.desired() == 3, out
    assert "raised to 3 this run (apply.maxStep 1), to 4 in later runs, and the rest refused" in out, out
    later = world.cli(capsys, "apply")
    assert later.code == 3 and world.desired() == 4, later.out
    assert "raised to 4 only, the rest refused" in later.out, later.out
    refused = world.cli(capsys, "apply")  # refused again, raising nothing: recorded once
    assert refused.code == 3 and world.desired() == 4, refused.out
    records = len(world.note()["records"])
    idle = world.cli(capsys, "apply")  # the same refusal again: no record per idle cycle
    assert idle.code == 3 and world.desired() == 4, idle.out
    assert len(world.note()["records"]) == records
