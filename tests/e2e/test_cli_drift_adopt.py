"""`apply.drift: adopt` end to end, the plan's half: a desired lowered by hand, adopted by apply, is
committed to main by the next plan with `Capacity-Source: external`, once, and apply then has nothing
to do. The same world as tests/e2e/test_cli_apply.py: moto, the fake Kubernetes API, a bare repo."""

from __future__ import annotations

import json
import re

import pytest

from reconciler.gitops.manifest import parse_manifest
from reconciler.gitops.trailers import SOURCE_EXTERNAL, Change, parse_message
from tests.support import k8s_objects as k
from tests.support.apply_world import MAIN_PATH, World, pod
from tests.support.git import git, needs_ssh_keygen

pytestmark = needs_ssh_keygen


def main_tip(world: World) -> str:
    return git("rev-parse", "main", cwd=world.remote).strip()


def lower_by_hand(world: World, desired: int) -> None:
    """A person sets the ASG's desired in the console; the two instances with nodes are protected,
    so AWS (moto) takes one of the instances that never registered."""
    ids = [i for i, _ in world.instances]
    world.aws.autoscaling.set_instance_protection(
        InstanceIds=ids, AutoScalingGroupName="general", ProtectedFromScaleIn=True
    )
    world.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=desired)
    world.aws.autoscaling.set_instance_protection(
        InstanceIds=ids, AutoScalingGroupName="general", ProtectedFromScaleIn=False
    )


def apply_adopts(world: World, capsys: pytest.CaptureFixture[str], desired: int, was: int) -> None:
    """`apply` with `apply.drift: adopt` finds `desired` set by hand where its last run left `was`:
    AWS untouched, and a record on the commit it applied whose group is `adopted` at AWS's value."""
    world.config.write_text(world.config.read_text().replace("apply: {", "apply: {drift: adopt, "))
    adopted = world.cli(capsys, "apply")
    assert adopted.code == 0, adopted.out + adopted.err
    assert f"drift: desired lowered outside the tool from {was} to {desired}" in adopted.out


def jobs(world: World, *names: str) -> None:
    for name in names:
        world.kube.put(k.pod(name, "batch", requests={"cpu": "1500m"}, owner_kind="Job", owner_name="j"))


def scaled_up_then_lowered_and_adopted(world: World, capsys: pytest.CaptureFixture[str]) -> str:
    """Plan scales general 2 -> 4, apply raises it, the jobs finish; a person lowers AWS to 3 and
    apply adopts it. Main's tip (the scale-up) is returned."""
    world.kube.put(pod("web-b2", "node-b", "1500m"))  # node b is busy: no scale-down
    jobs(world, "job-0", "job-1")
    assert world.cli(capsys, "plan").code == 0
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.desired() == 4
    for name in ("job-0", "job-1"):  # the jobs ran and finished; the new instances never registered
        world.kube.delete_object("Pod", "batch", name)
    scaled_up = main_tip(world)

    lower_by_hand(world, 3)
    apply_adopts(world, capsys, 3, was=4)
    assert world.desired() == 3
    assert world.note()["records"][-1]["groups"][0]["adopted"] is True
    return scaled_up


def test_desired_lowered_by_hand_and_adopted_is_committed_to_main_once_as_external(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    scaled_up = scaled_up_then_lowered_and_adopted(world, capsys)

    dry = world.cli(capsys, "plan", "--dry-run")  # says what it would commit, commits nothing
    assert dry.code == 0, dry.out + dry.err
    assert "would commit to main: adopted general 4 -> 3, set outside the tool" in dry.out
    assert re.search(r"general\s+3\s+no change", dry.out)  # planned on the adopted value
    assert main_tip(world) == scaled_up

    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.out + planned.err
    assert "adopted general 4 -> 3, set outside the tool (apply.drift adopt)" in planned.out
    adopted = main_tip(world)
    assert git("rev-parse", f"{adopted}^", cwd=world.remote).strip() == scaled_up  # one commit, its own
    message = parse_message(git("log", "-1", "--format=%B", adopted, cwd=world.remote))
    assert message is not None and message.cluster == "prod"
    assert message.source == SOURCE_EXTERNAL
    assert message.changes == (Change("general", 4, 3),)
    assert message.reason_for("general") == (
        "desired changed outside the tool (4 -> 3), adopted (apply.drift adopt)"
    )
    author = git("log", "-1", "--format=%an <%ae>", adopted, cwd=world.remote).strip()
    assert author == "asg-reconciler <asg-reconciler@users.noreply.local>"  # the bot
    manifest = parse_manifest(git("show", f"main:{MAIN_PATH}", cwd=world.remote), "main")
    group = manifest.group("general")
    assert group is not None and (group.desired, group.removal_ids) == (3, ())

    history = world.cli(capsys, "history", "--output", "json")
    assert history.code == 0, history.err
    changes = [e for e in json.loads(history.out) if e["kind"] == "change"]
    assert changes[0]["commit"] == adopted
    assert (changes[0]["from"], changes[0]["to"], changes[0]["direction"]) == (4, 3, "down")
    assert changes[0]["source"] == "external"
    assert changes[1]["source"] == ""  # the planner's own scale-up before it
    table = world.cli(capsys, "history")
    assert "down (external)" in table.out

    again = world.cli(capsys, "plan")  # main already says 3: nothing more, and no scale-up on top
    assert again.code == 0, again.out + again.err
    assert main_tip(world) == adopted

    after = world.cli(capsys, "apply")
    assert after.code == 0, after.out + after.err
    assert "raised desired" not in after.out
    assert world.desired() == 3
    record = world.note()["records"][-1]  # on the adoption commit, now applied
    assert record["complete"] is True and record["groups"][0]["action"] == "none"


def test_a_scale_up_planned_in_the_same_run_is_a_commit_of_its_own_on_top(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    scaled_up = scaled_up_then_lowered_and_adopted(world, capsys)
    jobs(world, "job-2", "job-3")  # more work arrives: the planner needs capacity again

    planned = world.cli(capsys, "plan")
    assert planned.code == 0, planned.out + planned.err
    log = git("log", "--format=%H", f"{scaled_up}..main", cwd=world.remote).split()
    assert len(log) == 2  # the adoption, then the planner's scale-up on top of it
    adoption, scale_up = (
        parse_message(git("log", "-1", "--format=%B", sha, cwd=world.remote)) for sha in reversed(log)
    )
    assert adoption is not None and adoption.source == SOURCE_EXTERNAL
    assert adoption.changes == (Change("general", 4, 3),)
    assert scale_up is not None and scale_up.source == ""  # the planner decided this one
    assert [c.group for c in scale_up.changes] == ["general"]
    assert scale_up.changes[0].before == 3 and scale_up.changes[0].after > 3

    again = world.cli(capsys, "plan")  # the adoption is not written a second time over the scale-up
    assert again.code == 0, again.out + again.err
    assert main_tip(world) == log[0]
    applied = world.cli(capsys, "apply")  # the planner's increase is applied, from the adopted value
    assert applied.code == 0, applied.out + applied.err
    assert f"raised desired 3 -> {scale_up.changes[0].after}" in applied.out
