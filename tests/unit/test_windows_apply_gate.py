"""scaleDown.windows in apply: one more gate per approved removal, counted per run across groups;
removals it holds back wait, still approved and not refused (exit 0 when nothing else is), and
scale-ups are never gated (reconciler/apply/window_gate.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

from reconciler.apply.outcome import NONE, SCALE_DOWN, SCALE_UP
from reconciler.domain.windows import Window
from tests.support.plan_world import NOW
from tests.support.windows_world import APPROVED, H, notes, run

# NOW is Monday 1 June 2026, 12:00 UTC
OPEN = Window("0 9 * * 1-5", 8 * H, 2)  # 09:00-17:00 on weekdays, two removals per run
CLOSED = Window("0 20 * * *", 2 * H, 2)  # 20:00-22:00


def test_without_windows_every_approved_removal_goes() -> None:
    report, cloud = run([])
    assert cloud.terminated == list(APPROVED)
    assert report.exit_code == 0


def test_outside_every_window_removals_wait_naming_the_next_opening() -> None:
    report, cloud = run([CLOSED])
    assert cloud.terminated == [] and cloud.drained == []
    (group,) = report.groups
    assert group.action == NONE and report.exit_code == 0 and group.waiting == APPROVED
    assert notes(report) == [
        f"{i}: waits for the scale-down window: opens 2026-06-01 20:00 UTC (in 8h); stays approved"
        for i in APPROVED
    ]


def test_inside_a_window_at_most_max_nodes_per_run_in_the_order_judged() -> None:
    report, cloud = run([OPEN])
    assert cloud.terminated == ["i-n3", "i-n4"]
    (group,) = report.groups
    assert group.action == SCALE_DOWN and group.desired_after == 3 and report.exit_code == 0
    assert group.waiting == ("i-n5",)
    assert (
        "i-n5: waits for a later run: the scale-down window allows 2 removal(s) per apply run "
        "(scaleDown.windows maxNodes) and this run has started them; stays approved"
    ) in group.notes


def test_a_window_without_max_nodes_lets_every_removal_through() -> None:
    report, cloud = run([Window("0 9 * * 1-5", 8 * H)])
    assert cloud.terminated == list(APPROVED) and report.exit_code == 0


def test_the_count_is_per_run_across_groups() -> None:
    groups = {"general": (5, ("i-n4", "i-n5")), "spot": (5, ("i-sn4", "i-sn5"))}
    report, cloud = run([Window("0 9 * * 1-5", 8 * H, 3)], groups=groups)
    assert cloud.terminated == ["i-n4", "i-n5", "i-sn4"]
    spot = next(g for g in report.groups if g.name == "spot")
    assert spot.terminated == ("i-sn4",)
    assert spot.waiting == ("i-sn5",)
    assert any(
        n.startswith("i-sn5: waits for a later run: the scale-down window allows 3") for n in spot.notes
    )


def test_a_blackout_inside_an_open_window_holds_removals_back() -> None:
    lunch = Window("0 11 * * *", 2 * H, 0)
    report, cloud = run([OPEN, lunch])
    assert cloud.terminated == [] and report.exit_code == 0
    assert notes(report)[0].startswith("i-n3: waits for the scale-down window: opens 2026-06-01 13:00 UTC")


def test_a_dry_run_says_the_same() -> None:
    report, cloud = run([OPEN], dry_run=True)
    assert cloud.terminated == []
    said = notes(report)
    assert said[:2] == ["would drain n3 and terminate i-n3", "would drain n4 and terminate i-n4"]
    assert "i-n5: waits for a later run: the scale-down window allows 2 removal(s)" in said[2]
    assert report.exit_code == 0
    closed, _ = run([CLOSED], dry_run=True)
    assert all(": waits for the scale-down window: opens " in n for n in notes(closed))
    assert closed.exit_code == 0


def test_scale_ups_are_never_gated() -> None:
    report, cloud = run([CLOSED], groups={"general": (7, ())})
    assert cloud.raised == [("general", 7)]
    assert report.groups[0].action == SCALE_UP and report.exit_code == 0


def test_a_batch_that_would_start_after_the_windows_closed_waits() -> None:
    """The count is taken when the run starts; a later batch also needs a window still open."""
    times = [NOW, NOW + 5 * H + timedelta(minutes=1)]  # the second batch starts after 17:00

    def clock() -> datetime:
        return times.pop(0) if len(times) > 1 else times[0]

    report, cloud = run([Window("0 9 * * 1-5", 8 * H, 5)], clock=clock)
    assert cloud.terminated == ["i-n3"]
    (group,) = report.groups
    assert group.action == SCALE_DOWN and group.terminated == ("i-n3",) and report.exit_code == 0
    assert notes(report)[-2:] == [
        f"{i}: waits for the scale-down window (it closed while this run worked): opens "
        "2026-06-02 09:00 UTC (in 16h); stays approved"
        for i in ("i-n4", "i-n5")
    ]


def test_a_run_inside_the_window_with_one_batch_is_a_scale_down() -> None:
    report, cloud = run([OPEN], groups={"general": (5, ("i-n5",))}, parallel=2)
    assert cloud.terminated == ["i-n5"]
    assert report.groups[0].action == SCALE_DOWN and report.exit_code == 0
