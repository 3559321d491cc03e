"""A clean scale-down seen by `status` and the history report: our own 3 -> 1 is not drift (issue 28,
the trial: `status` said "desired lowered outside the tool from 2 to 1" after a clean apply, because
the run's first intent record shared its result's second)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from reconciler.runtime import apply_stage
from tests.support.apply_steps import show
from tests.support.apply_world import World, manifest_on_main
from tests.support.git import git


def test_status_after_a_clean_three_to_one_reports_no_drift(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # apply's clock as the trial's fast run saw it: every record of the run in one second
    second = datetime.now(UTC).replace(microsecond=0)
    monkeypatch.setattr(apply_stage, "_stamp", lambda: second)
    world.add_node("node-c")  # idle: with node-b, two of three may go
    assert world.desired() == 3
    planned = world.cli(capsys, "plan")
    assert planned.code == 0, show(planned)
    approved = world.cli(capsys, "approve", "scale-down")
    assert approved.code == 0, show(approved)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, show(applied)
    assert world.desired() == 1
    records = world.note()["records"]
    assert [r.get("phase", "done") for r in records][-3:] == ["intent", "intent", "done"]

    status = world.cli(capsys, "status", "--output", "json")
    assert status.code == 0, show(status)
    (group,) = json.loads(status.out)["nodeGroups"]
    assert not [w for w in group["warnings"] if "drift" in w], group["warnings"]
    history = world.cli(capsys, "history", "--output", "json")
    assert not [e for e in json.loads(history.out) if "drift" in e["reason"]]


def test_the_plan_after_it_settles_the_removals_in_a_commit_that_says_so(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trial's "mirror ASG min/max sizes" commit that settled 6 -> 1, through the CLI."""
    world.add_node("node-c")
    assert world.cli(capsys, "plan").code == 0
    assert world.cli(capsys, "approve", "scale-down").code == 0
    assert world.cli(capsys, "apply").code == 0 and world.desired() == 1
    settled = world.cli(capsys, "plan")
    assert settled.code == 0, show(settled)
    subject = git("log", "-1", "--format=%s", "main", cwd=world.remote).strip()
    assert subject == "capacity(prod): settle applied removals: general 3 -> 1", subject
    assert "removeInstances: []" in manifest_on_main(world)
