"""A stream of pending pods against `asg-reconciler run` (issue 24, item 9).

A plan-stage `run` process (`run.interval: 30s`, every other run key at its default: `run.debounce`
1s, `run.batchMaxDuration` 10s, `run.batchMinInterval` 5s) against the fake Kubernetes API and moto.

Lone pods: after a quiet spell, one unschedulable pod; the time until the plan cycle that plans it
begins (the timestamp of its "planning 1 new pending pod" line; the cycle reads the watch-fed cache,
so there is no Pod list to watch for). Target: <= 2 s for every trial (about the idle period: a lone
pod is planned at once).

Stream: 80 unschedulable pods created over 20 s (one every 250 ms); from the first pod until 12 s
after the last (time for the last batch to close), the plan cycles (`asg_reconciler_cycles_total`),
the Pod lists (none: the cache listed them once at start) and the INFO lines about pending pods.
Target: at most one cycle per 5 s through the stream (<= 5 cycles) and not one INFO line per pod.

    python benchmarks/pod_stream.py [--pods N] [--seconds S] [--trials N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from latency import Process, World, wait  # noqa: E402

from reconciler.demo.kube_api import FakeKubeAPI  # noqa: E402
from reconciler.demo.mock_aws import mock_aws  # noqa: E402
from reconciler.kube.live import NOT_TERMINAL  # noqa: E402

TARGET_LONE_SECONDS, TARGET_SECONDS_PER_CYCLE = 2.0, 5.0
SETTLE = 12.0  # after the stream: the last batch closes within run.batchMaxDuration (10s)


def plan_lists(kube: FakeKubeAPI) -> int:
    """Full Pod lists begun by the plan stage (its cache's, at start; cycles read the cache)."""
    return sum(
        1
        for r in list(kube.requests)
        if r.method == "GET"
        and r.path == "/api/v1/pods"
        and r.query.get("watch") not in ("true", "1")
        and r.query.get("fieldSelector") == NOT_TERMINAL
        and not r.query.get("continue")
    )


def lone_pod(world: World, log: Path, name: str) -> float:
    started = datetime.now(UTC)
    world.kube.put(world.pod(name))

    def began() -> datetime | None:
        for line in log.read_text(errors="replace").splitlines():
            if " INFO " in line and "new pending pod" in line and name in line:
                return datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00"))
        return None

    wait(lambda: began() is not None, 15, f"a plan cycle for {name}")
    when = began()
    assert when is not None
    return (when - started).total_seconds()


def pending_lines(log: str) -> list[str]:
    """INFO lines about new pending pods: one per pod before batching, one per batch after."""
    return [
        line
        for line in log.splitlines()
        if " INFO " in line and ("pending pod" in line or "unschedulable" in line)
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=80)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    missed = []
    with tempfile.TemporaryDirectory() as tmp, mock_aws(), FakeKubeAPI() as kube:
        world = World(Path(tmp), kube)
        plan = Process(world, "plan", "30s", "plan")
        log = Path(tmp) / "plan.log"
        try:
            wait(lambda: plan.get("/readyz")[0] == 200, 60, "readiness")
            wait(lambda: plan.metric("asg_reconciler_cycles_total", stage="plan") >= 1, 60, "a first cycle")
            lone = []
            for trial in range(args.trials):
                time.sleep(6.0)  # quiet: longer than run.batchMinInterval
                lone.append(lone_pod(world, log, f"lone-{trial}"))
                print(f"   lone pod {trial + 1}: plan began after {lone[-1]:.2f}s", flush=True)
            time.sleep(6.0)
            cycles, lists = plan.metric("asg_reconciler_cycles_total", stage="plan"), plan_lists(kube)
            offset = len(log.read_text(errors="replace"))
            began = time.monotonic()
            for n in range(args.pods):
                world.kube.put(world.pod(f"stream-{n:03d}"))
                time.sleep(max(0.0, began + (n + 1) * args.seconds / args.pods - time.monotonic()))
            streamed = time.monotonic() - began
            time.sleep(SETTLE)
            cycles = plan.metric("asg_reconciler_cycles_total", stage="plan") - cycles
            lists = plan_lists(kube) - lists
            text = log.read_text(errors="replace")[offset:]
        finally:
            plan.stop()
    lines = pending_lines(text)
    worst = max(lone)
    print(
        f"lone pod -> plan cycle begins, {len(lone)} trials: max {worst:.2f}s "
        f"(target <= {TARGET_LONE_SECONDS}s)"
    )
    limit = 1 + int(streamed // TARGET_SECONDS_PER_CYCLE)
    print(
        f"stream: {args.pods} pods over {streamed:.1f}s (+{SETTLE:.0f}s to settle): "
        f"{cycles:.0f} plan cycles, {lists} Pod lists, {len(lines)} INFO lines about pending pods "
        f"(target <= {limit} cycles)"
    )
    for line in lines[:5]:
        print(f"   {line[:160]}")
    if worst > TARGET_LONE_SECONDS:
        missed.append("lone pod")
    if cycles > limit or lists > limit or len(lines) > limit:
        missed.append("stream")
    if missed:
        print(f"missed: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
