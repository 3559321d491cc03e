"""A deposed plan leader writes nothing: the run loop's guard runs right before every write."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.config.settings import load_config
from reconciler.domain.errors import OperationError
from reconciler.runtime.plan_stage import plan_once
from tests.support.apply_world import World
from tests.support.git import git


def test_a_plan_whose_guard_says_no_writes_nothing(world: World) -> None:
    def deposed() -> None:
        raise OperationError("plan: lost the Lease during the cycle")

    with pytest.raises(OperationError, match="lost the Lease"):
        plan_once(load_config(world.config), None, datetime.now(UTC), dry_run=False, guard=deposed)
    assert git("for-each-ref", cwd=world.remote).strip() == ""  # no main, no proposal, no state
    calls: list[str] = []
    run = plan_once(
        load_config(world.config), None, datetime.now(UTC), dry_run=False, guard=lambda: calls.append("x")
    )
    assert run.published is not None and run.published.main_commit
    assert calls  # it was asked before writing
