"""`status` shows the open scale-down proposal beside the manifest: before approval, not only after."""

from __future__ import annotations

import json

import jsonschema
import pytest

from reconciler.config.documents import load_schema
from tests.support.apply_world import World


def test_status_names_the_proposed_instances_and_how_long_they_wait(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    before = world.cli(capsys, "status")
    assert before.code == 0, before.err
    assert "scale-down proposal" not in before.out
    assert world.cli(capsys, "plan").code == 0  # node-b is idle: proposed for removal
    shown = world.cli(capsys, "status")
    assert shown.code == 0, shown.err
    assert (
        "scale-down proposal asg-reconciler/prod/scale-down, waiting 0m for approval: "
        f"general: {world.b_id}" in shown.out
    )
    assert "(1 proposed for removal)" in shown.out  # the MANIFEST column: counts, never "-1"
    data = json.loads(world.cli(capsys, "status", "--output", "json").out)
    jsonschema.validate(data, load_schema("status"))
    assert data["proposal"]["removals"] == {"general": [world.b_id]}
    assert data["nodeGroups"][0]["proposedRemovals"] == [world.b_id]
    assert world.cli(capsys, "approve", "scale-down").code == 0
    after = world.cli(capsys, "status")
    assert "scale-down proposal" not in after.out and "(1 to remove, approved)" in after.out
