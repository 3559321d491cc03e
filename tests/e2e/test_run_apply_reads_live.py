"""In `run`, only the plan stage reads the watch-fed cache: apply, its re-check before a drain
included, reads the cluster live (DESIGN §3 rule 5). Both stages in one process (the Runner, driven
cycle by cycle), with the cache's watches cut off so its picture misses a pod that made the
approved node busy again: apply must see that pod, refuse, and never ask the cache."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.config.settings import load_config
from reconciler.demo.kube_api import DROP
from reconciler.domain.errors import OperationError
from reconciler.kube.cache import ClusterCache
from reconciler.kube.live import NOT_TERMINAL
from reconciler.runtime.run_loop import Runner
from reconciler.runtime.stage_loop import APPLY, PLAN
from tests.support.apply_world import World, approved, pod, untouched


def pod_lists(world: World) -> int:
    return sum(
        1
        for r in list(world.kube.requests)
        if r.path == "/api/v1/pods"
        and not r.query.get("watch")
        and r.query.get("fieldSelector") == NOT_TERMINAL
    )


def test_apply_and_its_recheck_read_live_while_plan_reads_the_cache(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    approved(world, capsys)  # node-b's instance approved for removal
    config_path: Path = world.config.with_name("run.yaml")
    config_path.write_text(
        world.config.read_text()
        + "run: {stages: [plan, apply], metricsAddress: '', namespace: kube-system}\n"
    )
    runner = Runner(config_path, load_config(config_path))
    cache = runner.cache
    assert cache is not None
    asked: list[str] = []
    real_state = ClusterCache.state

    def state(self: ClusterCache, now: datetime) -> Any:
        asked.append("state")
        return real_state(self, now)

    monkeypatch.setattr(ClusterCache, "state", state)
    runner.follow_cache(True)
    try:
        assert cache.wait_synced(10)
        # the cache's watches end and cannot come back: its picture stays as it is now
        world.kube.fault = lambda method, path, query: DROP if query.get("watch") else None
        world.kube.end_watches()
        world.kube.put(pod("web-b2", "node-b", "1500m"))  # node-b is busy again
        assert "web-b2" not in {p.name for p in cache.state(datetime.now(UTC)).pods}
        asked.clear()

        lists = pod_lists(world)
        summary, _, kind = runner.apply_cycle(runner.config_for(APPLY), datetime.now(UTC))
        assert kind == "refused", summary
        assert asked == []  # apply never asked the cache
        assert pod_lists(world) > lists  # it listed the pods itself
        untouched(world)  # and saw web-b2: node-b was not drained

        lists = pod_lists(world)
        with pytest.raises(OperationError, match="lost the Lease"):  # not leading: writes nothing
            runner.plan_cycle(runner.config_for(PLAN), datetime.now(UTC))
        assert asked == ["state"]  # the plan read the cache
        assert pod_lists(world) == lists  # and listed nothing
    finally:
        world.kube.fault = None
        runner.follow_cache(False)
