"""The numbers of every wait after a failure on the Kubernetes edge and in the `run` loop, pinned:
each waits on domain/backoff.py's one schedule (issue 21) and keeps the numbers it had before
(kube/drain.py's are pinned in tests/integration/test_kube_drain_answers.py, the Lease's in
tests/integration/test_kube_lease.py).

Jittered waits are compared with the formula they had, fed the same random draws: the global random
generator is seeded, and a twin generator seeded alike says what each draw was."""

from __future__ import annotations

import random
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from reconciler.kube.cache import Reflector
from reconciler.kube.leader import LeaderElector
from reconciler.kube.live import LiveReader
from reconciler.kube.retry import with_retries
from reconciler.kube.wake_hint import KeyWatch
from reconciler.runtime.stage_loop import Stage
from tests.support.kube import make_api_client

SEED = 21
NOWHERE = "http://127.0.0.1:9"  # nothing is called: only the waits are looked at


class _Waits:
    """Stands for a thread's stop Event: records each wait instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return False

    def is_set(self) -> bool:
        return False


def _draws(n: int) -> list[float]:
    """The next `n` draws of the global generator once it is seeded with SEED, which it now is."""
    twin = random.Random(SEED)
    random.seed(SEED)
    return [twin.random() for _ in range(n)]


def _equal_jitter(first: float, cap: float, draws: list[float]) -> list[float]:
    """The watches' schedule as written before issue 21: min(cap, first * 2**n) * (0.5 + r / 2)."""
    return [min(cap, first * 2**n) * (0.5 + r / 2) for n, r in enumerate(draws)]


def _failing(exc: BaseException) -> tuple[list[int], Any]:
    tries: list[int] = []

    def call() -> None:
        tries.append(1)
        raise exc

    return tries, call


def test_a_kubernetes_call_is_tried_four_times_waiting_0_2_then_0_4_then_0_8_seconds() -> None:
    tries, call = _failing(ApiException(status=503, reason="Service Unavailable"))
    slept: list[float] = []
    with pytest.raises(ApiException):
        with_retries(call, sleep=slept.append)
    assert len(tries) == 4
    assert slept == pytest.approx([0.2, 0.4, 0.8])


def test_a_kubernetes_call_that_times_out_is_tried_once_more_after_0_2_seconds() -> None:
    tries, call = _failing(urllib3.exceptions.ReadTimeoutError(None, "/api", "Read timed out."))
    slept: list[float] = []
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        with_retries(call, sleep=slept.append)
    assert len(tries) == 2 and slept == pytest.approx([0.2])


def test_the_cache_reflector_backs_off_from_its_first_wait_to_its_cap_with_equal_jitter() -> None:
    reflector = Reflector(
        "Node",
        LiveReader(make_api_client(NOWHERE)),
        resync=600.0,
        watch_timeout=300,
        request_timeout=5.0,
        clock=lambda: 0.0,
        wall=lambda: 0.0,
        initial_backoff=0.5,
        max_backoff=10.0,
        relisted=lambda kind, reason: None,
    )
    stop = _Waits()
    reflector._stop = cast(Any, stop)
    draws = _draws(8)
    for _ in draws:
        reflector._failed(ApiException(status=500, reason="Internal Server Error"))
    assert stop.waits == pytest.approx(_equal_jitter(0.5, 10.0, draws))
    assert max(stop.waits) <= 10.0


def test_the_wake_up_hint_watch_backs_off_from_its_first_wait_to_its_cap_with_equal_jitter() -> None:
    watch = KeyWatch(
        make_api_client(NOWHERE),
        "ns",
        "status",
        "plan-pushed",
        lambda value: None,
        initial_backoff=1.0,
        max_backoff=30.0,
    )
    stop = _Waits()
    watch._stop = cast(Any, stop)
    draws = _draws(8)
    for _ in draws:
        watch._failed(ApiException(status=502, reason="Bad Gateway"))
    assert stop.waits == pytest.approx(_equal_jitter(1.0, 30.0, draws))


def test_a_follower_waits_the_retry_period_stretched_by_up_to_the_jitter_factor() -> None:
    """client-go's wait.Jitter: retry_period x (1 + r x JitterFactor), between a follower's tries."""
    elector = LeaderElector(make_api_client(NOWHERE), "ns", "lease", "me", retry_period=2.0, jitter=1.2)
    draws = _draws(5)
    assert [elector._pause() for _ in draws] == pytest.approx([2.0 * (1 + r * 1.2) for r in draws])


def _stage(interval: float, max_backoff: float) -> Stage:
    run = SimpleNamespace(
        interval=timedelta(seconds=interval),
        max_backoff=timedelta(seconds=max_backoff),
        lease_duration=timedelta(seconds=15),
        renew_deadline=timedelta(seconds=10),
        retry_period=timedelta(seconds=2),
    )
    runner = SimpleNamespace(
        config=SimpleNamespace(cluster="prod", run=run),
        kube=make_api_client(NOWHERE),
        namespace="ns",
        identity="me",
    )
    return Stage("plan", cast(Any, runner))


@pytest.mark.parametrize(
    ("interval", "max_backoff", "waits"),
    [
        (10.0, 60.0, [10, 20, 40, 60, 60, 60]),  # run.interval doubled after each failure, to run.maxBackoff
        (30.0, 10.0, [30, 30, 30]),  # a maxBackoff under the interval: never sooner than the interval
    ],
)
def test_a_failing_stage_waits_its_interval_doubled_up_to_max_backoff(
    interval: float, max_backoff: float, waits: list[float]
) -> None:
    stage = _stage(interval, max_backoff)
    seen = []
    for _ in waits:
        stage._failed()
        seen.append(stage.wait)
    assert seen == waits


def test_a_stage_failing_for_days_still_waits_max_backoff() -> None:
    stage = _stage(60.0, 900.0)
    stage.failures = 10_000_000
    stage._failed()
    assert stage.wait == 900.0
