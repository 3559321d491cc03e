"""When new pending pods trigger a plan: Karpenter's batch (an idle period, a maximum duration) and at
least `run.batchMinInterval` between pod-triggered cycles. A stream of arrival times in, the times the
batches are planned out, on an injected clock."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.runtime.pod_batches import Batch, PodBatcher

IDLE, MAX, MIN = 1.0, 10.0, 5.0  # run.debounce, run.batchMaxDuration, run.batchMinInterval defaults


def simulate(
    arrivals: list[float],
    *,
    idle: float = IDLE,
    max_duration: float = MAX,
    min_interval: float = MIN,
    cycle: float = 0.0,
    periodic: tuple[float, ...] = (),
) -> list[tuple[float, Batch]]:
    """The run loop on a clock: pods arrive at `arrivals`; a cycle starts when the batch is due and the
    previous cycle (`cycle` seconds long) has ended, or at a `periodic` time; each cycle takes the
    batch. Returns (start, batch) for every cycle that took pods."""
    batcher = PodBatcher(idle=idle, max_duration=max_duration, min_interval=min_interval)
    events = sorted(arrivals)
    ticks = sorted(periodic)
    taken: list[tuple[float, Batch]] = []
    busy_until, i = -math.inf, 0
    while True:
        due = batcher.due()
        start = max(due, busy_until) if due is not None else math.inf
        tick = max(ticks[0], busy_until) if ticks else math.inf
        arrival = events[i] if i < len(events) else math.inf
        if arrival <= min(start, tick) and arrival < math.inf:
            batcher.add(f"shop/p{i}", arrival)
            i += 1
            continue
        if min(start, tick) == math.inf:
            return taken
        now = min(start, tick)
        if tick <= start:
            ticks.pop(0)
        batch = batcher.take(now)
        if batch is not None:
            taken.append((now, batch))
        busy_until = now + cycle


def starts(result: list[tuple[float, Batch]]) -> list[float]:
    return [round(t, 6) for t, _ in result]


def test_a_lone_pod_is_planned_after_the_idle_period() -> None:
    result = simulate([100.0])
    assert starts(result) == [101.0]
    assert result[0][1].count == 1 and result[0][1].first == ("shop/p0",)
    assert result[0][1].opened == 100.0


def test_a_burst_is_one_batch_an_idle_period_after_its_last_pod() -> None:
    result = simulate([0.0, 0.1, 0.3, 0.7, 1.2])
    assert starts(result) == [2.2]
    assert result[0][1].count == 5
    assert result[0][1].first == ("shop/p0", "shop/p1", "shop/p2")


def test_the_issue_stream_80_pods_over_20s_is_two_batches_closed_by_the_maximum() -> None:
    arrivals = [n * 0.25 for n in range(80)]  # before: 17 cycles, one after each debounce
    result = simulate(arrivals, cycle=0.3)
    assert starts(result) == [10.0, 20.25]
    assert sum(b.count for _, b in result) == 80


def test_a_stream_slower_than_the_idle_period_still_waits_the_minimum_interval() -> None:
    """Karpenter plans such a stream pod by pod; every cycle here re-lists every pod, so pod-triggered
    cycles keep batchMinInterval apart."""
    arrivals = [n * 1.5 for n in range(20)]  # a pod every 1.5 s for 30 s
    assert len(simulate(arrivals, min_interval=0.0)) == 20  # Karpenter's batches alone
    result = simulate(arrivals)
    gaps = [b - a for a, b in itertools.pairwise(starts(result))]
    assert starts(result)[0] == 1.0  # the first pod is a lone pod: planned at once
    assert min(gaps) >= MIN and len(result) <= 1 + 30 / MIN
    assert sum(b.count for _, b in result) == 20


def test_bursts_about_an_idle_period_apart_do_not_plan_every_second() -> None:
    arrivals = [burst * 1.2 + n * 0.05 for burst in range(17) for n in range(4)]  # 4 pods every 1.2 s
    assert len(simulate(arrivals, min_interval=0.0)) == 17  # each burst its own batch: back to back
    result = simulate(arrivals)
    assert len(result) <= 1 + 20 / MIN
    assert sum(b.count for _, b in result) == 68


def test_a_lone_pod_after_a_quiet_spell_is_planned_at_once_again() -> None:
    arrivals = [n * 0.25 for n in range(40)] + [40.0]
    result = simulate(arrivals)
    assert starts(result)[-1] == 41.0 and result[-1][1].count == 1


def test_a_pod_soon_after_a_triggered_cycle_waits_for_the_minimum_interval() -> None:
    result = simulate([0.0, 3.0])
    assert starts(result) == [1.0, 6.0]


def test_a_periodic_cycle_takes_the_batch_without_holding_back_the_next_pod() -> None:
    """The interval's cycle lists the pods seen before it: it takes them, and since no pod triggered
    it, a pod right after it is still planned after the idle period."""
    result = simulate([29.5, 31.0], periodic=(30.0,))
    assert starts(result) == [30.0, 32.0]


def test_pods_that_arrive_during_a_long_cycle_wait_for_the_next_one() -> None:
    arrivals = [n * 0.25 for n in range(60)]
    result = simulate(arrivals, cycle=6.0)
    assert sum(b.count for _, b in result) == 60
    gaps = [b - a for a, b in itertools.pairwise(starts(result))]
    assert min(gaps) >= 6.0


def test_an_empty_batcher_is_never_due_and_takes_nothing() -> None:
    batcher = PodBatcher(idle=IDLE, max_duration=MAX, min_interval=MIN)
    assert batcher.due() is None and batcher.take(5.0) is None
    batcher.add("shop/a", 6.0)
    assert batcher.take(6.5) is not None and batcher.due() is None


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(st.floats(min_value=0.0, max_value=12.0), min_size=1, max_size=120),
    idle=st.sampled_from([0.0, 0.2, 1.0, 2.0]),
    max_duration=st.sampled_from([2.0, 10.0]),
    min_interval=st.sampled_from([0.0, 5.0, 12.0]),
)
def test_any_stream_every_pod_once_bounded_wait_spaced_triggers(
    gaps: list[float], idle: float, max_duration: float, min_interval: float
) -> None:
    arrivals, now = [], 0.0
    for gap in gaps:
        now += gap
        arrivals.append(now)
    result = simulate(arrivals, idle=idle, max_duration=max(max_duration, idle), min_interval=min_interval)
    assert sum(b.count for _, b in result) == len(arrivals)  # every pod in exactly one batch
    bound = max(max_duration, idle, min_interval)
    taken_at = iter(t for t, b in result for _ in range(b.count))
    for arrival in arrivals:  # no pod waits longer than the larger of the maximum and the interval
        assert next(taken_at) - arrival <= bound + 1e-9
    times = starts(result)
    for earlier, later in itertools.pairwise(times):  # cycles are all triggered here
        assert later - earlier >= min_interval - 1e-6
    for (start, batch), previous in zip(result, [None, *times], strict=False):
        quiet = previous is None or batch.opened - previous >= min_interval
        if quiet and batch.count == 1 and start - batch.opened < max_duration:
            assert math.isclose(start, batch.opened + idle)  # a lone pod after a quiet spell: at once
