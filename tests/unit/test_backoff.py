"""The one backoff schedule (reconciler/domain/backoff.py): capped doubling, spread within bounds."""

from __future__ import annotations

import itertools

import pytest

from reconciler.domain.backoff import EQUAL_JITTER, FULL_JITTER, Backoff


def test_doubles_from_first_and_never_passes_the_cap() -> None:
    schedule = Backoff(first=0.5, cap=4.0)
    assert [schedule.base(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert list(itertools.islice(schedule.delays(), 4)) == [0.5, 1.0, 2.0, 4.0]


def test_a_fault_lasting_days_does_not_overflow() -> None:
    assert Backoff(first=1.0, cap=300.0).base(10_000_000) == 300.0


@pytest.mark.parametrize(("spread", "low", "high"), [(EQUAL_JITTER, 4.0, 8.0), (FULL_JITTER, 0.0, 8.0)])
def test_the_spread_scales_within_its_range(spread: tuple[float, float], low: float, high: float) -> None:
    schedule = Backoff(first=1.0, cap=8.0, spread=spread)
    assert schedule.delay(3, rand=lambda: 0.0) == low
    assert schedule.delay(3, rand=lambda: 0.999999) == pytest.approx(high, rel=1e-5)
    assert all(low <= schedule.delay(5) < high for _ in range(200))


def test_client_go_jitter_adds_up_to_its_fraction() -> None:
    schedule = Backoff(first=1.0, cap=10.0, spread=(1.0, 1.1))
    assert schedule.delay(0, rand=lambda: 0.5) == pytest.approx(1.05)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"first": -1, "cap": 1},
        {"first": 2, "cap": 1},
        {"first": 1, "cap": 2, "factor": 0.5},
        {"first": 1, "cap": 2, "spread": (1.0, 0.5)},
    ],
)
def test_an_impossible_schedule_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="invalid schedule"):
        Backoff(**kwargs)  # type: ignore[arg-type]
