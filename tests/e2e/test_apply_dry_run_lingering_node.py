"""A dry run says what the real run does (found by a new user's trial): after a clean removal the
terminated instance's Node object lingers with our drain taint until the cloud controller deletes
it; the real apply keeps that taint (its machine is going away), so `apply --dry-run` must not
promise to give it back."""

from __future__ import annotations

import pytest

from tests.support.apply_steps import ours
from tests.support.apply_world import World, approved
from tests.support.git import needs_ssh_keygen

pytestmark = needs_ssh_keygen


def test_dry_run_does_not_promise_to_give_back_a_terminated_nodes_taint(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    applied = world.cli(capsys, "apply")
    assert applied.code == 0, applied.out + applied.err
    assert world.b_id not in world.in_service()
    assert world.kube.get_object("Node", None, "node-b") is not None  # lingers, tainted
    assert ours(world, "node-b")

    dry = world.cli(capsys, "apply", "--dry-run")
    real = world.cli(capsys, "apply")

    assert dry.code == 0 and real.code == 0, dry.err + real.err
    assert ours(world, "node-b"), "the real run gave a dying node back"
    assert "node-b" not in real.out, real.out
    assert "would be given back" not in dry.out, (
        "BROKE: the dry run promises what apply will not do\n" + dry.out
    )
