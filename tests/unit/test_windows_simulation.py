"""The simulator honours scaleDown.windows (reconciler/domain/windows.py) as apply does."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest

from reconciler.config.settings import Config, ScaleDownConfig
from reconciler.domain.windows import Window, allowed_removals
from reconciler.simulation.policies import ApprovalModel, Reviewed
from tests.support.simulation_world import idle_node_trace, run


def test_approved_removals_wait_for_a_scale_down_window() -> None:
    # approved at 00:40 UTC, the window opens at 03:00 for an hour: removed at 03:00
    windows = (Window("0 3 * * *", timedelta(hours=1)),)
    config = Config(cluster="sim", scale_down=ScaleDownConfig(windows=windows))
    policy = Reviewed(ApprovalModel(timedelta(minutes=30), fixed=True), partial(allowed_removals, windows))
    ours = run(idle_node_trace(), policy, hours=5, config=config)
    assert ours.groups[0].node_hours == pytest.approx(5 + 3)
