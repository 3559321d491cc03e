"""Review of scaleDown.windows in apply (issue 13): a waiting removal is never tainted or drained,
the count is per run across batches, and a clock that moves during a long run (a blackout starting,
the window closing, the clock stepping back) stops later batches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from reconciler.apply.outcome import SCALE_DOWN
from reconciler.domain.windows import Window
from tests.support import windows_world as harness
from tests.support.plan_world import NOW

H = timedelta(hours=1)
OPEN_ALL_DAY = Window("0 9 * * 1-5", 8 * H)  # 09:00-17:00 UTC on weekdays, no maxNodes


@dataclass
class Watched(harness.Cloud):
    """The harness's cloud, also recording which nodes were tainted and given back."""

    marked_nodes: list[str] = field(default_factory=list)
    unmarked: list[str] = field(default_factory=list)

    def mark(self, node: str, commit: str, *, instance: str | None = None) -> None:
        self.marked_nodes.append(node)

    def unmark(self, node: str) -> None:
        self.unmarked.append(node)


@pytest.fixture(autouse=True)
def _watched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "Cloud", Watched)


def clock_of(*times: datetime) -> Callable[[], datetime]:
    """Each call the next time; the last one repeats."""
    left = list(times)

    def clock() -> datetime:
        return left.pop(0) if len(left) > 1 else left[0]

    return clock


def test_outside_the_window_nothing_is_tainted_drained_or_terminated() -> None:
    report, cloud = harness.run([Window("0 20 * * *", 2 * H, 2)])
    assert isinstance(cloud, Watched)
    assert (cloud.marked_nodes, cloud.drained, cloud.terminated) == ([], [], [])
    assert report.exit_code == 0  # waiting, not refused (the run loop would count a refused cycle)
    assert all("stays approved" in n for g in report.groups for n in g.notes)


def test_a_blackout_that_starts_during_the_run_stops_later_batches_untainted() -> None:
    lunch = Window("0 13 * * *", H, 0)  # a blackout from 13:00
    clock = clock_of(NOW, NOW + H + timedelta(minutes=5))  # the second batch would start at 13:05
    report, cloud = harness.run([OPEN_ALL_DAY, lunch], clock=clock)
    assert isinstance(cloud, Watched)
    assert cloud.terminated == ["i-n3"] and cloud.marked_nodes == ["n3"]
    (group,) = report.groups
    assert group.action == SCALE_DOWN and group.waiting == ("i-n4", "i-n5")
    assert [n.split(":")[0] for n in group.notes if "closed while this run worked" in n] == ["i-n4", "i-n5"]
    assert "opens 2026-06-01 14:00 UTC" in group.notes[-1]


def test_a_clock_stepped_back_before_the_window_opened_stops_later_batches() -> None:
    clock = clock_of(NOW, NOW.replace(hour=8, minute=59))  # NTP steps the clock back to 08:59
    report, cloud = harness.run([OPEN_ALL_DAY], clock=clock)
    assert cloud.terminated == ["i-n3"]
    assert report.groups[0].waiting == ("i-n4", "i-n5") and report.exit_code == 0


def test_a_clock_that_jumps_into_another_open_window_lets_batches_go() -> None:
    evening = Window("0 18 * * *", 4 * H)
    clock = clock_of(NOW, NOW + 7 * H)  # 19:00: the day window closed, the evening one is open
    report, cloud = harness.run([OPEN_ALL_DAY, evening], clock=clock)
    assert cloud.terminated == ["i-n3", "i-n4", "i-n5"] and report.exit_code == 0


def test_max_nodes_counts_across_batches_of_one_run() -> None:
    report, cloud = harness.run([Window("0 9 * * 1-5", 8 * H, 2)], parallel=1)
    assert isinstance(cloud, Watched)
    assert cloud.terminated == ["i-n3", "i-n4"] and cloud.marked_nodes == ["n3", "n4"]
    assert any(
        n.startswith("i-n5: waits for a later run: the scale-down window allows 2 removal(s)")
        for n in report.groups[0].notes
    )


def test_max_nodes_counts_across_groups_and_batches_in_a_dry_run_too() -> None:
    groups = {"general": (5, ("i-n4", "i-n5")), "spot": (5, ("i-sn4", "i-sn5"))}
    window = [Window("0 9 * * 1-5", 8 * H, 3)]
    real, cloud = harness.run(window, groups=groups, parallel=2)
    dry, _ = harness.run(window, groups=groups, parallel=2, dry_run=True)
    assert cloud.terminated == ["i-n4", "i-n5", "i-sn4"]
    would = [n for g in dry.groups for n in g.notes if n.startswith("would ")]
    assert [n.split()[-1] for n in would] == cloud.terminated
    assert real.exit_code == dry.exit_code == 0
    assert [g.waiting for g in real.groups] == [g.waiting for g in dry.groups] == [(), ("i-sn5",)]


@pytest.mark.parametrize("hour", [8, 17, 20])
def test_a_dry_run_and_a_run_agree_outside_the_window(hour: int) -> None:
    now = NOW.replace(hour=hour)
    real, cloud = harness.run([OPEN_ALL_DAY], now=now)
    dry, _ = harness.run([OPEN_ALL_DAY], now=now, dry_run=True)
    assert cloud.terminated == []
    assert [g.notes for g in real.groups] == [g.notes for g in dry.groups]
