"""The per-commit cap on observation records never freezes the drift baseline (issue 20, "no idle
writes"; found by an attack): under `apply.drift: warn` the run that sees a lowered desired records
AWS's value, so the next run applies main again (docs/apply.md "Drift"), however many records the
commit's note already holds: a record that moves a group's desired is always written."""

from __future__ import annotations

import pytest

from reconciler.gitops.record_reading import OBSERVATIONS_PER_COMMIT
from tests.support.apply_world import World, scaled_up_then_lowered_outside


def set_desired(world: World, value: int) -> None:
    world.aws.autoscaling.set_desired_capacity(AutoScalingGroupName="general", DesiredCapacity=value)


def recorded_desired(world: World) -> int:
    return int(world.note()["records"][-1]["groups"][0]["desiredAfter"])


def test_warn_drift_raises_main_back_on_the_next_run_below_the_cap(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The promise as it holds on a fresh commit: seen once, then main is applied again."""
    scaled_up_then_lowered_outside(world, capsys)  # main 3, applied, then 2 by hand
    seen = world.cli(capsys, "apply")
    assert "not raised back" in seen.out and world.desired() == 2
    again = world.cli(capsys, "apply")
    assert again.code == 0, again.out + again.err
    assert world.desired() == 3, again.out


def test_warn_drift_raises_main_back_on_the_next_run_past_the_cap(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    scaled_up_then_lowered_outside(world, capsys)  # main 3, applied, then 2 by hand
    # Terraform (or a person) keeps resetting the group while main stays still: each flip is drift,
    # an observation recorded on the same commit, until the note holds the cap.
    value = 2
    while len(world.note()["records"]) < OBSERVATIONS_PER_COMMIT + 1:
        assert world.cli(capsys, "apply").code == 0
        value = 5 - value  # 2 -> 3 -> 2 ...
        set_desired(world, value)
    # settle: AWS where the last record says, then main applied (a raise is a change: recorded)
    set_desired(world, recorded_desired(world))
    assert world.cli(capsys, "apply").code == 0
    assert world.desired() == 3 and recorded_desired(world) == 3
    set_desired(world, 2)  # lowered by hand once more
    seen = world.cli(capsys, "apply")
    assert "drift: desired lowered outside the tool from 3 to 2" in seen.out, seen.out
    assert world.desired() == 2
    again = world.cli(capsys, "apply")
    assert again.code == 0, again.out + again.err
    assert world.desired() == 3, again.out  # the run after the one that saw it applies main again
