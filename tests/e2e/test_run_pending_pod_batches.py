"""A real `run` process against the fake Kubernetes API: a stream of pending pods is planned in
batches (Karpenter's idle period and maximum batch duration, plus at least `run.batchMinInterval`
between pod-triggered cycles), while a lone pod after a quiet spell is still planned at once; and
no cycle lists the pods again (they read the watch-fed cache)."""

from __future__ import annotations

import re
import signal
import time
from datetime import UTC, datetime

import pytest

from reconciler.kube.live import NOT_TERMINAL
from tests.support.apply_world import World
from tests.support.run_process import RunProcess, wait_for
from tests.support.run_world import pending

# A real process with timing bounds: one worker, in turn.
pytestmark = pytest.mark.xdist_group("timing")

STREAM, SPACING = 40, 0.15  # 40 pods, one every 150 ms: a 6 s stream


def full_pod_lists(world: World) -> int:
    """How many full Pod lists (first pages) the plan stage has made: its cache's, at start."""
    return sum(
        1
        for r in list(world.kube.requests)
        if r.method == "GET"
        and r.path == "/api/v1/pods"
        and r.query.get("watch") not in ("true", "1")
        and r.query.get("fieldSelector") == NOT_TERMINAL
        and not r.query.get("continue")
    )


def batch_began(run: RunProcess, pod: str, timeout: float) -> datetime:
    """When the plan cycle that planned `pod`'s batch began: the timestamp of its log line."""
    found: list[datetime] = []

    def logged() -> bool:
        for line in info_lines(run.output()):
            if "new pending pod" in line and pod in line:
                found.append(datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00")))
                return True
        return False

    wait_for(logged, timeout, f"the batch of {pod}", log=run.output)
    return found[0]


def test_a_stream_of_pending_pods_is_planned_in_one_batch_and_a_lone_pod_at_once(world: World) -> None:
    with RunProcess(world.config, stages="plan", keys={"debounce": "1s"}) as run:
        wait_for(lambda: run.get("/readyz")[0] == 200, 30, "readiness", log=run.output)
        wait_for(  # the new leader's first cycle has ended
            lambda: (run.metric("asg_reconciler_cycles_total", stage="plan") or 0) >= 1,
            30,
            "the first plan cycle",
            log=run.output,
        )
        listed = full_pod_lists(world)
        assert listed == 1, listed  # the cache's list; cycles read the cache

        # a lone pod after a quiet spell: planned within about run.debounce
        put = datetime.now(UTC)
        pending(world, "lone")
        latency = (batch_began(run, "lone", 10) - put).total_seconds()
        assert latency < 2.0, (latency, run.output())

        # a stream: one pod every 150 ms for 6 s
        began = time.monotonic()

        for n in range(STREAM):
            pending(world, f"stream-{n:02d}")
            time.sleep(max(0.0, began + (n + 1) * SPACING - time.monotonic()))
        streamed = time.monotonic() - began
        time.sleep(2.5)  # the batch closes an idle period (1s) after the last pod; its cycle begins
        wait_for(  # every streamed pod was in a batch that was planned
            lambda: planned_pods(run.output()) >= 1 + STREAM, 12, "every streamed pod planned", log=run.output
        )
        batches = [line for line in info_lines(run.output()) if "new pending pod" in line]
        per_pod = [line for line in info_lines(run.output()) if "is unschedulable" in line]
        # at most one pod-triggered cycle per run.batchMinInterval (5s) through the stream, besides
        # the lone pod's
        assert len(batches) <= 2 + int(streamed // 5), batches
        assert full_pod_lists(world) == listed  # no cycle listed the pods again
        assert per_pod == [], per_pod[:3]  # the per-pod line is at debug level
        assert any("stream-00 is unschedulable" in line for line in run.output().splitlines())
        assert run.stop(signal.SIGTERM) == 0, run.output()
    assert "Traceback" not in run.output()


def info_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if " INFO " in line]


def planned_pods(log: str) -> int:
    """New pending pods the batch lines have reported, in all."""
    return sum(int(m.group(1)) for m in re.finditer(r" INFO run: plan: planning (\d+) new pending pod", log))
