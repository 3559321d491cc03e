"""The run loop's stop request as apply sees it (LoopHooks.stopping): a drain that ends within the
grace period finishes; one that would not is abandoned at its next look and its node given back."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest

from reconciler.config.settings import load_config
from reconciler.runtime.apply_stage import LoopHooks, apply_once
from reconciler.runtime.shutdown import Shutdown
from tests.support.apply_world import World, approved, untouched


def _stop_at_first_eviction(world: World, shutdown: Shutdown) -> None:
    def fault(method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path.endswith("/eviction"):
            shutdown.request()

    world.kube.fault = fault


def test_a_drain_longer_than_the_grace_period_gives_its_node_back(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    world.kube.pod_termination_seconds = 2.0  # the pod takes a while to go: the drain is mid-way
    shutdown = Shutdown(grace=1.0)  # drainTimeout is 20s: it cannot finish within 1s
    _stop_at_first_eviction(world, shutdown)
    beats: list[float] = []
    hooks = LoopHooks(stopping=shutdown.stopping, progress=lambda: beats.append(time.monotonic()))
    run = apply_once(load_config(world.config), datetime.now(UTC), dry_run=False, hooks=hooks)
    world.kube.fault = None
    assert run.report.interrupted and run.report.exit_code == 130
    assert any("given back" in note for g in run.report.groups for note in g.notes)
    untouched(world)  # desired 2, b in service, not tainted (its pod is being evicted, so not checked)
    assert beats, "no heartbeat while draining"


def test_a_drain_within_the_grace_period_finishes_and_terminates(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    approved(world, capsys)
    world.kube.pod_termination_seconds = 1.0
    shutdown = Shutdown(grace=60.0)  # above drainTimeout (20s): as the examples set it
    _stop_at_first_eviction(world, shutdown)
    hooks = LoopHooks(stopping=shutdown.stopping)
    run = apply_once(load_config(world.config), datetime.now(UTC), dry_run=False, hooks=hooks)
    world.kube.fault = None
    assert shutdown.requested and not run.report.interrupted, run.report
    assert run.report.exit_code == 0
    assert world.desired() == 1 and world.b_id not in world.in_service()


def test_the_stop_request_only_lets_steps_that_end_in_time_go_on() -> None:
    clock = [100.0]
    shutdown = Shutdown(grace=30.0, clock=lambda: clock[0])
    assert not shutdown.stopping(math.inf)  # nothing requested: everything goes on
    shutdown.request()  # 30s of grace, of which the last 7.5s are kept for what follows a drain
    assert shutdown.stopping(math.inf) and shutdown.stopping(123.0) and not shutdown.stopping(122.0)
    clock[0] = 200.0
    shutdown.request()  # a second request does not move the deadline
    assert shutdown.stopping(123.0)
    long = Shutdown(grace=660.0, clock=lambda: 0.0)  # drainTimeout 10m, grace 11m, as examples set
    long.request()
    assert not long.stopping(600.0) and long.stopping(641.0)  # 20s kept after the drain
