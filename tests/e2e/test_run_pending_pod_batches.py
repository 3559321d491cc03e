"""A real `run` process against the fake Kubernetes API: a stream of pending pods is planned in
batches (Karpenter's idle period and maximum batch duration, plus at least `run.batchMinInterval`
between pod-triggered cycles), while a lone pod after a quiet spell is still planned at once."""

from __future__ import annotations

import re
import signal
import time

import pytest

from reconciler.kube.live import NOT_TERMINAL
from tests.e2e.run_process import RunProcess, wait_for
from tests.e2e.test_cli_apply import World
from tests.e2e.test_cli_run import pending

# A real process with timing bounds: one worker, in turn.
pytestmark = pytest.mark.xdist_group("timing")

STREAM, SPACING = 40, 0.15  # 40 pods, one every 150 ms: a 6 s stream


def plan_lists(world: World) -> int:
    """How many full Pod lists the plan stage has begun (the watch's own lists ask for unassigned
    pods only; a later page of the same list carries `continue`)."""
    return sum(
        1
        for r in list(world.kube.requests)
        if r.method == "GET"
        and r.path == "/api/v1/pods"
        and r.query.get("watch") not in ("true", "1")
        and r.query.get("fieldSelector") == NOT_TERMINAL
        and not r.query.get("continue")
    )


def list_began(world: World, before: int, timeout: float) -> float:
    """Seconds until the plan stage begins a Pod list beyond the first `before` (polled every 10 ms)."""
    started = time.monotonic()
    while plan_lists(world) <= before:
        if time.monotonic() - started > timeout:
            raise AssertionError(f"no plan cycle began within {timeout}s")
        time.sleep(0.01)
    return time.monotonic() - started


def test_a_stream_of_pending_pods_is_planned_in_one_batch_and_a_lone_pod_at_once(world: World) -> None:
    with RunProcess(world.config, stages="plan", keys={"debounce": "1s"}) as run:
        wait_for(lambda: run.get("/readyz")[0] == 200, 30, "readiness", log=run.output)
        wait_for(  # the new leader's first cycle has ended
            lambda: (run.metric("asg_reconciler_cycles_total", stage="plan") or 0) >= 1,
            30,
            "the first plan cycle",
            log=run.output,
        )
        quiet = plan_lists(world)

        # a lone pod after a quiet spell: planned within about run.debounce
        pending(world, "lone")
        latency = list_began(world, quiet, 10)
        assert latency < 2.0, (latency, run.output())
        wait_for(lambda: "lone" in run.output(), 10, "the lone pod's batch logged", log=run.output)

        # a stream: one pod every 150 ms for 6 s
        before = plan_lists(world)
        began = time.monotonic()

        for n in range(STREAM):
            pending(world, f"stream-{n:02d}")
            time.sleep(max(0.0, began + (n + 1) * SPACING - time.monotonic()))
        streamed = time.monotonic() - began
        time.sleep(2.5)  # the batch closes an idle period (1s) after the last pod; its cycle begins
        lists = plan_lists(world) - before
        # at most one pod-triggered cycle per run.batchMinInterval (5s) through the stream
        assert lists <= 1 + int(streamed // 5), (lists, streamed, run.output())
        wait_for(  # every streamed pod was in a batch that was planned
            lambda: planned_pods(run.output()) >= 1 + STREAM, 12, "every streamed pod planned", log=run.output
        )
        batches = [line for line in info_lines(run.output()) if "new pending pod" in line]
        per_pod = [line for line in info_lines(run.output()) if "is unschedulable" in line]
        assert len(batches) <= 2 + int(streamed // 5), batches  # the lone pod's and the stream's
        assert per_pod == [], per_pod[:3]  # the per-pod line is at debug level
        assert any("stream-00 is unschedulable" in line for line in run.output().splitlines())
        assert run.stop(signal.SIGTERM) == 0, run.output()
    assert "Traceback" not in run.output()


def info_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if " INFO " in line]


def planned_pods(log: str) -> int:
    """New pending pods the batch lines have reported, in all."""
    return sum(int(m.group(1)) for m in re.finditer(r" INFO run: plan: planning (\d+) new pending pod", log))
