"""A manifest group that is no node group of the cluster (a typo: `generall`) is flagged before
apply refuses it: `plan` (table and JSON) and `status` warn, naming the group and both fixes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.aws import MotoAws
from tests.support.cli import run
from tests.support.git import BOB
from tests.support.plan_git_world import MAIN_PATH, Setup

TYPO = """\
  generall:
    desired: 1
    removeInstances: []
"""


def _with_typo(setup: Setup) -> None:
    text = setup.show("main")
    assert "nodeGroups:\n" in text
    BOB.commit(
        setup.remote, "main", {MAIN_PATH: text.replace("nodeGroups:\n", "nodeGroups:\n" + TYPO, 1)}, "typo"
    )


def test_plan_and_status_name_a_manifest_group_no_asg_matches(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, None)
    objects = setup.cluster(busy_b=1500)
    assert setup.plan(capsys, objects).code == 0
    _with_typo(setup)

    planned = setup.plan(capsys, objects, "--dry-run")
    assert planned.code == 0, planned.err
    said = planned.out
    assert "generall" in said and "not a node group of cluster prod" in said, said
    assert "remove it from the manifest" in said and "nodeGroups" in said
    assert "did you mean general?" in said

    as_json = setup.plan(capsys, objects, "--dry-run", "--output", "json")
    warnings = json.loads(as_json.out)["warnings"]
    assert any("generall" in w and "not a node group" in w for w in warnings), warnings

    written = setup.plan(capsys, objects)  # the plan that writes says it too
    assert written.code == 0 and "generall" in written.out

    snapshot = tmp_path / "cluster.json"  # the dump setup.plan wrote
    shown = run(capsys, "status", "--config", str(setup.config), "--snapshot", str(snapshot))
    assert shown.code == 0, shown.err
    assert "generall" in shown.out and "not a node group of cluster prod" in shown.out, shown.out


def test_groups_that_all_match_say_nothing(
    aws: MotoAws, bare_remote: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup = Setup(aws, tmp_path, bare_remote, None)
    objects = setup.cluster(busy_b=1500)
    assert setup.plan(capsys, objects).code == 0
    again = setup.plan(capsys, objects, "--dry-run")
    assert "not a node group" not in again.out
