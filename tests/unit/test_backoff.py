"""The one backoff schedule (reconciler/domain/backoff.py): capped doubling, jitter within bounds."""

from __future__ import annotations

import itertools

import pytest

from reconciler.domain.backoff import Backoff


def test_doubles_from_first_and_never_passes_the_cap() -> None:
    schedule = Backoff(first=0.5, cap=4.0)
    assert [schedule.base(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert list(itertools.islice(schedule.delays(), 4)) == [0.5, 1.0, 2.0, 4.0]


def test_a_fault_lasting_days_does_not_overflow() -> None:
    assert Backoff(first=1.0, cap=300.0).base(10_000_000) == 300.0


def test_jitter_adds_at_most_its_fraction() -> None:
    schedule = Backoff(first=1.0, cap=8.0, jitter=0.5)
    assert schedule.delay(3, rand=lambda: 0.0) == 8.0
    assert schedule.delay(3, rand=lambda: 0.999) == pytest.approx(8.0 * 1.4995)
    assert all(1.0 <= schedule.delay(0) < 1.5 for _ in range(200))


@pytest.mark.parametrize(
    "kwargs", [{"first": -1, "cap": 1}, {"first": 2, "cap": 1}, {"first": 1, "cap": 2, "factor": 0.5}]
)
def test_an_impossible_schedule_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="invalid schedule"):
        Backoff(**kwargs)
