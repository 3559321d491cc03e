"""The plan says when approved removals wait for scaleDown.windows: one line in its warnings, so the
table and the JSON show it (reconciler/planning/plan.py, reconciler/domain/windows.py)."""

from __future__ import annotations

from datetime import timedelta

from reconciler.domain.windows import Window
from reconciler.planning.types import CommittedGroup, Plan
from reconciler.views.plan import render_plan_table
from tests.support.plan_world import World

H = timedelta(hours=1)
# NOW is Monday 1 June 2026, 12:00 UTC
EVENING = Window("0 20 * * *", 2 * H, 3)
OFFICE = Window("0 9 * * 1-5", 8 * H, 3)
LINE = "scale-down window closed: approved removals wait until 2026-06-01 20:00 UTC (in 8h)"


def idle_world() -> World:
    """n1 is busy, n2 idle (proposed once unneededTime is 0s)."""
    w = World().group("general", min_size=1)
    w.node("general", "n1").running("n1", "web", cpu=3000)
    w.node("general", "n2")
    return w


def plan(windows: tuple[Window, ...], w: World | None = None) -> Plan:
    return (w or idle_world()).plan(scale_down={"windows": windows, "unneeded_time": timedelta(0)})


def test_a_proposed_removal_outside_every_window_gets_the_line() -> None:
    proposed = plan((EVENING,))
    assert [r.instance_id for r in proposed.groups[0].removals] == ["i-n2"]
    assert LINE in proposed.warnings
    assert f"  ! {LINE}" in render_plan_table(proposed)
    assert LINE in proposed.to_dict()["warnings"]


def test_an_approved_removal_kept_outside_every_window_gets_the_line() -> None:
    w = World().group("general", min_size=1)
    w.node("general", "n1").running("n1", "web", cpu=3000)
    w.node("general", "n2").running("n2", "small", cpu=100)
    committed = {"general": CommittedGroup(desired=1, remove_instances=("i-n2",))}
    kept = w.plan(scale_down={"windows": (EVENING,)}, committed=committed)
    assert kept.groups[0].removals[0].reason == "approved, not yet applied"
    assert LINE in kept.warnings


def test_no_line_inside_a_window_without_removals_or_without_windows() -> None:
    assert not any("scale-down window" in w for w in plan((OFFICE,)).warnings)
    assert not any("scale-down window" in w for w in plan(()).warnings)
    busy = World().group("general", min_size=1)
    busy.node("general", "n1").running("n1", "web", cpu=3000)
    assert not any("scale-down window" in w for w in plan((EVENING,), busy).warnings)


def test_a_blackout_says_when_it_lifts() -> None:
    lunch = Window("0 11 * * *", 2 * H, 0)
    (line,) = [w for w in plan((OFFICE, lunch)).warnings if "scale-down window" in w]
    assert line == "scale-down window closed: approved removals wait until 2026-06-01 13:00 UTC (in 1h)"
